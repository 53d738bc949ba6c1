"""Test helpers: run a case's graph and pull a cotangent back through the ops' VJP rules.

The walk is the textbook reverse sweep, kept minimal: it exists to exercise each op's
own `vjp` rule, on numpy arrays (the numpy value kind runs the rule) or on graph values
(the rule records a backward graph, which can then be differentiated again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import graphc as gc
from graphc.ir.graph import OP, PLACEHOLDER, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TupleType
from graphc.ops.tuples import add_cotangents


def forward_values(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[Node, np.ndarray]:
    """The value of every node, by each op's own kernel."""
    values: dict[Node, Any] = {}
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            values[node] = feeds[node.name]
        elif node.kind == OP:
            inputs = [values[x] for x in node.inputs]
            with np.errstate(all="ignore"):
                value = get_op(node.op).kernel(*inputs, **node.attrs)
            # a node with several results (scan, cond) holds a tuple of arrays
            values[node] = tuple(value) if isinstance(value, tuple) else np.asarray(value)
    return values


def pullback(
    nodes: Sequence[Node],
    values: Mapping[Node, Any],
    seeds: Mapping[Node, Any],
    wrt: Sequence[Node],
) -> dict[Node, Any]:
    """Cotangents of the nodes in `wrt`, given cotangents `seeds` of some nodes.

    `values` may hold arrays or graph values; each VJP rule works on either.
    """
    depends = set(wrt)
    for node in nodes:
        if any(x in depends for x in node.inputs):
            depends.add(node)
    cts: dict[Node, Any] = dict(seeds)
    for node in reversed(nodes):
        if node.kind != OP or node not in cts:
            continue
        needs = tuple(x in depends for x in node.inputs)
        if not any(needs):
            continue
        opdef = get_op(node.op)
        assert opdef.vjp is not None, f"op {node.op} has no vjp rule but a grad is needed"
        inputs = [values[x] for x in node.inputs]
        grads = opdef.vjp(cts[node], values[node], *inputs, needs=needs, **node.attrs)
        assert len(grads) == len(node.inputs), f"{node.op}: vjp gave {len(grads)} cotangents"
        for x, grad, need in zip(node.inputs, grads, needs):
            if need and grad is not None:
                for g, t in _slots(grad, x.type):
                    assert tuple(g.shape) == tuple(t.shape), f"{node.op}: ct shape of {x.name}"
                    assert g.dtype == t.dtype, f"{node.op}: ct dtype of {x.name}"
                cts[x] = add_cotangents(cts[x], grad) if x in cts else grad
    return {x: cts[x] for x in wrt if x in cts}


def _slots(ct: Any, t: Any) -> list[tuple[Any, Any]]:
    """(cotangent, type) pairs: one, or one per result of a tuple-typed value."""
    if isinstance(t, TupleType):
        assert isinstance(ct, tuple) and len(ct) == len(t.items), f"tuple cotangent {ct!r}"
        return [(c, item) for c, item in zip(ct, t.items) if c is not None]
    return [(ct, t)]


def numeric_vjp(
    f: Callable[..., Any], xs: list[np.ndarray], ct: np.ndarray, index: int, eps: float = 1e-6
) -> np.ndarray:
    """d/dx_index of sum(ct * f(xs)) by central differences (float64)."""
    x = xs[index]
    grad = np.zeros(x.shape, np.float64)
    for position in np.ndindex(*x.shape):
        values = []
        for step in (eps, -eps):
            moved = x.copy()
            moved[position] += step
            args = list(xs)
            args[index] = moved
            values.append(np.sum(ct * np.asarray(f(*args), np.float64)))
        grad[position] = (values[0] - values[1]) / (2 * eps)
    return grad


def backward_graph(
    build: Callable[..., Any], arrays: list[np.ndarray], wrt: Sequence[int]
) -> Graph:
    """The graph (x0, x1, ..., ct) -> d sum(ct * build(xs)) / d x_i for i in wrt."""
    g = Graph("backward")
    with g:
        xs = [gc.placeholder(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
        out = build(*xs)
        ct = gc.placeholder("ct", out.shape, out.dtype)
        forward = list(g.nodes)
        values = {n: gc.Symbol(n) for n in forward}
        targets = [xs[i].node for i in wrt]
        cts = pullback(forward, values, {out.node: ct}, targets)
        for i, node in zip(wrt, targets):
            grad = cts.get(node)
            gc.output(grad if grad is not None else gc.zeros_like(xs[i]), name=f"d_x{i}")
    return g
