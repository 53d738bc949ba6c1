"""The declare API: placeholders, constants and outputs of the graph being built.

>>> import numpy as np, graphc as gc
>>> g = gc.Graph("affine")
>>> with g:
...     x = gc.placeholder("x", shape=("B", 3))
...     w = gc.placeholder("w", shape=(3, 2))
...     _ = gc.output(gc.relu(x @ w), name="y")
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from graphc.frontend.names import make_room, output_name
from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import TensorType, as_dtype, as_shape
from graphc.ops.symbolic import Symbol, add_constant, graph_mismatch, user_location


def _declaring(what: str) -> Graph:
    graph = active_graph()
    if graph is None:
        raise GraphcError(f"{what} needs a graph being declared: use `with gc.Graph(...):`")
    return graph


def _checked_name(name: Any, what: str) -> str:
    """`name` if it can name a node (a non-empty str), else an error saying so."""
    if isinstance(name, str) and name:
        return name
    if what != "placeholder":
        raise GraphcError(f"{what}: expected a non-empty str as the name (or None), got {name!r}")
    hint = ""
    if not isinstance(name, str):
        try:
            as_dtype(name)
            hint = " (TF1's tf.placeholder takes the dtype first; gc.placeholder the name)"
        except GraphcError:
            pass
    raise GraphcError(
        f"placeholder: expected a non-empty str as the name, got {name!r}{hint}; e.g. "
        "gc.placeholder('x', shape=('B', 3), dtype='float32')"
    )


def _placeholder_shape(name: str, shape: Any) -> tuple:
    """The shape of placeholder `name`. TF1's None (a size or a rank unknown until run
    time) is refused, saying graphc's spelling: a size known only at run time is a named
    symbol, and placeholders that name the same symbol must be fed the same size."""
    what = f"placeholder '{name}'"
    if shape is None:
        raise ShapeError(
            f"{what}: shape None (an unknown rank) is not supported; give its dims, a str "
            "for each size known only at run time, e.g. shape=('B', 3)"
        )
    if not isinstance(shape, (int, str, np.integer)) and hasattr(shape, "__iter__"):
        shape = tuple(shape)
        if None in shape:
            raise ShapeError(
                f"{what}: dim {shape.index(None)} of shape {shape} is None; a size known only "
                "at run time is a named symbol in graphc, e.g. ('B', 3) (placeholders naming "
                "the same symbol are fed the same size)"
            )
    return as_shape(shape, what)


def placeholder(name: str, shape: Iterable[Any] = (), dtype: Any = "float32") -> Symbol:
    """An input of the graph being declared; str dims such as "B" are symbolic."""
    name = _checked_name(name, "placeholder")
    graph = _declaring(f"placeholder '{name}'")
    make_room(graph, name)
    if name in graph:
        raise GraphcError(f"graph '{graph.name}' already has a node named '{name}'")
    shape = _placeholder_shape(name, shape)
    node = graph.add_placeholder(name, TensorType(shape, dtype), meta={"loc": user_location()})
    return Symbol(node)


def constant(value: Any, name: str | None = None, dtype: Any = None) -> Symbol:
    """A fixed array in the graph being declared (copied: later changes do not leak in).

    Python floats (and lists of them) are float32, as in PyTorch; a value with a dtype
    of its own (a numpy array or scalar, a torch or jax array) keeps it."""
    graph = _declaring("constant")
    if name is not None:
        name = _checked_name(name, "constant")
        make_room(graph, name)
    if name is not None and name in graph:
        raise GraphcError(f"graph '{graph.name}' already has a node named '{name}'")
    what = "constant" if name is None else f"constant '{name}'"
    if isinstance(value, Symbol):  # else numpy asks it for data, which it has none of
        raise GraphcError(
            f"{what}: {value.node.describe()} is a graph value, computed when the graph "
            "runs, not data to hold fixed; use the value itself (gc.named(value, name) names it)"
        )
    try:
        wanted = None if dtype is None else as_dtype(dtype)
    except DTypeError as exc:
        raise DTypeError(f"{what}: {exc}") from None
    try:
        array = np.asarray(value, dtype=wanted)
    except (OverflowError, TypeError, ValueError) as exc:  # 300 as int8, a ragged list
        raise DTypeError(f"{what}: numpy cannot read the {type(value).__name__} ({exc})") from None
    if wanted is None and array.dtype == np.float64 and not hasattr(value, "dtype"):
        array = array.astype(np.float32)
    try:
        as_dtype(array.dtype)
    except DTypeError as exc:
        raise DTypeError(f"{what}: {exc} (numpy reads the {type(value).__name__} so)") from None
    return add_constant(graph, array, name=name)


def output(value: Any, name: str | None = None) -> Symbol:
    """Mark `value` as an output of the graph being declared; returns it."""
    graph = _declaring("output")
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, (list, tuple, dict)) and any(isinstance(v, Symbol) for v in items):
        # TF1's sess.run([a, b]) fetches a list; a list of numbers is a constant
        raise GraphcError(
            f"output: marks one value, got a {type(value).__name__}; call gc.output once "
            "per value (several outputs run as a tuple, in the order they were marked)"
        )
    if not isinstance(value, Symbol):
        value = constant(value)
    if value.graph is not graph:
        raise graph_mismatch("output", value, graph, declaring=True)
    if name is None:
        name = output_name(graph, value.node)
    name = _checked_name(name, "output")
    make_room(graph, name, value.node)
    if name in graph:
        raise GraphcError(f"graph '{graph.name}' already has a node named '{name}'")
    graph.add_output(value.node, name, meta={"loc": user_location()})
    return value
