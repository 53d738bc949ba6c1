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

from graphc.ir.errors import DTypeError, GraphcError, IndexRangeError, ShapeError
from graphc.ir.graph import active_graph
from graphc.ir.types import is_float
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S
from graphc.ops.methods import MinMax, ValueMethods
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


def _spelled(t: Any, name: str) -> Any:
    from graphc.eager.grad_fn import spelled  # grad_fn imports Tensor

    return spelled(t, name)


def _extremum(x: Any, which: str, dim: Any, keepdim: bool, axis: Any, keepdims: bool) -> Any:
    """torch.max / torch.min on a tensor: the shared method (along a dim, the values are
    the entries at the indices returned, so the whole gradient goes to them: torch's
    max(dim)), its grad_fn named as torch names it."""
    method = ValueMethods.max if which == "max" else ValueMethods.min
    if dim is None and axis is None:
        return _spelled(method(x), f"{which.title()}Backward1")
    result = method(x, dim, keepdim, axis=axis, keepdims=keepdims)
    if axis is not None or not isinstance(dim, (int, np.integer)) or active_graph() is not None:
        return result
    return MinMax(_spelled(result.values, f"{which.title()}Backward0"), result.indices)


def _check_float(x: Any, op: str) -> None:
    if not is_float(x.dtype):
        raise DTypeError(
            f"{op}(): could not infer output dtype: the input must be of a floating point "
            f"dtype, got {x.dtype} (cast it first, e.g. x.float().{op}())"
        )


def _filled(value: Any, dtype: np.dtype) -> np.ndarray:
    """A Python number as a 0-d array of `dtype`: torch's cast of a fill value."""
    return np.asarray(value).astype(dtype)


class EagerMethods:
    """Mixed into `Tensor`, before the shared `ValueMethods`.

    Some methods below only name the node the shared method made as torch names it
    (`t()` is TBackward0, `transpose(0, 1)` TransposeBackward0, both a `transpose` op)."""

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
        return _spelled(out, "CloneBackward0")

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

    def __rtruediv__(self, other: Any) -> Any:
        """`2 / x` is `reciprocal(x) * 2`, as in torch: its backward reads the result only,
        so writing x in place afterwards is no error (div's would read x)."""
        number = isinstance(other, (int, float)) and not isinstance(other, bool)
        if number and active_graph() is None:
            return E.mul(E.reciprocal(self), other)
        return E.div(other, self)

    # -- reductions with torch's semantics -----------------------------------------------

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        """The largest element; (values, indices) along dim; maximum with a value."""
        return _extremum(self, "max", dim, keepdim, axis, keepdims)

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        """The smallest element; (values, indices) along dim; minimum with a value."""
        return _extremum(self, "min", dim, keepdim, axis, keepdims)

    def amax(self, *args: Any, **kwargs: Any) -> Any:
        return _spelled(ValueMethods.amax(self, *args, **kwargs), "AmaxBackward0")  # type: ignore[attr-defined]

    def amin(self, *args: Any, **kwargs: Any) -> Any:
        return _spelled(ValueMethods.amin(self, *args, **kwargs), "AminBackward0")  # type: ignore[attr-defined]

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        """The mean (over dim); as torch, of floating-point tensors only."""
        _check_float(self, "mean")
        return ValueMethods.mean(self, *args, **kwargs)  # type: ignore[attr-defined]

    def var(self, *args: Any, **kwargs: Any) -> Any:
        """The variance (see ValueMethods.var); as torch, of floating-point tensors only."""
        _check_float(self, "var")
        return ValueMethods.var(self, *args, **kwargs)

    # -- torch's names for the nodes of shared ops -----------------------------------------

    def t(self) -> Any:
        return _spelled(ValueMethods.t(self), "TBackward0")

    def transpose(self, *dims: Any) -> Any:
        """transpose(d0, d1) swaps two dims (PyTorch); a full permutation also works."""
        out = ValueMethods.transpose(self, *dims)
        swapped = len(dims) == 2 and all(isinstance(d, (int, np.integer)) for d in dims)
        return _spelled(out, "TransposeBackward0") if swapped else out

    swapaxes = swapdims = transpose

    def unsqueeze(self, dim: int) -> Any:
        return _spelled(ValueMethods.unsqueeze(self, dim), "UnsqueezeBackward0")

    def squeeze(self, dim: Any = None) -> Any:
        """Drop dims of size 1 (all, or those of `dim` that are 1: torch keeps the others)."""
        overload = 0 if dim is None else 2 if isinstance(dim, (tuple, list)) else 1
        return _spelled(ValueMethods.squeeze(self, dim), f"SqueezeBackward{overload}")

    def clone(self) -> Any:
        """A copy that stays differentiable (gradients flow back to self)."""
        return _spelled(ValueMethods.clone(self), "CloneBackward0")

    def nansum(self, *args: Any, **kwargs: Any) -> Any:
        """The sum counting nan as 0 (a sum of where's: torch's node is NansumBackward0)."""
        return _spelled(ValueMethods.nansum(self, *args, **kwargs), "NansumBackward0")  # type: ignore[attr-defined]

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        """The diagonal of dims dim1 and dim2 as a last dim (a strided slice: torch's node
        is DiagonalBackward0)."""
        out = ValueMethods.diagonal(self, offset, dim1, dim2)
        return _spelled(out, "DiagonalBackward0")

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """`value` where mask holds, self elsewhere; of self's dtype, as torch (an int
        tensor filled with 2.5 gets 2). A tensor value must be 0-d; it gets a gradient."""
        if getattr(value, "shape", ()) != ():
            raise ShapeError(
                "masked_fill: only a 0-dimensional value tensor is supported, got one of "
                f"shape {tuple(value.shape)}"
            )
        if isinstance(value, (bool, int, float, np.generic, np.ndarray)):
            return _spelled(E.where(mask, _filled(value, self.dtype), self), "MaskedFillBackward0")
        if value.dtype != self.dtype:  # a tensor (or graph value): cast on the tape
            value = E.cast(value, self.dtype)
        return _spelled(E.where(mask, value, self), "MaskedFillBackward1")

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
