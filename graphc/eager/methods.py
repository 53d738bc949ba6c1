"""PyTorch's spellings of tensor methods, as thin wrappers over graphc's op functions.

`dim`/`keepdim` are accepted next to numpy's `axis`/`keepdims`. Where the two
libraries disagree, a Tensor behaves like PyTorch: `transpose(0, 1)` swaps two dims,
`max(dim)` returns `(values, indices)`, and `var()`/`std()` are unbiased by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from graphc.ir.errors import GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import normalize_axis
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import linalg as L
from graphc.ops import nn as N
from graphc.ops import reduce as R
from graphc.ops import shape as S


class MinMax(NamedTuple):
    """What `max(dim)` / `min(dim)` return, as in PyTorch."""

    values: Any
    indices: Any


def pick_axis(dim: Any, axis: Any) -> Any:
    if dim is not None and axis is not None:
        raise GraphcError("give either dim (PyTorch) or axis (numpy), not both")
    return axis if dim is None else dim


def pick_keep(keepdim: bool | None, keepdims: bool | None) -> bool:
    return bool(keepdims if keepdim is None else keepdim)


def sizes(shape: Sequence[Any]) -> tuple:
    """`f(2, 3)` and `f((2, 3))` both mean the shape (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def scaled(other: Any, alpha: Any) -> Any:
    """`alpha * other`, for PyTorch's `add(x, y, alpha=...)` / `sub`."""
    return other if alpha == 1 else E.mul(other, alpha)


def var_of(x: Any, dim: Any, unbiased: bool | None, keepdim: bool, correction: int | None) -> Any:
    ddof = correction if correction is not None else (1 if unbiased in (None, True) else 0)
    return R.var(x, axis=dim, keepdims=keepdim, ddof=ddof)


def extremum(x: Any, reduce: Any, dim: Any, keepdim: bool, axis: Any, keepdims: Any) -> Any:
    """torch.max / torch.min: all elements, (values, indices) along dim, or numpy style."""
    if dim is None and axis is None:
        return reduce(x)
    if axis is not None:
        return reduce(x, axis=axis, keepdims=bool(keepdims))
    find = R.argmax if reduce is R.max else R.argmin
    indices = find(x, axis=dim, keepdims=keepdim)
    return MinMax(reduce(x, axis=dim, keepdims=keepdim), indices)


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


class TorchMethods:
    """Methods with PyTorch's names and argument names (mixed into `Tensor`)."""

    shape: tuple

    # -- sizes -------------------------------------------------------------------------

    def dim(self) -> int:
        return len(self.shape)

    ndimension = dim

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    nelement = numel

    # -- shape ---------------------------------------------------------------------------

    def view(self, *shape: Any) -> Any:
        """The same memory in another shape; like torch, an error when no view can do it."""
        out = S.reshape(self, sizes(shape))
        if out._base is None and out._data.size:
            raise ShapeError(
                f"view: view size {tuple(out.shape)} is not compatible with the input's "
                f"size {tuple(self.shape)} and strides (its dims span non-contiguous "
                "memory); use .reshape(...) instead, which copies"
            )
        return out

    def reshape(self, *shape: Any) -> Any:
        return S.reshape(self, sizes(shape))

    def view_as(self, other: Any) -> Any:
        return S.reshape(self, other.shape)

    reshape_as = view_as

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        if not self.shape:
            return S.reshape(self, (1,))
        start = normalize_axis(start_dim, len(self.shape))
        end = normalize_axis(end_dim, len(self.shape))
        merged = int(np.prod(self.shape[start : end + 1], dtype=np.int64))
        return S.reshape(self, self.shape[:start] + (merged,) + self.shape[end + 1 :])

    def expand(self, *shape: Any) -> Any:
        return S.expand(self, sizes(shape))

    def expand_as(self, other: Any) -> Any:
        return S.broadcast_to(self, other.shape)

    def broadcast_to(self, shape: Any) -> Any:
        return S.broadcast_to(self, shape)

    def repeat(self, *repeats: Any) -> Any:
        """Tile the tensor `repeats` times along each dim (PyTorch's repeat)."""
        reps = sizes(repeats)
        shape = (1,) * (len(reps) - len(self.shape)) + tuple(self.shape)
        spread = [d for pair in zip((1,) * len(shape), shape) for d in pair]
        tiled = [d for pair in zip(reps, shape) for d in pair]
        x = S.broadcast_to(S.reshape(self, tuple(spread)), tuple(tiled))
        return S.reshape(x, tuple(r * d for r, d in zip(reps, shape)))

    def squeeze(self, dim: Any = None) -> Any:
        """Drop dims of size 1 (all, or those of `dim` that are 1: torch keeps the others)."""
        if dim is not None:
            dims = dim if isinstance(dim, (tuple, list)) else (dim,)
            if not self.shape:  # a 0-d tensor: dim 0 or -1 is allowed, nothing to drop
                bad = [d for d in dims if d not in (0, -1)]
                if bad:
                    raise IndexRangeError(f"squeeze: dim {bad[0]} is out of range for a 0-d tensor")
                return S.reshape(self, ())
            rank = len(self.shape)
            dim = tuple(d for d in dims if self.shape[normalize_axis(d, rank, "squeeze")] == 1)
            if not dim:
                return S.reshape(self, self.shape)  # a view, as torch
        return S.squeeze(self, dim)

    def unsqueeze(self, dim: int) -> Any:
        return S.expand_dims(self, dim)

    def permute(self, *dims: Any) -> Any:
        return S.transpose(self, sizes(dims))

    def transpose(self, *dims: Any) -> Any:
        """transpose(d0, d1) swaps two dims (PyTorch); a full permutation also works."""
        if len(dims) == 2 and all(isinstance(d, (int, np.integer)) for d in dims):
            return S.swapaxes(self, int(dims[0]), int(dims[1]))
        return S.transpose(self, sizes(dims) or None)

    swapaxes = swapdims = transpose

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """A view of `length` entries of dim `dim` from `start`, as in torch."""
        dim = normalize_axis(dim, len(self.shape))
        start = int(start) + (self.shape[dim] if start < 0 else 0)
        if not 0 <= start <= start + length <= self.shape[dim]:
            raise IndexRangeError(
                f"narrow: start {start} + length {length} exceeds dim {dim} of size "
                f"{self.shape[dim]}"
            )
        return I.slice_(self, index=(slice(None),) * dim + (slice(start, start + length),))

    def select(self, dim: int, index: int) -> Any:
        """A view of entry `index` of dim `dim` (that dim removed), as in torch."""
        dim = normalize_axis(dim, len(self.shape))
        if not -self.shape[dim] <= index < self.shape[dim]:
            raise IndexRangeError(
                f"select: index {index} is out of range for dim {dim} of size {self.shape[dim]}"
            )
        return I.slice_(self, index=(slice(None),) * dim + (int(index),))

    @property
    def T(self) -> Any:  # noqa: N802 - torch's name
        """All dims reversed (a view)."""
        return S.transpose(self)

    def t(self) -> Any:
        if len(self.shape) > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dims, got {len(self.shape)}")
        return S.transpose(self)

    def __getitem__(self, index: Any) -> Any:
        """numpy/PyTorch indexing; eagerly a boolean mask is fine too (x[x > 0])."""
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
        return I.getitem(self, index)

    def take(self, indices: Any, axis: int = 0) -> Any:
        return I.take(self, indices, axis=axis)

    def sum_to(self, shape: Any) -> Any:
        """Sum down to `shape`, undoing broadcasting."""
        return S.sum_to(self, shape)

    def slice(self, index: Any) -> Any:
        return I.slice_(self, index=index)

    def unslice(self, shape: Any, index: Any) -> Any:
        return I.unslice(self, shape=shape, index=index)

    def scatter_add(self, indices: Any, shape: Any, axis: int = 0) -> Any:
        return I.scatter_add(self, indices, shape=shape, axis=axis)

    def concat(self, others: Any, axis: int = 0) -> Any:
        return S.concat([self, *others], axis=axis)

    def one_hot(self, num_classes: int, dtype: Any = "float32") -> Any:
        return N.one_hot(self, num_classes=num_classes, dtype=dtype)

    def index_select(self, dim: int, index: Any) -> Any:
        return I.take(self, index, axis=dim)

    # -- reductions --------------------------------------------------------------------

    def sum(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:  # fmt: skip
        return R.sum(self, axis=pick_axis(dim, axis), keepdims=pick_keep(keepdim, keepdims))

    def mean(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
             keepdims: bool | None = None) -> Any:  # fmt: skip
        return R.mean(self, axis=pick_axis(dim, axis), keepdims=pick_keep(keepdim, keepdims))

    def prod(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
             keepdims: bool | None = None) -> Any:  # fmt: skip
        return R.prod(self, axis=pick_axis(dim, axis), keepdims=pick_keep(keepdim, keepdims))

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        if dim is not None and not isinstance(dim, (int, np.integer)):
            return E.maximum(self, dim)
        return extremum(self, R.max, dim, keepdim, axis, keepdims)

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        if dim is not None and not isinstance(dim, (int, np.integer)):
            return E.minimum(self, dim)
        return extremum(self, R.min, dim, keepdim, axis, keepdims)

    def amax(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.max(self, axis=dim, keepdims=keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.min(self, axis=dim, keepdims=keepdim)

    def argmax(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
               keepdims: bool | None = None) -> Any:  # fmt: skip
        return R.argmax(self, axis=pick_axis(dim, axis), keepdims=pick_keep(keepdim, keepdims))

    def argmin(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.argmin(self, axis=dim, keepdims=keepdim)

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: int | None = None) -> Any:  # fmt: skip
        return var_of(self, dim, unbiased, keepdim, correction)

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: int | None = None) -> Any:  # fmt: skip
        return E.sqrt(var_of(self, dim, unbiased, keepdim, correction))

    def all(self, dim: Any = None, keepdim: bool = False) -> Any:
        """True where every element (along dim) is nonzero."""
        return R.min(E.cast(self, np.bool_), axis=dim, keepdims=keepdim)

    def any(self, dim: Any = None, keepdim: bool = False) -> Any:
        """True where some element (along dim) is nonzero."""
        return R.max(E.cast(self, np.bool_), axis=dim, keepdims=keepdim)

    def equal(self, other: Any) -> bool:
        """Same shape and the same values (PyTorch's torch.equal)."""
        return tuple(self.shape) == tuple(other.shape) and bool(E.eq(self, other).all())

    def logsumexp(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.logsumexp(self, axis=dim, keepdims=keepdim)

    def norm(self) -> Any:
        """The 2-norm of all elements."""
        return E.sqrt(R.sum(self * self))

    # -- arithmetic and math -----------------------------------------------------------

    def add(self, other: Any, alpha: Any = 1) -> Any:
        return E.add(self, scaled(other, alpha))

    def sub(self, other: Any, alpha: Any = 1) -> Any:
        return E.sub(self, scaled(other, alpha))

    subtract = sub

    def mul(self, other: Any) -> Any:
        return E.mul(self, other)

    multiply = mul

    def div(self, other: Any) -> Any:
        return E.div(self, other)

    divide = true_divide = div

    def pow(self, exponent: Any) -> Any:
        return E.pow(self, exponent)

    def neg(self) -> Any:
        return E.neg(self)

    negative = neg

    def abs(self) -> Any:
        return E.abs(self)

    def sign(self) -> Any:
        return E.sign(self)

    def square(self) -> Any:
        return E.mul(self, self)

    def sin(self) -> Any:
        return E.sin(self)

    def cos(self) -> Any:
        return E.cos(self)

    def gelu(self) -> Any:
        return E.gelu(self)

    # rsqrt, reciprocal, clamp, clip, clamp_min, clamp_max: math_methods.py (ops of their
    # own, and tensor bounds)

    def maximum(self, other: Any) -> Any:
        return E.maximum(self, other)

    def minimum(self, other: Any) -> Any:
        return E.minimum(self, other)

    def where(self, condition: Any, other: Any) -> Any:
        return E.where(condition, self, other)

    def masked_fill(self, mask: Any, value: Any) -> Any:
        return E.where(mask, value, self)

    def eq(self, other: Any) -> Any:
        return E.eq(self, other)

    def ne(self, other: Any) -> Any:
        return E.ne(self, other)

    def lt(self, other: Any) -> Any:
        return E.lt(self, other)

    def le(self, other: Any) -> Any:
        return E.le(self, other)

    def gt(self, other: Any) -> Any:
        return E.gt(self, other)

    def ge(self, other: Any) -> Any:
        return E.ge(self, other)

    def mm(self, other: Any) -> Any:
        if len(self.shape) != 2 or len(other.shape) != 2:
            raise ShapeError(f"mm: expects two matrices, got shapes {self.shape}, {other.shape}")
        return L.matmul(self, other)

    def matmul(self, other: Any) -> Any:
        return L.matmul(self, other)

    bmm = matmul

    def mv(self, vector: Any) -> Any:
        return L.matmul(self, vector)

    def dot(self, other: Any) -> Any:
        return L.matmul(self, other)

    def softmax(self, dim: int = -1) -> Any:
        return N.softmax(self, axis=dim)

    def log_softmax(self, dim: int = -1) -> Any:
        return N.log_softmax(self, axis=dim)
