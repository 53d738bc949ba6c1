"""Reductions: sum, prod, mean, max, min, argmax, argmin, logsumexp, and the builders on
them: var, numpy's amax and amin, all and any (counts of truth values), and nansum,
nanmean, nanmax and nanmin (nan ignored)."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import (
    Shape,
    TensorType,
    as_dtype,
    as_shape,
    is_float,
    normalize_axes,
    normalize_axis,
)
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S
from graphc.ops.defop import defop, into, ufunc_dtype
from graphc.ops.dispatch import dtype_of
from graphc.ops.logical import logical_not
from graphc.ops.selection import isnan
from graphc.ops.spelling import torch_keywords


def scalar_axis(axis: Any, name: str) -> None:
    """The axis given for a 0-d input, canonically: None (its one element is reduced).

    As in PyTorch, a 0-d input has the one axis 0, also spelled -1; anything else (or
    that axis twice) is an error naming the op.
    """
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise ShapeError(f"{name}: an axis must be an int, got {item!r}")
        if item not in (0, -1):  # an IndexError too, as torch's "Dimension out of range"
            raise IndexRangeError(f"{name}: axis {item!r} is out of range for rank 0 (0 or -1)")
    if len(items) > 1:
        raise ShapeError(f"{name}: repeated axis in {axis!r} (a 0-d input has one axis)")
    return None


def canonical_axes(axis: Any, rank: int, name: str) -> tuple[int, ...] | None:
    """Sorted non-negative axes, or None for all of them (also for every axis listed)."""
    if rank == 0 and axis is not None:
        return scalar_axis(axis, name)
    axes = normalize_axes(axis, rank, name)
    if axes is not None and len(axes) == rank:
        axes = None  # reducing every axis is spelled one way only
    return axes


def _axes_canon(name: str) -> Any:
    def canon(x: TensorType, axis: Any, keepdims: bool) -> dict:
        return {"axis": canonical_axes(axis, x.rank, name), "keepdims": bool(keepdims)}

    return canon


def reduced_shape(shape: Shape, axes: tuple[int, ...] | None, keepdims: bool) -> Shape:
    axes = tuple(range(len(shape))) if axes is None else axes
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduced_dims(shape: Shape, axes: tuple[int, ...] | None) -> Shape:
    """The dims a reduction over `axes` (all by default) combines."""
    return tuple(shape) if axes is None else tuple(shape[a] for a in axes)


def _check_nonempty(name: str, shape: Shape, axes: tuple[int, ...] | None) -> None:
    """An extremum (or its index) over an empty axis does not exist (checked by the type
    rule, and by the kernel too: a symbolic dim may be fed as 0)."""
    if 0 in _reduced_dims(shape, axes):  # an IndexError in PyTorch: IndexRangeError is both
        raise IndexRangeError(f"{name}: cannot reduce an empty axis of shape {tuple(shape)}")


def _reduce_infer(dtype_of: Any) -> Any:
    def infer(x: TensorType, axis: tuple[int, ...] | None, keepdims: bool) -> TensorType:
        return TensorType(reduced_shape(x.shape, axis, keepdims), dtype_of(x.dtype))

    return infer


def _reduce_kernel(reducer: Any, ufunc: np.ufunc | None = None, nonempty: str = "") -> Any:
    def kernel(
        x: np.ndarray, out: np.ndarray | None = None, axis: Any = None, keepdims: bool = False
    ) -> np.ndarray:
        if nonempty and x.size == 0:
            _check_nonempty(nonempty, x.shape, axis)
        result = np.asarray(reducer(x, axis=axis, keepdims=keepdims, out=out))
        if out is None and result.ndim > 1 and not result.flags.c_contiguous:
            # numpy laid the result out in the input's order (a transposed view's) and
            # summed in an order following it; every planned value is C-contiguous and
            # its reduction writes into a C out=, which sums in another order: do the same
            result = np.asarray(
                reducer(x, axis=axis, keepdims=keepdims, out=np.empty(result.shape, result.dtype))
            )
        return result

    # np.sum is np.add.reduce behind a slow Python wrapper: the runtime calls the reduce
    kernel.reduce_ufunc = ufunc  # type: ignore[attr-defined]
    return kernel


def keep_reduced(ct: Any, x_shape: Shape, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
    """Reshape a reduction's cotangent so it broadcasts against the input again."""
    if keepdims:
        return ct
    return S.reshape(ct, reduced_shape(x_shape, axes, True))


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    return as_dtype(np.sum(np.zeros(1, dtype)).dtype)


