"""Shared test settings: `--full` (every generated case and the slow tests; the default
run is the quick one, tests/budget.py) and `--rest` (what the quick run leaves out);
hypothesis runs without deadlines (the machine is noisy); a test's background builds
end with it; the `needs_dot` mark for tests
that render pictures, `needs_torch` for those comparing with PyTorch (optional: CI
installs it, the oldest/newest matrix does not)."""

from __future__ import annotations

import gc as garbage
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

import graphc as gc
from graphc.runtime import tiers
from tests.budget import FULL_ENV, draws


@pytest.fixture(autouse=True)
def _background_work_ends_with_its_test() -> Iterator[None]:
    """A test's background jobs (a plan's fast tier, an entry in C: runtime/tiers.py)
    end with the test, or they would run during the next one and change what it counts
    (build requests, compiler runs, kernel setups) or how long it takes."""
    yield
    tiers.settle(timeout=600)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="every generated case, every hypothesis draw and the slow tests",
    )
    parser.addoption(
        "--rest",
        action="store_true",
        help="what the quick run leaves out: --full without the tests the quick run runs "
        "alike (those reading the budget, hypothesis draws and `reads_budget` tests, run "
        "again in full); CI runs it beside the quick run",
    )
    parser.addoption(
        "--shard",
        default=None,
        metavar="K/N",
        help="only the K-th of N disjoint parts of the run (by a hash of each test's id); "
        "the two legs of .ci/matrix take one half each",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--rest"):  # collected beside this process's own collection
        config.stash[_QUICK_IDS] = _collect_quick_run(config)
    if config.getoption("--full") or config.getoption("--rest"):
        # read by tests/budget.py when the test modules build their case tables
        os.environ[FULL_ENV] = "full"
        if config.option.markexpr == "not slow":  # the default from pyproject's addopts
            config.option.markexpr = ""
    # before the test modules are imported: their @settings read the budget too
    settings.register_profile(
        "graphc",
        deadline=None,
        print_blob=True,
        max_examples=draws(100),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.load_profile("graphc")


def pytest_unconfigure(config: pytest.Config) -> None:
    process = config.stash.get(_QUICK_IDS, None)
    if process is not None and process.poll() is None:  # collection stopped early
        process.kill()
        process.communicate()


# In the quick run, a parametrized test runs at most this many of its cases (its first;
# a test marked quick_cases(n) its first and n - 1 chosen by a stable hash of the case's
# id); `--rest` runs the others.
QUICK_CASES = 1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In the quick run, at most QUICK_CASES cases of each parametrized test; with
    `--rest`, leave out the tests the quick run runs exactly as `--full` does; with
    `--shard K/N`, the tests of the other parts."""
    config.stash[_FILES] = {item.nodeid.split("::")[0] for item in items}
    rest, shard = config.getoption("--rest"), config.getoption("--shard")
    if not rest and not config.getoption("--full"):
        _sample_cases(config, items)
    if not rest and shard is None:
        return
    quick = _quick_run_ids(config.stash[_QUICK_IDS]) if rest else set()
    part, parts = _shard(shard) if shard is not None else (0, 1)
    kept, left = [], []
    for item in items:
        in_part = zlib.crc32(item.nodeid.encode()) % parts == part
        done = item.nodeid in quick and not _does_more_in_full(item)
        (kept if in_part and not done else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def _sample_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The quick run's sample: of each parametrized test function, its first case and
    QUICK_CASES - 1 others by a stable hash of their ids (`quick_cases(n)`, a mark on a
    test whose cases are cheap and differ in what they check, asks for n in all)."""
    cases: dict[str, list[pytest.Item]] = {}
    for item in items:
        if "[" in item.nodeid:
            cases.setdefault(item.nodeid.split("[")[0], []).append(item)
    left: set[int] = set()
    for group in cases.values():
        marker = group[0].get_closest_marker("quick_cases")  # a heavy test asks for fewer
        limit = marker.args[0] if marker is not None else QUICK_CASES
        if len(group) > limit:
            ranked = sorted(group[1:], key=lambda item: zlib.crc32(item.nodeid.encode()))
            left.update(id(item) for item in ranked[limit - 1 :])
    if left:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in left])
        items[:] = [item for item in items if id(item) not in left]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The quick run of the whole suite keeps at least one test of every test file.

    Also moves everything collection made (torch, jax, onnx and dask imported, the case
    tables) out of the garbage collector's view (`gc.freeze`): a full collection with
    them in view took about 0.3 s here, and the benchmark tests' runner asks for one per
    case (measured on tests/bench, eager, frontend and runtime: 50.6 -> 47.3 s)."""
    garbage.freeze()
    config = session.config
    whole = not config.option.keyword and config.option.markexpr == "not slow"
    if config.getoption("--rest") or config.getoption("--full") or not whole:
        return
    if config.getoption("--shard") is not None:
        return
    kept = {item.nodeid.split("::")[0] for item in session.items}
    missing = sorted(config.stash.get(_FILES, set()) - kept)
    if missing:
        raise pytest.UsageError(
            "the quick run leaves out every test of " + ", ".join(missing) + ": keep one "
            "(mark fewer of its tests slow)"
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After the quick run, what it left out and how to run it."""
    config = terminalreporter.config
    if config.getoption("--rest") or config.getoption("--full"):
        return
    left = len(terminalreporter.stats.get("deselected", []))
    if left:
        terminalreporter.write_line(
            f"quick run: {left} tests left out (generated cases past the sample, slow tests); "
            "`python -m pytest --rest` runs them, `python -m pytest --full` runs everything"
        )


