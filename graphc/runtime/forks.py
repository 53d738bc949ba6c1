"""Locks that a forked child gets unlocked.

`os.fork()` copies a process with only the thread that called it. A lock another thread
held at that moment stays held in the child, by a thread that does not exist there, and
the child's first `with lock:` waits forever. graphc's locks are taken by its background
threads (the tier builder, the toolchain's compiles, OpenBLAS's jobs on graphc's pool), so
a fork from the main thread (multiprocessing's default start method on Linux, dask's and
pytest-xdist's workers) can meet one held.

Every lock made here is made anew in the child, as the standard library does for its own
(logging's handlers, concurrent.futures): the data a lock guarded is the parent's as of
the fork, and each module's own fork handler puts right what a half-done update left.
Those handlers take these locks, so this module's handler must run first: the child's
handlers run in the order they were registered, and every module that registers one
(tiers, toolchain, threads) imports this module, whose handler is registered at its
import, before it registers its own.
"""

from __future__ import annotations

import os
import threading
import weakref

_renewed: weakref.WeakSet = weakref.WeakSet()


def lock() -> threading.Lock:
    """A `threading.Lock` that is released in a forked child."""
    made = threading.Lock()
    _renewed.add(made)
    return made


def event() -> threading.Event:
    """A `threading.Event` whose inner lock is released in a forked child (its flag is
    kept: a job done before the fork stays done)."""
    made = threading.Event()
    _renewed.add(made)
    return made


def _after_fork_in_child() -> None:
    for made in list(_renewed):
        made._at_fork_reinit()  # type: ignore[attr-defined]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