def _mean_dtype(dtype: np.dtype) -> np.dtype:
    return as_dtype(np.mean(np.zeros(1, dtype)).dtype)


def _reduce_cost(out: TensorType, x: TensorType, **attrs: Any) -> int:
    return x.size or 0


# d sum(x) = broadcast(d out)
sum = defop(
    "sum",
    infer=_reduce_infer(_sum_dtype),
    kernel=_reduce_kernel(np.sum, np.add),
    attrs={"axis": None, "keepdims": False},
    canonicalize=_axes_canon("sum"),
    vjp=lambda ct, out, x, needs, axis, keepdims: (
        S.broadcast_to(keep_reduced(ct, x.shape, axis, keepdims), x.shape),
    ),
    cost=_reduce_cost,
    doc="Sum over axis (all by default). gc.sum(x, axis=1, keepdims=True)",
    props=("one_element_sum",),
)


def _prod_vjp(ct: Any, out: Any, x: Any, needs: tuple, axis: Any, keepdims: bool) -> tuple:
    # d prod(x) / d x_i = the product of the other elements of x_i's group. Not out / x_i:
    # that is nan at a zero, where the gradient is the product of the rest
    return (keep_reduced(ct, x.shape, axis, keepdims) * _others_product(x, axis),)


def _others_product(x: Any, axis: tuple[int, ...] | None) -> Any:
    """For each element of x, the product of the other elements the reduction over
    `axis` combines with it: the reduced axes moved last and flattened, the product
    before each position times the product after it, with no division, so it is right
    at zeros and differentiable again. Along a symbolic reduced dim, see _others_where."""
    rank = len(x.shape)
    axes = tuple(range(rank)) if axis is None else axis
    kept = [a for a in range(rank) if a not in axes]
    reduced = [x.shape[a] for a in axes]
    if not builtins.all(isinstance(d, int) for d in reduced):
        return _others_where(x, axis)
    order = (*kept, *axes)
    moved = S.transpose(x, order) if order != tuple(range(rank)) else x
    n = math.prod(reduced)
    flat = S.reshape(moved, (*moved.shape[: len(kept)], n))
    others = S.reshape(_before(flat, n) * _after(flat, n), moved.shape)
    inverse = tuple(order.index(a) for a in range(rank))
    return S.transpose(others, inverse) if order != tuple(range(rank)) else others


def _before(v: Any, n: int) -> Any:
    """The product of the elements before each position of the last axis (n long): v
    moved one place on, then an inclusive product scan by doubling (after the step of
    shift s every position holds the product of the 2s elements ending there)."""
    result = _shift(v, 1, n)
    shift = 1
    while shift < n:
        result = result * _shift(result, shift, n)
        shift *= 2
    return result


def _after(v: Any, n: int) -> Any:
    """The product of the elements after each position of the last axis."""
    backwards = (Ellipsis, slice(None, None, -1))
    return I.getitem(_before(I.getitem(v, backwards), n), backwards)


def _shift(v: Any, places: int, n: int) -> Any:
    """v moved `places` on along its last axis (n long), ones moved in at the start."""
    if places >= n:
        return E.ones_like(v)
    start = E.ones_like(I.getitem(v, (Ellipsis, slice(0, places))))
    return S.concat([start, I.getitem(v, (Ellipsis, slice(0, n - places)))], axis=-1)


