"""Checking what a caller feeds a graph, and binding its symbolic dims.

Every engine (the interpreter `gc.run`, a called Graph, compiled executables and the
functions `gc.jit` compiles) checks feeds here, so a mistake gets the same error from
each. The dtype rule, stated once (`as_feed_array`):

- a value with a dtype of its own (a numpy array or scalar, an eager tensor) must have
  the placeholder's dtype; graphc never casts an array behind the caller's back;
- a Python value (a number, or a nested list of numbers) has none: numpy reads it as
  bool, int64 or float64, and it takes the placeholder's dtype when that is of the same
  kind or a wider one (bool < int < float: `[1, 2]` feeds a float32 placeholder) and
  every value fits (no float read into an int placeholder, no overflow); numbers are
  weak here as they are in `x * 2.0`. Anything else is refused as an array of the
  wrong dtype would be, with the cast that fixes it.

The layout rule: a fed array is read as its C-contiguous copy where it is laid out
otherwise (Fortran order, a strided or reversed view, a broadcast). numpy's sums and
BLAS round by memory layout, and the exact rewrites assume C-ordered placeholders
(x * 1 -> x hands x itself to a sum), so without this the levels gave other bits for a
Fortran-ordered feed (docs/trust.md, "Memory layout is part of this").

Names are checked as one set (`check_names`): a feed naming no placeholder and a
placeholder left unfed are reported together, with a "did you mean" for a misspelling.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import FeedError
from graphc.ir.graph import Graph, Node
from graphc.ir.types import TensorType, format_shape, is_bfloat16, is_float


def collect_feeds(graph: Graph, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Map positional and keyword arguments onto the graph's placeholders by name."""
    inputs = graph.inputs
    if len(args) > len(inputs):
        raise FeedError(
            f"graph '{graph.name}' takes {len(inputs)} input(s) "
            f"({', '.join(p.name for p in inputs)}), got {len(args)} positional"
        )
    feeds = {p.name: a for p, a in zip(inputs, args)}
    for name, value in kwargs.items():
        if name in feeds:
            raise FeedError(f"placeholder '{name}' was fed twice (by position and by name)")
        feeds[name] = value
    return feeds


_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2}  # bool < int < float


def _kind(dtype: np.dtype) -> str:
    return "f" if is_float(dtype) else dtype.kind  # bfloat16 is kind 'V' to numpy


def as_feed_array(placeholder: Node, value: Any, *, layout: bool = True) -> np.ndarray:
    """The array fed to `placeholder`, by the module's one dtype rule: an array must have
    its dtype; a Python number or list takes it when that loses nothing. C-contiguous
    (the layout rule): another layout is copied, unless `layout` is False (an example
    whose shape and dtype alone are read, for a plan: a broadcast view of a large chunk
    stays a view)."""
    expected = placeholder.type.dtype
    typed = isinstance(value, np.ndarray) or hasattr(value, "__array__")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists, objects numpy cannot read
        raise FeedError(
            f"placeholder '{placeholder.name}' expects {placeholder.type}, got a "
            f"{type(value).__name__} numpy cannot read as an array ({exc})"
        ) from None
    if array.dtype == expected:
        # (np.asarray with order="C" keeps a 0-d array 0-d, as ascontiguousarray does not)
        return array if array.flags.c_contiguous or not layout else np.asarray(array, order="C")
    module = "ml_dtypes" if is_bfloat16(expected) else "np"
    fix = (
        f"np.asarray(value, dtype={module}.{expected})"
        if not typed
        else f".astype({module}.{expected})"
    )
    if typed:
        raise FeedError(
            f"placeholder '{placeholder.name}' expects dtype {expected}, got an array of "
            f"dtype {array.dtype}; cast it with {fix}"
        )
    problem = _python_value_problem(array, expected)
    if problem is not None:
        raise FeedError(
            f"placeholder '{placeholder.name}' expects dtype {expected}, got a "
            f"{type(value).__name__} that numpy reads as {array.dtype}: {problem}; convert "
            f"it explicitly if that is what you mean ({fix})"
        )
    return array.astype(expected, order="C")


