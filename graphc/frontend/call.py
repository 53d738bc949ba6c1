"""Calling a Graph: on arrays it runs; on graph values or eager tensors it inlines.

Inlining replays the graph's ops through the op functions, so on graph values it
records them into the graph being built and on eager tensors it computes them, the
tape recording each. A node with several results (cond, scan, while_loop) on eager
tensors runs the Python control flow it stands for, its bodies inlined step by step
(as gc.cond, gc.scan and gc.while_loop do on tensors): the tape then records what
actually ran, so gradients reach the tensors through every step; its results are a
tuple, which the `result` nodes reading them index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphc.ir.errors import GraphcError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node, set_call_handler
from graphc.ir.registry import bound_attrs, get_op
from graphc.ir.types import TupleType
from graphc.ir.verify import verified_on_failure
from graphc.ops.closure import graph_of
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
    with verified_on_failure(graph):  # a broken graph: verify's error, not a KeyError
        for node in graph.nodes:
            if node.kind == PLACEHOLDER:
                values[node] = feeds[node.name]
            elif node.kind == OP:
                values[node] = _replay(node, [values[x] for x in node.inputs], bindings)
            else:
                assert node.kind == OUTPUT
                results.append(values[node.inputs[0]])
    return results


def _replay(node: Node, inputs: list[Any], bindings: dict[str, Any]) -> Any:
    """The node's value on `inputs`: recorded or computed by its op function; a node
    with several results on eager tensors as the Python loop or branch it stands for."""
    attrs = bound_attrs(node, bindings)
    if node.op == "result" and isinstance(inputs[0], tuple):  # several results, computed
        return inputs[0][attrs["index"]]
    eager = graph_of(inputs) is None and any(kind_of(v) is not None for v in inputs)
    if eager and isinstance(node.type, TupleType):
        return _python_flow(node, inputs, attrs, bindings)
    return bind(node.op, *inputs, **attrs)


def _python_flow(
    node: Node, inputs: list[Any], attrs: dict[str, Any], bindings: dict[str, Any]
) -> tuple:
    """The results of a node of several results (cond, scan, while_loop) computed by the
    Python control flow it stands for: the op's "stepwise" rule (graphc/ops/control.py),
    its bodies inlined here."""
    stepwise = get_op(node.op).rules.get("stepwise")
    if stepwise is None:
        raise GraphcError(
            f"calling a graph on eager tensors: {node.describe()} has several results and no "
            "stepwise rule; call the graph on arrays"
        )
    types = list(node.type.bind(bindings).items)
    return stepwise(attrs, inputs, types, _run_body)


def _run_body(body: Graph, values: Sequence[Any]) -> list[Any]:
    return inline(body, dict(zip([p.name for p in body.inputs], values)))


def call_graph(graph: Graph, args: tuple, kwargs: dict) -> Any:
    feeds = collect_feeds(graph, args, kwargs)
    if any(kind_of(v) is not None for v in feeds.values()):
        results = inline(graph, feeds)
    else:
        results = run(graph, feeds)
    return results[0] if len(results) == 1 else tuple(results)


set_call_handler(call_graph)
