"""Argument spellings the array ops share: numpy's `axis` beside PyTorch's `dim`.

graphc's op functions take numpy's names; `graphc.eager` re-exports them as its
torch-style functions, so the array ops also accept PyTorch's keyword (`dim=`,
`dims=`, `diagonal=`) where torch's spelling differs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import Dim, format_shape, is_symbol, normalize_axis
from graphc.ops import shape as S


def pick_axis(
    axis: Any, dim: Any, op: str, *, default: Any = None, names: tuple = ("axis", "dim")
) -> Any:
    """`axis` (numpy's spelling) or `dim` (PyTorch's), not both; `default` when neither
    is given. `names` are the two spellings, for the error."""
    if axis is not None and dim is not None:
        raise GraphcError(f"{op}: give either {names[1]} (PyTorch) or {names[0]} (numpy), not both")
    chosen = axis if dim is None else dim
    return default if chosen is None else chosen


def shape_of(x: Any) -> tuple:
    """The shape of a graph value, a tensor, an array or a nested list."""
    shape = getattr(x, "shape", None)
    return tuple(np.shape(x) if shape is None else shape)


def integer(value: Any, op: str, what: str) -> int:
    """`value` as a Python int (not a bool, not a float), or a ShapeError naming `op`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ShapeError(f"{op}: {what} must be an int, got {value!r}")
    return int(value)


def count(value: Any, op: str, what: str, *, low: int = 0) -> int:
    """`value` as an int >= low (a count or a size), or a ShapeError naming `op`."""
    value = integer(value, op, what)
    if value < low:
        raise ShapeError(f"{op}: {what} must be at least {low}, got {value}")
    return int(value)


def one_axis(axis: Any, rank: int, op: str) -> int | None:
    """normalize_axis, except that a 0-d input's one axis (0 or -1, as in PyTorch) is
    canonically None."""
    if rank:
        return normalize_axis(axis, rank, op)
    if axis is not None and integer(axis, op, "axis") not in (0, -1):
        raise IndexRangeError(f"{op}: axis {axis} is out of range for rank 0 (0 or -1)")
    return None


def merged_dim(dims: tuple, op: str) -> Dim:
    """The one dim that holds `dims` merged: their product, or their one symbol."""
    symbols = [d for d in dims if is_symbol(d)]
    known = math.prod(d for d in dims if not is_symbol(d))
    if not symbols:
        return known
    if len(symbols) == 1 and known == 1:
        return symbols[0]
    raise ShapeError(
        f"{op}: cannot merge dims {format_shape(dims)} into one (a dim is one int or one "
        "symbol, never a product such as B*3); give an axis, or concrete sizes"
    )


def flattened(x: Any, op: str) -> Any:
    """x as one dim (numpy's axis=None), or a ShapeError naming `op`."""
    shape = shape_of(x)
    return x if len(shape) == 1 else S.reshape(x, (merged_dim(shape, op),))
