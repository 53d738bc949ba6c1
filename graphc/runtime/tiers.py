"""Tiered plans: a plan runs on numpy at once while its native kernels build in the background.

A backend that compiles code (native: C kernels, built by the system compiler) can keep a
first call waiting for seconds. So when an executable may not wait (``backend="auto"``,
or ``wait=False``), a plan whose kernels are not all built yet is generated on numpy,
which needs no build, and a `Job` is queued that generates the same plan on the
compiling backend, kernels and all, on one daemon thread of this module (the compiler
processes it starts use the other cores: toolchain.py), which ends when no job is left.
The job is started by the end of the plan's first call, so that its Python work does not
share the interpreter with that call, or by anyone who waits for it. When it is done the
executable swaps the new code in (Executable._swap): every thread's next call runs it.

Both tiers run the same plan (the same graph, optimized once for the compiling backend),
so they agree bit for bit wherever that backend is exact, and within its stated bounds
elsewhere (docs/trust.md). A build that fails leaves the plan on numpy, with one
warning; a backend that turns out to be unavailable here (the compiler's probe fails)
leaves it there without one, as "auto" chooses numpy silently where no compiler works.

A forked child has no builder thread: jobs not finished at the fork are queued again in
the child, on a thread of its own (the locks the parent's threads held are released:
forks.py).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from graphc.runtime import forks


class Job:
    """One plan's fast tier, built in the background: `build()` returns the generated
    code (or raises), `done(job)` is called on the builder thread when it is over."""

    def __init__(self, build: Callable[[], Any], done: Callable[[Job], None]) -> None:
        self._build = build
        self._done = done
        self.created = time.perf_counter()
        self.started: float | None = None  # when the builder took it up
        self.seconds: float | None = None  # how long the build took
        self.result: Any = None  # the generated code of the fast tier
        self.error: str | None = None  # why there is none (a failed build)
        self.silent = False  # the backend is not available here: no warning was due
        self.finished = forks.event()
        self._queued = False

    def start(self) -> None:
        """Hand the job to the builder (once; later calls do nothing)."""
        if not self._queued:
            _submit(self)

    @property
    def queued(self) -> bool:
        """Has the job been handed to the builder (by `start` or `wait`)?"""
        return self._queued

    def wait(self, timeout: float | None = None) -> bool:
        """Start the job if it is not started, and wait until it is over."""
        self.start()
        return self.finished.wait(timeout)

    def run(self) -> None:
        self.started = time.perf_counter()
        try:
            with _build_lock:
                self.result = self._build()
        except UnavailableError as exc:
            self.error, self.silent = str(exc), True
        except Exception as exc:  # noqa: BLE001 - a failed build leaves the numpy tier
            self.error = str(exc) or type(exc).__name__
            # the interpreter is exiting (its threads were told so before the atexit
            # handlers that stop the compilers ran): a build it stopped is no failure
            self.silent = not threading.main_thread().is_alive()
        self.seconds = time.perf_counter() - self.started
        try:
            self._done(self)
        finally:
            self.finished.set()

    def describe(self) -> str:
        """One line for explain(): which tier runs the plan, and how long the build took."""
        if not self.finished.is_set():
            if self.started is None and self._queued:
                return "tier: numpy, while the native kernels wait for the builder (queued)"
            if self.started is None:
                return (
                    "tier: numpy, while the native kernels wait to be built (they start "
                    "when the first call returns, or on exe.wait())"
                )
            since = time.perf_counter() - self.started
            return f"tier: numpy, while the native kernels build in the background ({since:.2f} s so far)"
        if self.error is None:
            return (
                f"tier: native, swapped in after a background build of {self.seconds:.3f} s "
                "(the calls before it ran the same plan on numpy)"
            )
        reason = "not available here" if self.silent else "failed to build"
        return f"tier: numpy (the native kernels {reason}: {self.error})"


class UnavailableError(Exception):
    """The compiling backend cannot run here: the job ends without a warning."""


_lock = forks.lock()
_jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
_pending: list[Job] = []
_builder = [False]  # has this process started the builder thread?
_build_lock = forks.lock()  # held by the builder through a job's build (see no_build)


def _submit(job: Job) -> None:
    with _lock:
        if job._queued:
            return
        job._queued = True
        _pending.append(job)
        _jobs.put(job)
        if not _builder[0]:
            # a bare thread (daemon by nature): threading.Thread.start waits for the new
            # thread to report in, 0.3-1 ms of the first call in a fresh process
            _thread.start_new_thread(_work, ())
            _builder[0] = True


# how long the builder lets a job's first call return before it takes up the job: its
# Python (generating the plan on the compiling backend) would otherwise take the
# interpreter from that call for a switch interval (5 ms) the moment it is started
START_DELAY = 0.01


def _work() -> None:
    while True:
        with _lock:
            try:
                job = _jobs.get_nowait()
            except queue.Empty:
                # idle: the thread ends, and with it the pool of OpenMP workers that a
                # kernel run here (a probe, packing a constant) made for it. While that
                # pool lives, libgomp counts more threads than cores and stops letting
                # any idle worker spin, so every parallel kernel of the process waits
                # for a sleeping worker to wake (an LSTM's steps: 2.9 -> 9.5 ms)
                _builder[0] = False
                return
        time.sleep(START_DELAY)
        try:
            job.run()
        finally:
            with _lock:
                if job in _pending:
                    _pending.remove(job)
            # the job's callback holds its executable: not kept alive while idle here
            del job


@contextlib.contextmanager
def no_build() -> Iterator[bool]:
    """Hold the builder off: yields True when no build runs now, and then none starts
    until the block ends; False when one is under way (a build's Python may be inside
    numpy's BLAS: packing a constant, a probe)."""
    idle = _build_lock.acquire(blocking=False)
    try:
        yield idle
    finally:
        if idle:
            _build_lock.release()


def pending() -> int:
    """Jobs queued or running now (for tests and the benchmarks)."""
    with _lock:
        return len(_pending)


def settle(timeout: float) -> bool:
    """Wait until every job queued or running now is over (True), or `timeout` seconds
    have passed (False): for tests, so that one test's background work does not run
    during the next."""
    deadline = time.monotonic() + timeout
    with _lock:
        jobs = list(_pending)
    return all(job.finished.wait(max(0.0, deadline - time.monotonic())) for job in jobs)


def _after_fork_in_child() -> None:
    global _jobs
    _jobs = queue.SimpleQueue()
    _builder[0] = False
    unfinished = [job for job in _pending if not job.finished.is_set()]
    _pending.clear()
    for job in unfinished:
        job._queued = False
        job.started = None
        job.start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
