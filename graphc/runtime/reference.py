"""The reference interpreter: runs a graph node by node, as plainly as possible.

It is the oracle every optimization and the compiled runtime are tested against,
so it does nothing clever: the feeds are checked, then `graphc.ops.body.evaluate`
runs each op's own kernel, on fresh arrays, in graph order. Each value gets the memory
layout the compiled plans give it (C-contiguous, but a transpose's: see LAYOUT in
plan.py), since matmul and reductions round by layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphc.ir.errors import FeedError, GraphcError, VerifyError
from graphc.ir.graph import PLACEHOLDER, Graph, Node, expect_graph
from graphc.ir.verify import verify
from graphc.ops.body import check_finite, evaluate
from graphc.ops.symbolic import Symbol
from graphc.runtime.feeds import check_feeds

__all__ = ["check_finite", "run"]


def run(graph: Graph, feeds: Mapping[Any, Any], check_numerics: bool = False) -> list[np.ndarray]:
    """Run `graph` on `feeds`; returns the outputs in order.

    `feeds` maps each placeholder, by name or as the graph value `gc.placeholder`
    returned (TF1's feed_dict), to its array. A graph edited through the low-level API
    may break the IR's invariants (an op given one input of two, a cycle): a VerifyError
    naming the node, as gc.compile gives.

    >>> import numpy as np, graphc as gc
    >>> g = gc.Graph("double")
    >>> with g:
    ...     x = gc.placeholder("x", shape=(2,))
    ...     _ = gc.output(x * 2, name="y")
    >>> gc.run(g, {x: np.ones(2, np.float32)})
    [array([2., 2.], dtype=float32)]
    """
    if isinstance(graph, Symbol):
        raise GraphcError(
            f"gc.run: expected a gc.Graph, got the graph value '{graph.node.name}'; mark it "
            "with gc.output(value) while declaring, then run the graph"
        )
    graph = expect_graph(graph, "gc.run")
    arrays, bindings = check_feeds(graph, _by_name(graph, feeds))
    try:
        return evaluate(graph, arrays, bindings, check_numerics)
    except Exception as exc:
        # verified only on failure: on a small graph verify costs half as much as a run
        # of the oracle, and a well-formed graph's own errors (a NaN, an index out of
        # range) pass on unchanged
        try:
            verify(graph)
        except VerifyError as problem:
            raise problem from exc
        raise


def _by_name(graph: Graph, feeds: Mapping[Any, Any]) -> dict[str, Any]:
    """The feeds keyed by placeholder name, whether given by name or by graph value."""
    placeholders = [p.name for p in graph.inputs]
    if not isinstance(feeds, Mapping):
        raise FeedError(
            f"gc.run: feeds map placeholder names to arrays, as {{'{placeholders[0]}': array}}"
            if placeholders
            else f"gc.run: feeds map placeholder names to arrays (graph '{graph.name}' has none)"
        )
    named: dict[str, Any] = {}
    for key, value in feeds.items():
        node = key.node if isinstance(key, Symbol) else key
        if isinstance(node, Node):
            if node.graph is not graph or node.kind != PLACEHOLDER:
                where = (
                    ""
                    if node.graph is graph
                    else f" of graph '{getattr(node.graph, 'name', None)}'"
                )
                raise FeedError(
                    f"gc.run: {node.describe()}{where} is fed, but only the placeholders of "
                    f"graph '{graph.name}' are: {placeholders}"
                )
            key = node.name
        elif not isinstance(key, str):
            raise FeedError(
                f"gc.run: a feed's key is a placeholder's name or its graph value, got a "
                f"{type(key).__name__}; the placeholders are {placeholders}"
            )
        if key in named:
            raise FeedError(f"placeholder '{key}' was fed twice (by name and by graph value)")
        named[key] = value
    return named
