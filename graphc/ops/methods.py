"""The methods of graph values and eager tensors: one table for both kinds.

`Symbol` (symbolic.py) and the eager `Tensor` both inherit `ValueMethods`. Every method
here applies graphc's op functions, which dispatch on the kind of value (dispatch.py):
the same `x.erf()` records an `erf` node on a graph value and computes on an eager
tensor, so eager code traces unchanged (as JAX gives tracers and arrays one method table).

Spellings are PyTorch's: `dim=` and `keepdim=`, `x.transpose(0, 1)` swapping two dims,
`x.max(dim)` giving (values, indices), an unbiased `var()`. numpy's spellings work
beside them where the two do not clash, with numpy's meaning: `axis=`, `keepdims=`,
`ddof=` (`x.max(axis=0)` gives the values alone, `x.var(axis=0)` divides by n).

Methods spelled as their op function with the value first (`x.exp()` is `exp(x)`,
`x.lt(y)` is `lt(x, y)`), and reductions taking only dims (`x.sum(dim=1)`), are
generated from the tables `UNARY`, `BINARY` and `REDUCE`, one line each; the others
are written out below, grouped as the ops are.

>>> import numpy as np, graphc as gc
>>> g = gc.trace(lambda x: x.erf().clamp(0.0, 0.5).sum(dim=1), gc.TensorSpec((2, 3)))
>>> [n.op for n in g.nodes if n.kind == "op"]
['erf', 'clip', 'sum']
>>> import graphc.eager as ge
>>> ge.tensor([[0.5, 2.0, -1.0]]).erf().clamp(0.0, 0.5).sum(dim=1)
tensor([1.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from graphc.ir.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError
from graphc.ir.types import as_dtype, format_shape, is_float, is_symbol, normalize_axis
from graphc.ops import (
    activation,
    along_axis,
    arrays,
    bias_products,
    closeness,
    composites,
    creation,
    elementwise,
    elementwise_composites,
    indexing,
    linalg,
    logical,
    nn,
    order_statistics,
    padding,
    reduce,
    rounding,
    scatters,
    selection,
    sequences,
    sorting,
    updates,
)
from graphc.ops import shape as shape_ops
from graphc.ops.devices import check_device, is_device
from graphc.ops.dispatch import dtype_of, is_python_scalar
from graphc.ops.operators import OperatorMixin
from graphc.ops.spelling import pick_axis

# x.name() is op(x)
UNARY: dict[str, Callable[..., Any]] = {
    "exp": elementwise.exp,
    "log": elementwise.log,
    "sqrt": elementwise.sqrt,
    "square": elementwise.square,
    "abs": elementwise.abs,
    "neg": elementwise.neg,
    "negative": elementwise.neg,
    "sign": elementwise.sign,
    "sin": elementwise.sin,
    "cos": elementwise.cos,
    "tanh": elementwise.tanh,
    "sigmoid": elementwise.sigmoid,
    "relu": elementwise.relu,
    "gelu": elementwise.gelu,  # the tanh form; gelu_exact is torch's default F.gelu
    "gelu_exact": activation.gelu_exact,
    "erf": elementwise.erf,
    "log1p": elementwise.log1p,
    "log2": elementwise.log2,
    "log10": elementwise.log10,
    "expm1": elementwise.expm1,
    "tan": elementwise.tan,
    "asin": elementwise.asin,
    "arcsin": elementwise.asin,
    "acos": elementwise.acos,
    "arccos": elementwise.acos,
    "atan": elementwise.atan,
    "arctan": elementwise.atan,
    "sinh": elementwise.sinh,
    "cosh": elementwise.cosh,
    "asinh": elementwise.asinh,
    "arcsinh": elementwise.asinh,
    "acosh": elementwise.acosh,
    "arccosh": elementwise.acosh,
    "atanh": elementwise.atanh,
    "arctanh": elementwise.atanh,
    "reciprocal": elementwise.reciprocal,
    "rsqrt": elementwise.rsqrt,
    "isnan": selection.isnan,
    "isinf": selection.isinf,
    "isfinite": selection.isfinite,
    "floor": rounding.floor,
    "ceil": rounding.ceil,
    "trunc": rounding.trunc,
    "fix": rounding.trunc,
    "logical_not": logical.logical_not,
    "absolute": elementwise.abs,
    "sgn": elementwise_composites.sgn,
    "exp2": elementwise_composites.exp2,
    "isposinf": elementwise_composites.isposinf,
    "isneginf": elementwise_composites.isneginf,
    "sinc": elementwise_composites.sinc,
    "deg2rad": elementwise_composites.deg2rad,
    "rad2deg": elementwise_composites.rad2deg,
}

# x.name(other) is op(x, other)
BINARY: dict[str, Callable[..., Any]] = {
    "mul": elementwise.mul,
    "multiply": elementwise.mul,
    "true_divide": elementwise.div,
    "pow": elementwise.pow,
    "maximum": elementwise.maximum,
    "minimum": elementwise.minimum,
    "atan2": elementwise.atan2,  # the angle of (other, self), as torch
    "arctan2": elementwise.atan2,
    "floor_divide": rounding.floor_divide,  # Python's //
    "remainder": rounding.remainder,  # the sign of other (Python's %)
    "fmod": rounding.fmod,  # the sign of x (C's fmod)
    "logaddexp": elementwise.logaddexp,
    "xlogy": elementwise_composites.xlogy,
    "hypot": elementwise_composites.hypot,
    "fmax": elementwise_composites.fmax,
    "fmin": elementwise_composites.fmin,
    "heaviside": elementwise_composites.heaviside,
    "float_power": elementwise_composites.float_power,
    "inner": composites.inner,
    "logical_and": logical.logical_and,
    "logical_or": logical.logical_or,
    "logical_xor": logical.logical_xor,
    "eq": elementwise.eq,
    "ne": elementwise.ne,
    "lt": elementwise.lt,
    "le": elementwise.le,
    "gt": elementwise.gt,
    "ge": elementwise.ge,
    "matmul": linalg.matmul,
    "mv": linalg.matmul,
    "dot": linalg.matmul,
}

# x.name(dim=None, keepdim=False) is op(x, axis=dim, keepdims=keepdim); numpy's axis=
# and keepdims= work too; those in TAKES_DTYPE also take torch's dtype=
REDUCE: dict[str, Callable[..., Any]] = {
    "sum": reduce.sum,
    "mean": reduce.mean,
    "prod": reduce.prod,
    "amax": reduce.max,
    "amin": reduce.min,
    "argmax": reduce.argmax,
    "argmin": reduce.argmin,
    "logsumexp": reduce.logsumexp,
    "nansum": reduce.nansum,
    "nanmean": reduce.nanmean,
}

TAKES_DTYPE = {"sum", "prod", "mean", "nansum", "nanmean"}


def unbind(x: Any, dim: int = 0) -> tuple:
    """The entries of x along dim, each with that dim removed, as torch.unbind: a tuple of
    selects (each a `slice` op, a view of an eager tensor), so gradients flow back to x.

    >>> import numpy as np, graphc as gc
    >>> [a.tolist() for a in gc.unbind(np.arange(6).reshape(2, 3), dim=1)]
    [[0, 3], [1, 4], [2, 5]]
    """
    shape = tuple(x.shape)
    if not shape:
        raise IndexRangeError("unbind: a 0-d value has no dim to unbind")
    dim = normalize_axis(dim, len(shape), "unbind")
    size = shape[dim]
    if is_symbol(size):
        raise ShapeError(
            f"unbind: dim {dim} of shape {format_shape(shape)} is symbolic, so the number of "
            "results is known only when the graph runs; gc.scan walks over it instead"
        )
    before = (slice(None),) * dim
    return tuple(indexing.slice_(x, index=(*before, i)) for i in range(size))


class MinMax(NamedTuple):
    """What `max(dim)` / `min(dim)` return, as in PyTorch."""

    values: Any
    indices: Any


def sizes(shape: Sequence[Any]) -> tuple:
    """`f(2, 3)` and `f((2, 3))` (or a list) both mean the shape (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def scaled(other: Any, alpha: Any) -> Any:
    """`alpha * other`, for PyTorch's `add(x, y, alpha=...)` / `sub`: two Python numbers
    multiply as Python numbers, so the product stays weak (an op would make it an int64
    array, and a float32 x + 1 * 2 float64)."""
    if alpha == 1:
        return other
    if is_python_scalar(other) and is_python_scalar(alpha):
        return other * alpha
    return elementwise.mul(other, alpha)


def pick_keep(keepdim: bool | None, keepdims: bool | None) -> bool:
    return bool(keepdims if keepdim is None else keepdim)


def pick_ddof(
    unbiased: bool | None, correction: int | None, ddof: int | None, numpy_spelled: bool
) -> int:
    """PyTorch divides by n - 1 unless told otherwise, numpy by n: a call spelled with
    numpy's names (axis=, keepdims=) gets numpy's default."""
    if correction is not None:
        return correction
    if ddof is not None:
        return ddof
    if unbiased is not None:
        return 1 if unbiased else 0
    return 0 if numpy_spelled else 1


def extremum(x: Any, reduce_op: Any, dim: Any, keepdim: bool, axis: Any, keepdims: Any) -> Any:
    """torch.max / torch.min: all elements, (values, indices) along dim, or numpy style."""
    if dim is None and axis is None:
        if not is_float(x.dtype) or not x.shape:
            return reduce_op(x)
        return order_statistics.of_all(x, reduce_op.__name__, reduce_op)
    if axis is not None:
        return reduce_op(x, axis=axis, keepdims=bool(keepdims))
    find = reduce.argmax if reduce_op is reduce.max else reduce.argmin
    indices = find(x, axis=dim, keepdims=keepdim)
    if not x.shape:  # one element: no ties
        return MinMax(reduce_op(x, axis=dim, keepdims=keepdim), indices)
    # the values are the entries at the indices, so the whole gradient goes to them (torch's
    # max(dim): one winner per tie), where the max op shares it among ties (as JAX)
    axis = normalize_axis(dim, len(x.shape), "max" if reduce_op is reduce.max else "min")
    at = indices if keepdim else shape_ops.expand_dims(indices, axis)
    values = along_axis.take_along_axis(x, at, axis=axis)
    return MinMax(values if keepdim else shape_ops.squeeze(values, axis), indices)


def _by_keyword(method: str, dims: tuple, named: dict, keyword: str) -> tuple:
    """torch's dims given by position or as one keyword (permute(dims=...)), not both."""
    if set(named) - {keyword} or (named and dims):
        raise TypeError(
            f"{method}() takes {keyword}, by position or as {keyword}=; got {sorted(named)}"
        )
    return (named[keyword],) if named else dims


ROUNDING_MODES = (None, "trunc", "floor")


def rounded_quotient(x: Any, y: Any, rounding_mode: str | None) -> Any:
    """torch.div: x / y, or rounded down ("floor") or towards zero ("trunc"), integer
    dtypes kept when rounded."""
    if rounding_mode not in ROUNDING_MODES:
        raise ArgumentError(
            f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
        )
    if rounding_mode is None:
        return elementwise.div(x, y)
    if rounding_mode == "floor":
        return rounding.floor_divide(x, y)
    if is_float(dtype_of(x)) or is_float(dtype_of(y)):
        return rounding.trunc(elementwise.div(x, y))
    # integers: x - fmod(x, y) is y times the quotient truncated, exactly
    return rounding.floor_divide(x - rounding.fmod(x, y), y)


# torch's legacy tensor type names, Tensor.type's spelling of a dtype
TORCH_TYPE_NAMES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bf16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}


