"""Specialization: a graph's types made concrete for one input signature.

Given the sizes of the symbolic dims (bound from the feeds), every node's type is
inferred again by its op's own type rule on concrete input types, with symbolic
dims in shape attributes bound as well, and must equal the node's declared type with
the dims bound: a type that holds only for some sizes (a slice x[0:5] of a dim B)
is a ShapeError naming the node for the sizes where it does not hold. The result
maps each node to a concrete
`TensorType` and the attrs its kernel will be called with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import bound_attrs, get_op
from graphc.ir.types import TensorType


@dataclass
class Specialized:
    """Concrete types and kernel attrs of every node, for one set of symbol sizes."""

    bindings: dict[str, int]
    types: dict[Node, TensorType]
    attrs: dict[Node, dict[str, Any]]


def specialize(graph: Graph, bindings: Mapping[str, int]) -> Specialized:
    """Re-infer every node's type with the symbolic dims bound to `bindings`."""
    types: dict[Node, TensorType] = {}
    attrs: dict[Node, dict[str, Any]] = {}
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            types[node] = node.type.bind(bindings)
        elif node.kind == OUTPUT:
            types[node] = types[node.inputs[0]]
        else:
            assert node.kind == OP
            opdef = get_op(node.op)  # type: ignore[arg-type]
            node_attrs = bound_attrs(node, bindings)
            inputs = [types[x] for x in node.inputs]
            try:
                types[node] = opdef.infer(*inputs, **node_attrs)
            except GraphcError as exc:
                where = f" (created at {node.loc})" if node.loc else ""
                # the rule's own class where it is a shape error (an IndexRangeError for
                # max over an empty dim is an IndexError, as eagerly and in PyTorch)
                kind = type(exc) if isinstance(exc, ShapeError) else ShapeError
                raise kind(
                    f"{node.describe()}{where} does not type-check for the fed shapes "
                    f"{_show(bindings)}: {exc}",
                    node=node.name,
                ) from exc
            attrs[node] = dict(node_attrs)
        if not types[node].is_concrete:
            raise ShapeError(
                f"{node.describe()} still has symbolic dims {types[node].symbols} after binding "
                f"{_show(bindings)}"
            )
        declared = node.type.bind(bindings)
        if declared != types[node]:
            # e.g. x[0:5] on a dim B, typed 5, when B is 3: never run on a wrong shape
            where = f" (created at {node.loc})" if node.loc else ""
            raise ShapeError(
                f"{node.describe()}{where} is declared {node.type}, i.e. {declared} for "
                f"{_show(bindings)}, but at these shapes it gives {types[node]}",
                node=node.name,
            )
    return Specialized(dict(bindings), types, attrs)


def bound_graph(graph: Graph, spec: Specialized) -> Graph:
    """A copy of `graph` whose types and shape attrs are the concrete ones of `spec`."""
    bound = Graph(graph.name)
    copies: dict[Node, Node] = {}
    for node in graph.nodes:
        inputs = tuple(copies[x] for x in node.inputs)
        if node.kind == PLACEHOLDER:
            copies[node] = bound.add_placeholder(node.name, spec.types[node], meta=node.meta)
        elif node.kind == OUTPUT:
            copies[node] = bound.add_output(inputs[0], node.name, meta=node.meta)
        else:
            copies[node] = bound.add_op(
                node.op, inputs, spec.attrs[node], spec.types[node], node.name, node.meta
            )
    return bound


def _show(bindings: Mapping[str, int]) -> str:
    if not bindings:
        return "(no symbolic dims)"
    return "(" + ", ".join(f"{k}={v}" for k, v in sorted(bindings.items())) + ")"
