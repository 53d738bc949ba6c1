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

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node, set_call_handler
from graphc.ir.registry import bound_attrs
from graphc.ir.types import TupleType
from graphc.ops.closure import graph_of
from graphc.ops.dispatch import bind, kind_of
from graphc.ops.shape import stack
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
    """The results of a cond, scan or while_loop node, computed by the Python control
    flow it stands for. (The eager tape records ops of one result; these three are the
    ops of several, each with its own loop, so they are spelled out here.)"""
    if node.op == "cond":
        return _cond(node, inputs, attrs, bindings)
    if node.op == "scan":
        return _scan(node, inputs, attrs, bindings)
    if node.op == "while_loop":
        return _while_loop(node, inputs, attrs, bindings)
    raise GraphcError(
        f"calling a graph on eager tensors: {node.describe()} has several results and no "
        "Python form here (graphc/frontend/call.py); call the graph on arrays"
    )


def _run_body(body: Graph, values: Sequence[Any]) -> list[Any]:
    return inline(body, dict(zip([p.name for p in body.inputs], values)))


def _cond(node: Node, inputs: list[Any], attrs: dict[str, Any], bindings: dict[str, Any]) -> tuple:
    pred, *operands = inputs
    taken = attrs["then_body"] if bool(pred) else attrs["else_body"]
    return tuple(_run_body(taken, operands))


def _scan(node: Node, inputs: list[Any], attrs: dict[str, Any], bindings: dict[str, Any]) -> tuple:
    count, num_xs = attrs["num_carry"], attrs["num_xs"]
    carry = inputs[:count]
    xs, consts = inputs[count : count + num_xs], inputs[count + num_xs :]
    steps = int(attrs["length"])
    ys: list[list[Any]] = [[] for _ in range(steps)]
    for t in reversed(range(steps)) if attrs["reverse"] else range(steps):
        outs = _run_body(attrs["body"], [*carry, *(x[t] for x in xs), *consts])
        carry, ys[t] = outs[:count], outs[count:]
    if steps:
        stacked = [stack([step[k] for step in ys], axis=0) for k in range(len(ys[0]))]
    else:  # no step ran: empty ys of the node's types, of the inputs' kind
        kind = next(kind_of(v) for v in inputs if kind_of(v) is not None)
        types = node.type.bind(bindings).items[count:]
        stacked = [kind.lift(np.zeros(t.shape, t.dtype), None, ()) for t in types]
    return (*carry, *stacked)


def _while_loop(
    node: Node, inputs: list[Any], attrs: dict[str, Any], bindings: dict[str, Any]
) -> tuple:
    count, num_cond = attrs["num_carry"], attrs["num_cond_consts"]
    carry = inputs[:count]
    cond_consts, body_consts = inputs[count : count + num_cond], inputs[count + num_cond :]
    while bool(_run_body(attrs["cond_body"], [*carry, *cond_consts])[0]):
        carry = _run_body(attrs["body"], [*carry, *body_consts])
    return tuple(carry)


def call_graph(graph: Graph, args: tuple, kwargs: dict) -> Any:
    feeds = collect_feeds(graph, args, kwargs)
    if any(kind_of(v) is not None for v in feeds.values()):
        results = inline(graph, feeds)
    else:
        results = run(graph, feeds)
    return results[0] if len(results) == 1 else tuple(results)


set_call_handler(call_graph)
