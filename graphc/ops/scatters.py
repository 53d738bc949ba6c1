"""torch's writes along a dim, out of place: `scatter`, `scatter_add(dim, index, src)`,
`index_add`, `index_copy` and `index_fill`, as op functions over graph values, eager
tensors and arrays alike.

A write is a `where` of what is written over x's old values, the written positions
found by scatter-adding ones: so the index may be a graph value (fed when the graph
runs), and the gradient reaches x outside the positions written and the source inside
them. Where an index names one position twice, `scatter` and `index_copy` write the
mean of the values sent there (torch leaves unspecified which one wins; graphc's
`x.at[i].set(v)` writes the mean too); `scatter_add` and `index_add` add them all up.
Indices may be negative, counting from the end as in numpy (torch refuses them, except
in index_fill); one out of range is an IndexRangeError.

>>> import numpy as np, graphc as gc
>>> gc.index_copy(np.zeros((2, 3)), 1, np.array([2, 0]), np.ones((2, 2))).tolist()
[[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, IndexRangeError, ShapeError
from graphc.ir.types import format_shape, is_float, is_symbol, normalize_axis
from graphc.ops import along_axis, rounding
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S
from graphc.ops.dispatch import dtype_of, is_python_scalar

__all__ = ["index_add", "index_copy", "index_fill", "scatter"]


def _shape(value: Any) -> tuple:
    return tuple(value.shape) if hasattr(value, "shape") else np.shape(value)


def _check_index(op: str, index: Any, size: Any, axis: int) -> None:
    """An integer index whose entries (when known now) are in [-size, size)."""
    dtype = dtype_of(index)
    if dtype.kind not in "iu":
        raise DTypeError(f"{op}: index must be of an integer dtype, got {dtype}")
    from graphc.ops.symbolic import Symbol  # symbolic imports methods, which imports us

    if isinstance(index, Symbol) or is_symbol(size):
        return  # its values are known when the graph runs: the kernel checks them then
    values = np.asarray(index)
    bad = values[(values < -size) | (values >= size)]
    if bad.size:
        raise IndexRangeError(
            f"{op}: index {bad.flat[0]} in `index` is out of range for dim {axis} of size {size}"
        )


def _as_dtype(value: Any, dtype: np.dtype) -> Any:
    """A source cast to x's dtype (a number as torch casts a fill value: 2.7 into ints 2)."""
    if not hasattr(value, "shape") or isinstance(value, np.ndarray):
        return np.asarray(value).astype(dtype)
    return value if dtype_of(value) == dtype else E.cast(value, dtype)


def _mean(total: Any, count: Any) -> Any:
    """What each written position gets: the values sent there over their count (1 where
    the index is unique, so the value itself, bit for bit)."""
    dtype = dtype_of(total)
    if dtype == np.bool_:
        return total  # bools added up are their or
    times = E.cast(E.maximum(count, 1), dtype)
    return E.div(total, times) if is_float(dtype) else rounding.floor_divide(total, times)


def _zero_d(x: Any, fn: Any, *values: Any) -> Any:
    """torch lets these write into a 0-d x along dim 0 (or -1): as into one element."""
    one = [S.reshape(v, (1,)) if _shape(v) == () else v for v in values]
    return S.reshape(fn(S.reshape(x, (1,)), 0, *one), ())


# -- scatter, scatter_add: elementwise, index of x's rank -----------------------------------


def _window(op: str, x: Any, index: Any, src: Any, axis: int) -> Any:
    """src read over index's shape (torch reads the window from 0 of a larger src)."""
    index_shape, src_shape = _shape(index), _shape(src)
    if len(index_shape) != len(x.shape):
        raise ShapeError(
            f"{op}: index must have the rank of self ({len(x.shape)}), got shape "
            f"{format_shape(index_shape)}"
        )
    if src_shape == index_shape:
        return src
    if len(src_shape) != len(index_shape) or any(
        is_symbol(s) or is_symbol(i) or s < i for s, i in zip(src_shape, index_shape)
    ):
        raise ShapeError(
            f"{op}: src of shape {format_shape(src_shape)} must be at least as large as index "
            f"{format_shape(index_shape)} in every dim"
        )
    return I.slice_(src, index=tuple(slice(0, n) for n in index_shape))


