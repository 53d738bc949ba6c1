"""Large outputs are recycled only when nothing outside the executable refers to them."""

from __future__ import annotations

import gc as garbage
import threading

import numpy as np
import pytest

import graphc as gc
from graphc.runtime.recycle import RECYCLE_BYTES

N = RECYCLE_BYTES // 4 + 1  # float32 elements: just over the threshold


def exe_of(fn) -> gc.Executable:  # type: ignore[no-untyped-def]
    return gc.compile(gc.trace(fn, gc.TensorSpec((N,))), opt_level=2)


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_dropped_output_is_reused_and_correct() -> None:
    exe = exe_of(lambda x: gc.tanh(x) * 2 + 1)  # a fused output
    x = np.linspace(-1, 1, N, dtype=np.float32)
    first = exe(x)
    where = address(first)
    del first
    garbage.collect()
    second = exe(x + 1)
    assert address(second) == where
    np.testing.assert_allclose(second, np.tanh(x + 1) * 2 + 1, rtol=1e-6)


def test_a_large_output_starts_on_a_cache_line() -> None:
    """Kernels store whole vectors into it: from numpy's own start, 16 bytes past a line,
    every 64-byte store straddled two lines (recycle.py). Each array here is held, so
    each call makes a fresh one."""
    exe = gc.compile(gc.trace(lambda x: gc.exp(x) * 2, gc.TensorSpec((N,))), backend="numpy")
    x = np.zeros(N, np.float32)
    held = [exe(x) for _ in range(4)]
    assert [address(a) % 64 for a in held] == [0] * 4
    for a in held:
        np.testing.assert_array_equal(a, np.full(N, 2, np.float32))


def test_a_held_output_is_never_written_again() -> None:
    exe = exe_of(lambda x: gc.exp(x))  # a plain (unfused) output
    x = np.zeros(N, np.float32)
    first = exe(x)
    second = exe(x + 1)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, np.ones(N, np.float32))


# what a caller may do to a returned array, in place, before letting it go
CHANGES = ["shape", "dtype", "read-only"]


def change_in_place(a: np.ndarray, change: str) -> None:
    """Set a's shape, dtype or read-only flag in place (`change`, one of CHANGES)."""
    if change == "shape":
        a.shape = (1, -1)
    elif change == "dtype":
        a.dtype = np.int32
    else:
        a.flags.writeable = False


@pytest.mark.parametrize("change", CHANGES)
def test_a_dropped_output_changed_in_place_is_not_recycled(change: str) -> None:
    """A caller may set the returned array's shape, dtype or flags in place before it
    lets the array go: the next call must still return the plan's shape and dtype,
    writeable, with its own values."""
    exe = exe_of(lambda x: gc.tanh(x) * 2 + 1)
    x = np.linspace(-1, 1, N, dtype=np.float32)
    first = exe(x)
    change_in_place(first, change)
    del first
    garbage.collect()
    again = exe(x + 1)
    assert again.shape == (N,) and again.dtype == np.float32 and again.flags.writeable
    np.testing.assert_allclose(again, np.tanh(x + 1) * 2 + 1, rtol=1e-6)


def test_a_view_or_a_container_keeps_the_output_alive() -> None:
    exe = exe_of(lambda x: gc.tanh(x) * 2)
    x = np.zeros(N, np.float32)
    view = exe(x)[:10]
    kept = [exe(x + 1)]  # other values: an output written over the view's would show
    later = exe(x + 2)
    for other in (view, kept[0]):
        assert not np.shares_memory(other, later)
    assert not np.shares_memory(view, kept[0])
    np.testing.assert_array_equal(view, np.zeros(10, np.float32))
    # (either tier's tanh: the native one may have swapped in, within its ulp bound)
    np.testing.assert_allclose(kept[0], np.full(N, np.tanh(np.float32(1)) * 2), rtol=1e-6)


def test_threads_recycle_their_own_outputs() -> None:
    exe = exe_of(lambda x: x * 3)
    results: dict[int, list[float]] = {}

    def work(k: int) -> None:
        x = np.full(N, k, np.float32)
        results[k] = [float(exe(x)[-1]) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [3.0 * k] * 20 for k in range(4)}


def test_the_plan_and_explain_account_for_recycled_outputs() -> None:
    exe = exe_of(lambda x: gc.tanh(x) * 2)
    x = np.zeros(N, np.float32)
    assert exe.plan(x).recycled_bytes == 4 * N
    assert "recycled once the caller drops them" in exe.explain(x)
    small = gc.compile(gc.trace(lambda v: v * 2, gc.TensorSpec((4,))))
    assert small.plan(np.zeros(4, np.float32)).recycled_bytes == 0


def test_calibration_follows_the_interpreters_counts(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from graphc.runtime import recycle

    real = recycle.sys.getrefcount
    assert recycle.ALONE == recycle.calibrate() is not None
    # an interpreter that counts one reference fewer (borrowed stack references):
    # the recycler follows, instead of handing out an array the caller still holds
    # a wrapper's own frame holds references too (how many depends on the interpreter):
    # measure them, then count one fewer than the real interpreter does
    monkeypatch.setattr(recycle.sys, "getrefcount", lambda obj: real(obj))
    wrapped = recycle.calibrate()
    assert wrapped is not None
    shift = wrapped[0] - (recycle.ALONE[0] - 1)
    assert wrapped[1] - shift == recycle.ALONE[1] - 1  # the wrapper holds each count's object
    monkeypatch.setattr(recycle.sys, "getrefcount", lambda obj: real(obj) - shift)
    assert recycle.calibrate() == tuple(count - 1 for count in recycle.ALONE)
    monkeypatch.setattr(recycle, "ALONE", recycle.calibrate())
    exe = exe_of(lambda x: gc.tanh(x) * 2)
    x = np.zeros(N, np.float32)
    first = exe(x)
    second = exe(x + 1)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, np.zeros(N, np.float32))


def test_recycling_is_off_when_calibration_fails(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from graphc.runtime import recycle

    monkeypatch.setattr(recycle.sys, "getrefcount", lambda obj: 2)  # counts tell nothing
    assert recycle.calibrate() is None
    monkeypatch.setattr(recycle, "ALONE", None)
    slot = recycle.Recycler((4,), np.dtype(np.float32))
    first = id(slot())  # dropped at once: with recycling on, the next call returns it
    # the new array is made while the old one is still held by the slot: another id
    assert id(slot()) != first
    exe = exe_of(lambda x: gc.tanh(x) * 2 + 1)
    x = np.zeros(N, np.float32)
    kept = exe(x)
    again = exe(x + 1)
    assert not np.shares_memory(kept, again)
    np.testing.assert_array_equal(kept, np.ones(N, np.float32))
