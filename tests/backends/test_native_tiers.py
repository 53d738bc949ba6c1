"""Tiered plans (runtime/tiers.py): with backend="auto" a plan runs on numpy at once while
its native kernels build in the background, then the kernels are swapped in.

The graphs here hold a tanh, whose float32 bits differ between numpy and graphc's own C
tanh for some inputs: so each result says which tier computed it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import toolchain
from graphc.runtime import backend as backends
from graphc.runtime import tiers
from tests.forking import child_status
from tests.native_checks import failing_compiler, graphc_warnings, needs_native

pytestmark = needs_native


@pytest.fixture(name="cold")
def cold_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty cache directory and no library loaded from before, as in a new user's
    first process; the default backend is "auto" (the suite's conftest makes it numpy)."""
    saved = set(backends._WARNED)
    backends._WARNED.clear()
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GRAPHC_BACKEND", raising=False)
    toolchain.reset(loaded=True)
    yield tmp_path / "cache"
    assert tiers.pending() == 0 or _drain()
    monkeypatch.undo()
    toolchain.reset(loaded=True)
    backends._WARNED.clear()
    backends._WARNED.update(saved)


def _drain() -> bool:
    deadline = time.monotonic() + 120
    while tiers.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def _graph(name: str = "tiered") -> gc.Graph:
    g = gc.Graph(name)
    with g:
        x = gc.placeholder("x", shape=("B", 64), dtype="float32")
        gc.output(gc.tanh(x * 1.25) - x * 0.5, name="y")
    return g


def _inputs(batch: int = 64) -> np.ndarray:
    return np.random.default_rng(3).uniform(-3, 3, (batch, 64)).astype(np.float32)


