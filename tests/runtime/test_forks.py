"""Locks a forked child gets unlocked (runtime/forks.py)."""

from __future__ import annotations

import _thread
import importlib
import os
import pkgutil
import threading

import numpy as np
import pytest

import graphc as gc
from graphc.runtime import forks
from tests.forking import child_status

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()), _thread.RLock)


def _held_by_a_thread(lock: threading.Lock) -> tuple[threading.Event, threading.Thread]:
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            release.wait(30)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert taken.wait(10)
    return release, thread


def test_a_lock_held_by_another_thread_is_free_in_the_child() -> None:
    """Guards forks.lock: a lock some thread holds at the fork can be taken in the child
    (a plain threading.Lock cannot: the control), and stays held in the parent."""
    ours, plain = forks.lock(), threading.Lock()
    release, thread = _held_by_a_thread(ours)
    release_plain, thread_plain = _held_by_a_thread(plain)
    try:
        assert child_status(lambda: ours.acquire(timeout=5), 15) == 0
        assert child_status(lambda: not plain.acquire(timeout=0.2), 15) == 0
        assert ours.locked()
    finally:
        release.set()
        release_plain.set()
        thread.join()
        thread_plain.join()


def test_an_event_keeps_its_flag_in_the_child() -> None:
    """Guards forks.event: an event set before the fork is still set in the child, one not
    set is not, and both can be set and waited on there."""
    done, open_ = forks.event(), forks.event()
    done.set()

    def child() -> bool:
        flags = done.is_set(), open_.is_set()
        open_.set()
        return flags == (True, False) and open_.wait(1)

    assert child_status(child, 15) == 0


def _graphc_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(gc.__path__, "graphc."):
        if info.name.startswith(("graphc.distributed", "graphc.bench", "graphc.viz")):
            continue  # optional dependencies; distributed's worker is checked below
        names.append(info.name)
    return names


def test_every_lock_graphc_keeps_is_released_in_a_child() -> None:
    """Guards the audit: every lock held at module level in graphc, and an executable's
    own, is made by forks.lock (a new module-level threading.Lock fails this test)."""
    found = []
    for name in [*_graphc_modules(), "graphc.distributed.worker"]:
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency (dask, onnx) is not installed
            continue
        for attribute, value in vars(module).items():
            if isinstance(value, LOCK_TYPES):
                found.append((name, attribute, value))
    assert len(found) >= 6, f"the audit found too few locks to be looking: {found}"
    stray = [
        f"{name}.{attribute}" for name, attribute, value in found if value not in forks._renewed
    ]
    assert not stray, f"locks a forked child may find held: {stray}"
    g = gc.Graph("state")
    with g:
        w = gc.placeholder("w", shape=(2,))
        gc.output(w * 2.0, name="y")
    exe = gc.compile(g, updates={"w": "y"})
    mine = [v for v in vars(exe).values() if isinstance(v, LOCK_TYPES)]
    assert len(mine) == 2 and all(v in forks._renewed for v in mine)


def test_an_executable_called_in_the_child_while_its_lock_was_held() -> None:
    """Guards the executable in a child: a fork while another thread held the executable's
    lock (building a plan, swapping a tier in) leaves a child that compiles and runs."""
    g = gc.Graph("held")
    with g:
        x = gc.placeholder("x", shape=("B",))
        gc.output(x * 3.0, name="y")
    exe = gc.compile(g, backend="numpy")
    release, thread = _held_by_a_thread(exe._lock)
    try:
        x = np.arange(5, dtype=np.float32)
        assert child_status(lambda: np.array_equal(exe(x), x * 3), 15) == 0
    finally:
        release.set()
        thread.join()
