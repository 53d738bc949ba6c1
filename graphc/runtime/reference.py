"""The reference interpreter: runs a graph node by node, as plainly as possible.

It is the oracle every optimization and the compiled runtime are tested against,
so it does nothing clever: the feeds are checked, then `graphc.ops.body.evaluate`
runs each op's own kernel, on fresh arrays, in graph order. Each value gets the memory
layout the compiled plans give it (C-contiguous, but a transpose's: see LAYOUT in
plan.py), since matmul and reductions round by layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import FeedError, GraphcError
from graphc.ir.graph import OUTPUT, PLACEHOLDER, Graph, Node, expect_graph
from graphc.ir.types import TensorType
from graphc.ir.verify import verified_on_failure
from graphc.ops.body import check_finite, evaluate
from graphc.ops.symbolic import Symbol
from graphc.runtime.feeds import check_feeds

__all__ = ["check_finite", "run"]


def run(
    graph: Graph,
    feeds: Mapping[Any, Any],
    check_numerics: bool = False,
    fetch: Sequence[Any] | None = None,
) -> list[np.ndarray]:
    """Run `graph` on `feeds`; returns the outputs in order, or the values `fetch` names.

    `feeds` maps each placeholder, by name or as the graph value `gc.placeholder`
    returned (TF1's feed_dict), to its array. `fetch` picks values to return instead of
    the outputs, any node's (TF1's fetches of `sess.run`, PyTensor's `eval`): graph values,
    or names of nodes or outputs. A graph edited through the low-level API may break the
    IR's invariants (an op given one input of two, a cycle): a VerifyError naming the
    node, as gc.compile gives.

    >>> import numpy as np, graphc as gc
    >>> g = gc.Graph("double")
    >>> with g:
    ...     x = gc.placeholder("x", shape=(2,))
    ...     _ = gc.output(x * 2, name="y")
    >>> gc.run(g, {x: np.ones(2, np.float32)})
    [array([2., 2.], dtype=float32)]
    >>> gc.run(g, {"x": np.arange(2, dtype=np.float32)}, fetch=[x])
    [array([0., 1.], dtype=float32)]
    """
    if isinstance(graph, Symbol):
        raise GraphcError(
            f"gc.run: expected a gc.Graph, got the graph value '{graph.node.name}'; mark it "
            "with gc.output(value) while declaring, then run the graph"
        )
    graph = expect_graph(graph, "gc.run")
    named = _by_name(graph, feeds)
    if fetch is not None:
        graph = _fetching(graph, fetch)
    arrays, bindings = check_feeds(graph, named)
    # verified only on failure: on a small graph verify costs half as much as a run of
    # the oracle
    with verified_on_failure(graph):
        return evaluate(graph, arrays, bindings, check_numerics)


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


def _fetching(graph: Graph, fetch: Sequence[Any]) -> Graph:
    """A copy of `graph` whose outputs are the values `fetch` names (graph values, nodes,
    or names of nodes or outputs; an output stands for the value it marks)."""
    if isinstance(fetch, (str, Symbol, Node)) or not isinstance(fetch, Sequence):
        raise GraphcError(
            f"gc.run: fetch is a list of graph values or node names, got {type(fetch).__name__}"
        )
    chosen = []
    for item in fetch:
        node = item.node if isinstance(item, Symbol) else item
        if isinstance(node, str) and node in graph:
            node = graph.node(node)
        if not isinstance(node, Node) or node.graph is not graph:
            raise GraphcError(
                f"gc.run: cannot fetch {item!r}: it is no value or node name of graph "
                f"'{graph.name}'"
            )
        node = node.inputs[0] if node.kind == OUTPUT else node
        if not isinstance(node.type, TensorType):
            raise GraphcError(
                f"gc.run: cannot fetch {node.describe()}: it has several results {node.type}; "
                "fetch the result nodes reading them"
            )
        chosen.append(node)
    fetched = Graph(graph.name)
    copies: dict[Node, Node] = {}
    for node in graph.nodes:
        if node.kind != OUTPUT:
            fetched.append_copy(node, copies)
    for node in chosen:
        fetched.add_output(copies[node], fetched.fresh_name("fetched"))
    return fetched
