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
from graphc.ir.errors import GraphcError, GraphMismatchError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import TensorType, as_shape
from graphc.ops.symbolic import Symbol, add_constant, user_location


def _declaring(what: str) -> Graph:
    graph = active_graph()
    if graph is None:
        raise GraphcError(f"{what} needs a graph being declared: use `with gc.Graph(...):`")
    return graph


def placeholder(name: str, shape: Iterable[Any] = (), dtype: Any = "float32") -> Symbol:
    """An input of the graph being declared; str dims such as "B" are symbolic."""
    graph = _declaring(f"placeholder '{name}'")
    make_room(graph, name)
    if name in graph:
        raise GraphcError(f"graph '{graph.name}' already has a node named '{name}'")
    shape = as_shape(shape, f"placeholder '{name}'")
    node = graph.add_placeholder(name, TensorType(shape, dtype), meta={"loc": user_location()})
    return Symbol(node)


def constant(value: Any, name: str | None = None, dtype: Any = None) -> Symbol:
    """A fixed array in the graph being declared (copied: later changes do not leak in)."""
    graph = _declaring("constant")
    if name is not None:
        make_room(graph, name)
    if name is not None and name in graph:
        raise GraphcError(f"graph '{graph.name}' already has a node named '{name}'")
    array = np.asarray(value, dtype=dtype)
    if dtype is None and array.dtype == np.float64 and not isinstance(value, np.ndarray):
        array = array.astype(np.float32)  # Python floats default to float32, as in PyTorch
    return add_constant(graph, array, name=name)


def output(value: Any, name: str | None = None) -> Symbol:
    """Mark `value` as an output of the graph being declared; returns it."""
    graph = _declaring("output")
    if not isinstance(value, Symbol):
        value = constant(value)
    if value.graph is not graph:
        raise GraphMismatchError(
            f"output: value '{value.node.name}' belongs to graph '{value.graph.name}', "
            f"not to graph '{graph.name}' being declared"
        )
    if name is None:
        name = output_name(graph, value.node)
    make_room(graph, name, value.node)
    if name in graph:
        raise GraphcError(f"graph '{graph.name}' already has a node named '{name}'")
    graph.add_output(value.node, name, meta={"loc": user_location()})
    return value
