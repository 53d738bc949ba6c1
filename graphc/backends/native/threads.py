"""One thread pool: numpy's OpenBLAS runs its parallel jobs on graphc's OpenMP threads.

A native plan calls OpenBLAS (numpy's `matmul`, the `gemm` lowering of blas.py) between
its own OpenMP kernels. Left alone, OpenBLAS keeps a pthreads pool of its own, whose
worker busy-waits for about 0.1 s after each product; an OpenMP kernel run meanwhile
shares a core with it, and on a two-core machine the two pools take turns (LeNet at
batch 64: 0.52 ms, against 0.31 ms with one pool; docs/backends.md, "One thread pool").

OpenBLAS (0.3.28 and later) lets a program hand it a threading backend: a callback
given an array of jobs, which must run them all, concurrently, before it returns (the
jobs of one product wait on one another's packed panels, so they cannot run one after
another). `install` builds the callback below with the native toolchain when the first
native plan is built, and `join` registers it with the OpenBLAS that numpy runs, once
per process. From then on every threaded BLAS call in the process, numpy's own
included, runs its jobs on the OpenMP team the native kernels use.

Registering is only safe while no product is under way: OpenBLAS swaps its threading
under a product in flight, whose jobs then wait for a worker that no longer takes them
(a hang) or are never run (a wrong product; found on a fresh install, where the tier
builder registered the callback while the program's own thread multiplied: 2 wrong and
2 hung runs in 9). So `join` runs on the thread about to run a native plan, before the
plan's first call there and when exe.wait() returns there (Generated.on_thread), while
the tier builder is not building (tiers.no_build, which also keeps a build from starting
meanwhile), and only if every other Python thread waits: its innermost frame is one of
`_waits()`, whose calls are into a lock, a queue or the OS, never numpy. The check and
the registration are one C call that holds the GIL (threads.c's
graphc_blas_install_if_quiet), so no thread leaves its wait in between. A process with a
thread anywhere else keeps OpenBLAS's own pool (slow on two cores, never wrong).
The partition of a product into jobs is still OpenBLAS's, so the results are its
bits, unchanged (the tests compare them with OpenBLAS's own pool's); `join` checks one
threaded product against a float64 reference before it keeps the callback. numpy
2.0's wheels bundle OpenBLAS 0.3.27, which has no such hook: there OpenBLAS keeps its
pool, and graphc's workers sleep when idle, as before.

Where a team of the jobs' size cannot be had (called inside an active OpenMP region, or
under OMP_THREAD_LIMIT), the jobs run on threads of their own, made for the call. A
forked child gets OpenBLAS's own pool back, and runs graphc's kernels on one thread
(libgomp's pool does not survive a fork: `_one_thread_in_child`).
`GRAPHC_BLAS_POOL=openblas` leaves OpenBLAS's threading as it is.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading

import numpy as np

from graphc.backends.native import toolchain
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.calls import POOL_CLOCK
from graphc.runtime import forks, tiers

SOURCE = c_source("threads.c")

# OpenBLAS's setter, spelled as the library spells its gemm (blas.SPELLINGS)
SETTERS = {
    "scipy_cblas_sgemm64_": "scipy_openblas_set_threads_callback_function64_",
    "cblas_sgemm64_": "openblas_set_threads_callback_function64_",
    "scipy_cblas_sgemm": "scipy_openblas_set_threads_callback_function",
    "cblas_sgemm": "openblas_set_threads_callback_function",
}

# libgomp's idle workers spin this many rounds (about 0.5 ms here) before they sleep, so
# that the next kernel or product of a plan finds them awake (a sleeping worker takes
# tens of microseconds to wake); measured: docs/backends.md, "One thread pool"
SPIN_COUNT = "10000"
# for how long after a parallel region the kernels count on the workers still spinning
# (calls.POOL_CLOCK), in ns: well inside SPIN_COUNT's rounds (measured on 2026-11-28: a
# 32,768-element kernel on two threads took 3 us when called up to 0.2 ms after the
# last region, 20-25 us from 0.3 ms on)
WARM_NS = 100_000
# the same under OMP_WAIT_POLICY=active, where libgomp spins for minutes
ACTIVE_NS = 1_000_000_000

_lock = forks.lock()
_environment_lock = forks.lock()  # toolchain's probe may run under _lock
_state: dict[str, str] = {}


def openmp_environment() -> None:
    """Set how idle OpenMP workers wait, before libgomp loads (it reads the environment
    once), unless the user has: spinning briefly when OpenBLAS will run on the same pool,
    sleeping when it keeps its own, whose worker busy-waits too (two pools spinning on
    two cores slowed each other 50x: PERF-NOTES). Records for how long the workers spin
    (calls.POOL_CLOCK), for the kernels that go parallel only while they do."""
    with _environment_lock:
        if "waiting" in _state:
            return
        policy = os.environ.get("OMP_WAIT_POLICY", "").lower()
        if policy or "GOMP_SPINCOUNT" in os.environ:  # the user's: spinning for how long
            # is known only for an active policy with libgomp's own count
            _state["waiting"] = "the user's"
            active = policy == "active" and "GOMP_SPINCOUNT" not in os.environ
            POOL_CLOCK[1] = ACTIVE_NS if active else 0
        elif isinstance(_setter(), str):
            os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
            _state["waiting"] = "passive"
            POOL_CLOCK[1] = 0
        else:
            os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
            _state["waiting"] = "spinning"
            POOL_CLOCK[1] = WARM_NS


def _setter() -> tuple[ctypes._CFuncPtr, str] | str:
    """OpenBLAS's threads-callback setter and its library's name, or why there is none."""
    from graphc.backends.native import blas  # registers a lowering: imported after the backend

    if os.environ.get("GRAPHC_BLAS_POOL", "graphc") == "openblas":
        return "GRAPHC_BLAS_POOL=openblas"
    found = blas.library()
    if isinstance(found, str):
        return found
    setter = blas.symbol(found, SETTERS[found.symbols[0]])
    if setter is None:
        return f"{found.path.name} has no threads callback"
    setter.argtypes = [ctypes.c_void_p]
    setter.restype = None
    return setter, found.path.name


def install(compile: bool = True) -> str:
    """Build the callback that runs numpy's OpenBLAS threads on graphc's OpenMP pool
    (once per process; `join` registers it). Returns what happened, for explain(): "one
    pool: ..." or why OpenBLAS keeps its own. With `compile` False and the callback not
    built yet, nothing is built (a later call with `compile` does it)."""
    with _lock:
        if "note" not in _state:
            try:
                _state["note"] = _install(compile)
            except toolchain.NotBuiltError:
                return "OpenBLAS keeps its own threads until graphc's callback is built"
            _state.setdefault("pool", _state["note"])  # not "ready": why it keeps its own
        return _state["note"]


def _install(compile: bool) -> str:
    found = _setter()
    if isinstance(found, str):
        return f"OpenBLAS keeps its own threads: {found}"
    setter, name = found
    try:
        support = toolchain.build(SOURCE, compile=compile).library
    except toolchain.BuildError as exc:
        return f"OpenBLAS keeps its own threads: its callback did not build: {exc}"
    support.graphc_bind_pool_clock(ctypes.c_void_p(POOL_CLOCK.ctypes.data))
    address = ctypes.cast(support.graphc_blas_install_if_quiet, ctypes.c_void_p).value
    # a PYFUNCTYPE call keeps the GIL: no other thread runs Python until it returns
    install_if_quiet = ctypes.PYFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Python), ctypes.c_void_p, ctypes.c_int
    )(address)
    _state["pool"] = "ready"
    _ready.append((setter, install_if_quiet))
    return (
        f"one pool: {name} runs its threads on graphc's OpenMP pool once a native plan "
        "is first called while every other thread waits"
    )


_ready: list = []  # (setter, install_if_quiet) once install built them


class _Python(ctypes.Structure):
    """threads.c's `struct graphc_python`: the C API it walks the threads with."""

    _fields_ = [
        (field, ctypes.c_void_p)
        for field in (
            "interpreter", "thread_head", "thread_next", "current", "frame", "code", "decref"
        )
    ]  # fmt: skip


