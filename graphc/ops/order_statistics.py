"""torch's order statistics, from a stable argsort or a running scan: `median`,
`nanmedian`, `kthvalue`, `msort`, `cummax` and `cummin`.

Each is a few op functions, so graph values and eager tensors have them alike (methods
of `ValueMethods`, and `gc.median`, ...), gradients going to the elements picked (but
median() and nanmedian() of all elements share theirs among ties, as torch's, and so do
torch's max() and min() of all elements: one custom node, `of_all`). Where
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


def _median_of_all(x: Any) -> Any:
    return _picked(S.reshape(x, (-1,)), 0, _median_rank).values


def _nanmedian_of_all(x: Any) -> Any:
    return _picked(S.reshape(x, (-1,)), 0, _nan_skipping_rank).values


def median(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower of the two middle values, or nan where there is a nan (the first one's
    index), as torch.median: of all elements, or (values, indices) along dim; the
    gradient goes to the element picked along dim, and of all elements in equal shares
    to those equal to the median (to the nans if it is nan), as torch's.

    >>> import numpy as np, graphc as gc
    >>> float(gc.median(np.array([3.0, 1.0, 2.0, 4.0])))
    2.0
    """
    return _middle(x, dim, keepdim, "median", _median_rank, _median_of_all)


def _median_rank(nans: Any, count: int) -> Any:
    """Where the median sits in sorted order (nan last): the first nan if there is one."""
    return E.where(E.gt(nans, 0), E.sub(count, nans), (count - 1) // 2)


def _nan_skipping_rank(nans: Any, count: int) -> Any:
    """The lower middle of the numbers (nan last), or the first nan when all are nan."""
    numbers = E.sub(count, nans)
    return E.where(E.gt(numbers, 0), rounding.floor_divide(E.sub(numbers, 1), 2), 0)


def _middle(x: Any, dim: Any, keepdim: bool, op: str, rank_of: Any, of_everything: Any) -> Any:
    """median or nanmedian: of all elements, or (values, indices) along dim."""
    if dim is None:
        flat = S.reshape(x, (-1,))
        if known_size(flat.shape[0], op, 0, tuple(flat.shape)) == 0:
            return E.mul(R.sum(x), np.nan)  # torch's median of nothing: nan
        return of_all(x, op, of_everything)
    shape = tuple(x.shape)
    axis = normalize_axis(dim, max(len(shape), 1), op)  # 0-d: dims 0 and -1
    line = x if shape else S.reshape(x, (1,))
    if known_size(line.shape[axis], op, axis, tuple(line.shape)) == 0:
        raise IndexRangeError(f"{op}: dim {dim} has no elements to take a median of")
    found = _picked(line, axis, rank_of)
    if keepdim and shape:
        return found
    return ValuesIndices(S.squeeze(found.values, axis), S.squeeze(found.indices, axis))


def of_all(x: Any, name: str, statistic: Any) -> Any:
    """torch's x.max(), x.min(), x.median() or x.nanmedian() of all elements of x (at
    least one): `statistic` (a function of x: a reduction, or `_picked` on x flattened)
    under the custom node `name`, with torch's gradient: shared evenly among the elements equal to the
    result, or among the nans when it is nan (along a dim, the element picked takes it
    all). The reduction's own rule shares it among the equal elements too (as jax's and
    torch's amax), but no element equals a nan, so a nan result spread nan over every
    element. A custom node whose forward is the statistic's ops: a backend inlines it,
    so its forward costs theirs alone; integers have no gradient, so they take the ops."""
    from graphc.ops.custom import record_custom, value_type  # custom imports the values

    x_type = value_type(x)
    if not is_float(x_type.dtype):
        return S.reshape(statistic(x), ())
    forward, backward = _of_all_bodies(name, statistic, x_type)
    return record_custom(name, [x], forward, backward, linear=True)


@functools.lru_cache(maxsize=64)
def _of_all_bodies(name: str, statistic: Any, x_type: TensorType) -> tuple[Any, Any]:
    """of_all's forward and backward bodies, built once per statistic and type."""
    from graphc.ops.custom import build_body

    spec = [("x", x_type)]
    forward = build_body(f"{name}_all", spec, lambda xs: [S.reshape(statistic(xs[0]), ())])

    def share(args: list[Any]) -> list[Any]:
        x, out, ct = args
        hit = E.where(selection.isnan(out), selection.isnan(x), E.eq(x, out))
        each = ct / R.sum(E.cast(hit, x_type.dtype))
        return [E.where(hit, each, np.zeros((), x_type.dtype))]

    scalar = TensorType((), x_type.dtype)
    backward = build_body(
        f"{name}_all_backward", spec + [("out", scalar), ("ct", scalar)], share, ["ct_x"]
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
    return _middle(x, dim, keepdim, "nanmedian", _nan_skipping_rank, _nanmedian_of_all)


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
