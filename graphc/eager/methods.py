"""Tensor methods that need a tensor's data or memory, so graph values cannot have them.

Every method that applies an op is shared with graph values (`ValueMethods` in
graphc/ops/methods.py); what is left here reads memory layout (`view` checks that no
copy is needed, `contiguous`), reads values (`equal`, boolean-mask indexing), or makes
new tensors from data (`new_zeros`, ...). In-place methods are in inplace.py, autograd
and conversion to Python and numpy in tensor.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, IndexRangeError, ShapeError
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S
from graphc.ops.symbolic import Symbol


def check_basic_index(index: Any, rank: int) -> None:
    """torch's IndexErrors: a float or bool item, more indices than dims."""
    items = index if isinstance(index, tuple) else (index,)
    used = 0
    for item in items:
        if isinstance(item, (float, np.floating, bool, np.bool_)):
            raise IndexRangeError(
                f"getitem: only integers, slices (:), ellipsis (...), None and integer or "
                f"boolean tensors are valid indices, got {item!r}"
            )
        if item is not None and item is not Ellipsis:
            used += 1
    if used > rank:
        raise IndexRangeError(f"getitem: too many indices ({used}) for a tensor of rank {rank}")


def _beyond_getitem(index: Any) -> bool:
    """Whether numpy's advanced indexing is needed beyond what the `getitem` op function
    takes (one integer array with plain ':' slices, as graph values have it): several
    arrays, arrays beside ints, None, ... or partial slices, boolean arrays in a tuple."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = [
        item
        for item in items
        if not (item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer)))
    ]
    if not arrays:
        return False
    if len(arrays) > 1 or np.asarray(getattr(arrays[0], "_data", arrays[0])).dtype == np.bool_:
        return True  # a list of bools too: a mask, as in torch
    return any(
        item is not arrays[0] and not (isinstance(item, slice) and item == slice(None))
        for item in items
    )


def _gather(x: Any, index: Any) -> Any:
    """`x[index]` for any index numpy takes, as a `take` from x's entries in order, so its
    gradient (a scatter_add) adds up the entries read more than once."""
    items = index if isinstance(index, tuple) else (index,)
    plain = tuple(getattr(item, "_data", item) for item in items)
    try:
        positions = np.arange(int(np.prod(x.shape))).reshape(x.shape)[plain]
    except IndexError as exc:
        raise IndexRangeError(f"getitem: {exc}") from None
    return I.take(S.reshape(x, (-1,)), positions)


class EagerMethods:
    """Mixed into `Tensor`, before the shared `ValueMethods`."""

    shape: tuple
    dtype: np.dtype
    _data: np.ndarray

    def view(self, *shape: Any) -> Any:
        """The same memory in another shape; like torch, an error when no view can do it."""
        out = super().view(*shape)  # type: ignore[misc]
        if isinstance(out, Symbol):  # while tracing: a graph value has no memory to check
            return out
        if out._base is None and out._data.size:
            raise ShapeError(
                f"view: view size {tuple(out.shape)} is not compatible with the input's "
                f"size {tuple(self.shape)} and strides (its dims span non-contiguous "
                "memory); use .reshape(...) instead, which copies"
            )
        return out

    def contiguous(self) -> Any:
        """Self when its memory is in row-major order, else a row-major copy on the tape."""
        if self._data.flags.c_contiguous:
            return self
        out = E.cast(self, self.dtype)
        if isinstance(out, Symbol):  # while tracing
            return out
        out._data = np.ascontiguousarray(out._data)
        if out.grad_fn is not None:
            out.grad_fn.rebase_output(out)
        return out

    def is_contiguous(self) -> bool:
        """True when the memory is in row-major order without gaps (a copy is not needed)."""
        return bool(self._data.flags.c_contiguous)

    def __getitem__(self, index: Any) -> Any:
        """numpy/PyTorch indexing; eagerly a boolean mask (x[x > 0]) and every other
        advanced index (x[[0, 2], [1, 1]]) are fine too, all differentiable."""
        mask = getattr(index, "_data", index)
        if getattr(mask, "dtype", None) == np.bool_:
            if tuple(mask.shape) == tuple(self.shape):
                return I.take(S.reshape(self, (-1,)), np.flatnonzero(mask))
            if mask.ndim == 1 and self.shape and mask.shape[0] == self.shape[0]:
                return I.take(self, np.flatnonzero(mask), axis=0)
            raise GraphcError(
                f"a boolean mask of shape {tuple(mask.shape)} does not fit shape {self.shape}"
            )
        check_basic_index(index, len(self.shape))
        if _beyond_getitem(index):
            return _gather(self, index)
        return I.getitem(self, index)

    def equal(self, other: Any) -> bool:
        """Same shape and the same values (PyTorch's torch.equal)."""
        return tuple(self.shape) == tuple(other.shape) and bool(E.eq(self, other).all())

    def type(self, dtype: Any = None) -> Any:
        if dtype is None:
            return f"graphc.{self.dtype.name}"
        return self.to(dtype)  # type: ignore[attr-defined]

    def new_tensor(self, data: Any) -> Any:
        from graphc.eager.creation import tensor  # creation imports Tensor

        return tensor(data, dtype=self.dtype)

    def new_zeros(self, *shape: Any) -> Any:
        from graphc.eager.creation import zeros

        return zeros(*shape, dtype=self.dtype)

    def new_ones(self, *shape: Any) -> Any:
        from graphc.eager.creation import ones

        return ones(*shape, dtype=self.dtype)
