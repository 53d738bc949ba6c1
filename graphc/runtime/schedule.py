"""The order a plan's steps run in: the graph's, except that a step whose result leaves
the arena runs as soon as it can after another step reading the same operand.

Why: a layer's weight gradient G^T X reads the output gradient G, as the input gradient
G W does. Reverse-mode differentiation emits the two apart, and an optimizer's update
(W - lr G^T X, one gemm) comes after the whole backward pass, by when G and X have left
the cache (PyTorch's autograd computes both in one node, the product's backward). In
the MLP step at batch 512 (`graphc bench`'s), run right after G W, the 256 x 512 by
512 x 256 weight update took 300 us instead of 350 (exe.profile, medians of 50); the
whole step, about 1 % less time, within the noise of a 2-core machine.

A step is pulled forward only when that makes no step hold more live arena bytes: its
result is returned or written into state (not the arena's), views of computed values
are all it needs besides, and its operands may die sooner. A step it would need to run
first (W - lr (G^T X) unfused: the product and the scaling) would add arena values where
others are live (a cross-entropy's gradient pulled ahead of its loss that way took 70
KiB of arena instead of 50), so such a candidate waits. Every other step keeps its
place in the graph's order.

Algorithm: one forward walk over the graph's order. After each step, the later steps
reading an operand it read (through views: a transpose reads its input's memory), or
its result, are candidates, in graph order. A candidate runs at once when
- it is pure, and its result is returned or updates a state placeholder;
- each input is computed, or is a view of a computed value (which then runs first);
- it updates state p only when every other step reading p has run (the update then
  still goes straight into p's buffer: plan.py's rule "state").
A step run so pulls in turn. Only candidates are kept per operand (a graph's outputs
and updates: a few), so the walk is linear in the graph's size times those.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op


def permutes(node: Node) -> bool:
    """Whether `node` is an op that permutes its input's axes (a transpose): the plan
    always makes it a view of its input."""
    return node.kind == OP and get_op(node.op).permutes  # type: ignore[arg-type]


def reshape_view(node: Node) -> bool:
    """Whether `node` is a reshape the plan makes a view of its input where the value
    is neither returned nor written into state: one of anything but a transpose, whose
    reshape numpy would make a copy or a strided view (the plan computes that one). The
    one statement of plan.py's rule, which the schedule follows too."""
    return node.kind == OP and node.op == "reshape" and not permutes(node.inputs[0])


def _is_view(node: Node) -> bool:
    """Whether the plan makes `node` a view of its input, computed by no kernel."""
    return permutes(node) or reshape_view(node)


def schedule(graph: Graph, steps: list[Node], updates: Mapping[str, str]) -> list[Node]:
    """`steps` (the graph's op nodes, in its order) in the order to run them; `updates`
    maps a state placeholder's name to the output that writes it."""
    position = {n: i for i, n in enumerate(steps)}
    returned = {o.inputs[0] for o in graph.outputs}
    writes = {graph.node(o).inputs[0]: graph.node(p) for p, o in updates.items()}

    def base(x: Node) -> Node:
        while _is_view(x) and x in position:
            x = x.inputs[0]
        return x

    readers: dict[Node, list[Node]] = {p: [] for p in writes.values()}  # of each state
    candidates: dict[Node, list[Node]] = {}  # base value -> the outputs' steps reading it
    for n in steps:
        bases = dict.fromkeys(base(x) for x in n.inputs)
        for x in bases:
            if x in readers:
                readers[x].append(n)
        if n in returned and get_op(n.op).pure and not _is_view(n):  # type: ignore[arg-type]
            for x in bases:
                candidates.setdefault(x, []).append(n)

    done: set[Node] = set()
    order: list[Node] = []

    def computed(x: Node) -> bool:
        if x.kind == OP and x.op == "result":
            return computed(x.inputs[0])
        return x not in position or x in done

    def ready(x: Node, views: dict[Node, None]) -> bool:
        """Whether x is computed, or a view of one, which then runs first (in `views`)."""
        if computed(x) or x in views:
            return True
        if not _is_view(x) or not all(ready(y, views) for y in x.inputs):
            return False
        views[x] = None
        return True

    def run(n: Node) -> None:
        done.add(n)
        order.append(n)

    def pull(n: Node) -> None:
        work = deque([n])
        while work:
            m = work.popleft()
            for x in dict.fromkeys([*(base(x) for x in m.inputs), m]):
                for c in candidates.get(x, ()):
                    if c in done:
                        continue
                    views: dict[Node, None] = {}
                    if not all(ready(y, views) for y in c.inputs):
                        continue
                    p = writes.get(c)
                    if p is not None and any(
                        r is not c and r not in done and r not in views for r in readers[p]
                    ):
                        continue
                    for step in [*views, c]:
                        run(step)
                        work.append(step)

    for n in steps:
        if n not in done:
            run(n)
            pull(n)
    return order