def torch_dtype_name(dtype: Any) -> Any:
    """A torch dtype object (torch.float64, from a program written for torch) as its
    name, "float64", which graphc's dtypes read; any other dtype spelling as it is."""
    kind = type(dtype)
    if kind.__module__ == "torch" and kind.__name__ == "dtype":
        return str(dtype).removeprefix("torch.")
    return dtype


def type_name_dtype(dtype: Any) -> Any:
    """The dtype a `type(...)` argument names: "graphc.float64" (what `type()` returns),
    torch's "torch.DoubleTensor" or its class (torch.DoubleTensor, when torch is
    installed; "torch.cuda.DoubleTensor" is a device refused by name); any other dtype
    spelling is `to`'s to read."""
    if isinstance(dtype, type) and dtype.__module__.startswith("torch"):
        dtype = f"{dtype.__module__}.{dtype.__name__}"  # torch.DoubleTensor, the class
    if not isinstance(dtype, str):
        return torch_dtype_name(dtype)
    prefix, _, name = dtype.rpartition(".")
    if prefix == "graphc":
        return name
    if prefix == "torch.cuda":
        check_device("cuda", f"type({dtype!r})")
    if prefix in ("torch", "torch.cuda"):
        if name not in TORCH_TYPE_NAMES:
            known = ", ".join(f"torch.{n}" for n in TORCH_TYPE_NAMES)
            raise DTypeError(
                f"type: graphc has no dtype for {dtype!r}; torch's names it takes are {known}"
            )
        return TORCH_TYPE_NAMES[name]
    return dtype