def scatter(x: Any, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
    """x with src[p] (or the number `value`) written where position p of index points:
    for dim 1, out[i][index[i][j]] = src[i][j] (torch.scatter, out of place).

    >>> import numpy as np, graphc as gc
    >>> gc.scatter(np.zeros((2, 3)), 1, np.array([[2], [0]]), value=7.0).tolist()
    [[0.0, 0.0, 7.0], [7.0, 0.0, 0.0]]
    """
    if (src is None) == (value is None):
        raise ShapeError("scatter: give either src (a value or a number) or value=, not both")
    if src is None or is_python_scalar(src):
        src, value = None, value if src is None else src
    if not x.shape:
        if src is None:
            return _zero_d(x, lambda x1, d, i: scatter(x1, d, i, value=value), index)
        return _zero_d(x, scatter, index, src)
    axis = normalize_axis(dim, len(x.shape), "scatter")
    _check_index("scatter", index, x.shape[axis], axis)
    window = _window("scatter", x, index, index if src is None else src, axis)
    count = along_axis.scatter_add_along_axis(E.full_like(index, 1), index, x.shape, axis)
    written = E.gt(count, 0)
    if src is None:
        return E.where(written, _as_dtype(value, dtype_of(x)), x)
    total = along_axis.scatter_add_along_axis(_as_dtype(window, dtype_of(x)), index, x.shape, axis)
    return E.where(written, _mean(total, count), x)


def scatter_add_along(x: Any, dim: int, index: Any, src: Any) -> Any:
    """x plus each src[p] added where position p of index points, repeats adding up:
    torch's Tensor.scatter_add(dim, index, src), out of place (graphc's `gc.scatter_add`
    is numpy's: take's adjoint)."""
    if not x.shape:
        return _zero_d(x, scatter_add_along, index, src)
    axis = normalize_axis(dim, len(x.shape), "scatter_add")
    _check_index("scatter_add", index, x.shape[axis], axis)
    window = _as_dtype(_window("scatter_add", x, index, src, axis), dtype_of(x))
    return E.add(x, along_axis.scatter_add_along_axis(window, index, x.shape, axis))


# -- index_add, index_copy, index_fill: whole slices along dim, a 1-d index -----------------


def _slices(op: str, x: Any, dim: int, index: Any) -> tuple[int, Any, Any]:
    """dim normalized, the index as 1-d, and how many times each slice along dim is
    written (shaped to broadcast against x)."""
    axis = normalize_axis(dim, len(x.shape), op)
    if len(_shape(index)) > 1:
        raise ShapeError(
            f"{op}: index must be 0-d or 1-d (a vector of positions along dim {axis}), "
            f"got shape {format_shape(_shape(index))}"
        )
    _check_index(op, index, x.shape[axis], axis)
    index = S.reshape(index, (-1,)) if hasattr(index, "shape") else np.reshape(index, -1)
    count = I.scatter_add(E.full_like(index, 1), index, shape=(x.shape[axis],), axis=0)
    return axis, index, S.reshape(count, (-1,) + (1,) * (len(x.shape) - axis - 1))


def _check_source(op: str, x: Any, axis: int, index: Any, source: Any) -> None:
    expected = (*x.shape[:axis], *_shape(index), *x.shape[axis + 1 :])
    if _shape(source) != expected:
        raise ShapeError(
            f"{op}: source must have shape {format_shape(expected)} (self's, with dim {axis} "
            f"the index's length), got {format_shape(_shape(source))}"
        )


def index_add(x: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
    """x with alpha * source[i] added into its index[i]-th slice along dim, repeats
    adding up (torch.index_add, out of place).

    >>> import numpy as np, graphc as gc
    >>> gc.index_add(np.zeros(3), 0, np.array([0, 0, 2]), np.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    if not x.shape:
        return _zero_d(x, lambda x1, d, i, s: index_add(x1, d, i, s, alpha=alpha), index, source)
    axis, flat, _ = _slices("index_add", x, dim, index)
    _check_source("index_add", x, axis, flat, source)
    scaled = source if alpha == 1 else E.mul(source, alpha)
    added = I.scatter_add(_as_dtype(scaled, dtype_of(x)), flat, shape=x.shape, axis=axis)
    return E.add(x, added)


def index_copy(x: Any, dim: int, index: Any, source: Any) -> Any:
    """x with its index[i]-th slice along dim replaced by source[i] (torch.index_copy,
    out of place)."""
    if not x.shape:
        return _zero_d(x, index_copy, index, source)
    axis, flat, count = _slices("index_copy", x, dim, index)
    _check_source("index_copy", x, axis, flat, source)
    total = I.scatter_add(_as_dtype(source, dtype_of(x)), flat, shape=x.shape, axis=axis)
    return E.where(E.gt(count, 0), _mean(total, count), x)


def index_fill(x: Any, dim: int, index: Any, value: Any) -> Any:
    """x with its index[i]-th slices along dim filled with `value`, a number or a 0-d
    value (which then gets the gradient of the filled elements), as torch.index_fill."""
    if _shape(value) != ():
        raise ShapeError(
            f"index_fill: value must be a number or a 0-d value, got shape "
            f"{format_shape(_shape(value))}"
        )
    if not x.shape:
        return _zero_d(x, lambda x1, d, i: index_fill(x1, d, i, value), index)
    _, _, count = _slices("index_fill", x, dim, index)
    return E.where(E.gt(count, 0), _as_dtype(value, dtype_of(x)), x)
