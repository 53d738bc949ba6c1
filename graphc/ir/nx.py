"""Export to and import from `networkx.DiGraph`, for analyses networkx already has.

Each graphc node becomes a networkx node keyed by its name, with the attributes
``kind``, ``op``, ``attrs``, ``type`` (a `TensorType`, or a `TupleType` for a node with
several results), ``meta`` and ``index`` (its position in the graph). An edge runs from a value to each node using it; since a
node may use one value twice (``mul(%x, %x)``), the edge's ``positions`` lists the
input positions it fills, e.g. ``[0, 1]``.

`from_networkx` rebuilds a graph in a topological order that keeps the ``index``
order where it can (so placeholders and outputs keep their order), and checks every
node as the text and JSON loaders do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphc.ir.errors import CycleError, VerifyError
from graphc.ir.graph import KINDS, Graph, Node
from graphc.ir.types import TensorType, TupleType
from graphc.ir.verify import node_problem, verify

if TYPE_CHECKING:
    import networkx as nx


def to_networkx(graph: Graph) -> nx.DiGraph:
    """The graph as a `networkx.DiGraph` (nodes keyed by name; see the module docstring).

    >>> import graphc as gc
    >>> g = gc.Graph("g")
    >>> with g:
    ...     x = gc.placeholder("x", shape=(2,))
    ...     _ = gc.output(x * x, name="y")
    >>> d = gc.to_networkx(g)
    >>> d.edges["x", "mul"]["positions"], d.nodes["mul"]["op"]
    ([0, 1], 'mul')
    """
    import networkx as nx  # here: a fifth of graphc's import time, for two functions

    digraph = nx.DiGraph(name=graph.name)
    for index, node in enumerate(graph.nodes):
        digraph.add_node(
            node.name,
            kind=node.kind,
            op=node.op,
            attrs=dict(node.attrs),
            type=node.type,
            meta=dict(node.meta),
            index=index,
        )
        for position, x in enumerate(node.inputs):
            if digraph.has_edge(x.name, node.name):
                digraph.edges[x.name, node.name]["positions"].append(position)
            else:
                digraph.add_edge(x.name, node.name, positions=[position])
    return digraph


def from_networkx(digraph: nx.DiGraph, name: str | None = None) -> Graph:
    """Rebuild a Graph from a DiGraph shaped like `to_networkx` output.

    Raises CycleError naming nodes on a cycle, VerifyError naming a malformed node.
    """
    import networkx as nx

    try:
        cycle = nx.find_cycle(digraph)
    except nx.NetworkXNoCycle:
        cycle = []
    if cycle:
        names = [str(u) for u, _ in cycle] + [str(cycle[0][0])]
        raise CycleError(f"the DiGraph has a cycle: {' -> '.join(names)}")
    name = name if name is not None else digraph.graph.get("name", "graph")
    if not isinstance(name, str):
        raise VerifyError(f"the DiGraph's name must be a string, got {name!r}")
    graph = Graph(name)
    insertion = {key: i for i, key in enumerate(digraph.nodes)}

    def order(key: Any) -> tuple:
        index = digraph.nodes[key].get("index")
        if type(index) is not int:  # not a bool, a float or a numpy int either
            index = insertion[key]
        return (index, insertion[key])

    for key in nx.lexicographical_topological_sort(digraph, key=order):
        graph.append(_node(graph, digraph, key))
    return graph


def _key_name(key: Any) -> str:
    """The node's name: a DiGraph from `to_networkx` is keyed by names, so str keys only
    (str() of other keys could give two nodes one name, or run the key's own code)."""
    if not isinstance(key, str) or not key:
        raise VerifyError(f"DiGraph node {key!r}: keys must be non-empty strings (node names)")
    return key


def _node(graph: Graph, digraph: nx.DiGraph, key: Any) -> Node:
    name = _key_name(key)
    data = digraph.nodes[key]
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise VerifyError(f"DiGraph node {key!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    op = data.get("op")
    if op is not None and not isinstance(op, str):
        raise VerifyError(f"DiGraph node {key!r}: 'op' must be an op name or None, got {op!r}")
    node_type = data.get("type")
    if type(node_type) not in (TensorType, TupleType):
        raise VerifyError(
            f"DiGraph node {key!r}: 'type' must be a TensorType or TupleType, got {node_type!r}"
        )
    attrs, meta = data.get("attrs") or {}, data.get("meta") or {}
    for what, mapping in (("attrs", attrs), ("meta", meta)):
        if not isinstance(mapping, dict) or not all(isinstance(k, str) for k in mapping):
            raise VerifyError(
                f"DiGraph node {key!r}: '{what}' must be a dict keyed by strings, got {mapping!r}"
            )
    slots: dict[int, str] = {}
    for source in digraph.predecessors(key):
        positions = digraph.edges[source, key].get("positions")
        if not positions:
            raise VerifyError(f"DiGraph edge {source!r} -> {key!r} has no input 'positions'")
        if not isinstance(positions, (list, tuple)) or any(
            type(p) is not int or p < 0 for p in positions
        ):
            raise VerifyError(
                f"DiGraph edge {source!r} -> {key!r}: 'positions' must list input positions "
                f"(ints >= 0), got {positions!r}"
            )
        for position in positions:
            if position in slots:
                raise VerifyError(f"DiGraph node {key!r}: input position {position} is given twice")
            slots[position] = source
    if sorted(slots) != list(range(len(slots))):
        raise VerifyError(
            f"DiGraph node {key!r}: input positions {sorted(slots)} are not 0..{len(slots) - 1}"
        )
    inputs = tuple(graph.node(slots[i]) for i in range(len(slots)))
    node = Node(name, kind, op, inputs, attrs, node_type, meta)
    for attr, value in attrs.items():
        if isinstance(value, Graph):  # a fused body: checked as verify checks it
            try:
                verify(value)
            except VerifyError as exc:
                raise VerifyError(f"DiGraph node {key!r}, attr '{attr}': {exc}") from None
    problem = node_problem(node)
    if problem:
        raise VerifyError(f"DiGraph node {key!r}: {problem}")
    return node
