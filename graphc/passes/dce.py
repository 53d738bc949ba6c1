"""Dead code elimination.

Algorithm: one reverse walk over the topological order marks as live every output,
every placeholder (they are the graph's signature, used or not), every impure op,
and the inputs of whatever is live; one forward walk then copies the live nodes.
Invariant: the result computes the same outputs from the same placeholders, and
every op node in it is used, directly or not, by an output (or is impure).
Linear in nodes plus edges.
"""

from __future__ import annotations

from graphc.ir.graph import Graph, Node
from graphc.passes.builder import GraphBuilder, live_nodes
from graphc.passes.report import PassLog


def eliminate_dead_code(graph: Graph, log: PassLog | None = None) -> Graph:
    """A copy of `graph` without the nodes no output needs; `graph` itself when every
    node is needed, as `rewrite` returns a graph no rule changes (passes never edit a
    graph, so a result that is the input is safe to share).

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2]) {
    ...   %unused: f32[2] = exp(%x)
    ...   output %y = %x
    ... }''')
    >>> len(gc.passes.eliminate_dead_code(g).nodes)
    2
    """
    live = live_nodes(graph)
    if len(live) == len(graph.nodes):
        return graph
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in live:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    if log is not None:
        removed = len(graph.nodes) - len(builder.graph.nodes)
        if removed:
            log.note(f"removed {removed} unused node(s)")
    return builder.graph
