"""Time to first result (graphc.bench.first_result): cold caches, waiting for the build,
the figures in the report and the goals that read them.

No test asserts a timing: only that each cold start finds a new empty cache, that the
background build is waited for inside it, and that the figures exist and are reported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphc import bench
from graphc.backends.native import toolchain
from graphc.bench import first_result, gelu, goals, tiny
from graphc.bench.core import (
    BASELINE,
    DEFAULT,
    MODES,
    QUICK_SKIP_COLD,
    QUICK_SKIP_DEFAULT_COLD,
    Case,
    FirstCall,
    NotApplicableError,
    Prepared,
    UnavailableError,
    Workload,
)
from graphc.bench.first_result import Rounds, cold_cache
from graphc.runtime.backend import available_backends

NATIVE_READY = "native" in available_backends()
ONE_ROUND = Rounds(least=1, most=1, budget=0.0)


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's cache directory, in GRAPHC_CACHE_DIR; the runtime's reset is a stub that
    accepts `loaded` (toy cold starts build nothing, and the runtime keeps its state)."""
    path = tmp_path / "user-cache"
    path.mkdir()
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(path))
    monkeypatch.setattr(toolchain, "reset", lambda loaded=False: None)
    return path


class Built:
    """Stands for an Executable building in the background: records what its wait saw."""

    def __init__(self, log: list[tuple[str, Any]], done: bool = True) -> None:
        self.log, self.done, self.tier = log, done, "numpy (building native)"

    def wait(self, timeout: float | None = None) -> bool:
        root = os.environ["GRAPHC_CACHE_DIR"]
        self.log.append(("wait", (root, os.path.isdir(root), timeout)))
        self.tier = "native"
        return self.done


def starter(log: list[tuple[str, Any]], name: str, value: float = 1.0, **options: Any) -> Any:
    """A cold start that records the cache it found, writes a 'library' into it, and
    leaves a `Built` to wait for (none with `built=False`)."""

    def prepare(params: dict[str, Any], inputs: dict[str, Any]) -> Any:
        def start() -> FirstCall:
            root = os.environ["GRAPHC_CACHE_DIR"]
            log.append((name, (root, sorted(os.listdir(root)))))
            Path(root, "graphc_kernels.so").write_text("built")
            result = np.full(3, value, np.float32)
            if not options.get("built", True):
                return FirstCall(result)
            return FirstCall(result, Built(log, options.get("done", True)))

        return start

    return prepare


def _raises(exc: Exception) -> Any:
    def prepare(params: dict[str, Any], inputs: dict[str, Any]) -> Any:
        raise exc

    return prepare


