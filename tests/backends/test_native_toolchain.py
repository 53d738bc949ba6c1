"""The native toolchain's safety (backends/native/toolchain.py): no compiler outlives the
call that started it, damaged cached libraries are built again, an unusable cache
directory turns the backend off with one warning naming it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import toolchain
from graphc.runtime import backend as backends
from tests.native_checks import graphc_warnings, needs_native

pytestmark = needs_native


@pytest.fixture(name="fresh")
def fresh_toolchain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A cache directory of the test's own, the probe and loaded libraries forgotten,
    the warnings given so far too (all restored after)."""
    saved = set(backends._WARNED)
    backends._WARNED.clear()
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(tmp_path / "cache"))
    toolchain.reset(loaded=True)
    yield tmp_path / "cache"
    monkeypatch.undo()
    toolchain.reset(loaded=True)
    backends._WARNED.clear()
    backends._WARNED.update(saved)


def _graph(name: str = "chain") -> gc.Graph:
    g = gc.Graph(name)
    with g:
        x = gc.placeholder("x", shape=(8192,), dtype="float32")
        gc.output(gc.tanh(x) * 0.25 + x, name="y")
    return g


def _sleeping_compiler(tmp_path: Path) -> tuple[str, Path]:
    """A compiler that builds the probe but, given a kernel (a source with gk_) or the
    prelude to precompile (a header), starts a long sleep in its process group and waits
    for it; it writes its process id (the group's, as graphc starts each compiler in a
    group of its own) to a file first."""
    real = toolchain.toolchain()
    assert not isinstance(real, str)
    pids = tmp_path / "pids"
    script = tmp_path / "sleepy-cc"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in *.h|*.c) if grep -q "gk_\\|gc_" "$a"; then\n'
        f'  echo $$ >> "{pids}"; sleep 600 & wait; exit 1; fi;; esac; done\n'
        f'exec "{real.compiler}" "$@"\n'
    )
    script.chmod(0o755)
    return str(script), pids


def _group_alive(pgid: int) -> list[int]:
    """The processes of process group `pgid` still running (zombies excluded)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def test_a_timed_out_build_leaves_no_compiler_behind(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Guards the timeout: the compiler's whole process group (here the wrapper and its
    sleep, as gcc's driver and cc1) is killed, not only the driver; the plan falls back
    to numpy with a warning naming the timeout."""
    cc, pids = _sleeping_compiler(tmp_path)
    monkeypatch.setenv("GRAPHC_CC", cc)
    monkeypatch.setenv("GRAPHC_CC_TIMEOUT", "1")
    toolchain.reset()
    x = np.linspace(-2, 2, 8192, dtype=np.float32)
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = gc.compile(_graph(), backend="native")(x)
    assert time.monotonic() - started < 30
    np.testing.assert_array_equal(y, gc.compile(_graph(), backend="numpy")(x))
    said = graphc_warnings(caught)
    assert any("took more than 1 s and was stopped" in w for w in said), said
    groups = [int(line) for line in pids.read_text().split()]
    assert groups, "the sleeping compiler never ran"
    for pgid in groups:
        assert _group_alive(pgid) == [], f"compiler processes of group {pgid} survived"
    assert toolchain.live_compilers() == 0


