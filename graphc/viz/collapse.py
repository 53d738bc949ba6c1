"""Keeping big pictures readable: collapse long chains and repeated structures.

Two shapes make graphs unreadable long before they are big: a long chain of
single-use ops (an unrolled loop, a deep elementwise pipeline) and many identical
ops side by side (the same computation repeated on the same inputs). Both are
found in one walk over the topological order:

- A *chain* is a maximal run n1 → n2 → … → nk of ops where each n(i+1) reads exactly
  one non-constant value, n(i), and n(i) has no other user. When k exceeds
  `max_chain`, n2 … n(k-1) become one summary node (n1 and nk stay, so the
  chain's ends still connect to the rest of the graph). If the ops repeat with a
  short period the summary says so: ``(mul → add) × 18``; otherwise it counts ops.
- *Repeats* are ops of the same structure: the same op and attributes applied to
  inputs of the same structure (see `_repeats`). More than `max_repeat` of them
  become one node labelled ``op × N``.

Constants read only by collapsed nodes are folded into the same summary. Nothing
here changes a graph; the result only tells the drawer which node stands for which.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from graphc.ir.graph import OP, Graph, Node
from graphc.viz.style import dot_id


@dataclass
class Group:
    """Several nodes drawn as one summary node."""

    id: str
    label: str
    members: list[Node]


@dataclass
class Collapse:
    """Which nodes are hidden behind which summary node."""

    groups: list[Group] = field(default_factory=list)
    owner: dict[Node, Group] = field(default_factory=dict)

    def add(self, group: Group) -> None:
        self.groups.append(group)
        for n in group.members:
            self.owner[n] = group


def _is_chain_op(n: Node) -> bool:
    return n.kind == OP and not n.is_constant


def _value_inputs(n: Node) -> list[Node]:
    return [x for x in n.inputs if not x.is_constant]


def _chains(graph: Graph, users: dict[Node, list[Node]]) -> list[list[Node]]:
    def continues(n: Node, p: Node) -> bool:
        return _is_chain_op(n) and _value_inputs(n) == [p] and users[p] == [n]

    chains = []
    seen: set[Node] = set()
    for start in graph.nodes:
        if start in seen or not _is_chain_op(start):
            continue
        chain = [start]
        while len(users[chain[-1]]) == 1 and continues(users[chain[-1]][0], chain[-1]):
            chain.append(users[chain[-1]][0])
        seen.update(chain)
        chains.append(chain)
    return chains


def _repeats(graph: Graph, plan: Collapse) -> list[list[Node]]:
    """Ops grouped by structure: same op and attributes on inputs of the same structure.

    One walk in topological order gives each node a class number, hashing its op,
    attributes and its inputs' classes (placeholders are their own class, constants
    are classed by value), so nine `reshape(exp(x))` side by side form two classes of
    nine: `exp × 9` feeding `reshape × 9`.
    """
    classes: dict[tuple, int] = {}
    class_of: dict[Node, int] = {}
    members: dict[int, list[Node]] = {}
    for n in graph.nodes:
        if n.is_constant:
            value = n.value
            key: tuple = ("constant", n.type, value.tobytes() if value.size <= 16 else n.name)
        elif _is_chain_op(n) and n not in plan.owner:
            attrs = tuple(sorted((k, repr(v)) for k, v in n.attrs.items()))
            key = (n.op, attrs, tuple(class_of[x] for x in n.inputs))
        else:
            key = ("node", n.name)
        class_of[n] = classes.setdefault(key, len(classes))
        if _is_chain_op(n) and n not in plan.owner:
            members.setdefault(class_of[n], []).append(n)
    return list(members.values())


def summarize(ops: Sequence[str]) -> str:
    """``(mul → add) × 18`` for a periodic run of ops, else counts by op."""
    n = len(ops)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and all(ops[i] == ops[i - period] for i in range(period, n)):
            return f"({' → '.join(ops[:period])}) × {n // period}"
    counts = Counter(ops).most_common()
    shown = ", ".join(f"{op} ×{k}" for op, k in counts[:4])
    more = f", +{len(counts) - 4} kinds" if len(counts) > 4 else ""
    return f"{n} ops: {shown}{more}"


def plan_collapse(
    graph: Graph, max_chain: int | None = 12, max_repeat: int | None = 6, prefix: str = ""
) -> Collapse:
    """Decide which nodes of `graph` to hide behind summary nodes (None disables a rule)."""
    users = graph.users()
    plan = Collapse()
    if max_chain is not None:
        for chain in _chains(graph, users):
            if len(chain) <= max(max_chain, 2):
                continue
            middle = chain[1:-1]
            label = f"… {summarize([n.op for n in middle])} …"  # type: ignore[misc]
            plan.add(Group(dot_id(f"{prefix}collapsed/{middle[0].name}"), label, list(middle)))
    if max_repeat is not None:
        for members in _repeats(graph, plan):
            if len(members) > max(max_repeat, 1):
                label = f"{members[0].op} × {len(members)}"
                plan.add(Group(dot_id(f"{prefix}repeated/{members[0].name}"), label, members))
    # constants that feed nothing but hidden nodes disappear with them
    for n in graph.nodes:
        if n.is_constant and users[n] and all(u in plan.owner for u in users[n]):
            groups = {id(plan.owner[u]): plan.owner[u] for u in users[n]}
            if len(groups) == 1:
                group = next(iter(groups.values()))
                group.members.append(n)
                plan.owner[n] = group
    return plan
