"""torch.nn.functional spellings: normalize, cosine_similarity, pairwise_distance, pdist.

Norms are taken so that a zero vector has a gradient of 0, as torch's norm (sqrt of a
sum of squares would give 0 * inf = nan there): the root is taken of 1 where the sum is
0, and that lane's value is set to 0 by a where.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import ShapeError
from graphc.ops import abs as absolute
from graphc.ops import broadcast_to, maximum, power, take, where
from graphc.ops import max as largest
from graphc.ops import sum as total
from graphc.ops.custom import stopped

__all__ = ["cosine_similarity", "normalize", "pairwise_distance", "pdist"]


def vector_norm(x: Any, p: float, axis: int, keepdims: bool = False) -> Any:
    """The `p` norm along `axis`, with torch's gradient of 0 at a zero vector."""
    if math.isinf(p):
        return largest(absolute(x), axis=axis, keepdims=keepdims)
    powered = x * x if p == 2 else power(absolute(x), p)
    summed = total(powered, axis=axis, keepdims=keepdims)
    positive = summed > 0
    root = power(where(positive, summed, 1.0), 1.0 / p)
    return where(positive, root, 0.0)


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Any:  # noqa: A002
    """input / max(its p norm along dim, eps), as torch's.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.normalize(ge.tensor([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    return input / maximum(vector_norm(input, p, dim, keepdims=True), eps)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """The cosine of the angle between x1 and x2 along dim (broadcast together): each
    divided by its norm, clamped below at eps, then their dot product, as torch's (whose
    clamp is made without recording it: the gradient is the unclamped norm's).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.cosine_similarity(ge.tensor([[1.0, 0.0]]), ge.tensor([[1.0, 1.0]])).tolist()
    [0.7071067690849304]
    """
    shape = _broadcast_shape(tuple(x1.shape), tuple(x2.shape))
    x1, x2 = broadcast_to(x1, shape), broadcast_to(x2, shape)
    units = []
    for x in (x1, x2):
        norm = vector_norm(x, 2.0, dim, keepdims=True)
        clamped = norm + stopped(maximum(norm, eps) - norm)
        units.append(x / clamped)
    return total(units[0] * units[1], axis=dim)


def pairwise_distance(
    x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Any:
    """The p norm of x1 - x2 + eps along the last dim, as torch's.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.pairwise_distance(ge.tensor([[0.0, 0.0]]), ge.tensor([[3.0, 4.0]]), eps=0.0).tolist()
    [5.0]
    """
    return vector_norm(x1 - x2 + eps, p, -1, keepdims=keepdim)


def _broadcast_shape(a: tuple, b: tuple) -> tuple:
    shape = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and 1 not in (da, db):
            raise ShapeError(f"cosine_similarity: shapes {a} and {b} do not broadcast")
        shape.append(db if da == 1 else da)
    return tuple(reversed(shape))


def pdist(input: Any, p: float = 2.0) -> Any:  # noqa: A002 - torch's names
    """The p-norm distance between every two rows i < j of an (N, M) input, in row-major
    order of the pairs: N (N - 1) / 2 values, as torch.nn.functional.pdist.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.pdist(ge.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
    [5.0, 1.0, 4.242640495300293]
    """
    shape = tuple(input.shape)
    if len(shape) != 2 or not isinstance(shape[0], int):
        raise ShapeError(f"pdist: expected a 2-D input (N, M) with a known N, got shape {shape}")
    first, second = np.triu_indices(shape[0], 1)
    return vector_norm(take(input, first, axis=0) - take(input, second, axis=0), p, -1)