def toy(first: dict[str, Any], case: Case | None = None) -> Workload:
    def returns(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        return Prepared(lambda: inputs["x"] * 1.0)

    builders = {m: _raises(NotApplicableError("not here")) for m in MODES}
    builders.update({"numpy": returns, BASELINE: returns})
    return Workload(
        name="toy",
        description="toy",
        unit="call",
        cases=[case or Case("small", {})],
        make_inputs=lambda params: {"x": np.ones(3, np.float32)},
        builders=builders,
        first_result=first,
    )


def test_cold_cache_is_new_and_empty_each_time_and_restored(
    user_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resets: list[bool] = []
    monkeypatch.setattr(toolchain, "reset", lambda loaded=False: resets.append(loaded))
    seen = []
    for _ in range(2):
        with cold_cache():
            root = Path(os.environ["GRAPHC_CACHE_DIR"])
            assert root != user_cache and root.is_dir() and not list(root.iterdir())
            (root / "graphc_x.so").write_text("a build")
            seen.append(root)
        assert os.environ["GRAPHC_CACHE_DIR"] == str(user_cache)
        assert not seen[-1].exists()  # removed with what was built in it
    assert seen[0] != seen[1]
    assert resets and all(resets)  # the loaded libraries were forgotten, going in and out
    monkeypatch.delenv("GRAPHC_CACHE_DIR")
    with cold_cache():
        assert "GRAPHC_CACHE_DIR" in os.environ
    assert "GRAPHC_CACHE_DIR" not in os.environ


@pytest.mark.slow  # long: the quick run leaves it to --rest
def test_measure_waits_for_each_build_inside_its_cold_cache(user_cache: Path) -> None:
    log: list[tuple[str, Any]] = []
    workload = toy(
        {
            BASELINE: starter(log, BASELINE),
            DEFAULT: starter(log, DEFAULT),
            "jax": starter(log, "jax", built=False),
        }
    )
    found = first_result.measure(workload, Case("s", {}), {}, Rounds(least=3, most=3, budget=0.0))
    starts = [(name, seen) for name, seen in log if name != "wait"]
    assert len(starts) == 9
    roots = [root for _, (root, _) in starts]
    assert len(set(roots)) == 9 and str(user_cache) not in roots  # a new cache every time
    assert all(files == [] for _, (_, files) in starts)  # empty: nothing built before
    # every graphc start is followed by its wait, in the same cold cache, still there
    for k, (name, seen) in enumerate(log):
        if name in (BASELINE, DEFAULT):
            assert log[k + 1] == ("wait", (seen[0], True, first_result.BUILD_TIMEOUT))
    # the modes' order rotates from round to round
    rounds = [[name for name, _ in starts[i : i + 3]] for i in (0, 3, 6)]
    assert [r[0] for r in rounds] == [BASELINE, DEFAULT, "jax"]
    for mode in (BASELINE, DEFAULT):
        result = found[mode]
        assert result.status == "ok" and result.repeats == 3
        assert result.min <= result.median <= result.max
        assert result.build is not None and result.build_max >= result.build
        assert result.agrees is True and result.rel_error == 0.0
        assert result.note == "numpy (building native) -> native"
    assert found["jax"].status == "ok" and found["jax"].build is None
    assert found["jax"].agrees is None  # a peer's result has its own form: not compared


@pytest.mark.slow  # long: the quick run leaves it to --rest
def test_measure_reports_what_did_not_run(user_cache: Path) -> None:
    log: list[tuple[str, Any]] = []
    workload = toy(
        {
            BASELINE: starter(log, BASELINE),
            DEFAULT: starter(log, DEFAULT, value=2.0, done=False),
            "jax": _raises(UnavailableError("jax is not installed")),
        }
    )
    found = first_result.measure(workload, Case("s", {}), {}, ONE_ROUND)
    assert found["jax"].status == "unavailable" and "not installed" in found["jax"].reason
    assert found[DEFAULT].status == "error" and "did not finish" in found[DEFAULT].reason
    workload.first_result[DEFAULT] = starter(log, DEFAULT, value=2.0)
    found = first_result.measure(workload, Case("s", {}, skip_modes={"jax": "slow"}), {}, ONE_ROUND)
    assert found["jax"].status == "skipped" and found["jax"].reason == "slow"
    assert found[DEFAULT].agrees is False and found[DEFAULT].rel_error == pytest.approx(1.0)
    assert found[BASELINE].agrees is True


@pytest.mark.slow  # four cold starts in fresh processes
def test_quick_leaves_the_slow_cold_starts_to_the_full_run(user_cache: Path) -> None:
    log: list[tuple[str, Any]] = []
    starts = {m: starter(log, m) for m in (BASELINE, DEFAULT)}
    workload = toy({**starts, "jax": starter(log, "jax", built=False)})
    full = first_result.measure(workload, Case("s", {}), {}, ONE_ROUND)
    assert all(found.status == "ok" for found in full.values())
    quick = first_result.measure(workload, Case("s", {}), {}, ONE_ROUND, quick=True)
    assert quick["jax"].status == "skipped" and quick["jax"].reason == QUICK_SKIP_COLD["jax"]
    assert quick[BASELINE].status == quick[DEFAULT].status == "ok"
    case = Case("s", {}, quick_skip_cold=QUICK_SKIP_DEFAULT_COLD)  # a model's quick case
    quick = first_result.measure(workload, case, {}, ONE_ROUND, quick=True)
    assert quick[DEFAULT].status == "skipped" and "full run" in quick[DEFAULT].reason
    assert quick[BASELINE].status == "ok"  # the numpy backend's cold start builds nothing
    assert first_result.measure(workload, case, {}, ONE_ROUND)[DEFAULT].status == "ok"


def test_runner_reports_first_results_in_cells_table_and_goals(user_cache: Path) -> None:
    log: list[tuple[str, Any]] = []
    workload = toy({BASELINE: starter(log, BASELINE), DEFAULT: starter(log, DEFAULT)})
    report = bench.run(quick=True, workloads=[workload])
    entry = report["workloads"]["toy"]
    assert entry["first_result_modes"] == [BASELINE, DEFAULT]
    assert DEFAULT in entry["modes"]  # a row for the default backend, though it has no builder
    cells = entry["cases"]["small"]
    for mode in (BASELINE, DEFAULT):
        assert cells[mode]["first_result"]["status"] == "ok"
        assert cells[mode]["first_result"]["median"] is not None
    assert cells["numpy"]["first_result"] is None
    text = bench.markdown(report)
    header = next(line for line in text.splitlines() if line.startswith("| case |"))
    assert "| first result, cold | background build |" in header
    rows = [line for line in text.splitlines() if line.startswith("| small |")]
    assert rows and all(row.replace("\\|", "").count("|") == header.count("|") for row in rows)
    default_row = next(row for row in rows if f"| {DEFAULT} |" in row)
    assert " cold) |" in default_row and "numpy (building native) -> native" in default_row


def test_runner_waits_for_the_build_before_timing() -> None:
    events: list[str] = []

    class Building:
        def wait(self, timeout: float | None = None) -> bool:
            events.append("wait")
            return True

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        return Prepared(lambda: events.append("call") or inputs["x"], built=Building())

    workload = toy({})
    workload.builders[BASELINE] = build
    bench.run(quick=True, workloads=[workload])
    assert events[:3] == ["call", "wait", "call"]  # the first (checked) call, then the wait


@pytest.mark.slow  # cold starts in child interpreters; the quick run keeps the runner and report tests
def test_graphc_cold_starts_of_a_scalar_graph() -> None:
    """tiny's graph runs on numpy scalars on every backend: nothing to build, both agree."""
    inputs = tiny.WORKLOAD.make_inputs({})
    found = first_result.measure(tiny.WORKLOAD, Case("(1,)", {}), inputs, ONE_ROUND)
    for mode in (BASELINE, DEFAULT):
        assert found[mode].status == "ok" and found[mode].agrees is True, found[mode].reason
    assert found["jax"].status in ("ok", "unavailable")


@pytest.fixture
def users_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default backend a user gets (the suite's conftest makes it numpy)."""
    monkeypatch.delenv("GRAPHC_BACKEND", raising=False)


@pytest.mark.slow  # long: the quick run leaves it to --rest
@pytest.mark.skipif(not NATIVE_READY, reason="the native backend cannot run here")
def test_the_default_backend_builds_native_kernels_in_a_cold_cache(users_default: None) -> None:
    case = Case("1e3", {"n": 1000})
    inputs = gelu.WORKLOAD.make_inputs(case.params)
    runs = toolchain.compiler_runs() if hasattr(toolchain, "compiler_runs") else None
    found = first_result.measure(gelu.WORKLOAD, case, inputs, ONE_ROUND)[DEFAULT]
    assert found.status == "ok" and found.agrees is True, found.reason
    if runs is not None:  # a cold cache: the kernels were compiled, not found
        assert toolchain.compiler_runs() > runs
    if found.build is not None:  # a runtime that builds behind the first result
        assert found.note.endswith("-> native")


def test_the_steady_state_default_mode_is_timed_on_its_final_tier(users_default: None) -> None:
    inputs = gelu.WORKLOAD.make_inputs({"n": 1000})
    prepared = gelu.WORKLOAD.builders[DEFAULT]({"n": 1000}, inputs)
    exe = prepared.built
    assert exe is not None
    tier = getattr(exe, "tier", "")
    assert "building" not in tier
    assert prepared.note.startswith("native 1/1 steps" if NATIVE_READY else "on numpy")


def _first(median: float, build: float | None = None) -> dict[str, Any]:
    return {"status": "ok", "median": median, "build": build}


def _cell(first: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "status": "ok",
        "median": 1.0,
        "peak_bytes": None,
        "agrees": True,
        "first_result": first,
    }


def test_first_result_goals_read_one_run() -> None:
    report = {
        "workloads": {
            "gelu": {
                "cases": {
                    "1e5": {
                        BASELINE: _cell(_first(0.010)),
                        DEFAULT: _cell(_first(0.0105, 0.9)),
                        "jax": _cell(_first(0.080)),
                    },
                    "1e6": {BASELINE: _cell(_first(0.020)), DEFAULT: _cell(_first(0.030, 1.0))},
                }
            },
            "mlp": {
                "cases": {
                    "batch 32": {
                        BASELINE: _cell(_first(0.10)),
                        DEFAULT: _cell(_first(0.10, 4.0)),
                        "jax": _cell(_first(0.09)),
                    }
                }
            },
            "trace-compile": {
                "cases": {
                    "K=5000": {BASELINE: _cell(_first(0.4)), DEFAULT: _cell(_first(0.42, 8.0))}
                }
            },
        }
    }
    found = {g.text: g for g in goals.evaluate(report)}
    within = "first result, default backend within 1.1x of the numpy backend's (cold), every case"
    faster = "first result, default backend faster than jax.jit's first call (cold), every case"
    assert found[f"GELU: {within}"].met is False  # 1.5x at 1e6
    assert "worst 1.50x (1e6); 1 of 2" in found[f"GELU: {within}"].measured
    assert found[f"MLP step: {within}"].met is True
    assert found[f"K-op chain: {within}"].met is True
    assert found[f"CNN step: {within}"].met is None  # not measured
    assert found[f"GELU: {faster}"].met is True  # 1e6 has no jax figure
    assert found[f"MLP step: {faster}"].met is False
    assert found[f"RNN (unrolled): {faster}"].met is None
    chain_first = next(g for g in found.values() if g.text.startswith("5000-op chain: first"))
    chain_build = next(g for g in found.values() if g.text.startswith("5000-op chain: full"))
    assert (chain_first.met, chain_build.met) == (True, True)
    assert "| goal (issues 6, 14 to 18, 30, 31, 35) |" in goals.markdown(list(found.values()))
    # a runtime without background builds: the build was inside the first result
    report["workloads"]["trace-compile"]["cases"]["K=5000"][DEFAULT] = _cell(_first(41.0))
    found = {g.text: g for g in goals.evaluate(report)}
    chain_first = next(g for g in found.values() if g.text.startswith("5000-op chain: first"))
    chain_build = next(g for g in found.values() if g.text.startswith("5000-op chain: full"))
    assert chain_first.met is False
    assert chain_build.met is None and "built before the first result" in chain_build.measured
