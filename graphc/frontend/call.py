"""Calling a Graph: on arrays it runs; on graph values or eager tensors it inlines."""

from __future__ import annotations

from typing import Any

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node, set_call_handler
from graphc.ir.registry import bound_attrs
from graphc.ops.dispatch import bind, kind_of
from graphc.runtime.feeds import check_names, collect_feeds
from graphc.runtime.reference import run


def inline(graph: Graph, feeds: dict[str, Any]) -> list[Any]:
    """Replay `graph`'s ops on the given values through the op functions.

    The graph's symbolic dims take the dims of the values fed for them (a graph traced
    with a batch dim B, called on a (4, 3) value, broadcasts to (4, 3), not to (B, 3))."""
    check_names(graph, feeds)
    bindings: dict[str, Any] = {}
    for p in graph.inputs:
        for d, actual in zip(p.type.shape, getattr(feeds[p.name], "shape", ())):
            if isinstance(d, str):
                bindings.setdefault(d, actual)
    values: dict[Node, Any] = {}
    results = []
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            values[node] = feeds[node.name]
        elif node.kind == OP:
            attrs = bound_attrs(node, bindings)
            values[node] = bind(node.op, *(values[x] for x in node.inputs), **attrs)
        else:
            assert node.kind == OUTPUT
            results.append(values[node.inputs[0]])
    return results


def call_graph(graph: Graph, args: tuple, kwargs: dict) -> Any:
    feeds = collect_feeds(graph, args, kwargs)
    if any(kind_of(v) is not None for v in feeds.values()):
        results = inline(graph, feeds)
    else:
        results = run(graph, feeds)
    return results[0] if len(results) == 1 else tuple(results)


set_call_handler(call_graph)
