"""torch's order statistics, from a stable argsort or a running scan: `median`,
`nanmedian`, `kthvalue`, `msort`, `cummax` and `cummin`.

Each is a few op functions, so graph values and eager tensors have them alike (methods
of `ValueMethods`, and `gc.median`, ...), gradients going to the elements picked (but
median() and nanmedian() of all elements share theirs among ties, as torch's). Where
the element picked depends on the data (the count of nans of a median), the rank is
computed by ops too, so the graph does not. As in torch, nan sorts above every number:
a median of values holding a nan is nan (the first one's index), cummax and cummin keep
a nan once met; ties go to the first element (kthvalue) or, in a running extremum, to
the latest.

>>> import numpy as np, graphc as gc
>>> [v.tolist() for v in gc.cummax(np.array([1.0, 3.0, 2.0, 3.0]), 0)]
[[1.0, 3.0, 3.0, 3.0], [0, 1, 1, 3]]
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from graphc.ir.errors import IndexRangeError
from graphc.ir.types import TensorType, is_float, normalize_axis
from graphc.ops import along_axis, rounding, selection, sorting
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import logical as L
from graphc.ops import reduce as R
from graphc.ops import shape as S
from graphc.ops.composites import known_size
from graphc.ops.sorting import ValuesIndices

__all__ = ["cummax", "cummin", "kthvalue", "median", "msort", "nanmedian"]


def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """(values, indices) of the k-th smallest entries along dim (counting from 1), as
    torch.kthvalue; of ties, the one first in x."""
    shape = tuple(x.shape)
    axis = normalize_axis(dim, max(len(shape), 1), "kthvalue")
    size = known_size(shape[axis], "kthvalue", axis, shape) if shape else 1
    if not 1 <= k <= size:
        raise IndexRangeError(f"kthvalue: k = {k} is out of range for dim {axis} of size {size}")
    ordered = sorting.sort(x, axis) if shape else sorting.sort(S.reshape(x, (1,)), 0)
    pick = (slice(None),) * axis + (slice(k - 1, k) if keepdim and shape else k - 1,)
    return type(ordered)(
        I.slice_(ordered.values, index=pick), I.slice_(ordered.indices, index=pick)
    )


def median(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower of the two middle values, or nan where there is a nan (the first one's
    index), as torch.median: of all elements, or (values, indices) along dim; the
    gradient goes to the element picked along dim, and of all elements in equal shares
    to those equal to the median (to the nans if it is nan), as torch's.

    >>> import numpy as np, graphc as gc
    >>> float(gc.median(np.array([3.0, 1.0, 2.0, 4.0])))
    2.0
    """
    return _middle(x, dim, keepdim, "median", _median_rank)


