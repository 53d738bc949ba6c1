"""Recycling large output arrays that the caller has let go of.

Every call returns fresh arrays, and an array the caller still holds is never written
again. But a fresh 40 MB array costs ~10,000 page faults (the allocator hands large
blocks back to the OS), several milliseconds a call. So each large output slot keeps
the array it returned last time and hands it out again only when nothing else refers
to it: not the caller, not a view of it (a view holds its base), not a container.
CPython's reference count says so exactly; an array only reachable through a weakref
is the one case that could see its data change, as with any reused memory.

A kept array starts on a cache line (64 bytes; numpy's allocation starts on 16), so
that a kernel storing whole vectors into it has none straddle two lines: the stacked
outer products' 4 MB result took 23 us on two Zen 4 cores so, 29 from 16 bytes past a
line. Its memory is a byte array's, its `base`; numpy points a view of it at that byte
array, not at the array, so both counts are read: the array's (the caller, a
container) and its base's (a view).

How many references the recycler's own code holds depends on the interpreter
(CPython 3.14's borrowed stack references change such counts), so they are not
constants: `calibrate` measures them at import, through the very method the recycler
uses, and checks that one more holder raises one of them by exactly one. If that check
fails, recycling is off (`ALONE` is None) and every call returns a fresh array.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from graphc.runtime.backend import line_aligned_empty

RECYCLE_BYTES = 1 << 20  # smaller arrays come from malloc's free lists cheaply anyway


class Recycler:
    """One output slot of one thread's plan: `recycler()` gives the array to write."""

    __slots__ = ("shape", "dtype", "last")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape = shape
        self.dtype = dtype
        self.last: np.ndarray | None = None

    def _refs(self) -> tuple[int, int]:
        """The reference counts of the last array and of its memory's owner (its base),
        as seen from here (see calibrate): a caller's view of the array refers to the
        owner, not to the array (numpy points a view of a view at the owner)."""
        last = self.last
        return sys.getrefcount(last), sys.getrefcount(last.base)

    def __call__(self) -> np.ndarray:
        if self.last is not None and ALONE is not None and self._refs() == ALONE:
            last = self.last
            if intact(last, self.shape, self.dtype):
                return last
        # on a cache line: kernels store whole vectors into it, none straddling two lines
        self.last = last = line_aligned_empty(self.shape, self.dtype)
        return last


def intact(a: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether a kept array is still what a call returns: a caller may have set its
    shape, dtype or flags in place before letting it go (`y.shape = (2, -1)`). The entry
    in C (native/csrc/entry.c) asks the same of the arrays it keeps."""
    flags = a.flags
    return a.shape == shape and a.dtype == dtype and flags.c_contiguous and flags.writeable


def calibrate() -> tuple[int, int] | None:
    """The counts `Recycler._refs` reports for an array nothing else refers to, or None
    when a caller's reference, a view or a container does not raise one of them by
    exactly one."""
    probe = Recycler((1,), np.dtype(np.float32))
    probe.last = line_aligned_empty((1,), np.float32)
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
    for counts in (by_name, by_view, by_box):
        raised = [now - then for now, then in zip(counts, alone)]
        if sorted(raised) != [0, 1]:
            return None
    return alone if probe._refs() == alone else None


ALONE = calibrate()


def worth_recycling(nbytes: Any) -> bool:
    return nbytes is not None and nbytes >= RECYCLE_BYTES
