"""torch functions whose results are counts or positions read from the values: `unique`,
`bincount`, `searchsorted`. numpy computes them; like torch's they have no gradient.

>>> import graphc.eager as ge
>>> ge.tensor([3, 1, 3]).unique(return_counts=True)
(tensor([1, 3]), tensor([1, 2]))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.types import normalize_axis


def _tensor(array: np.ndarray) -> Any:
    from graphc.eager.tensor import make  # tensor imports this module

    return make(np.ascontiguousarray(array))


def _values(x: Any) -> np.ndarray:
    return np.asarray(getattr(x, "_data", x))


def unique(x: Any, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:  # fmt: skip
    """The distinct values (sorted, also for sorted=False as torch's CPU kernel), or the
    distinct slices along dim; with the index of each element's value and the counts."""
    data = _values(x)
    axis = None if dim is None else normalize_axis(dim, data.ndim, "unique")
    values, inverse, counts = np.unique(data, return_inverse=True, return_counts=True, axis=axis)
    out = [_tensor(values)]
    if return_inverse:  # of x's shape (of its dim's length along dim)
        shape = data.shape if axis is None else (data.shape[axis],)
        out.append(_tensor(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(_tensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    """How many times each of 0, 1, ... occurs in the 1-d non-negative integers x (or the
    sum of their weights)."""
    data = _values(x)
    if data.ndim != 1 or data.dtype.kind not in "iu" or (data.size and data.min() < 0):
        raise ShapeError(
            f"bincount: takes 1-d non-negative integers, got shape {data.shape} of {data.dtype}"
        )
    if weights is None:
        return _tensor(np.bincount(data, minlength=minlength).astype(np.int64))
    given = _values(weights)
    counted = np.bincount(data, weights=given, minlength=minlength)
    return _tensor(counted.astype(given.dtype if given.dtype.kind == "f" else np.float64))


def searchsorted(sorted_sequence: Any, values: Any, *, right: bool = False,
                 side: str | None = None) -> Any:  # fmt: skip
    """Where each of values would go in the sorted last dim of sorted_sequence (before
    equal entries, or after with right=True / side="right"), as int64."""
    edges, wanted = _values(sorted_sequence), _values(values)
    if edges.dtype.kind not in "iuf" or wanted.dtype.kind not in "iufb":
        raise DTypeError(f"searchsorted: numbers only, got {edges.dtype} and {wanted.dtype}")
    where = side or ("right" if right else "left")
    if edges.ndim <= 1:
        return _tensor(np.searchsorted(edges, wanted, side=where).astype(np.int64))
    if edges.shape[:-1] != wanted.shape[:-1]:
        raise ShapeError(
            f"searchsorted: the leading dims of sorted_sequence {edges.shape} and values "
            f"{wanted.shape} must match"
        )
    rows = [
        np.searchsorted(e, w, side=where)
        for e, w in zip(edges.reshape(-1, edges.shape[-1]), wanted.reshape(-1, wanted.shape[-1]))
    ]
    return _tensor(np.array(rows, np.int64).reshape(wanted.shape))


class CountingMethods:
    """`unique` and `bincount` as Tensor methods (mixed into `Tensor`)."""

    def unique(self, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
               return_counts: bool = False, dim: int | None = None) -> Any:  # fmt: skip
        return unique(self, sorted, return_inverse, return_counts, dim)

    def bincount(self, weights: Any = None, minlength: int = 0) -> Any:
        return bincount(self, weights, minlength)
