"""Sorting: the `argsort` op, and `sort` and `topk` built on it.

One primitive with one result: argsort gives int64 indices (no gradient: it is
piecewise constant); the values are `take_along_axis(x, indices)`, so their gradient
scatters back through the indices, eagerly and symbolically alike.

Every sort is stable: equal elements keep their order, also in descending order
(torch.sort(stable=True)). NaN sorts as the largest value, as in PyTorch: last in
ascending order, first in descending order; -0.0 and 0.0 are equal.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from graphc.ir.errors import IndexRangeError
from graphc.ir.types import TensorType, is_symbol
from graphc.ops import indexing as I
from graphc.ops.along_axis import take_along_axis
from graphc.ops.defop import defop, into
from graphc.ops.spelling import count, one_axis, pick_axis, shape_of


class ValuesIndices(NamedTuple):
    """What sort and topk return, as PyTorch's torch.return_types.sort / topk."""

    values: Any
    indices: Any


def _argsort_canon(x: TensorType, axis: Any, descending: Any) -> dict:
    return {"axis": one_axis(axis, x.rank, "argsort"), "descending": bool(descending)}


def _argsort_kernel(
    x: np.ndarray, out: np.ndarray | None = None, axis: int | None = -1, descending: bool = False
) -> np.ndarray:
    if x.ndim == 0:
        return into(out, np.zeros((), np.int64))
    if not descending:
        order = np.argsort(x, axis=axis, kind="stable")
    else:
        # a stable ascending sort of x reversed, read backwards, is a stable descending
        # sort (negating instead would wrap INT_MIN, fail on bools and put NaN last)
        backwards = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = np.subtract(x.shape[axis] - 1, np.flip(backwards, axis))
    if out is None:
        return order.astype(np.int64, copy=False)
    np.copyto(out, order, casting="unsafe")
    return out


_argsort = defop(
    "argsort",
    infer=lambda x, axis, descending: x.with_dtype(np.int64),
    kernel=_argsort_kernel,
    attrs={"axis": -1, "descending": False},
    canonicalize=_argsort_canon,
    cost=lambda out, x, axis, descending: 10 * (x.size or 0),
    doc="The indices that sort x along axis (stable; descending on request), int64.",
)


def argsort(
    x: Any,
    axis: int | None = None,
    descending: bool = False,
    stable: bool = True,
    *,
    dim: int | None = None,
) -> Any:
    """The int64 indices that sort x along axis (the last by default), as torch.argsort
    and np.argsort(kind="stable"). Always stable, whatever `stable` says (a stable order is
    one of the orders an unstable sort may give). NaN sorts last (first if descending).

    >>> import numpy as np, graphc as gc
    >>> gc.argsort(np.array([3.0, 1.0, 3.0, 2.0]), descending=True).tolist()
    [0, 2, 3, 1]
    """
    return _argsort(x, axis=pick_axis(axis, dim, "argsort", default=-1), descending=descending)


def sort(
    x: Any,
    axis: int | None = None,
    descending: bool = False,
    stable: bool = True,
    *,
    dim: int | None = None,
) -> ValuesIndices:
    """(values, indices): x sorted along axis (the last by default) and where each value
    came from, as torch.sort (numpy's sort gives the values alone). Always stable.

    The values' gradient goes back to the places the values came from.

    >>> import numpy as np, graphc as gc
    >>> values, indices = gc.sort(np.array([[3.0, 1.0, 2.0]]))
    >>> values.tolist(), indices.tolist()
    ([[1.0, 2.0, 3.0]], [[1, 2, 0]])
    """
    axis = pick_axis(axis, dim, "sort", default=-1)
    indices = _argsort(x, axis=axis, descending=descending)
    return ValuesIndices(take_along_axis(x, indices, axis=axis), indices)


def topk(
    x: Any,
    k: int,
    axis: int | None = None,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002 - torch's name
    *,
    dim: int | None = None,
) -> ValuesIndices:
    """(values, indices) of the k largest (or smallest) entries along axis, as torch.topk.

    The first k of a stable sort: in order, largest first (smallest first with
    largest=False), ties in index order; `sorted=False` gives that order too. k may be
    0 and at most the axis' size (a symbolic size is checked when the graph runs).

    >>> import numpy as np, graphc as gc
    >>> values, indices = gc.topk(np.array([1.0, 5.0, 3.0, 5.0]), 2)
    >>> values.tolist(), indices.tolist()
    ([5.0, 5.0], [1, 3])
    """
    k = count(k, "topk", "k")
    shape = shape_of(x)
    axis = one_axis(pick_axis(axis, dim, "topk", default=-1), len(shape), "topk")
    size = 1 if axis is None else shape[axis]
    if not is_symbol(size) and k > size:
        raise IndexRangeError(f"topk: k={k} is out of range for a dim of size {size}")
    indices = _argsort(x, axis=axis, descending=largest)
    if not shape:
        if k != 1:
            raise IndexRangeError(f"topk: k={k} is out of range for a 0-d input (k must be 1)")
    elif k != size:
        indices = I.slice_(indices, index=(slice(None),) * axis + (slice(0, k),))
    return ValuesIndices(take_along_axis(x, indices, axis=axis), indices)
