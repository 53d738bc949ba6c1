"""Recycling large output arrays that the caller has let go of.

Every call returns fresh arrays, and an array the caller still holds is never written
again. But a fresh 40 MB array costs ~10,000 page faults (the allocator hands large
blocks back to the OS), several milliseconds a call. So each large output slot keeps
the array it returned last time and hands it out again only when nothing else refers
to it: not the caller, not a view of it (a view holds its base), not a container.
CPython's reference count says so exactly; an array only reachable through a weakref
is the one case that could see its data change, as with any reused memory.

How many references the recycler's own code holds depends on the interpreter
(CPython 3.14's borrowed stack references change such counts), so it is not a
constant: `calibrate` measures it at import, through the very method the recycler
uses, and checks that one more holder raises the count by exactly one. If that check
fails, recycling is off (`ALONE` is None) and every call returns a fresh array.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

RECYCLE_BYTES = 1 << 20  # smaller arrays come from malloc's free lists cheaply anyway


class Recycler:
    """One output slot of one thread's plan: `recycler()` gives the array to write."""

    __slots__ = ("shape", "dtype", "last")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape = shape
        self.dtype = dtype
        self.last: np.ndarray | None = None

    def _refs(self) -> int:
        """The reference count of the last array, as seen from here (see calibrate)."""
        last = self.last
        return sys.getrefcount(last)

    def __call__(self) -> np.ndarray:
        if self.last is not None and ALONE is not None and self._refs() == ALONE:
            last = self.last
            if intact(last, self.shape, self.dtype):
                return last
        self.last = last = np.empty(self.shape, self.dtype)
        return last


def intact(a: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether a kept array is still what a call returns: a caller may have set its
    shape, dtype or flags in place before letting it go (`y.shape = (2, -1)`). The entry
    in C (native/csrc/entry.c) asks the same of the arrays it keeps."""
    flags = a.flags
    return a.shape == shape and a.dtype == dtype and flags.c_contiguous and flags.writeable


def calibrate() -> int | None:
    """The count `Recycler._refs` reports for an array nothing else refers to, or None
    when a caller's reference, a view or a container does not raise it by exactly one."""
    probe = Recycler((1,), np.dtype(np.float32))
    probe.last = np.empty(1, np.float32)
    alone = probe._refs()
    held = probe.last
    by_name = probe._refs()
    del held
    view = probe.last[:1]
    by_view = probe._refs()
    del view
    box = [probe.last]
    by_box = probe._refs()
    del box
    if (by_name, by_view, by_box) != (alone + 1,) * 3 or probe._refs() != alone:
        return None
    return alone


ALONE = calibrate()


def worth_recycling(nbytes: Any) -> bool:
    return nbytes is not None and nbytes >= RECYCLE_BYTES
