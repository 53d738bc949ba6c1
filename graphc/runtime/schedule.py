"""The order a plan's steps run in: the graph's, except that a step whose result leaves
the arena runs as soon as it can after another step reading the same operand.

Why: a layer's weight gradient G^T X reads the output gradient G, as the input gradient
G W does. Reverse-mode differentiation emits the two apart, and an optimizer's update
(W - lr G^T X, one gemm) comes after the whole backward pass, by when G and X have left
the cache (PyTorch's autograd computes both in one node, the product's backward). In
the MLP step at batch 512 (`graphc bench`'s), run right after G W, the 256 x 512 by
512 x 256 weight update took 300 us instead of 350 (exe.profile, medians of 50); the
whole step, about 1 % less time, within the noise of a 2-core machine.

A step is pulled forward only when that holds no arena memory longer: its result is
returned or written into state, and it may free its operands sooner; so may the steps
feeding only it (W - lr (G^T X) unfused: the product and the scaling die in the update).
Every other step keeps its place in the graph's order.

Algorithm: one forward walk over the graph's order. After each step, the later steps
reading an operand it read (through views: a transpose reads its input's memory), or
its result, are candidates, in graph order. A candidate runs at once when
- it is pure, and its result is returned or updates a state placeholder;
- each input is computed, or can run with it first: a view, or a pure step whose value
  only the candidate and such steps read (at most MAX_CHAIN of them, run in the
  graph's order);
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

# ops whose value is a view of their one input, computed by no kernel
_VIEWS = ("reshape",)
# steps at most that run early with a candidate, as its chain (views aside)
MAX_CHAIN = 16


def _is_view(node: Node) -> bool:
    return node.kind == OP and (node.op in _VIEWS or get_op(node.op).permutes)


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

    readers: dict[Node, list[Node]] = {}  # base value -> the steps reading it
    candidates: dict[Node, list[Node]] = {}  # base value -> the outputs' steps reading it
    for n in steps:
        bases = dict.fromkeys(base(x) for x in n.inputs)
        for x in bases:
            readers.setdefault(x, []).append(n)
        if n in returned and get_op(n.op).pure and not _is_view(n):  # type: ignore[arg-type]
            for x in bases:
                candidates.setdefault(x, []).append(n)

    done: set[Node] = set()
    order: list[Node] = []

    def computed(x: Node) -> bool:
        if x.kind == OP and x.op == "result":
            return computed(x.inputs[0])
        return x not in position or x in done

    def feeds(c: Node, x: Node, chain: dict[Node, None], path: set[Node]) -> bool:
        """Whether input x of the chain ending in candidate c is computed, or can run
        with it: a view, or a pure step whose value only the chain reads (it dies there).
        Those steps are added to `chain`, each after its own inputs."""
        if computed(x) or x in chain:
            return True
        if x.kind != OP or x.op == "result" or len(chain) >= MAX_CHAIN:
            return False
        if not _is_view(x) and (
            not get_op(x.op).pure  # type: ignore[arg-type]
            or any(r is not c and r not in path and not _is_view(r) for r in readers[x])
        ):
            return False
        path.add(x)
        if not all(feeds(c, y, chain, path) for y in x.inputs):
            return False
        chain[x] = None
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
                    chain: dict[Node, None] = {}
                    if not all(feeds(c, y, chain, {c}) for y in c.inputs):
                        continue
                    p = writes.get(c)
                    if p is not None and any(
                        r is not c and r not in done and r not in chain for r in readers.get(p, ())
                    ):
                        continue
                    for step in [*sorted(chain, key=position.__getitem__), c]:
                        run(step)
                        work.append(step)

    for n in steps:
        if n not in done:
            run(n)
            pull(n)
    return order