class ValueMethods(OperatorMixin):
    """The methods every value kind has (mixed into `Symbol` and the eager `Tensor`);
    the generated ones are listed in `UNARY`, `BINARY` and `REDUCE`."""

    shape: tuple
    dtype: np.dtype

    # -- sizes (no op: the shape answers) ------------------------------------------------

    def dim(self) -> int:
        return len(self.shape)

    ndimension = dim

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        if any(is_symbol(d) for d in self.shape):
            raise ShapeError(
                f"numel: shape {format_shape(self.shape)} has symbolic dims, so its number "
                "of elements is known only when the graph runs"
            )
        return int(np.prod(self.shape, dtype=np.int64))

    nelement = numel

    # -- shape ---------------------------------------------------------------------------

    def reshape(self, *shape: Any) -> Any:
        return shape_ops.reshape(self, sizes(shape))

    def view(self, *shape: Any) -> Any:
        """reshape; an eager tensor also checks that its memory allows a view."""
        return shape_ops.reshape(self, sizes(shape))

    def view_as(self, other: Any) -> Any:
        return shape_ops.reshape(self, other.shape)

    reshape_as = view_as

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        return arrays.flatten(self, start_dim, end_dim)

    def expand(self, *shape: Any) -> Any:
        return shape_ops.expand(self, sizes(shape))

    def expand_as(self, other: Any) -> Any:
        return shape_ops.broadcast_to(self, other.shape)

    def broadcast_to(self, shape: Any) -> Any:
        return shape_ops.broadcast_to(self, shape)

    def sum_to(self, shape: Any) -> Any:
        """Sum down to `shape`, undoing broadcasting."""
        return shape_ops.sum_to(self, shape)

    def repeat(self, *repeats: Any) -> Any:
        """Tile the value `repeats` times along each dim (PyTorch's repeat)."""
        reps = sizes(repeats)
        shape = (1,) * (len(reps) - len(self.shape)) + tuple(self.shape)
        spread = [d for pair in zip((1,) * len(shape), shape) for d in pair]
        tiled = [d for pair in zip(reps, shape) for d in pair]
        x = shape_ops.broadcast_to(shape_ops.reshape(self, tuple(spread)), tuple(tiled))
        return shape_ops.reshape(x, tuple(r * d for r, d in zip(reps, shape)))

    def repeat_interleave(self, repeats: Any, dim: int | None = None) -> Any:
        """Each element repeated in turn along dim (of the flattened value by default), as
        torch's and np.repeat (`gc.repeat`)."""
        return arrays.repeat(self, repeats, dim)

    def ravel(self) -> Any:
        """The elements as one dim (torch's and numpy's)."""
        return shape_ops.ravel(self)

    def moveaxis(self, source: Any, destination: Any) -> Any:
        """Axes `source` moved to `destination` (torch's moveaxis and movedim)."""
        return shape_ops.moveaxis(self, source, destination)

    movedim = moveaxis

    def tile(self, *dims: Any) -> Any:
        """Repeat the value dims[i] times along each dim i (numpy's tile)."""
        return arrays.tile(self, sizes(dims))

    def squeeze(self, dim: Any = None) -> Any:
        """Drop dims of size 1 (all, or those of `dim` that are 1: torch keeps the others)."""
        if dim is not None:
            dims = dim if isinstance(dim, (tuple, list)) else (dim,)
            if not self.shape:  # 0-d: dim 0 or -1 is allowed, nothing to drop
                bad = [d for d in dims if d not in (0, -1)]
                if bad:
                    raise IndexRangeError(f"squeeze: dim {bad[0]} is out of range for a 0-d tensor")
                return shape_ops.reshape(self, ())
            rank = len(self.shape)
            dim = tuple(d for d in dims if self.shape[normalize_axis(d, rank, "squeeze")] == 1)
            if not dim:
                return shape_ops.reshape(self, self.shape)  # a view, as torch
        return shape_ops.squeeze(self, dim)

    def unsqueeze(self, dim: int) -> Any:
        return shape_ops.expand_dims(self, dim)

    def permute(self, *dims: Any, **named: Any) -> Any:
        """Dims reordered: permute(1, 0), permute((1, 0)) or permute(dims=(1, 0))."""
        return shape_ops.transpose(self, sizes(_by_keyword("permute", dims, named, "dims")))

    def transpose(self, *dims: Any, **named: Any) -> Any:
        """transpose(d0, d1) (or dim0=, dim1=) swaps two dims (PyTorch); a full
        permutation also works."""
        if named:
            if set(named) - {"dim0", "dim1"}:
                raise TypeError(f"transpose() takes dim0 and dim1, got {sorted(named)}")
            dims = (*dims, *(named[k] for k in ("dim0", "dim1") if k in named))
        if len(dims) == 2 and all(isinstance(d, (int, np.integer)) for d in dims):
            return shape_ops.swapaxes(self, int(dims[0]), int(dims[1]))
        return shape_ops.transpose(self, sizes(dims) or None)

    swapaxes = swapdims = transpose

    def t(self) -> Any:
        if len(self.shape) > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dims, got {len(self.shape)}")
        return shape_ops.transpose(self)

    def concat(self, others: Any, axis: int = 0) -> Any:
        return shape_ops.concat([self, *others], axis=axis)

    # -- pieces, copies and order ----------------------------------------------------------

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        """Pieces of `split_size` along dim (the last may be smaller), or of the sizes in
        a list, as torch.split."""
        return arrays.split(self, split_size, axis=dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """`chunks` pieces of equal size along dim (the last may be smaller)."""
        return arrays.chunk(self, chunks, axis=dim)

    def flip(self, *dims: Any, **named: Any) -> Any:
        """Reversed along each of dims: flip(0, 1), flip((0, 1)) or flip(dims=(0, 1)) (a
        copy, as torch)."""
        return arrays.flip(self, sizes(_by_keyword("flip", dims, named, "dims")))

    def fliplr(self) -> Any:
        return arrays.flip(self, (1,))

    def flipud(self) -> Any:
        return arrays.flip(self, (0,))

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        """The entries (i, i + offset) of dims dim1 and dim2, as a last dim (torch's)."""
        return arrays.diagonal(self, offset, dim1, dim2)

    def diag(self, diagonal: int = 0) -> Any:
        """A 1-D value on a matrix's diagonal, or a matrix's diagonal (torch's, `gc.diag`)."""
        return arrays.diag(self, diagonal)

    def outer(self, other: Any) -> Any:
        return linalg.outer(self, other)

    ger = outer

    def tril(self, diagonal: int = 0) -> Any:
        return arrays.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Any:
        return arrays.triu(self, diagonal)

    def unpad(self, pad_width: Any, mode: str = "constant") -> Any:
        """The adjoint of pad (graphc's): interior plus padded values added back."""
        return padding.unpad(self, pad_width, mode)

    def cumsum(self, dim: int | None = None, dtype: Any = None, *, axis: int | None = None) -> Any:
        """Running sums along dim (ints and bools in int64); `dtype` casts first."""
        x = self if dtype is None else elementwise.cast(self, dtype)
        return sequences.cumsum(x, axis=pick_axis(axis, dim, "cumsum"))

    def cumprod(self, dim: int | None = None, dtype: Any = None, *, axis: int | None = None) -> Any:
        """Running products along dim (ints and bools in int64); `dtype` casts first."""
        x = self if dtype is None else elementwise.cast(self, dtype)
        return sequences.cumprod(x, axis=pick_axis(axis, dim, "cumprod"))

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """(values, indices) sorted along dim; always stable (ties keep their order)."""
        return sorting.sort(self, dim, descending)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        return sorting.argsort(self, dim, descending)

    def topk(
        self,
        k: int,
        dim: int = -1,
        largest: bool = True,
        sorted: bool = True,  # noqa: A002 - torch's name
    ) -> Any:
        """(values, indices) of the k largest (smallest) along dim; ties in index order."""
        out = sorting.topk(self, k, dim, largest)
        if not self.shape and out.values.shape:  # of a 0-d value: 0-d, as its indices (torch)
            return type(out)(shape_ops.reshape(out.values, ()), out.indices)
        return out

    # -- indexing --------------------------------------------------------------------------

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """`length` entries of dim `dim` from `start`, as in torch."""
        dim = normalize_axis(dim, len(self.shape), "narrow")
        start = int(start) + (self.shape[dim] if start < 0 else 0)
        if not 0 <= start <= start + length <= self.shape[dim]:
            raise IndexRangeError(
                f"narrow: start {start} + length {length} exceeds dim {dim} of size "
                f"{self.shape[dim]}"
            )
        return indexing.slice_(self, index=(slice(None),) * dim + (slice(start, start + length),))

    def select(self, dim: int, index: int) -> Any:
        """Entry `index` of dim `dim` (that dim removed), as in torch."""
        dim = normalize_axis(dim, len(self.shape), "select")
        if not -self.shape[dim] <= index < self.shape[dim]:
            raise IndexRangeError(
                f"select: index {index} is out of range for dim {dim} of size {self.shape[dim]}"
            )
        return indexing.slice_(self, index=(slice(None),) * dim + (int(index),))

    def unbind(self, dim: int = 0) -> tuple:
        """The entries along dim, each with that dim removed (see `unbind`)."""
        return unbind(self, dim)

    @property
    def at(self) -> updates.At:
        """JAX's functional updates: `x.at[index].set(v)` (add, subtract, multiply,
        divide, power, min, max; get) is a new value, `x` unchanged (ops/updates.py)."""
        return updates.At(self)

    def slice(self, index: Any) -> Any:
        return indexing.slice_(self, index=index)

    def unslice(self, shape: Any, index: Any) -> Any:
        return indexing.unslice(self, shape=shape, index=index)

    def take(self, indices: Any, axis: int = 0) -> Any:
        return indexing.take(self, indices, axis=axis)

    def index_select(self, dim: int, index: Any) -> Any:
        return indexing.take(self, index, axis=dim)

    def gather(self, dim: int, index: Any) -> Any:
        """torch.gather: out[i][j] = self[i][index[i][j]] for dim 1 (take_along_axis);
        graphc's own `gc.gather` is numpy's take."""
        return along_axis.take_along_axis(self, index, axis=dim)

    def take_along_dim(self, indices: Any, dim: int | None = None) -> Any:
        return along_axis.take_along_axis(self, indices, axis=dim)

    def take_along_axis(self, indices: Any, axis: int | None = None) -> Any:
        return along_axis.take_along_axis(self, indices, axis=axis)

    def scatter_add_along_axis(self, indices: Any, shape: Any, axis: int = 0) -> Any:
        """Zeros of shape with this value's entries added at indices along axis."""
        return along_axis.scatter_add_along_axis(self, indices, shape, axis)

    def one_hot(self, num_classes: int, dtype: Any = "float32") -> Any:
        return nn.one_hot(self, num_classes=num_classes, dtype=dtype)

    # -- reductions (and REDUCE) -------------------------------------------------------------

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        """The largest element; (values, indices) along dim; maximum with a value."""
        if dim is not None and not isinstance(dim, (int, np.integer)):
            return elementwise.maximum(self, dim)
        return extremum(self, reduce.max, dim, keepdim, axis, keepdims)

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        """The smallest element; (values, indices) along dim; minimum with a value."""
        if dim is not None and not isinstance(dim, (int, np.integer)):
            return elementwise.minimum(self, dim)
        return extremum(self, reduce.min, dim, keepdim, axis, keepdims)

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool | None = None, *,
            correction: int | None = None, axis: Any = None, keepdims: bool | None = None,
            ddof: int | None = None) -> Any:  # fmt: skip
        """Unbiased (divided by n - 1) unless unbiased=False, correction= or ddof= say
        otherwise, or numpy's axis=/keepdims= spell the call."""
        numpy_spelled = axis is not None or keepdims is not None
        return reduce.var(
            self,
            axis=pick_axis(axis, dim, "var"),
            keepdims=pick_keep(keepdim, keepdims),
            ddof=pick_ddof(unbiased, correction, ddof, numpy_spelled),
        )

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool | None = None, *,
            correction: int | None = None, axis: Any = None, keepdims: bool | None = None,
            ddof: int | None = None) -> Any:  # fmt: skip
        """The square root of `var` (same arguments)."""
        variance = self.var(
            dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims, ddof=ddof
        )
        return elementwise.root_flat_at_zero(variance)  # gradient 0 at no spread, as torch

    def all(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:  # fmt: skip
        """True where every element (along dim) is nonzero; True for none (`gc.all`)."""
        return reduce.all(self, pick_axis(axis, dim, "all"), pick_keep(keepdim, keepdims))

    def any(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:  # fmt: skip
        """True where some element (along dim) is nonzero; False for none (`gc.any`)."""
        return reduce.any(self, pick_axis(axis, dim, "any"), pick_keep(keepdim, keepdims))

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> Any:  # fmt: skip
        """nan, +inf and -inf replaced (torch's, `gc.nan_to_num`)."""
        return selection.nan_to_num(self, nan=nan, posinf=posinf, neginf=neginf)

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Any:  # fmt: skip
        return closeness.isclose(self, other, rtol=rtol, atol=atol, equal_nan=equal_nan)

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> Any:  # fmt: skip
        """A Python bool on an eager tensor (torch's); a 0-d bool value on a graph value."""
        return closeness.allclose(self, other, rtol=rtol, atol=atol, equal_nan=equal_nan)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False,
             dtype: Any = None) -> Any:  # fmt: skip
        """The vector p-norm over dim (all elements by default): p = 2 ("fro"), 1, inf,
        -inf, 0 (the count of nonzeros) or any other number; `dtype` casts first."""
        x = self if dtype is None else elementwise.cast(self, dtype)
        return composites.vector_norm(x, p, dim, keepdim)

    def softmax(self, dim: int | None = None, dtype: Any = None, *,
                axis: int | None = None) -> Any:  # fmt: skip
        """Along dim (the last by default); `dtype` casts first, as torch."""
        x = self if dtype is None else elementwise.cast(self, dtype)
        return nn.softmax(x, axis=pick_axis(axis, dim, "softmax", default=-1))

    def log_softmax(self, dim: int | None = None, dtype: Any = None, *,
                    axis: int | None = None) -> Any:  # fmt: skip
        x = self if dtype is None else elementwise.cast(self, dtype)
        return nn.log_softmax(x, axis=pick_axis(axis, dim, "log_softmax", default=-1))

    # -- arithmetic with PyTorch's extra arguments -------------------------------------------

    def add(self, other: Any, alpha: Any = 1) -> Any:
        return elementwise.add(self, scaled(other, alpha))

    def sub(self, other: Any, alpha: Any = 1) -> Any:
        return elementwise.sub(self, scaled(other, alpha))

    subtract = sub

    def round(self, decimals: int = 0) -> Any:
        """Halves to even, as torch.round."""
        return rounding.round(self, decimals=decimals)

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
        """Bounds may be scalars or values (tensors, graph values)."""
        return rounding.clamp(self, min, max)

    def clip(self, a_min: Any = None, a_max: Any = None, *, min: Any = None,  # noqa: A002
             max: Any = None) -> Any:  # fmt: skip
        return rounding.clip(self, a_min, a_max, min=min, max=max)

    def clamp_min(self, min: Any) -> Any:  # noqa: A002
        return rounding.clamp(self, min, None)

    def clamp_max(self, max: Any) -> Any:  # noqa: A002
        return rounding.clamp(self, None, max)

    def where(self, condition: Any, other: Any) -> Any:
        """self where condition holds, other elsewhere (torch's argument order)."""
        return elementwise.where(condition, self, other)

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """`value` where mask holds, self elsewhere; of self's dtype, as torch (an int
        value filled with 2.5 gets 2). A value that is not a number must be 0-d; it gets a
        gradient."""
        if getattr(value, "shape", ()) != ():
            raise ShapeError(
                "masked_fill: only a 0-dimensional value is supported, got one of shape "
                f"{format_shape(value.shape)}"
            )
        if isinstance(value, (bool, int, float, np.generic, np.ndarray)):
            return elementwise.where(mask, np.asarray(value).astype(self.dtype), self)
        if value.dtype != self.dtype:
            value = elementwise.cast(value, self.dtype)
        return elementwise.where(mask, value, self)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """self / other; `rounding_mode="floor"` rounds the quotient down (Python's //),
        "trunc" towards zero, both keeping integer dtypes (torch.div)."""
        return rounded_quotient(self, other, rounding_mode)

    divide = div

    def bmm(self, other: Any) -> Any:
        """Batches of matrices multiplied (torch.bmm: both of rank 3)."""
        if len(self.shape) != 3 or len(other.shape) != 3:
            raise ShapeError(
                f"bmm: expects two batches of matrices, got shapes {format_shape(self.shape)}, "
                f"{format_shape(other.shape)}"
            )
        return linalg.matmul(self, other)

    def mm(self, other: Any) -> Any:
        if len(self.shape) != 2 or len(other.shape) != 2:
            raise ShapeError(f"mm: expects two matrices, got shapes {self.shape}, {other.shape}")
        return linalg.matmul(self, other)

    # -- torch's composites (ops/composites.py, ops/scatters.py) -------------------------------

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        return composites.roll(self, shifts, dims)

    def lerp(self, end: Any, weight: Any) -> Any:
        return composites.lerp(self, end, weight)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        return composites.addcmul(self, tensor1, tensor2, value=value)

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        return composites.addcdiv(self, tensor1, tensor2, value=value)

    def trace(self) -> Any:
        """The sum of a matrix's diagonal (torch's; `gc.matrix_trace`)."""
        return composites.matrix_trace(self)

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
        return composites.diff(self, n, dim, prepend, append)

    def aminmax(self, *, dim: Any = None, keepdim: bool = False) -> Any:
        return composites.aminmax(self, dim=dim, keepdim=keepdim)

    def frac(self) -> Any:
        return composites.frac(self)

    def count_nonzero(self, dim: Any = None) -> Any:
        return composites.count_nonzero(self, dim)

    def unflatten(self, dim: int, sizes: Any) -> Any:
        return composites.unflatten(self, dim, sizes)

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple:
        return composites.tensor_split(self, indices_or_sections, dim)

    def is_floating_point(self) -> bool:
        return composites.is_floating_point(self)

    @property
    def mT(self) -> Any:  # noqa: N802 - torch's name
        """The last two dims swapped (of matrices, or batches of them)."""
        if len(self.shape) < 2:
            raise ShapeError(
                f"mT: needs a value of at least 2 dims, got shape {format_shape(self.shape)}"
            )
        return shape_ops.swapaxes(self, -2, -1)

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        """torch's scatter, out of place: for dim 1, out[i][index[i][j]] = src[i][j]."""
        return scatters.scatter(self, dim, index, src, value=value)

    def scatter_add(self, *args: Any, **kwargs: Any) -> Any:
        """torch's scatter_add(dim, index, src) when the first argument is a dim; graphc's
        own scatter_add(indices, shape, axis) (numpy's add.at into zeros) otherwise."""
        by_dim = args and isinstance(args[0], (int, np.integer)) and len(args) + len(kwargs) == 3
        if by_dim or {"dim", "index", "src"} & set(kwargs):
            return scatters.scatter_add_along(self, *args, **kwargs)
        return indexing.scatter_add(self, *args, **kwargs)

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        return scatters.index_add(self, dim, index, source, alpha=alpha)

    def index_fill(self, dim: int, index: Any, value: Any) -> Any:
        return scatters.index_fill(self, dim, index, value)

    def index_copy(self, dim: int, index: Any, source: Any) -> Any:
        return scatters.index_copy(self, dim, index, source)

    def type_as(self, other: Any) -> Any:
        return self.to(other.dtype)

    def is_complex(self) -> bool:
        return False  # graphc has no complex dtype

    def is_signed(self) -> bool:
        """Whether the dtype holds negative numbers (signed ints and floats), as torch."""
        return self.dtype.kind in "if"

    def positive(self) -> Any:
        return self

    def logit(self, eps: float | None = None) -> Any:
        return elementwise_composites.logit(self, eps)

    def dist(self, other: Any, p: Any = 2) -> Any:
        return composites.dist(self, other, p)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> Any:
        return order_statistics.kthvalue(self, k, dim, keepdim)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower middle value (nan if there is one); (values, indices) along dim."""
        return order_statistics.median(self, dim, keepdim)

    def nanmedian(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower middle value of those not nan; (values, indices) along dim."""
        return order_statistics.nanmedian(self, dim, keepdim)

    def msort(self) -> Any:
        return order_statistics.msort(self)

    def cummax(self, dim: int) -> Any:
        return order_statistics.cummax(self, dim)

    def cummin(self, dim: int) -> Any:
        return order_statistics.cummin(self, dim)

    def logcumsumexp(self, dim: int) -> Any:
        return composites.logcumsumexp(self, dim)

    def rot90(self, k: int = 1, dims: Any = (0, 1)) -> Any:
        return composites.rot90(self, k, dims)

    def unfold(self, dimension: int, size: int, step: int) -> Any:
        return composites.unfold(self, dimension, size, step)

    def matrix_power(self, n: int) -> Any:
        return composites.matrix_power(self, n)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
        return composites.diag_embed(self, offset, dim1, dim2)

    def diagflat(self, offset: int = 0) -> Any:
        return composites.diagflat(self, offset)

    def narrow_copy(self, dim: int, start: int, length: int) -> Any:
        return composites.narrow_copy(self, dim, start, length)

    def sum_to_size(self, *size: Any) -> Any:
        """Summed down to `size`, undoing broadcasting (torch's name for `sum_to`)."""
        return shape_ops.sum_to(self, sizes(size))

    # -- products added to self (ops/bias_products.py) ---------------------------------------

    def addmm(self, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return bias_products.addmm(self, mat1, mat2, beta=beta, alpha=alpha)

    def addmv(self, mat: Any, vec: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return bias_products.addmv(self, mat, vec, beta=beta, alpha=alpha)

    def addr(self, vec1: Any, vec2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return bias_products.addr(self, vec1, vec2, beta=beta, alpha=alpha)

    def baddbmm(self, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return bias_products.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def addbmm(self, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return bias_products.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    # -- new values of this one's dtype (an eager tensor makes them from data) ----------------

    def new_zeros(self, *size: Any) -> Any:
        return creation.zeros(sizes(size), dtype=self.dtype)

    def new_ones(self, *size: Any) -> Any:
        return creation.ones(sizes(size), dtype=self.dtype)

    def new_empty(self, *size: Any) -> Any:
        """Zeros (a graph value's memory is never left unset)."""
        return creation.zeros(sizes(size), dtype=self.dtype)

    def new_full(self, size: Any, fill_value: Any) -> Any:
        return creation.full(size, fill_value, dtype=self.dtype)

    def new_tensor(self, data: Any) -> Any:
        """A constant holding `data`, of this value's dtype."""
        return creation.full(np.shape(data), np.asarray(data, self.dtype))

    # -- dtypes and copies -------------------------------------------------------------------

    def to(self, *args: Any, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
        """`to(dtype)`, `to(other)` (other's dtype) or `to(device)`: "cpu" is where graphc
        computes; another device is an ArgumentError (graphc.ops.devices)."""
        for arg in args:
            if isinstance(arg, ValueMethods):  # to(other): other's dtype
                dtype = arg.dtype
            elif is_device(arg):
                check_device(arg, "to")
            else:
                dtype = arg
        check_device(device, "to")
        dtype = torch_dtype_name(dtype)
        if dtype is None or as_dtype(dtype) == self.dtype:
            return self
        return elementwise.cast(self, dtype)

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Any:
        """An ArgumentError: there is no CUDA device here (graphc.ops.devices)."""
        check_device("cuda" if device is None else f"cuda:{device}", "cuda")
        return self  # (not reached: only "cpu" passes)

    @property
    def is_cuda(self) -> bool:
        return False

    def astype(self, dtype: Any) -> Any:
        return elementwise.cast(self, dtype)

    cast = astype

    def clone(self) -> Any:
        """A copy that stays differentiable (gradients flow back to self)."""
        return elementwise.cast(self, self.dtype)

    def full_like(self, value: Any) -> Any:
        """A value like this one filled with `value`."""
        return elementwise.full_like(self, value)

    def cpu(self) -> Any:
        return self

    def contiguous(self) -> Any:
        """Self: a graph value has no memory layout (an eager tensor may copy)."""
        return self

    # last: in the class body these names would hide the builtins float, int, bool, type
    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        """torch's Tensor.type: without `dtype` this value's type name, "graphc.float32"
        (which `type` takes back: ``x.type(y.type())``); with one, `to(dtype)`: any dtype
        `to` takes, or torch's type names ("torch.DoubleTensor", torch.DoubleTensor)."""
        if dtype is None:
            return f"graphc.{self.dtype.name}"
        return self.to(type_name_dtype(dtype))

    def float(self) -> Any:
        return self.to(np.float32)

    def double(self) -> Any:
        return self.to(np.float64)

    def long(self) -> Any:
        return self.to(np.int64)

    def int(self) -> Any:
        return self.to(np.int32)

    def bool(self) -> Any:
        return self.to(np.bool_)

    def half(self) -> Any:
        return self.to(np.float16)

    def bfloat16(self) -> Any:
        return self.to("bf16")  # needs ml_dtypes (a named DTypeError without it)

    def short(self) -> Any:
        return self.to(np.int16)

    def char(self) -> Any:
        return self.to(np.int8)

    def byte(self) -> Any:
        return self.to(np.uint8)


def _generated(name: str, op: Callable[..., Any], arity: int) -> Callable[..., Any]:
    if arity == 1:

        def method(self: Any) -> Any:
            return op(self)

    else:

        def method(self: Any, other: Any) -> Any:
            return op(self, other)

    call = "x" if arity == 1 else "x, other"
    return _named(method, name, f"`{op.__name__}({call})`, by the op function gc.{op.__name__}.")


def _generated_reduction(name: str, op: Callable[..., Any]) -> Callable[..., Any]:
    if name in TAKES_DTYPE:

        def method(self: Any, dim: Any = None, keepdim: bool | None = None, *, dtype: Any = None,
                   axis: Any = None, keepdims: bool | None = None) -> Any:  # fmt: skip
            x = self if dtype is None else self.to(dtype)
            out = op(x, axis=pick_axis(axis, dim, name), keepdims=pick_keep(keepdim, keepdims))
            return out if dtype is None else out.to(dtype)  # int32 sums in int64, as numpy

    else:

        def method(self: Any, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
                   keepdims: bool | None = None) -> Any:  # fmt: skip
            return op(self, axis=pick_axis(axis, dim, name), keepdims=pick_keep(keepdim, keepdims))

    doc = f"`{op.__name__}(x, axis=dim, keepdims=keepdim)`, by the op function gc.{op.__name__}."
    if name in TAKES_DTYPE:
        doc += " `dtype=` casts x first, and is the result's dtype (torch's)."
    return _named(method, name, doc)


def _named(method: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
    method.__name__ = name
    method.__qualname__ = f"ValueMethods.{name}"
    method.__doc__ = doc
    return method


for _name, _op in UNARY.items():
    setattr(ValueMethods, _name, _generated(_name, _op, 1))
for _name, _op in BINARY.items():
    setattr(ValueMethods, _name, _generated(_name, _op, 2))
for _name, _op in REDUCE.items():
    setattr(ValueMethods, _name, _generated_reduction(_name, _op))
del _name, _op