def _python_api() -> _Python:
    api = ctypes.pythonapi
    names = (
        "PyInterpreterState_Get",
        "PyInterpreterState_ThreadHead",
        "PyThreadState_Next",
        "PyThreadState_Get",
        "PyThreadState_GetFrame",
        "PyFrame_GetCode",
        "Py_DecRef",
    )
    return _Python(*(ctypes.cast(getattr(api, name), ctypes.c_void_p) for name in names))


def _waits() -> list:
    """The code objects a thread that waits sits in, innermost: threading's waits (an
    Event's, a Queue's, a Semaphore's, a join), a thread pool's idle worker, a selector's
    select (asyncio's loops, socketserver), and a Jupyter kernel's threads (`_KERNEL`).
    Each calls only a lock, a queue, zmq or the OS while the GIL is released, never
    numpy (its other calls are Python functions, whose frames are then innermost). A
    thread anywhere else may be in a product."""
    import concurrent.futures.thread
    import selectors

    functions = [
        threading.Condition.wait,
        threading.Thread.join,
        getattr(threading.Thread, "_wait_for_tstate_lock", None),  # up to 3.12
        getattr(concurrent.futures.thread, "_worker", None),  # up to 3.13
        *(getattr(getattr(selectors, name, None), "select", None) for name in _SELECTORS),
        *(_loaded(module, path) for module, path in _KERNEL),
    ]
    codes = {id(f.__code__): f.__code__ for f in functions if hasattr(f, "__code__")}
    return list(codes.values())