def _shard(text: str) -> tuple[int, int]:
    """`--shard K/N` as (K - 1, N): the K-th of N parts, counted from 1."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise pytest.UsageError(f"--shard takes K/N with 1 <= K <= N, got {text!r}")
    return k - 1, n


def _does_more_in_full(item: pytest.Item) -> bool:
    """Whether a test the quick run runs does more under `--full`: hypothesis draws more
    examples, and a `reads_budget` test asks tests/budget.py in its body or fixtures."""
    function = getattr(item, "function", None)
    return bool(getattr(function, "is_hypothesis_test", False)) or (
        item.get_closest_marker("reads_budget") is not None
    )


_QUICK_IDS = pytest.StashKey[subprocess.Popen]()
_FILES = pytest.StashKey[set]()  # the test files collected, before any selection


def _collect_quick_run(config: pytest.Config) -> subprocess.Popen:
    """A pytest process collecting the quick run for the same paths (the case tables are
    built when the test modules are imported, so another process has to build them)."""
    env = {k: v for k, v in os.environ.items() if k != FULL_ENV}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts="]
    command += ["-m", "not slow", "-p", "no:cacheprovider", *config.invocation_params.args]
    command = [arg for arg in command if arg not in ("--rest", "--full")]
    return subprocess.Popen(
        command,
        env=env,
        cwd=config.invocation_params.dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _quick_run_ids(process: subprocess.Popen) -> set[str]:
    """The ids `_collect_quick_run`'s process collected."""
    out, err = process.communicate()
    if process.returncode not in (0, 5):  # 5: nothing collected
        raise pytest.UsageError(
            f"--rest: collecting the quick run failed ({' '.join(process.args)}):\n"
            + out[-3000:]
            + err[-3000:]
        )
    return {line.strip() for line in out.splitlines() if "::" in line}


# The suite compares compiled results with the reference interpreter and eager mode bit
# for bit, which the numpy backend guarantees; `gc.compile`'s default ("auto") would pick
# the native backend where a C compiler is found, whose libmvec functions differ from
# numpy's in the last bits. So the default backend here is numpy, and the native backend
# is tested against it explicitly (tests/backends/test_native*.py, every backend present).
# GRAPHC_BACKEND=native python -m pytest runs the whole suite on native instead.
os.environ.setdefault("GRAPHC_BACKEND", "numpy")

# tests that render pictures need graphviz's `dot` program; without it they skip and say
# how to install it (CI installs it, so they run there)
needs_dot = pytest.mark.skipif(
    not gc.viz.have_dot(),
    reason="graphviz's `dot` program is not installed: apt-get install graphviz "
    "(macOS: brew install graphviz; conda: conda install graphviz)",
)

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="PyTorch is not installed: pip install torch==2.13.0 (CI installs it)"
)
