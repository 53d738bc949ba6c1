"""`GraphBuilder`: how a pass builds its result graph from an old one.

Passes never edit a graph: they walk the old graph in order and append to a new one,
keeping a map from old nodes to new. The builder holds that new graph and

- keeps the names of copied nodes (so printed graphs stay comparable), and gives
  nodes a pass creates fresh names that collide with no name of the old graph;
- runs an op's own canonicalization and type rule for nodes a pass creates, so a
  pass cannot write down a wrong type;
- carries `meta` (``loc``, ``grad_of``) from a replaced node to its replacements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.ops.dispatch import prepare


class GraphBuilder:
    """A new graph under construction, next to the old graph it replaces."""

    def __init__(self, old: Graph, name: str | None = None) -> None:
        self.old = old
        self.graph = Graph(old.name if name is None else name)
        self._reserved = {n.name for n in old.nodes}
        self._counters: dict[str, int] = {}

    def fresh_name(self, base: str) -> str:
        """A name used neither in the old graph nor yet in the new one."""
        if base not in self._reserved and base not in self.graph:
            return base
        k = self._counters.get(base, 0)
        while True:
            k += 1
            name = f"{base}_{k}"
            if name not in self._reserved and name not in self.graph:
                self._counters[base] = k
                return name

    def _name(self, base: str, replaces: Node | None) -> str:
        """The name of the node `replaces` while the new graph does not use it, else fresh."""
        if replaces is not None and replaces.name not in self.graph:
            return replaces.name
        return self.fresh_name(base)

    def copy(self, node: Node, inputs: Iterable[Node] = ()) -> Node:
        """Append a copy of old `node` (same name, attrs, type, meta) on new `inputs`."""
        inputs = tuple(inputs)
        if node.kind == PLACEHOLDER:
            return self.graph.add_placeholder(node.name, node.type, meta=node.meta)
        if node.kind == OUTPUT:
            return self.graph.add_output(inputs[0], node.name, meta=node.meta)
        return self.graph.add_op(
            node.op, inputs, node.attrs, node.type, name=self._name(node.name, node), meta=node.meta
        )

    def append(self, node: Node) -> Node:
        """Append a detached op node, renaming it if its name is taken."""
        node.name = self._name(node.name, node)
        return self.graph.append(node)

    def op(
        self,
        op: str,
        inputs: Iterable[Node],
        attrs: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        name: str | None = None,
        replaces: Node | None = None,
    ) -> Node:
        """Append a new op node; attrs are completed and canonicalized by the op's rules.

        A node that `replaces` an old node takes that node's name when it is free.
        """
        inputs = tuple(inputs)
        full, out_type = prepare(get_op(op), [x.type for x in inputs], dict(attrs or {}))
        name = self._name(name or op, replaces)
        return self.graph.add_op(op, inputs, full, out_type, name=name, meta=meta)

    def constant(
        self,
        value: Any,
        meta: Mapping[str, Any] | None = None,
        name: str = "const",
        replaces: Node | None = None,
    ) -> Node:
        """Append a constant holding a private, read-only copy of `value`.

        A constant that `replaces` an old node takes that node's name when it is free.
        """
        array = np.array(value, order="C")  # C-contiguous, as every value but a transpose
        array.flags.writeable = False
        return self.graph.add_op(
            "constant",
            (),
            {"value": array},
            TensorType.of(array),
            name=self._name(name, replaces),
            meta=meta,
        )


def detached(node: Node, inputs: tuple[Node, ...]) -> Node:
    """A copy of op `node` on new inputs, not yet in any graph (a rewrite candidate)."""
    assert node.kind == OP
    return Node(node.name, OP, node.op, inputs, node.attrs, node.type, node.meta)


def replacement_meta(node: Node) -> dict[str, Any]:
    """The meta a node's replacements inherit: where it came from (its line and its name
    scope, so a picture of the optimized graph keeps it in its module's group), what it
    differentiates."""
    return {key: node.meta[key] for key in ("loc", "scope", "grad_of") if key in node.meta}


def live_nodes(graph: Graph) -> set[Node]:
    """Nodes an output depends on, plus impure ops and every placeholder (one reverse walk)."""
    live: set[Node] = set()
    for node in reversed(graph.nodes):
        keep = (
            node in live
            or node.kind in (OUTPUT, PLACEHOLDER)
            or (node.kind == OP and not get_op(node.op).pure)
        )
        if keep:
            live.add(node)
            live.update(node.inputs)
    return live


def sole_user(node: Node, users: dict[Node, list[Node]]) -> Node | None:
    """The one op node that reads `node`, or None (several readers, or an output)."""
    readers = users[node]
    return readers[0] if len(readers) == 1 and readers[0].kind == OP else None