# A Jupyter kernel (ipykernel on pyzmq) keeps threads of its own beside the notebook's
# code, each waiting in a frame of its own: the heartbeat in zmq's device (a proxy, in C),
# the watchers of the redirected stdout and stderr in os.read, the parent poller in
# time.sleep. Left out, they kept every notebook's OpenBLAS off the pool (found in an
# ipykernel 7.4 kernel: "ready" after a native plan's calls). Read from sys.modules
# only: never imported here
_KERNEL = (
    ("zmq.sugar", "device"),
    ("ipykernel.heartbeat", "Heartbeat.run"),
    ("ipykernel.iostream", "OutStream._watch_pipe_fd"),
    ("ipykernel.parentpoller", "ParentPollerUnix.run"),
)


def _loaded(module: str, path: str) -> object:
    """The attribute at dotted `path` of `module` if it is imported, else None."""
    found: object = sys.modules.get(module)
    for name in path.split("."):
        found = getattr(found, name, None)
    return found


_SELECTORS = (
    "SelectSelector",
    "PollSelector",
    "EpollSelector",
    "DevpollSelector",
    "KqueueSelector",
)


def _install_while_quiet(setter: ctypes._CFuncPtr, install_if_quiet: ctypes._CFuncPtr) -> bool:
    """Register the callback if no other thread can be inside OpenBLAS: each waits in one
    of `_waits()`. The check and the registration are one C call that keeps the GIL, with
    the collector off (a finalizer run meanwhile could release it), so no thread can
    leave its wait and start a product between them."""
    free_threaded = not getattr(sys, "_is_gil_enabled", lambda: True)()  # no GIL to hold
    if free_threaded and threading.active_count() > 1:
        return False
    codes = _waits()
    quiet = (ctypes.c_void_p * len(codes))(*map(id, codes))
    collecting = gc.isenabled()
    gc.disable()
    try:
        return bool(
            install_if_quiet(
                ctypes.cast(setter, ctypes.c_void_p), ctypes.byref(_python_api()), quiet, len(codes)
            )
        )
    finally:
        if collecting:
            gc.enable()


def join() -> None:
    """Register the built callback with OpenBLAS, if it is not and no other thread can
    be inside OpenBLAS now (see the module docstring); on the thread about to run a
    native plan, so that this one is not inside it either."""
    if _state.get("pool") != "ready":
        return
    with _lock, tiers.no_build() as idle:
        if _state.get("pool") != "ready" or not idle:
            return
        if not _install_while_quiet(*_ready[0]):
            return
        setter = _ready[0][0]
        if _product_holds():
            _state["pool"] = "joined"
        else:  # pragma: no cover - a callback that lost a job
            setter(None)
            _state["pool"] = "a product on graphc's pool came out wrong"


def pool() -> str:
    """Where numpy's OpenBLAS runs its threads now: "joined" (graphc's pool), "ready"
    (built, not registered yet), "not built" (no native plan yet), or why it keeps its
    own."""
    return _state.get("pool", "not built")


def _product_holds() -> bool:
    """One product OpenBLAS splits into jobs (it threads m n k above 2**18), against a
    float64 reference within the GEMM bound: a job not run leaves its block wrong. (No
    product before installing: that would wake OpenBLAS's own worker, which then spins
    beside the pool for 0.1 s and can leave the OS's placement of the threads bad for
    a second or more; that a product's bits are OpenBLAS's own is a test.)"""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 160)).astype(np.float32)
    b = rng.standard_normal((160, 128)).astype(np.float32)
    got = np.full((96, 128), np.nan, np.float32)
    np.matmul(a, b, out=got)
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = 2 * (160 + 2) * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    return bool(np.all(np.abs(got - want) <= bound))


def _one_thread_in_child() -> None:
    """GNU OpenMP is not fork-safe: a forked child inherits the parent's pool but not its
    threads, and its first parallel region waits for them forever. So a child runs every
    region on one thread: a team of one never touches the pool (the kernels' bits do not
    depend on their threads). Threads the child starts later make pools of their own."""
    try:
        gomp = ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:  # not loaded: the child's first region makes a pool of its own
        return
    gomp.omp_set_num_threads(ctypes.c_int(1))
    _state["forked"] = "yes"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_one_thread_in_child)


def calls() -> int:
    """How many times OpenBLAS has handed jobs to graphc's callback in this process (for
    the tests: OpenBLAS exports no getter of its callback)."""
    library = toolchain.build(SOURCE).library
    library.graphc_blas_calls.restype = ctypes.c_long
    return int(library.graphc_blas_calls())