def _others_where(x: Any, axis: tuple[int, ...] | None) -> Any:
    """The product of the others where the group's size is known only at run time:
    with no zero in the group it is prod / x_i; with one zero, the product of the rest
    at the zero and 0 elsewhere; with more, 0. Equal to _others_product's in exact
    arithmetic only: dividing rounds differently (so a graph with a symbolic reduced dim
    and eager mode, whose dims are concrete, differ in the last bits), and an infinite
    element, or a product of the nonzero elements that overflows or underflows, gives
    inf or nan where the scan gives a finite value. Its own derivative treats which
    elements are zero as fixed (wrong at zeros)."""
    zero = E.eq(x, 0)
    zeros = sum(zero, axis=axis, keepdims=True)
    nonzero = E.where(zero, E.ones_like(x), x)
    rest = prod(nonzero, axis=axis, keepdims=True)  # the product of the nonzero elements
    none_zero = E.where(E.eq(zeros, 0), rest / nonzero, E.zeros_like(x))
    return E.where(zero, E.where(E.eq(zeros, 1), rest, E.zeros_like(rest)), none_zero)


# d prod(x) = broadcast(d out) * the product of the others
prod = defop(
    "prod",
    infer=_reduce_infer(_sum_dtype),
    kernel=_reduce_kernel(np.prod, np.multiply),
    attrs={"axis": None, "keepdims": False},
    canonicalize=_axes_canon("prod"),
    vjp=_prod_vjp,
    cost=_reduce_cost,
    doc="Product over axis (all by default), as numpy's. gc.prod(x, axis=1, keepdims=True)",
)


def shape_size(x: Any, axis: tuple[int, ...] | None, dtype: Any) -> Any:
    """How many elements of x a reduction over `axis` combines, as a scalar of dtype.

    With symbolic dims the count is known only at run time: a `count` node over x's
    shape, which reads no data (so a backward graph need not keep x alive for it).
    """
    dims = _reduced_dims(x.shape, axis)
    if builtins.all(isinstance(d, int) for d in dims):
        return np.asarray(np.prod(dims, dtype=np.int64), dtype=dtype)
    return _count(shape=tuple(x.shape), axis=axis, dtype=dtype)


def _count_canon(shape: Any, axis: Any, dtype: Any) -> dict:
    dims = as_shape(shape, "count")
    return {
        "shape": dims,
        "axis": normalize_axes(axis, len(dims), "count"),
        "dtype": as_dtype(dtype),
    }


def _count_kernel(
    out: np.ndarray | None = None, shape: Shape = (), axis: Any = None, dtype: Any = "float32"
) -> np.ndarray:
    return into(out, np.asarray(np.prod(_reduced_dims(shape, axis), dtype=np.int64), dtype))


_count = defop(
    "count",
    inputs=(),
    infer=lambda shape, axis, dtype: TensorType((), dtype),
    kernel=_count_kernel,
    attrs={"shape": (), "axis": None, "dtype": "float32"},
    canonicalize=_count_canon,
    shape_attrs=("shape",),
    doc="The number of elements of an array of `shape` along axis (all by default).",
    props=("non_negative",),
)


def count(shape: Any, axis: Any = None, dtype: Any = "float32") -> Any:
    """The number of elements of an array of `shape` (symbolic dims too) along `axis`,
    as a scalar of dtype: a node reading no data, computed once the dims are bound."""
    return _count(shape=shape, axis=axis, dtype=dtype)


def _mean_vjp(ct: Any, out: Any, x: Any, needs: tuple, axis: Any, keepdims: bool) -> tuple:
    # d mean(x) = broadcast(d out) / n
    n = shape_size(x, axis, ct.dtype)
    return (S.broadcast_to(keep_reduced(ct, x.shape, axis, keepdims) / n, x.shape),)


def _mean_kernel(
    x: np.ndarray, out: np.ndarray | None = None, axis: Any = None, keepdims: bool = False
) -> np.ndarray:
    # np.mean is a sum and a division behind microseconds of Python: for float32/64 make
    # the same two calls, with the same intp count, so results agree bit for bit
    count = math.prod(_reduced_dims(x.shape, axis))
    if x.dtype.char not in "fd" or count == 0:  # other dtypes sum wider; empty warns
        # without out=: given a float16 out, numpy would sum in float16, not in float32
        return into(out, np.mean(x, axis=axis, keepdims=keepdims))
    if out is None:
        out = np.empty(reduced_shape(x.shape, axis, keepdims), x.dtype)
    np.add.reduce(x, axis=axis, keepdims=keepdims, out=out)
    return np.true_divide(out, np.intp(count), out=out, casting="unsafe")


