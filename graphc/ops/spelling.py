"""Argument spellings the array ops share: numpy's `axis` beside PyTorch's `dim`.

graphc's op functions take numpy's names; `graphc.eager` re-exports them as its
torch-style functions, so the array ops also accept PyTorch's keyword (`dim=`,
`dims=`, `diagonal=`) where torch's spelling differs. Every op function whose attrs
are numpy's `axis`/`keepdims` (the reductions, softmax, concat, take, ...) takes
`dim=`/`keepdim=` as their aliases through `numpy_keywords` (called by defop's op
functions), and a plain function does through `@torch_keywords`; giving both
spellings of one argument is an error.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import Dim, format_shape, is_symbol, normalize_axis

# PyTorch's keyword -> numpy's, where they name the same argument
TORCH_KEYWORDS = {"dim": "axis", "keepdim": "keepdims"}


def pick_axis(
    axis: Any, dim: Any, op: str, *, default: Any = None, names: tuple = ("axis", "dim")
) -> Any:
    """`axis` (numpy's spelling) or `dim` (PyTorch's), not both; `default` when neither
    is given. `names` are the two spellings, for the error."""
    if axis is not None and dim is not None:
        raise GraphcError(
            f"{op}: give either {names[1]}= (PyTorch's spelling) or {names[0]}= (numpy's), not both"
        )
    chosen = axis if dim is None else dim
    return default if chosen is None else chosen


def numpy_keywords(
    op: str, takes: Collection[str], kwargs: dict[str, Any], positional: Collection[str] = ()
) -> dict[str, Any]:
    """`kwargs` with PyTorch's keywords (dim=, keepdim=) renamed to numpy's, for a
    function taking the parameters `takes` (those in `positional` were given by
    position); an error naming `op` when both spellings of one argument are given."""
    for torch_name, numpy_name in TORCH_KEYWORDS.items():
        if torch_name not in kwargs or numpy_name not in takes or torch_name in takes:
            continue
        if numpy_name in kwargs or numpy_name in positional:
            raise GraphcError(
                f"{op}: give either {torch_name}= (PyTorch's spelling) or {numpy_name}= "
                f"(numpy's), not both"
            )
        kwargs[numpy_name] = kwargs.pop(torch_name)
    return kwargs


def torch_keywords(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, whose parameters have numpy's names (axis, keepdims), also taking PyTorch's
    (dim=, keepdim=) as keywords: `gc.var(x, dim=0)`."""
    signature = inspect.signature(fn)
    takes = list(signature.parameters)
    aliases = [t for t, n in TORCH_KEYWORDS.items() if n in takes and t not in takes]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(t in kwargs for t in aliases):
            kwargs = numpy_keywords(fn.__name__, takes, kwargs, takes[: len(args)])
        return fn(*args, **kwargs)

    return with_torch_parameters(wrapper, signature, aliases)


def with_torch_parameters(
    fn: Callable[..., Any], signature: inspect.Signature, aliases: Collection[str]
) -> Callable[..., Any]:
    """`fn` with `signature` plus keyword-only parameters `aliases` (for help())."""
    params = list(signature.parameters.values())
    rest = [p for p in params if p.kind == inspect.Parameter.VAR_KEYWORD]
    extra = [inspect.Parameter(t, inspect.Parameter.KEYWORD_ONLY, default=None) for t in aliases]
    fn.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*(p for p in params if p not in rest), *extra, *rest]
    )
    return fn


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
    from graphc.ops.shape import reshape  # here: shape's op functions use numpy_keywords

    shape = shape_of(x)
    return x if len(shape) == 1 else reshape(x, (merged_dim(shape, op),))
