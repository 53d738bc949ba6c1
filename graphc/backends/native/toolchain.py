"""Building native kernels: find the C compiler, compile each kernel source as a library of
its own (several at once), cache the libraries on disk by a hash of their text, load them.

The compiler is `GRAPHC_CC` when set, else `CC`, else the first of cc, gcc, clang on the
PATH. It is probed once per process with a small kernel that needs everything the
generated code needs (AVX2 vectors, glibc's libmvec, OpenMP); a failed probe makes the
native backend unavailable and names the reason.

A plan's kernels are *units*: one C source each (a kernel, or the kernels of one file such
as matmul.py's), compiled on its own into ``graphc_<hash>.so`` in `GRAPHC_CACHE_DIR`
(default ``~/.cache/graphc/native``). The hash covers compiler, version, flags, the
processor and the whole text, so a unit shared by two graphs, two batch sizes or two
processes is compiled once, and a changed kernel never loads a stale build. Units
missing from the cache compile in parallel, one compiler process per core. Every unit
starts with the same prelude (cexpr.py's vectors, loads, math): it is written beside the
libraries once and, with gcc, precompiled (a ``.gch``), which takes the prelude's
parsing out of every unit's build (0.45 -> 0.13 s of CPU for a small unit, most of it
immintrin.h). Precompiling costs about two units' builds, so the first build of at least
`PRECOMPILE_AFTER` units does it, as one more job beside its units: those compiled before
the ``.gch`` is in place parse the header, as gcc does when it finds none.

Safety: a compiler runs in a process group of its own, killed whole (driver, cc1, as,
ld) when it overruns `GRAPHC_CC_TIMEOUT` seconds (default 300), when the thread waiting
for it is interrupted (KeyboardInterrupt), and at interpreter exit, so no compiler
outlives the call that started it. A library is written under a temporary name and
renamed into place, so concurrent processes never load half a file; one that does not
load (damaged) is compiled again, the probe's included. A cache directory that cannot
be written makes the backend unavailable, naming the directory.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import platform
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graphc.backends.native.c_sources import c_source
from graphc.runtime import forks

# -O3 and the host's vector ISA; no -ffast-math and no FMA contraction, so every
# + - * / rounds once as numpy's does; -fwrapv: integer overflow wraps as numpy's does;
# -fno-math-errno: sqrt may be an instruction (errno is not part of any result)
COMPILE_FLAGS = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fwrapv",
    "-fopenmp",
    "-fPIC",
    "-Wno-psabi",
)
FLAGS = (*COMPILE_FLAGS, "-shared")
LIBS = ("-lmvec", "-lm")
DEFAULT_TIMEOUT = 300.0  # seconds for one compiler process (GRAPHC_CC_TIMEOUT)
PRECOMPILE_AFTER = 5  # units in one build from which precompiling the prelude pays

PROBE = c_source("probe.c")


class BuildError(Exception):
    """The compiler failed on a kernel source (its message is the compiler's output), or
    could not be run, or the cache directory could not be written."""


class CompilerFailedError(BuildError):
    """The compiler ran to its end and refused the source (not killed, not timed out)."""


class NotBuiltError(Exception):
    """Some units are neither loaded nor cached on disk, and compiling was not allowed."""


@dataclass
class Toolchain:
    compiler: str
    flags: tuple[str, ...]
    version: str  # the first line of `compiler --version`
    gcc: bool = False  # GNU C (often installed as plain `cc`): precompiles the prelude


_lock = forks.lock()  # the tables below (the probe runs under it)
_live_lock = forks.lock()  # _live: compilers run under _lock too (the probe's)
_probed: dict[str, Toolchain | str] = {}  # compiler setting -> toolchain, or why not
# unit hash -> library loaded in this process, and the file it was loaded from
_loaded: dict[str, tuple[ctypes.CDLL, Path]] = {}
_building: dict[str, threading.Event] = {}  # unit hash -> set when its build is over
_prelude_ready: set[str] = set()  # prelude headers written this process
_precompile_failed: set[str] = set()  # prelude headers gcc did not precompile: not again
_live: set[subprocess.Popen] = set()  # compiler processes running now
_runs = [0]  # compiler processes this process started (compiler_runs)


def compiler_runs() -> int:
    """How many times this process has run the C compiler on a kernel source."""
    return _runs[0]


def _compiler_setting() -> str:
    return os.environ.get("GRAPHC_CC") or os.environ.get("CC") or ""


def cache_dir() -> Path:
    root = os.environ.get("GRAPHC_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphc" / "native"


_usable_dirs: set[Path] = set()  # cache directories found usable (checked once)


def cache_dir_problem() -> str | None:
    """Why the cache directory cannot hold libraries (None when it can): it is made if
    missing, and must be a directory this process can write. A directory found usable
    is not checked again (one that stops being usable fails its next build instead)."""
    where = cache_dir()
    if where in _usable_dirs:
        return None
    if where.exists() and not where.is_dir():
        return f"the cache directory {where} is a file, not a directory (GRAPHC_CACHE_DIR)"
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"the cache directory {where} is not usable ({exc.strerror or exc})"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"the cache directory {where} is not usable (this process may not write it)"
    _usable_dirs.add(where)
    return None


def timeout() -> float:
    """Seconds one compiler process may take (GRAPHC_CC_TIMEOUT, default 300)."""
    text = os.environ.get("GRAPHC_CC_TIMEOUT", "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def workers() -> int:
    """Compiler processes run at once: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _find_compiler(setting: str) -> str | None:
    if setting:
        return shutil.which(setting)
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def probed() -> bool:
    """Has the current compiler setting been probed in this process?"""
    return _compiler_setting() in _probed


def toolchain() -> Toolchain | str:
    """The working toolchain, or a sentence saying why there is none (probed once per
    compiler setting)."""
    setting = _compiler_setting()
    with _lock:
        if setting not in _probed:
            _probed[setting] = _probe(setting)
        return _probed[setting]


def reset(loaded: bool = False) -> None:
    """Forget the probe (tests change GRAPHC_CC); with `loaded`, also which libraries this
    process has loaded, so that what follows finds the toolchain and the (possibly new)
    cache directory as a fresh process would (the libraries themselves stay mapped)."""
    with _lock:
        _probed.clear()
        _usable_dirs.clear()
        if loaded:
            _loaded.clear()
            _prelude_ready.clear()
            _precompile_failed.clear()


def _probe(setting: str) -> Toolchain | str:
    compiler = _find_compiler(setting)
    if compiler is None:
        if not setting:
            return "no C compiler found (cc, gcc or clang is not on the PATH)"
        source = "GRAPHC_CC" if os.environ.get("GRAPHC_CC") else "CC"
        where = "is not an executable file" if os.sep in setting else "is not on the PATH"
        return f"no C compiler found ({source}={setting!r} {where})"
    problem = cache_dir_problem()
    if problem is not None:
        return problem
    try:
        done = run_compiler([compiler, "--version"], 30.0, count=False)
    except BuildError as exc:
        return f"the C compiler {compiler} does not run: {exc}"
    said = done.stdout.lower()
    gcc = "free software foundation" in said and "clang" not in said
    chain = Toolchain(compiler, FLAGS, done.stdout.split("\n")[0], gcc)
    # how idle OpenMP workers wait: libgomp reads it when our first library loads it
    from graphc.backends.native import threads  # threads builds with this module

    threads.openmp_environment()
    path = library_path(chain, PROBE)
    for attempt in range(2):  # a damaged cached probe is built again, once
        try:
            lib = ctypes.CDLL(str(path)) if path.exists() else _compile(chain, PROBE, path)
            out = (ctypes.c_float * 8)()
            lib.graphc_probe(ctypes.c_int64(8), out)
        except OSError:
            if attempt == 0 and path.exists():
                path.unlink(missing_ok=True)
                continue
            return f"the C compiler {compiler} built a probe library that does not load"
        except BuildError as exc:
            first = str(exc).strip().split("\n")[:3]
            return f"the C compiler {compiler} cannot build graphc's kernels: {' '.join(first)}"
        if abs(out[1] - 2.7182817) <= 1e-5:
            return chain
        if attempt == 0:  # a stale or damaged file that loads: build it once more
            path.unlink(missing_ok=True)
    return "libmvec's expf gave a wrong value in the probe"


def cpuinfo() -> str | None:
    """The text of /proc/cpuinfo, or None where there is none (not Linux)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return None


def host_id() -> str:
    """The processor's model and feature flags: -march=native builds for this processor,
    so a cache shared with another machine must not hand it this one's libraries."""
    text = cpuinfo()
    if text is None:
        return platform.processor()
    wanted = [line for line in text.split("\n") if line.startswith(("model name", "flags"))][:2]
    return "\n".join(wanted)


HOST = host_id()  # (direct_conv.py reads its vector width here too)


def source_hash(chain: Toolchain, source: str) -> str:
    text = "\0".join([chain.compiler, chain.version, *chain.flags, *LIBS, HOST, source])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def library_path(chain: Toolchain, source: str) -> Path:
    """Where the cache keeps the library `chain` builds from `source`."""
    return cache_dir() / f"graphc_{source_hash(chain, source)}.so"


@dataclass
class Built:
    library: ctypes.CDLL
    seconds: float  # compile time (0 when it came from a cache)
    cached: str  # "memory", "disk" or "compiled"
    path: Path


def build(source: str, compile: bool = True) -> Built:
    """The library of one self-contained C `source` (see `build_units`)."""
    return build_units([source], compile=compile)[source]


def build_units(
    sources: Sequence[str], prelude: str = "", compile: bool = True
) -> dict[str, Built]:
    """The library of each unit in `sources` (each compiled after `prelude`), from this
    process, the disk cache, or the compiler; missing units compile in parallel. With
    `compile` False, raises NotBuiltError instead of running the compiler. Raises BuildError
    when the toolchain is missing, the cache directory is unusable or a compiler fails."""
    chain = toolchain()
    if isinstance(chain, str):
        raise BuildError(chain)
    found: dict[str, Built] = {}
    missing: dict[str, tuple[str, Path]] = {}  # source -> (hash, path)
    for source in dict.fromkeys(sources):
        key = source_hash(chain, prelude + source)
        path = cache_dir() / f"graphc_{key}.so"
        start = time.perf_counter()
        with _lock:
            loaded = _loaded.get(key)
        if loaded is not None:
            found[source] = Built(loaded[0], 0.0, "memory", loaded[1])
            continue
        if path.exists():
            try:
                library = ctypes.CDLL(str(path))
            except OSError:  # a damaged file: compile it again
                path.unlink(missing_ok=True)
            else:
                with _lock:
                    _loaded[key] = (library, path)
                found[source] = Built(library, time.perf_counter() - start, "disk", path)
                continue
        missing[source] = (key, path)
    if missing and not compile:
        raise NotBuiltError(
            f"{len(missing)} of {len(found) + len(missing)} kernel libraries to build"
        )
    if missing:
        found.update(_compile_all(chain, prelude, missing))
    return found


def _compile_all(
    chain: Toolchain, prelude: str, missing: dict[str, tuple[str, Path]]
) -> dict[str, Built]:
    """Compile the `missing` units, `workers()` at a time, each on a daemon thread (a
    ThreadPoolExecutor's threads would hold interpreter exit until the compilers end)."""
    include = _prelude_include(chain, prelude) if prelude else ""
    todo: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # None: the precompile
    if include and len(missing) >= PRECOMPILE_AFTER and _should_precompile(chain, prelude):
        todo.put(None)  # first, so that most units find the .gch
    for source in missing:
        todo.put(source)
    done: dict[str, Built] = {}
    failures: list[BaseException] = []
    cancel = threading.Event()
    mine: set[subprocess.Popen] = set()

    def work(over: threading.Event) -> None:
        try:
            while not cancel.is_set():
                try:
                    source = todo.get_nowait()
                except queue.Empty:
                    return
                if source is None:
                    _precompile(chain, prelude, mine)
                    continue
                key, path = missing[source]
                try:
                    done[source] = _compile_unit(chain, key, path, include, source, prelude, mine)
                except BaseException as exc:  # noqa: BLE001 - reported to the waiting thread
                    failures.append(exc)
                    cancel.set()
        finally:
            over.set()

    # (events, not Thread.join: a join interrupted by KeyboardInterrupt may mark a thread
    # that still runs as stopped, bpo-45274)
    overs = [threading.Event() for _ in range(min(workers(), len(missing)))]
    for over in overs:
        threading.Thread(target=work, args=(over,), name="graphc-cc", daemon=True).start()
    try:
        for over in overs:
            while not over.wait(0.05):  # short waits, so that KeyboardInterrupt gets through
                pass
    except BaseException:
        cancel.set()  # no worker starts another unit; those running are killed, then
        deadline = time.monotonic() + 10  # reaped, before the interrupt goes on
        while not all(over.is_set() for over in overs) and time.monotonic() < deadline:
            _kill(list(mine))
            for over in overs:
                over.wait(0.05)
        raise
    if failures:
        raise failures[0]
    return done


def _compile_unit(
    chain: Toolchain,
    key: str,
    path: Path,
    include: str,
    source: str,
    prelude: str,
    mine: set[subprocess.Popen],
) -> Built:
    """One unit's library: built here, or by another thread already building it."""
    with _lock:
        loaded = _loaded.get(key)
        other = _building.get(key)
        if loaded is None and other is None:
            _building[key] = forks.event()
    if loaded is not None:
        return Built(loaded[0], 0.0, "memory", loaded[1])
    if other is not None:  # the same unit, wanted by another plan: wait for that build
        other.wait()
        return build_units([source], prelude)[source]
    start = time.perf_counter()
    try:
        text = (include + source) if include else (prelude + source)
        try:
            library = _compile(chain, text, path, mine)
        except CompilerFailedError:
            if not include:
                raise
            # a damaged or unusable precompiled prelude: build without it
            _drop_precompiled(chain, prelude)
            library = _compile(chain, prelude + source, path, mine)
        with _lock:
            _loaded[key] = (library, path)
    finally:
        with _lock:
            _building.pop(key).set()
    return Built(library, time.perf_counter() - start, "compiled", path)


def _prelude_names(chain: Toolchain, prelude: str) -> tuple[Path, Path]:
    header = cache_dir() / f"graphc_prelude_{source_hash(chain, prelude)}.h"
    return header, header.with_suffix(".h.gch")


def _prelude_include(chain: Toolchain, prelude: str) -> str:
    """The line that includes the prelude, written beside the libraries; "" when it
    cannot be written there. gcc reads the prelude's ``.gch`` instead where it exists."""
    header, _ = _prelude_names(chain, prelude)
    key = str(header)
    if key not in _prelude_ready:
        try:
            if not header.exists():
                _write_atomically(header, prelude)
        except OSError:
            return ""
        _prelude_ready.add(key)
    return f'#include "{header.name}"\n'


def _should_precompile(chain: Toolchain, prelude: str) -> bool:
    header, precompiled = _prelude_names(chain, prelude)
    return chain.gcc and str(header) not in _precompile_failed and not precompiled.exists()


def _precompile(chain: Toolchain, prelude: str, mine: set[subprocess.Popen]) -> None:
    """Precompile the prelude's header into its ``.gch`` (renamed into place when whole,
    so a unit compiling meanwhile reads either none or all of it). A failure is not the
    build's: its units parse the header, and this process does not try again."""
    header, precompiled = _prelude_names(chain, prelude)
    try:
        with tempfile.TemporaryDirectory(dir=header.parent) as tmp:
            target = Path(tmp) / precompiled.name
            command = [
                chain.compiler, *COMPILE_FLAGS, "-x", "c-header", str(header), "-o", str(target)
            ]  # fmt: skip
            done = run_compiler(command, timeout(), mine)
            if done.returncode == 0:
                os.replace(target, precompiled)
                return
    except (OSError, BuildError):
        pass
    _precompile_failed.add(str(header))


def _drop_precompiled(chain: Toolchain, prelude: str) -> None:
    header, precompiled = _prelude_names(chain, prelude)
    precompiled.unlink(missing_ok=True)
    header.unlink(missing_ok=True)
    _prelude_ready.discard(str(header))


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        f.write(text)
    os.replace(f.name, path)


def build_extension(source: str, includes: Sequence[str], tag: str) -> Path:
    """The file of the CPython extension module built from `source` with `includes` on
    the include path (the interpreter's and numpy's headers): from the disk cache, or
    the compiler. `tag` names what the module is built against (their versions), so
    another interpreter or numpy gets its own file. Raises BuildError as `build_units`."""
    chain = toolchain()
    if isinstance(chain, str):
        raise BuildError(chain)
    path = library_path(chain, "\0".join([tag, *includes, source]))
    if not path.exists():
        _compile_file(chain, source, path, includes=includes)
    return path


def _compile(
    chain: Toolchain, source: str, path: Path, mine: set[subprocess.Popen] | None = None
) -> ctypes.CDLL:
    _compile_file(chain, source, path, mine)
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise BuildError(f"the library {path.name} did not load: {exc}") from None


def _compile_file(
    chain: Toolchain,
    source: str,
    path: Path,
    mine: set[subprocess.Popen] | None = None,
    includes: Sequence[str] = (),
) -> None:
    """Compile `source` into the library file `path`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.TemporaryDirectory(dir=path.parent)
    except OSError as exc:
        raise BuildError(f"the cache directory {path.parent} is not usable ({exc})") from None
    with tmp:
        c_file = Path(tmp.name) / "kernels.c"
        c_file.write_text(source)
        target = Path(tmp.name) / path.name
        command = [
            chain.compiler,
            *chain.flags,
            f"-I{path.parent}",
            *(f"-I{where}" for where in includes),
            str(c_file),
            "-o",
            str(target),
            *LIBS,
        ]
        done = run_compiler(command, timeout(), mine)
        if done.returncode < 0:  # killed by a signal (ours, on an interrupt, or another's)
            raise BuildError(f"{chain.compiler} was killed by signal {-done.returncode}")
        if done.returncode != 0:
            # the message names the temporary file: say kernels.c, so that one failure
            # reads the same every time (a warning is given once per distinct message)
            message = done.stderr.replace(str(c_file), c_file.name)
            raise CompilerFailedError(
                message[-4000:] or f"{chain.compiler} exited {done.returncode}"
            )
        os.replace(target, path)  # atomic: a concurrent process sees all of it or nothing


def run_compiler(
    command: list[str],
    seconds: float,
    mine: set[subprocess.Popen] | None = None,
    count: bool = True,
) -> subprocess.CompletedProcess:
    """Run `command` in a process group of its own; on timeout or interruption the whole
    group is killed (the driver and cc1 alike) before this returns or raises."""
    with _live_lock:
        if _exiting:
            raise BuildError("the interpreter is exiting: no compiler is started")
    if count:
        _runs[0] += 1
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise BuildError(f"{command[0]} did not run: {exc}") from None
    with _live_lock:
        _live.add(process)
        if _exiting:  # started as the interpreter began to exit
            os.killpg(process.pid, signal.SIGKILL)
    if mine is not None:
        mine.add(process)
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        _kill([process])
        raise BuildError(f"{command[0]} took more than {seconds:g} s and was stopped") from None
    except BaseException:
        _kill([process])
        raise
    finally:
        with _live_lock:
            _live.discard(process)
        if mine is not None:
            mine.discard(process)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _kill(processes: list[subprocess.Popen]) -> None:
    """Kill each process's whole group and reap the process."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):  # one that ignores SIGKILL
            process.wait(timeout=5)


def live_compilers() -> int:
    """Compiler processes running now (for tests)."""
    with _live_lock:
        return len(_live)


_exiting = False  # set at interpreter exit: no compiler starts after that


@atexit.register
def _kill_at_exit() -> None:
    global _exiting
    with _live_lock:
        _exiting = True
        running = list(_live)
    _kill(running)


def _after_fork_in_child() -> None:
    """A forked child holds none of the parent's builds: locks taken by the parent's
    threads at the fork are released (runtime/forks.py), and the builds they were
    waiting for are gone."""
    _live.clear()
    for event in _building.values():
        event.set()  # whoever waits in the child builds the unit itself
    _building.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