mean = defop(
    "mean",
    infer=_reduce_infer(_mean_dtype),
    kernel=_mean_kernel,
    attrs={"axis": None, "keepdims": False},
    canonicalize=_axes_canon("mean"),
    vjp=_mean_vjp,
    cost=_reduce_cost,
    doc="Mean over axis (all by default). gc.mean(x, axis=0)",
    props=("one_element_sum",),
)


def _nonempty_infer(name: str) -> Any:
    """The type rule of max/min: like any reduction, but an empty axis has no extremum."""
    plain = _reduce_infer(lambda d: d)

    def infer(x: TensorType, axis: tuple[int, ...] | None, keepdims: bool) -> TensorType:
        _check_nonempty(name, x.shape, axis)
        return plain(x, axis, keepdims)

    return infer


def _extremum_vjp(ct: Any, out: Any, x: Any, needs: tuple, axis: Any, keepdims: bool) -> tuple:
    # the gradient flows to the elements equal to the extremum, shared among ties
    hit = E.cast(E.eq(x, keep_reduced(out, x.shape, axis, keepdims)), ct.dtype)
    share = keep_reduced(ct, x.shape, axis, keepdims) / sum(hit, axis=axis, keepdims=True)
    return (hit * share,)


max = defop(
    "max",
    infer=_nonempty_infer("max"),
    kernel=_reduce_kernel(np.max, np.maximum, nonempty="max"),
    attrs={"axis": None, "keepdims": False},
    canonicalize=_axes_canon("max"),
    vjp=_extremum_vjp,
    cost=_reduce_cost,
    doc="Largest element over axis. gc.max(x, axis=-1)",
    props=("one_element_identity",),
)
min = defop(
    "min",
    infer=_nonempty_infer("min"),
    kernel=_reduce_kernel(np.min, np.minimum, nonempty="min"),
    attrs={"axis": None, "keepdims": False},
    canonicalize=_axes_canon("min"),
    vjp=_extremum_vjp,
    cost=_reduce_cost,
    doc="Smallest element over axis. gc.min(x, axis=-1)",
    props=("one_element_identity",),
)


def _index_op(name: str, find: Any, doc: str) -> Any:
    """argmax or argmin: the index numpy's `find` gives, along one axis or overall."""

    def canon(x: TensorType, axis: Any, keepdims: bool) -> dict:
        if axis is not None and not isinstance(axis, (int, np.integer)):
            raise GraphcError(f"{name}: axis must be one int or None, got {axis!r}")
        if x.rank == 0 and axis is not None:
            axis = scalar_axis(axis, name)
        return {
            "axis": None if axis is None else normalize_axis(int(axis), x.rank, name),
            "keepdims": bool(keepdims),
        }

    def infer(x: TensorType, axis: int | None, keepdims: bool) -> TensorType:
        axes = None if axis is None else (axis,)
        _check_nonempty(name, x.shape, axes)
        return TensorType(reduced_shape(x.shape, axes, keepdims), np.int64)

    def kernel(
        x: np.ndarray,
        out: np.ndarray | None = None,
        axis: int | None = None,
        keepdims: bool = False,
    ) -> np.ndarray:
        if x.size == 0:
            _check_nonempty(name, x.shape, None if axis is None else (axis,))
        return into(out, find(x, axis=axis, keepdims=keepdims))

    return defop(
        name,
        infer=infer,
        kernel=kernel,
        attrs={"axis": None, "keepdims": False},
        canonicalize=canon,
        cost=_reduce_cost,
        doc=doc,
    )