def _python_value_problem(array: np.ndarray, expected: np.dtype) -> str | None:
    """Why a Python value, read by numpy as `array`, cannot take dtype `expected`."""
    have, want = _KIND_ORDER.get(array.dtype.kind), _KIND_ORDER.get(_kind(expected))
    if have is None:
        return "those are not numbers of a dtype graphc feeds"
    if want is None or have > want:
        return f"{array.dtype} values do not convert to {expected} without loss"
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(expected)
    if is_float(expected):
        lost = np.isfinite(array) & ~np.isfinite(converted)
    else:
        lost = converted.astype(array.dtype) != array
    if np.any(lost):
        return f"{array[lost].flat[0].item()!r} does not fit dtype {expected}"
    return None


def check_names(graph: Graph, feeds: Mapping[str, Any]) -> None:
    """Every placeholder is fed, and nothing else is."""
    error = name_error(graph, graph.inputs, feeds)
    if error is not None:
        raise error


def name_error(graph: Graph, expected: Sequence[Node], fed: Iterable[str]) -> FeedError | None:
    """The error for feeds named `fed` that do not match the placeholders `expected`: the
    names no placeholder has and the placeholders left unfed, together, with a "did you
    mean" for a likely misspelling and a word on placeholders that tracing lifted from
    captured eager tensors; None when they match."""
    names = [p.name for p in expected]
    fed = list(fed)
    missing = [n for n in names if n not in fed]
    unknown = [n for n in fed if n not in names]
    if not missing and not unknown:
        return None
    problems = []
    if unknown:
        problems.append(f"has no placeholder(s) {unknown}")
    if missing:
        problems.append(f"is missing feed(s) for placeholder(s) {missing}")
    message = f"graph '{graph.name}' " + " and ".join(problems)
    message += f"; its placeholders are {[p.name for p in graph.inputs]}"
    for name in unknown:
        close = difflib.get_close_matches(name, missing or names, n=1)
        if close:
            message += f". Did you mean '{close[0]}' for '{name}'?"
    lifted = [p.name for p in expected if p.name in missing and p.meta.get("lifted")]
    if lifted:
        message += (
            f". {lifted} {'was' if len(lifted) == 1 else 'were'} lifted by gc.trace from "
            "eager tensor(s) the traced function captured (or read as module parameters), not "
            "from its arguments: feed "
            "their current values with gc.lifted_feeds(graph), as in "
            "graph(*inputs, **gc.lifted_feeds(graph)), or pass the tensors in as inputs"
        )
    return FeedError(message)


def check_feeds(graph: Graph, feeds: Mapping[str, Any]) -> tuple[list[np.ndarray], dict[str, int]]:
    """The feeds as arrays in placeholder order, and the sizes of the symbolic dims."""
    check_names(graph, feeds)
    bindings: dict[str, int] = {}
    arrays = []
    for p in graph.inputs:
        array = as_feed_array(p, feeds[p.name])
        bind_dims(p.name, p.type, array.shape, bindings)
        arrays.append(array)
    return arrays, bindings


def bind_dims(
    name: str, expected: TensorType, shape: tuple[int, ...], bindings: dict[str, int]
) -> None:
    """Check `shape` against `expected`, recording the size each symbol takes."""
    if len(shape) != expected.rank:
        raise FeedError(
            f"placeholder '{name}' expects shape {format_shape(expected.shape)} "
            f"(rank {expected.rank}), got {format_shape(shape)}"
        )
    for dim, size in zip(expected.shape, shape):
        if isinstance(dim, str):
            seen = bindings.setdefault(dim, size)
            if seen != size:
                raise FeedError(
                    f"placeholder '{name}': symbolic dim {dim} is {size} here but {seen} "
                    f"in an earlier feed (shape {format_shape(shape)})"
                )
        elif dim != size:
            raise FeedError(
                f"placeholder '{name}' expects shape {format_shape(expected.shape)}, "
                f"got {format_shape(shape)}"
            )