@pytest.mark.slow  # a build interrupted in a child process: the quick run keeps the timed-out one
def test_an_interrupted_build_leaves_no_compiler_behind(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Guards KeyboardInterrupt: a build the caller waits for (wait=True) is killed
    whole when the wait is interrupted, and the interrupt reaches the caller."""
    cc, pids = _sleeping_compiler(tmp_path)
    monkeypatch.setenv("GRAPHC_CC", cc)
    toolchain.reset()
    toolchain.toolchain()  # the probe, before the timer starts

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            gc.compile(_graph(), backend="native")(np.zeros(8192, np.float32))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    groups = [int(line) for line in pids.read_text().split()]
    assert groups
    for pgid in groups:
        assert _group_alive(pgid) == [], f"compiler processes of group {pgid} survived"
    assert toolchain.live_compilers() == 0


# a child's first call of a graph on the default backend: its kernels then build
FIRST_CALL = (
    "import numpy as np, graphc as gc\n"
    "g = gc.Graph('g')\n"
    "with g:\n"
    "    x = gc.placeholder('x', shape=(8192,), dtype='float32')\n"
    "    gc.output(gc.tanh(x) * 0.25 + x, name='y')\n"
    "exe = gc.compile(g)\n"
    "exe(np.zeros(8192, np.float32))\n"
)


@pytest.mark.slow  # a child interpreter building, then exiting; the quick run keeps the timed-out build
def test_compilers_are_killed_at_interpreter_exit(tmp_path: Path) -> None:
    """Guards interpreter exit: a process that ends while its background build runs
    takes the compiler's process group with it."""
    cc, pids = _sleeping_compiler(tmp_path)
    code = "import time\n" + FIRST_CALL + "time.sleep(2)\n"  # the compiler sleeps meanwhile
    env = dict(os.environ, GRAPHC_CC=cc, GRAPHC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GRAPHC_BACKEND", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    groups = [int(line) for line in pids.read_text().split()]
    assert groups, "the build did not start before the process ended"
    time.sleep(0.2)
    for pgid in groups:
        assert _group_alive(pgid) == [], f"compiler processes of group {pgid} survived"


@pytest.mark.slow  # a child interpreter, held at its exit a second
def test_a_build_stopped_at_interpreter_exit_is_not_reported_as_failed(tmp_path: Path) -> None:
    """A script that ends while its background build runs: the compiler stopped at exit
    is no failed build, so no warning says the kernels could not be built (3 runs in 20
    of a short script printed 'could not build its kernels (... killed by signal 9)').
    The handler registered first runs last, so the builder thread has a second to warn."""
    cc, pids = _sleeping_compiler(tmp_path)
    code = (
        "import atexit, os, time\n"
        "atexit.register(time.sleep, 1.0)\n"
        + FIRST_CALL
        + f"while not os.path.exists({str(pids)!r}): time.sleep(0.01)\n"
    )
    env = dict(os.environ, GRAPHC_CC=cc, GRAPHC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GRAPHC_BACKEND", None)
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert pids.read_text().split(), "the build did not start before the process ended"
    assert "could not build" not in done.stderr, done.stderr


def _run_fresh_process(cache: Path, code: str) -> str:
    env = dict(os.environ, GRAPHC_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


BUILD = (
    "import numpy as np, graphc as gc, warnings\n"
    "warnings.simplefilter('error')\n"
    "from graphc.backends.native import toolchain\n"
    "g = gc.Graph('g')\n"
    "with g:\n"
    "    x = gc.placeholder('x', shape=(8192,), dtype='float32')\n"
    "    gc.output(gc.tanh(x) * 0.25 + x, name='y')\n"
    "x = np.linspace(-2, 2, 8192, dtype=np.float32)\n"
    "exe = gc.compile(g, backend='native')\n"
    "y = exe(x)\n"
    "print('runs', toolchain.compiler_runs())\n"
    "print('backend', exe.tier)\n"
    "print('sum', float(np.abs(y - gc.compile(g, backend='numpy')(x)).max()))\n"
)


@pytest.mark.slow  # builds a library, damages it, builds it again
def test_damaged_libraries_are_built_again(tmp_path: Path) -> None:
    """Guards damaged caches: with every cached library (the probe's, the kernel's, the
    OpenBLAS callback's where there is one) and the precompiled prelude overwritten with garbage, a new
    process builds them again, runs native, and gives no warning."""
    cache = tmp_path / "cache"
    first = _run_fresh_process(cache, BUILD)
    assert "backend native" in first, first
    libraries = sorted(cache.glob("graphc_*.so"))
    # the probe and the kernel (and OpenBLAS's threads callback, where its OpenBLAS has
    # the hook: not numpy 2.0's)
    assert len(libraries) >= 2, libraries
    for path in [*libraries, *cache.glob("*.gch")]:
        path.write_bytes(b"not a library\n" * 10)
    again = _run_fresh_process(cache, BUILD)
    assert "backend native" in again, again
    runs = int(again.split("runs ")[1].split()[0])
    assert runs >= 2, again  # at least the probe and the kernel were compiled again
    assert float(again.split("sum ")[1].split()[0]) < 1e-5
    # and a third process finds them whole
    third = _run_fresh_process(cache, BUILD)
    assert "runs 0" in third, third


def test_gcc_is_recognized_under_any_name_and_precompiles_the_prelude(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the precompiled prelude: GNU C installed as `cc` (Debian's, this machine's)
    still counts as gcc; a build of fewer than PRECOMPILE_AFTER units leaves no `.gch`
    (precompiling costs about two units), a larger one leaves it beside its units, and
    what the units compiled with it compute is unchanged."""
    chain = toolchain.toolchain()
    if isinstance(chain, str):
        pytest.skip(chain)
    said = subprocess.run([chain.compiler, "--version"], capture_output=True, text=True).stdout
    assert chain.gcc == ("Free Software Foundation" in said and "clang" not in said.lower())
    if not chain.gcc:
        pytest.skip(f"{chain.compiler} is not GNU C: no precompiled prelude")
    x = np.linspace(-2, 2, 8192, dtype=np.float32)
    want = gc.compile(_graph(), backend="numpy")(x)
    monkeypatch.setattr(toolchain, "PRECOMPILE_AFTER", 2)
    y = gc.compile(_graph(), backend="native")(x)
    assert sorted(p.suffix for p in fresh.glob("graphc_prelude_*")) == [".h"]
    monkeypatch.setattr(toolchain, "PRECOMPILE_AFTER", 1)
    toolchain.reset(loaded=True)
    for path in fresh.glob("graphc_*.so"):
        path.unlink()
    again = gc.compile(_graph(), backend="native")
    z = again(x)
    assert again.tier == "native"
    assert sorted(p.suffix for p in fresh.glob("graphc_prelude_*")) == [".gch", ".h"]
    np.testing.assert_array_equal(y, z)
    assert np.abs(z - want).max() < 1e-5


def test_an_unusable_cache_directory_falls_back_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Guards the cache directory: a path that is a file turns the native backend off
    for "auto" with one warning naming the directory; results are numpy's."""
    saved = set(backends._WARNED)
    backends._WARNED.clear()
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache should be")
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(blocker / "native"))
    monkeypatch.delenv("GRAPHC_BACKEND", raising=False)
    toolchain.reset(loaded=True)
    x = np.linspace(-2, 2, 8192, dtype=np.float32)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exes = [gc.compile(_graph()) for _ in range(3)]
            results = [exe(x) for exe in exes]
        said = graphc_warnings(caught)
        assert len(said) == 1 and str(blocker / "native") in said[0], said
        assert all(exe.backend.name == "numpy" for exe in exes)
        want = gc.compile(_graph(), backend="numpy")(x)
        for y in results:
            np.testing.assert_array_equal(y, want)
    finally:
        monkeypatch.undo()
        toolchain.reset(loaded=True)
        backends._WARNED.clear()
        backends._WARNED.update(saved)


def test_a_cache_directory_lost_mid_run_keeps_numpy_with_one_warning(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards a cache directory that stops being usable after the probe: the background
    build fails, the plan stays on numpy (its results right), one warning names the
    directory."""
    monkeypatch.delenv("GRAPHC_BACKEND", raising=False)
    toolchain.toolchain()  # probed with the directory in place
    x = np.linspace(-2, 2, 8192, dtype=np.float32)
    fresh.rename(fresh.with_name("moved"))
    fresh.write_text("now a file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = gc.compile(_graph())
        y = exe(x)
        assert exe.wait(timeout=120)
        y2 = exe(x)
    want = gc.compile(_graph(), backend="numpy")(x)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(y2, want)
    said = graphc_warnings(caught)
    assert len(said) == 1 and str(fresh) in said[0], said
    assert exe.tier == "numpy"


def test_a_cache_path_that_is_a_file_is_said_to_be_one_at_the_users_line(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The warning says the path is a file (not "File exists"), and points at the line
    that compiled, not at graphc's own."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(blocker))
    monkeypatch.delenv("GRAPHC_BACKEND", raising=False)
    toolchain.reset(loaded=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.compile(_graph())
    (warning,) = [w for w in caught if "graphc" in str(w.message)]
    assert f"{blocker} is a file, not a directory (GRAPHC_CACHE_DIR)" in str(warning.message)
    assert warning.filename == __file__


@pytest.mark.parametrize(
    "setting, said",
    [("/nonexistent/gcc", "is not an executable file"), ("no-such-cc", "is not on the PATH")],
)
def test_a_compiler_setting_that_names_no_program_is_named(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, setting: str, said: str
) -> None:
    monkeypatch.setenv("GRAPHC_CC", setting)
    toolchain.reset()
    why = toolchain.toolchain()
    assert why == f"no C compiler found (GRAPHC_CC={setting!r} {said})"


def test_an_unknown_graphc_backend_variable_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GRAPHC_BACKEND", "nativ")
    with pytest.raises(gc.GraphcError, match=r"environment variable GRAPHC_BACKEND='nativ'"):
        gc.compile(_graph())