def _median_rank(nans: Any, count: int) -> Any:
    """Where the median sits in sorted order (nan last): the first nan if there is one."""
    return E.where(E.gt(nans, 0), E.sub(count, nans), (count - 1) // 2)


def _nan_skipping_rank(nans: Any, count: int) -> Any:
    """The lower middle of the numbers (nan last), or the first nan when all are nan."""
    numbers = E.sub(count, nans)
    return E.where(E.gt(numbers, 0), rounding.floor_divide(E.sub(numbers, 1), 2), 0)


def _middle(x: Any, dim: Any, keepdim: bool, op: str, rank_of: Any) -> Any:
    """median or nanmedian: of all elements, or (values, indices) along dim."""
    if dim is None:
        flat = S.reshape(x, (-1,))
        if known_size(flat.shape[0], op, 0, tuple(flat.shape)) == 0:
            return E.mul(R.sum(x), np.nan)  # torch's median of nothing: nan
        return _shared_by_ties(flat, S.reshape(_picked(flat, 0, rank_of).values, ()))
    shape = tuple(x.shape)
    axis = normalize_axis(dim, max(len(shape), 1), op)  # 0-d: dims 0 and -1
    line = x if shape else S.reshape(x, (1,))
    if known_size(line.shape[axis], op, axis, tuple(line.shape)) == 0:
        raise IndexRangeError(f"{op}: dim {dim} has no elements to take a median of")
    found = _picked(line, axis, rank_of)
    if keepdim and shape:
        return found
    return ValuesIndices(S.squeeze(found.values, axis), S.squeeze(found.indices, axis))


def _shared_by_ties(flat: Any, value: Any) -> Any:
    """`value`, a median of all of `flat`, with its gradient in equal shares to the
    elements equal to it (to the nans where it is nan), as torch's median() and
    nanmedian() share it (along a dim, the element picked takes it all): the smallest of
    the ties (the largest if it is inf), whose gradient min and max share so, or for nan
    the mean of the nans. Ops alone (no detached copies), so eager tensors and graph
    values run the same ones; a tie of -0.0 and 0.0 gives either zero."""
    if not is_float(np.dtype(flat.dtype)):
        return value
    ties = E.eq(flat, value)  # never at a nan
    low = R.min(E.where(ties, flat, np.inf))
    high = R.max(E.where(ties, flat, -np.inf))
    nans = L.logical_and(selection.isnan(flat), selection.isnan(value))
    count = E.maximum(R.sum(E.cast(nans, np.int64)), 1)  # (1 where value is no nan)
    nan = E.div(R.sum(E.where(nans, flat, 0)), E.cast(count, flat.dtype))
    return E.where(selection.isnan(value), nan, E.where(E.eq(value, np.inf), high, low))


def extremum_of_all(x: Any, op: str) -> Any:
    """torch's x.max() or x.min() (`op`) of all elements: the op, with torch's gradient,
    shared evenly among the elements equal to the result, or among the nans when it is
    nan. The op's own rule shares it among the equal elements too (as jax's and torch's
    amax), but no element equals a nan, so a nan result spread nan over every element.
    A custom node whose forward is the op: a backend inlines it, so its forward costs
    the op's alone (median's ties, `_shared_by_ties`, are ops: its forward is a sort)."""
    from graphc.ops.custom import record_custom, value_type  # custom imports the values

    forward, backward = _extremum_bodies(op, value_type(x))
    return record_custom(op, [x], forward, backward, linear=True)


@functools.lru_cache(maxsize=64)
def _extremum_bodies(op: str, x_type: TensorType) -> tuple[Any, Any]:
    """extremum_of_all's forward and backward bodies, built once per type."""
    from graphc.ops.custom import build_body

    find = getattr(R, op)
    spec = [("x", x_type)]
    forward = build_body(f"{op}_all", spec, lambda xs: [find(xs[0])])

    def share(args: list[Any]) -> list[Any]:
        x, out, ct = args
        hit = E.where(selection.isnan(out), selection.isnan(x), E.eq(x, out))
        each = ct / R.sum(E.cast(hit, x_type.dtype))
        return [E.where(hit, each, np.zeros((), x_type.dtype))]

    scalar = TensorType((), x_type.dtype)
    backward = build_body(
        f"{op}_all_backward", spec + [("out", scalar), ("ct", scalar)], share, ["ct_x"]
    )
    return forward, backward


def _picked(x: Any, axis: int, rank_of: Any) -> ValuesIndices:
    """(values, indices) at the rank `rank_of` gives along axis, that dim kept (size 1):
    a stable argsort (nan last), the position at the rank, the element there."""
    nans = R.sum(E.cast(E.ne(x, x), np.int64), axis=axis, keepdims=True)  # nan != nan
    rank = rank_of(nans, int(x.shape[axis]))
    positions = along_axis.take_along_axis(sorting.argsort(x, axis), rank, axis=axis)
    return ValuesIndices(along_axis.take_along_axis(x, positions, axis=axis), positions)


def msort(x: Any) -> Any:
    """x sorted along its first dim (torch.msort)."""
    return sorting.sort(x, 0).values


def nanmedian(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower middle value of the elements that are not nan (nan where all are), as
    torch.nanmedian: of all elements, or (values, indices) along dim.

    >>> import numpy as np, graphc as gc
    >>> float(gc.nanmedian(np.array([1.0, np.nan, 3.0, 2.0])))
    2.0
    """
    return _middle(x, dim, keepdim, "nanmedian", _nan_skipping_rank)


def _cumulative(x: Any, dim: int, beats: Any, op: str) -> ValuesIndices:
    """(values, indices) of the running extremum along dim: a later element replaces the
    one held when it `beats` it or ties, and a nan beats everything."""
    shape = tuple(x.shape)
    axis = normalize_axis(dim, max(len(shape), 1), op)
    if not shape:
        return ValuesIndices(E.cast(x, x.dtype), E.cast(E.full_like(x, 0), np.int64))
    length = known_size(shape[axis], op, axis, shape)
    along = np.arange(length, dtype=np.int64).reshape((-1,) + (1,) * (len(shape) - axis - 1))
    indices = E.add(E.cast(E.full_like(x, 0), np.int64), along)

    def combine(held: tuple, later: tuple) -> tuple:
        kept = L.logical_or(selection.isnan(held[0]), beats(held[0], later[0]))
        take = L.logical_or(selection.isnan(later[0]), L.logical_not(kept))
        return E.where(take, later[0], held[0]), E.where(take, later[1], held[1])

    from graphc.ops.parallel_scan import associative_scan  # it imports symbolic, which us

    values, picked = associative_scan(combine, (x, indices), axis=axis)
    return ValuesIndices(values, picked)


def cummax(x: Any, dim: int) -> ValuesIndices:
    """(values, indices) of the largest element so far along dim (torch.cummax)."""
    return _cumulative(x, dim, E.gt, "cummax")


def cummin(x: Any, dim: int) -> ValuesIndices:
    """(values, indices) of the smallest element so far along dim (torch.cummin)."""
    return _cumulative(x, dim, E.lt, "cummin")
