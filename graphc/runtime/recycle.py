"""Recycling large output arrays that the caller has let go of.

Every call returns fresh arrays, and an array the caller still holds is never written
again. But a fresh 40 MB array costs ~10,000 page faults (the allocator hands large
blocks back to the OS), several milliseconds a call. So each large output slot keeps
the array it returned last time and hands it out again only when nothing else refers
to it: not the caller, not a view of it (a view holds its base), not a container.
CPython's reference count says so exactly; an array only reachable through a weakref
is the one case that could see its data change, as with any reused memory.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

RECYCLE_BYTES = 1 << 20  # smaller arrays come from malloc's free lists cheaply anyway

# references to the last array inside `Recycler.__call__`: `self.last`, the local
# `last`, and getrefcount's own argument
_OURS = 3


class Recycler:
    """One output slot of one thread's plan: `recycler()` gives the array to write."""

    __slots__ = ("shape", "dtype", "last")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape = shape
        self.dtype = dtype
        self.last: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        last = self.last
        if last is not None and sys.getrefcount(last) == _OURS:
            return last
        self.last = last = np.empty(self.shape, self.dtype)
        return last


def worth_recycling(nbytes: Any) -> bool:
    return nbytes is not None and nbytes >= RECYCLE_BYTES
