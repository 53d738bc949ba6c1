"""Passes over the data: a graph whose rows need statistics of the whole batch.

`x - mean(x, axis=0)`, a softmax or a variance over the batch axis, a standardization:
each row needs a value only the whole batch gives. One batch split (split.py) refuses
them; `split_stages` cuts the graph into stages instead, each one batch split, run
one after the other over the same data:

1. `batch_roles` walks the graph collecting the *feedback values*: reduced values an op
   combines with rows (or spreads over them). From there on it takes each as a given,
   free value, so one walk finds them all.
2. A feedback value's *level* is 1, plus the highest level among the feedback values it
   depends on (a variance's rows need the mean: the standard deviation is level 2).
3. Stage k computes the feedback values of level k, with those of lower levels as
   placeholders; the last stage computes the graph's outputs with every feedback value
   as a placeholder. Each stage is split with `split_batch`, where its feedback
   placeholders are free inputs, computed once and sent to every chunk.

A softmax or log_softmax along the batch axis is one op, whose rule refuses the batch
axis; it is spelled out first as `x - logsumexp(x)` over the batch (then `exp`), which
the walk then sees as a logsumexp over the batch feeding back into the rows.

Invariant: a stage reads only placeholders of the original graph and feedback values
of earlier stages, so running the stages in order computes every output; each value is
computed as in one process, up to the rounding of summing the batch in chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphc.distributed.split import (
    BatchSplit,
    BatchSplitError,
    append_op,
    batch_roles,
    split_batch,
)
from graphc.ir.graph import Graph, Node
from graphc.ir.verify import verify


@dataclass(frozen=True)
class Stage:
    """One pass over the data: its batch split, and which of its outputs are feedback
    values (output name -> the placeholder name later stages read it by)."""

    split: BatchSplit
    feeds: dict[str, str]


def split_stages(graph: Graph, batch_dim: str = "B") -> list[Stage]:
    """The stages that compute `graph` over a batch split in chunks (one stage when its
    rows need no statistics of the whole batch); the last computes the graph's outputs.

    >>> import graphc as gc
    >>> g = gc.Graph("centered")
    >>> with g:
    ...     x = gc.placeholder("x", shape=("B", 3), dtype="float64")
    ...     _ = gc.output(x - gc.mean(x, axis=0), name="y")
    >>> [list(s.feeds.values()) for s in split_stages(g)]
    [['mean'], []]
    """
    verify(graph)
    graph = _spell_out_softmax(graph, batch_dim)
    feedback: set[Node] = set()
    batch_roles(graph, batch_dim, feedback)
    if not feedback:
        return [Stage(split_batch(graph, batch_dim), {})]
    levels = _levels(graph, feedback)
    names = {n.name for n in graph.nodes}
    stages = []
    for level in range(1, max(levels.values()) + 1):
        targets = [n for n in graph.nodes if levels.get(n) == level]
        given = {n for n, k in levels.items() if k < level}
        outputs = [(_fresh(f"{n.name}_value", names), n) for n in targets]
        stage = _stage_graph(graph, f"{graph.name}_stage{level}", outputs, given)
        feeds = {name: n.name for name, n in outputs}
        stages.append(Stage(_split(stage, batch_dim, graph), feeds))
    last = _stage_graph(
        graph, graph.name, [(o.name, o.inputs[0]) for o in graph.outputs], set(levels)
    )
    stages.append(Stage(_split(last, batch_dim, graph), {}))
    return stages


def _spell_out_softmax(graph: Graph, batch_dim: str) -> Graph:
    """`graph` with each softmax and log_softmax along the batch axis written as a
    logsumexp over the batch and ops on rows (the same graph when there is none).
    A mapped value carries the batch dim on its batch axis only, so the axis is the
    batch axis exactly when the input's dim there is `batch_dim`."""
    along = {
        n
        for n in graph.op_nodes
        if n.op in ("softmax", "log_softmax")
        and n.inputs[0].type.shape[n.attrs["axis"]] == batch_dim
    }
    if not along:
        return graph
    names = {n.name for n in graph.nodes}
    g = Graph(graph.name)
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        if n not in along:
            g.append_copy(n, copies)
            continue
        x = copies[n.inputs[0]]
        axis = (n.attrs["axis"],)
        lse = append_op(
            g, "logsumexp", [x], _fresh(f"{n.name}_lse", names), axis=axis, keepdims=True
        )
        if n.op == "log_softmax":  # log_softmax(x) = x - logsumexp(x)
            copies[n] = append_op(g, "sub", [x, lse], n.name)
        else:  # softmax(x) = exp(x - logsumexp(x))
            shifted = append_op(g, "sub", [x, lse], _fresh(f"{n.name}_shifted", names))
            copies[n] = append_op(g, "exp", [shifted], n.name)
    verify(g)
    return g


def _levels(graph: Graph, feedback: set[Node]) -> dict[Node, int]:
    """Each feedback value's level: 1 + the highest among the feedback values it reads."""
    below: dict[Node, int] = {}  # node -> the highest level among the feedback it reads
    levels: dict[Node, int] = {}
    for n in graph.nodes:
        reads = max((below[x] for x in n.inputs), default=0)
        if n in feedback:
            levels[n] = reads + 1
            below[n] = levels[n]
        else:
            below[n] = reads
    return levels


def _fresh(base: str, used: set[str]) -> str:
    name, i = base, 1
    while name in used:
        name, i = f"{base}_{i}", i + 1
    used.add(name)
    return name


def _stage_graph(
    graph: Graph, name: str, outputs: list[tuple[str, Node]], given: set[Node]
) -> Graph:
    """The part of `graph` that computes `outputs` (output name, node), reading the
    nodes in `given` as placeholders of their own name and type."""
    needed: set[Node] = set()
    todo = [n for _, n in outputs]
    while todo:
        n = todo.pop()
        if n in needed:
            continue
        needed.add(n)
        if n not in given:
            todo.extend(n.inputs)
    g = Graph(name)
    copies: dict[Node, Node] = {}
    for p in graph.inputs:
        if p in needed:
            g.append_copy(p, copies)
    for n in graph.op_nodes:
        if n in needed and n in given:
            copies[n] = g.add_placeholder(n.name, n.type)
    for n in graph.op_nodes:
        if n in needed and n not in given:
            g.append_copy(n, copies)
    for output, n in outputs:
        g.add_output(copies[n], name=output)
    verify(g)
    return g


def _split(stage: Graph, batch_dim: str, graph: Graph) -> BatchSplit:
    try:
        return split_batch(stage, batch_dim)
    except BatchSplitError as exc:  # not expected: the walk took every feedback as given
        raise BatchSplitError(
            f"graph '{graph.name}', cut into passes over the data: {exc}"
        ) from None