argmax = _index_op(
    "argmax", np.argmax, "Index of the largest element along axis (of the flattened x by default)."
)
# its own op, not argmax(-x): negating wraps INT_MIN and fails on bools
argmin = _index_op(
    "argmin", np.argmin, "Index of the smallest element along axis (of the flattened x by default)."
)


def _logsumexp_kernel(
    x: np.ndarray, out: np.ndarray | None = None, axis: Any = None, keepdims: bool = False
) -> np.ndarray:
    # in the float result dtype: x - max(x) on integers would wrap
    x = x.astype(ufunc_dtype(np.exp, "logsumexp", x.dtype), copy=False)
    if 0 in _reduced_dims(x.shape, axis):  # the log of an empty sum: -inf, as torch
        return into(out, np.full(reduced_shape(x.shape, axis, keepdims), -np.inf, x.dtype))
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all -inf rows stay -inf, not nan
    total = np.sum(np.exp(x - peak), axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):  # log(0) = -inf is the right answer for -inf rows
        result = np.log(total) + peak
    if not keepdims:
        result = np.squeeze(result, axis=axis)
    return into(out, result)


def _logsumexp_vjp(ct: Any, out: Any, x: Any, needs: tuple, axis: Any, keepdims: bool) -> tuple:
    # d logsumexp(x) = softmax(x) d out
    kept_out = keep_reduced(out, x.shape, axis, keepdims)
    # an all -inf row has out = -inf and exp(x - out) = nan; its gradient is 0
    kept_out = E.where(E.eq(kept_out, -np.inf), 0, kept_out)
    return (keep_reduced(ct, x.shape, axis, keepdims) * E.exp(x - kept_out),)


logsumexp = defop(
    "logsumexp",
    infer=_reduce_infer(lambda d: ufunc_dtype(np.exp, "logsumexp", d)),
    kernel=_logsumexp_kernel,
    attrs={"axis": None, "keepdims": False},
    canonicalize=_axes_canon("logsumexp"),
    vjp=_logsumexp_vjp,
    cost=lambda out, x, **attrs: 3 * (x.size or 0),
    doc="log(sum(exp(x))) over axis, computed stably. gc.logsumexp(logits, axis=-1)",
)


@torch_keywords
def amax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The largest element over axis (all by default): numpy's other name for max, and
    torch.amax's (the values alone; ties share the gradient, as in torch and JAX).

    >>> import numpy as np, graphc as gc
    >>> gc.amax(np.array([[1, 5], [7, 2]]), axis=1).tolist()
    [5, 7]
    """
    return max(x, axis=axis, keepdims=keepdims)


@torch_keywords
def amin(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The smallest element over axis (all by default): numpy's other name for min, and
    torch.amin's.

    >>> import numpy as np, graphc as gc
    >>> gc.amin(np.array([[1, 5], [7, 2]]), axis=0).tolist()
    [1, 2]
    """
    return min(x, axis=axis, keepdims=keepdims)


def _truths(x: Any) -> Any:
    return E.cast(x, np.bool_)  # nonzero (nan too) is true, as numpy's bool()