def _tier_results(g: gc.Graph, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numpy tier's and the native tier's results (built synchronously)."""
    slow = gc.compile(g, backend="numpy")(x)
    fast = gc.compile(g, backend="native")(x)
    assert not np.array_equal(slow, fast), "the tiers agree on these inputs: nothing to tell"
    return slow, fast


def test_first_call_runs_numpy_then_native_is_swapped_in(cold: Path) -> None:
    """Guards the tiers: the first call does not wait for the compiler (numpy's bits),
    wait() returns once the kernels are in, later calls give native's bits, and
    explain says which tier ran and how long the build took."""
    g, x = _graph(), _inputs()
    exe = gc.compile(g)  # "auto"
    runs = toolchain.compiler_runs()
    first = exe(x)
    slow, fast = _tier_results(_graph("reference"), x)
    np.testing.assert_array_equal(first, slow)
    assert exe.wait(timeout=120)
    assert toolchain.compiler_runs() > runs
    assert exe.tier == "native"
    np.testing.assert_array_equal(exe(x), fast)
    text = exe.explain(x)
    assert "tier: native, swapped in after a background build of" in text, text
    assert "backend: native" in text


def test_warm_kernels_run_native_from_the_first_call(cold: Path) -> None:
    """Guards no needless numpy tier: when every kernel is built (here by an earlier
    executable of the same graph), a new executable's first call runs native."""
    g, x = _graph(), _inputs()
    first = gc.compile(g)
    first(x)
    assert first.wait(timeout=120)
    again = gc.compile(g)
    assert again.tier == "none yet"
    np.testing.assert_array_equal(again(x), first(x))
    assert again.tier == "native"
    assert "tier:" not in again.explain(x)


def test_wait_true_builds_before_the_first_call(cold: Path) -> None:
    """Guards compile(wait=True) and the explicit backend="native": the first call
    already runs the kernels."""
    g, x = _graph(), _inputs()
    _, fast = _tier_results(_graph("reference"), x)
    exe = gc.compile(g, wait=True)
    np.testing.assert_array_equal(exe(x), fast)
    assert exe.tier == "native"


def test_tier_swap_under_eight_threads(cold: Path) -> None:
    """Guards the swap's thread safety: eight threads call one executable while its
    kernels build and are swapped in. Every result is one tier's, bit for bit; once
    wait() has returned, every thread gets native's."""
    g, x = _graph(), _inputs(256)
    exe = gc.compile(g)
    slow = gc.compile(g, backend="numpy")(x)
    np.testing.assert_array_equal(exe(x), slow)  # the plan, on numpy; its build starts
    start = threading.Barrier(9)
    built = threading.Event()
    results: list[list[np.ndarray]] = [[] for _ in range(8)]
    after: list[list[np.ndarray]] = [[] for _ in range(8)]
    errors: list[BaseException] = []

    def caller(k: int) -> None:
        try:
            start.wait()
            while not built.is_set():
                results[k].append(exe(x))
            after[k] += [exe(x) for _ in range(5)]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    start.wait()
    assert exe.wait(timeout=120)
    built.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    fast = exe(x)
    assert not np.array_equal(slow, fast), "the tiers agree on these inputs: nothing to tell"
    seen = [
        "numpy" if np.array_equal(y, slow) else "native" if np.array_equal(y, fast) else "?"
        for per in results
        for y in per
    ]
    assert "?" not in seen
    assert "numpy" in seen, "no call ran before the swap: the test saw no swap"
    assert all(np.array_equal(y, fast) for per in after for y in per)
    assert all(len(per) == 5 for per in after)


def test_state_survives_the_swap(cold: Path) -> None:
    """Guards state across tiers: an executable with updates keeps its state buffers
    when the kernels are swapped in, so a counter goes on counting."""
    g = gc.Graph("counter")
    with g:
        x = gc.placeholder("x", shape=(4096,), dtype="float32")
        s = gc.placeholder("s", shape=(4096,), dtype="float32")
        new = s + gc.tanh(x) * 0.0 + 1.0
        gc.output(gc.sum(new), name="total")
        gc.output(new, name="s_new")
    exe = gc.compile(g, updates={"s": "s_new"})
    x = np.zeros(4096, np.float32)
    exe.set_state(s=np.zeros(4096, np.float32))
    totals = [float(exe(x))]
    assert exe.wait(timeout=120)
    totals += [float(exe(x)) for _ in range(3)]
    assert totals == [4096.0 * k for k in range(1, 5)]
    assert exe.tier == "native"


def test_a_failed_build_keeps_numpy_with_one_warning(
    cold: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Guards the failed build: results stay numpy's, one warning names the failure,
    explain says so."""
    monkeypatch.setenv("GRAPHC_CC", failing_compiler(tmp_path, "kernels refused for the test"))
    toolchain.reset()
    g, x = _graph(), _inputs()
    slow = gc.compile(g, backend="numpy")(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exes = [gc.compile(g) for _ in range(2)]
        for exe in exes:
            np.testing.assert_array_equal(exe(x), slow)
            assert exe.wait(timeout=120)
            np.testing.assert_array_equal(exe(x), slow)
    said = graphc_warnings(caught)
    assert len(said) == 1 and "kernels refused for the test" in said[0], said
    assert "the native kernels failed to build" in exes[0].explain(x)
    assert exes[0].tier == "numpy"


def test_no_compiler_on_the_path_keeps_auto_on_numpy_silently(
    cold: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "auto" no longer searches the PATH before the first result (0.1-0.2 ms of every
    process's first compile): the first plan's background build looks for the compiler,
    finds none, and leaves that plan on numpy without a warning, explain() saying why;
    later plans see the probe's answer and compile for numpy at once."""
    monkeypatch.setenv("GRAPHC_CC", "graphc-no-such-compiler")
    toolchain.reset()
    g, x = _graph(), _inputs()
    slow = gc.compile(g, backend="numpy")(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = gc.compile(g)
        np.testing.assert_array_equal(first(x), slow)
        assert first.wait(timeout=120)
        np.testing.assert_array_equal(first(x), slow)
        later = gc.compile(g)
        np.testing.assert_array_equal(later(x), slow)
    assert graphc_warnings(caught) == []
    assert first.tier == "numpy"
    assert "not available here: no C compiler found" in first.explain(x)
    assert later.backend.name == "numpy"


def test_fork_during_a_background_build(cold: Path) -> None:
    """Guards the builder in a forked child: a build under way in the parent at the fork
    is done again in the child, whose wait() returns and whose results are right."""
    g, x = _graph(), _inputs()
    exe = gc.compile(g)
    exe(x)  # starts the build
    _, fast = _tier_results(_graph("reference"), x)
    status = child_status(lambda: exe.wait(timeout=60) and np.array_equal(exe(x), fast), 90)
    assert status == 0, f"the child exited with {status}"
    assert exe.wait(timeout=120)


def parallel_sized() -> tuple[gc.Executable, np.ndarray]:
    """A native executable whose kernel runs on the OpenMP pool, and its feed."""
    g = gc.Graph("big")
    with g:
        x = gc.placeholder("x", shape=(1 << 21,), dtype="float32")
        gc.output(gc.tanh(x) * 0.5 + x, name="y")
    return gc.compile(g, backend="native"), np.linspace(-4, 4, 1 << 21, dtype=np.float32)


def test_fork_after_parallel_native_work(cold: Path) -> None:
    """Guards fork safety: after a kernel ran on the OpenMP pool, a forked child runs
    native kernels (a parallel-sized one included) to the right result in bounded time.
    GNU OpenMP's pool does not survive a fork: without graphc's handling the child's
    first parallel region waits forever."""
    from graphc.backends.native.calls import POOL_CLOCK

    exe, x = parallel_sized()
    before = int(POOL_CLOCK[0])
    want = exe(x)
    assert int(POOL_CLOCK[0]) > before, "the kernel did not run on the pool"
    status = child_status(lambda: np.array_equal(exe(x), want), 60)
    assert status == 0, f"the child exited with {status}"


# run in a fresh interpreter, so that no builder thread of an earlier test is counted
_BUILDER_THREADS = """
import os, sys, time
import numpy as np
from graphc.backends.native.calls import POOL_CLOCK
from graphc.runtime import tiers
from tests.backends.test_native_tiers import parallel_sized

def threads():
    return len(os.listdir("/proc/self/task"))

exe, x = parallel_sized()
want = exe(x)  # the main thread's pool, which stays
assert tiers.settle(timeout=120)
before, clock = threads(), int(POOL_CLOCK[0])
job = tiers.Job(lambda: exe(x), lambda job: None)
assert job.wait(timeout=120)
assert job.error is None, job.error
assert np.array_equal(job.result, want)
assert int(POOL_CLOCK[0]) > clock, "the job's kernel did not run on a pool"
deadline = time.monotonic() + 10
while threads() != before and time.monotonic() < deadline:
    time.sleep(0.02)
print(before, threads())
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_the_builder_keeps_no_openmp_workers_after_its_jobs() -> None:
    """Guards the steady state after a background build: a job that ran a parallel kernel
    (as a build does when it packs a constant or probes the compiler) leaves no thread
    behind. A thread that ran an OpenMP region keeps a pool of workers while it lives,
    and while libgomp counts more threads than cores it stops idle workers spinning, so
    every parallel kernel of the process waits for a sleeping worker to wake (an LSTM's
    steps ran 3x slower for the rest of the process)."""
    done = subprocess.run(
        [sys.executable, "-c", _BUILDER_THREADS],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],  # where `tests` imports from
    )
    assert done.returncode == 0, done.stderr
    before, after = map(int, done.stdout.split())
    assert after == before, f"{after - before} thread(s) outlived the job"
