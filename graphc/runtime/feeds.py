"""Checking what a caller feeds a graph, and binding its symbolic dims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import FeedError
from graphc.ir.graph import Graph, Node
from graphc.ir.types import TensorType, format_shape


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


def as_feed_array(placeholder: Node, value: Any) -> np.ndarray:
    """The array fed to `placeholder`; lists and scalars take its dtype, arrays must match."""
    expected = placeholder.type
    if isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        array = np.asarray(value)
        if array.dtype != expected.dtype:
            raise FeedError(
                f"placeholder '{placeholder.name}' expects dtype {expected.dtype}, "
                f"got an array of dtype {array.dtype} (cast it with .astype)"
            )
        return array
    try:
        return np.asarray(value, dtype=expected.dtype)
    except (TypeError, ValueError) as exc:
        raise FeedError(
            f"placeholder '{placeholder.name}' expects {expected}, got {type(value).__name__}"
        ) from exc


def check_names(graph: Graph, feeds: Mapping[str, Any]) -> None:
    """Every placeholder is fed, and nothing else is."""
    names = [p.name for p in graph.inputs]
    missing = [n for n in names if n not in feeds]
    if missing:
        raise FeedError(f"graph '{graph.name}' is missing feed(s) for placeholder(s) {missing}")
    extra = sorted(set(feeds) - set(names))
    if extra:
        raise FeedError(
            f"graph '{graph.name}' has no placeholder(s) {extra}; its placeholders are {names}"
        )


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