@torch_keywords
def all(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001 - numpy's name
    """True where every element over axis (all by default) is nonzero (nan is), as np.all
    and torch.all; True over no elements. A count of the zeros, not a min: a min of no
    elements has no value.

    >>> import numpy as np, graphc as gc
    >>> gc.all(np.array([[1.0, np.nan], [0.0, 2.0]]), axis=1).tolist()
    [True, False]
    """
    zeros = sum(logical_not(_truths(x)), axis=axis, keepdims=keepdims)
    return E.eq(zeros, 0)


@torch_keywords
def any(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001 - numpy's name
    """True where some element over axis (all by default) is nonzero, as np.any and
    torch.any; False over no elements.

    >>> import numpy as np, graphc as gc
    >>> gc.any(np.array([[0, 0], [0, 3]]), axis=1).tolist()
    [False, True]
    """
    return E.gt(sum(_truths(x), axis=axis, keepdims=keepdims), 0)


@torch_keywords
def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0, *,
        correction: int | None = None) -> Any:  # fmt: skip
    """Variance over axis (numpy's ddof: 0 by default; PyTorch's unbiased is ddof=1;
    `correction` is the Array API's, numpy 2's and PyTorch's name for ddof)."""
    if correction is not None:
        ddof = correction
    centered = x - mean(x, axis=axis, keepdims=True)
    result = mean(centered * centered, axis=axis, keepdims=keepdims)
    if ddof:
        n = shape_size(x, canonical_axes(axis, len(x.shape), "var"), result.dtype)
        result = result * (n / (n - ddof))
    return result


# -- ignoring nan -------------------------------------------------------------------------------


def _nan_as_zero(x: Any) -> Any:
    """x with its nans 0 (the gradient there is then 0, as torch's); other dtypes have none."""
    if not is_float(dtype_of(x)):
        return x
    return E.where(isnan(x), E.zeros_like(x), x)


@torch_keywords
def nansum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Sum over axis (all by default) counting nan as 0, as torch.nansum and np.nansum:
    the gradient is 1 where x is a number and 0 at its nans. Integers and bools sum as
    `sum` does (in int64).

    >>> import numpy as np, graphc as gc
    >>> gc.nansum(np.array([[1.0, np.nan], [3.0, 4.0]]), dim=1).tolist()
    [1.0, 7.0]
    """
    return sum(_nan_as_zero(x), axis=axis, keepdims=keepdims)


@torch_keywords
def nanmean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Mean over axis (all by default) of the elements that are not nan, as torch.nanmean
    and np.nanmean: nan where all are (or none are there; numpy's 0 / 0 warning). As
    torch, of floating-point inputs only.

    >>> import numpy as np, graphc as gc
    >>> gc.nanmean(np.array([[1.0, np.nan], [3.0, 4.0]]), dim=1).tolist()
    [1.0, 3.5]
    """
    dtype = dtype_of(x)
    if not is_float(dtype):
        raise DTypeError(
            f"nanmean: expects a floating-point input, got {dtype} (as torch.nanmean; "
            "cast it first, or use mean)"
        )
    numbers = E.cast(logical_not(isnan(x)), dtype)
    count = sum(numbers, axis=axis, keepdims=keepdims)
    # nan where no element is a number, as torch; the gradient at nans is 0 (where's),
    # also in such a group, where torch's mask times ct / 0 gives nan
    return sum(_nan_as_zero(x), axis=axis, keepdims=keepdims) / count


def _nan_extremum(x: Any, axis: Any, keepdims: bool, largest: bool) -> Any:
    """nanmax (largest) or nanmin: the extremum of the numbers, nan where a group holds
    none (numpy warns, JAX and graphc do not)."""
    if not is_float(dtype_of(x)):
        return (max if largest else min)(x, axis=axis, keepdims=keepdims)
    nan = isnan(x)
    # a nan never wins: the infinity on the other side stands in for it
    filled = E.where(nan, -np.inf if largest else np.inf, x)
    best = (max if largest else min)(filled, axis=axis, keepdims=keepdims)
    numbers = sum(logical_not(nan), axis=axis, keepdims=keepdims)
    return E.where(E.eq(numbers, 0), np.nan, best)


@torch_keywords
def nanmax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The largest element over axis (all by default) ignoring nans, as np.nanmax: nan
    where every element of a group is. The gradient goes to the largest numbers (ties
    share it, as in JAX), and is 0 at the nans. An empty group is an error, as max's.

    >>> import numpy as np, graphc as gc
    >>> gc.nanmax(np.array([[1.0, np.nan], [np.nan, np.nan]]), axis=1).tolist()
    [1.0, nan]
    """
    return _nan_extremum(x, axis, keepdims, largest=True)


@torch_keywords
def nanmin(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The smallest element over axis (all by default) ignoring nans, as np.nanmin: nan
    where every element of a group is.

    >>> import numpy as np, graphc as gc
    >>> gc.nanmin(np.array([3.0, np.nan, -1.0])).item()
    -1.0
    """
    return _nan_extremum(x, axis, keepdims, largest=False)
