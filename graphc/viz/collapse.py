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
- An *unrolled loop* is such a run where each op may also read values from outside
  the run (a weight every step reads, the step's slice of a sequence) and the ops
  repeat with a period (`MAX_PERIOD` ops at most) at least three times: a Python
  `for` over `h = tanh(x[t] @ w + h @ u)` traced step by step. Its longest periodic
  stretch, in whole periods, becomes ``… (matmul → add → tanh) × 19 …``, and the
  ops that only feed it (each step's slice) hide with it.
- *Unrolled steps* that are no chain (a backward pass through an unrolled loop: each
  step's gradient ops in turn, several values passing between steps): the longest
  stretch of the remaining ops, in topological order, whose op sequence repeats with a
  period, becomes ``… (mul → sub → matmul) × 9 …`` with the count of steps and the
  names at its ends; its first step stays visible (`_collapse_steps`).
- *Repeats* are ops of the same structure: the same op and attributes applied to
  inputs of the same structure (see `_repeats`). More than `max_repeat` of them
  become one node labelled ``op × N``.

When a picture would still be too big to read (the size guard, painter.py), each
name scope's ops become one node first (`scopes=True`).

Constants read only by collapsed nodes are folded into the same summary. Nothing
here changes a graph; the result only tells the drawer which node stands for which.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.viz.bodies import has_bodies
from graphc.viz.style import dot_id


@dataclass
class Group:
    """Several nodes drawn as one summary node."""

    id: str
    label: tuple[str, ...]  # its lines, as text (the painter escapes them for DOT)
    members: list[Node]
    kind: str = "chain"  # "chain", "steps" (unrolled steps), "repeat" or "scope"


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
    # a node with bodies is a cluster worth seeing, and a `result` only projects one of
    # several results: neither hides in a summary (the unrolled steps around them do)
    return n.kind == OP and not n.is_constant and n.op != "result" and not has_bodies(n)


def _value_inputs(n: Node) -> list[Node]:
    return [x for x in n.inputs if not x.is_constant]


MAX_PERIOD = 64  # the most ops one step of an unrolled loop may have and still be seen
MIN_PERIODS = 3  # fewer repetitions than this are not a loop worth summarising


def _chains(
    graph: Graph, users: dict[Node, list[Node]], side_inputs: bool = False
) -> list[list[Node]]:
    """Maximal runs where each op is the only user of the one before it; without
    `side_inputs`, each op also reads no other value than that one (constants aside)."""

    def continues(n: Node, p: Node) -> bool:
        # with side inputs an op may be reachable from two runs: the first one keeps it
        if not _is_chain_op(n) or users[p] != [n] or n in seen:
            return False
        return p in n.inputs if side_inputs else _value_inputs(n) == [p]

    seen: set[Node] = set()
    chains = []
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


def periodic_stretch(ops: Sequence[str]) -> tuple[int, int, int] | None:
    """(start, stop, period) of the longest stretch of `ops` made of at least
    `MIN_PERIODS` whole repetitions of one period, or None.

    For each period p a stretch [s, e) is periodic when ops[k] == ops[k - p] for every
    k in [s + p, e); a mismatch at i ends it, and the next can start at i - p + 1.
    Whole periods are kept from the end, so what stays visible is the first step.
    """
    best: tuple[int, int, int] | None = None
    for period in range(1, min(MAX_PERIOD, len(ops) // MIN_PERIODS) + 1):
        start = 0
        for i in range(period, len(ops) + 1):
            if i < len(ops) and ops[i] == ops[i - period]:
                continue
            whole = (i - start) // period * period
            if whole >= MIN_PERIODS * period and (best is None or whole > best[1] - best[0]):
                best = (i - whole, i, period)
            start = i - period + 1
    return best


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
    graph: Graph,
    max_chain: int | None = 12,
    max_repeat: int | None = 6,
    prefix: str = "",
    scopes: bool = False,
) -> Collapse:
    """Decide which nodes of `graph` to hide behind summary nodes (None disables a rule;
    `scopes`: each name scope's ops first become one node, as the size guard asks)."""
    users = graph.users()
    plan = Collapse()
    if scopes:
        _collapse_scopes(graph, plan, prefix)
    if max_chain is not None:
        limit = max(max_chain, 2)
        for chain in _chains(graph, users, side_inputs=True):
            stretch = periodic_stretch([n.op for n in chain[1:-1]])  # type: ignore[misc]
            if stretch is not None and stretch[1] - stretch[0] > limit:
                start, stop, _ = stretch
                _add_chain_group(plan, chain[1 + start : 1 + stop], prefix)
                _absorb_step_inputs(graph, users, plan, plan.groups[-1], set(chain))
        for chain in _chains(graph, users):
            # the parts of the chain no unrolled loop took, each with its ends visible
            for run in _unowned_runs(chain, plan):
                if len(run) > limit:
                    _add_chain_group(plan, run[1:-1], prefix)
        _collapse_steps(graph, plan, limit, prefix)
    if max_repeat is not None:
        for members in _repeats(graph, plan):
            if len(members) > max(max_repeat, 1):
                label = (f"{members[0].op} × {len(members)}",)
                plan.add(
                    Group(dot_id(f"{prefix}repeated/{members[0].name}"), label, members, "repeat")
                )
    _absorb_inputs_and_outputs(graph, users, plan)
    # constants that feed nothing but hidden nodes disappear with them
    for n in graph.nodes:
        if n.is_constant and users[n] and all(u in plan.owner for u in users[n]):
            groups = {id(plan.owner[u]): plan.owner[u] for u in users[n]}
            if len(groups) == 1:
                group = next(iter(groups.values()))
                group.members.append(n)
                plan.owner[n] = group
    return plan


SCOPE_DEPTH = 2  # a scope group stands for "encoder/0", whatever lies deeper inside


def _collapse_scopes(graph: Graph, plan: Collapse, prefix: str) -> None:
    """The ops of each name scope (cut at `SCOPE_DEPTH` levels) as one summary node."""
    members: dict[str, list[Node]] = {}
    for n in graph.nodes:
        scope = n.meta.get("scope")
        if scope and (_is_chain_op(n) or n.is_constant):
            key = "/".join(str(scope).split("/")[:SCOPE_DEPTH])
            members.setdefault(key, []).append(n)
    for scope, nodes in members.items():
        ops = [str(n.op) for n in nodes if not n.is_constant]
        if len(ops) > 1:
            label = (scope, summarize(ops))
            plan.add(Group(dot_id(f"{prefix}scope/{scope}"), label, nodes, "scope"))


MAX_STEP_GROUPS = 8  # periodic stretches collapsed per graph (a forward's, a backward's, ...)


def _collapse_steps(graph: Graph, plan: Collapse, limit: int, prefix: str) -> None:
    """Unrolled steps that are no chain: the ops left visible, in topological order,
    whose op sequence repeats (a backward pass through an unrolled loop emits each
    step's gradient ops in turn, several values flowing between steps). The longest
    periodic stretch longer than `limit` becomes one summary node, its first step left
    visible to show what a step is; then the next longest, and so on.

    Steps are a loop only when each reads what the step before it computed: the same
    ops side by side on their own inputs (the query, key and value projections of an
    attention layer) are no loop, and stay visible; their stretch is left out of the
    search that follows."""
    passed_over: set[Node] = set()
    for _ in range(MAX_STEP_GROUPS):
        ops = [n for n in graph.nodes if _is_chain_op(n) and n not in plan.owner]
        names = [f"#{k}" if n in passed_over else str(n.op) for k, n in enumerate(ops)]
        stretch = periodic_stretch(names)
        if stretch is None or stretch[1] - stretch[0] - stretch[2] <= limit:
            return
        start, stop, period = stretch
        if not _chained(ops[start:stop], period):
            passed_over.update(ops[start:stop])
            continue
        members = ops[start + period : stop]
        label = f"… {summarize([str(n.op) for n in members])} …"
        names = f"{members[0].name} … {members[-1].name}"  # the program's names, if any
        plan.add(
            Group(dot_id(f"{prefix}steps/{members[0].name}"), (label, names), members, "steps")
        )


def _chained(ops: list[Node], period: int) -> bool:
    """Does each step of `ops` (`period` ops a step) read a value of the step before it,
    directly or through nodes that are no step's ops (a `result`, a constant)?"""
    step_of = {n: k // period for k, n in enumerate(ops)}
    for k in range(1, len(ops) // period):
        seen: set[Node] = set()
        todo = [x for n in ops[k * period : (k + 1) * period] for x in n.inputs]
        found = False
        while todo and not found:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            if x in step_of:
                found = step_of[x] == k - 1
            elif x.kind == OP:
                todo.extend(x.inputs)
        if not found:
            return False
    return True


def _absorb_inputs_and_outputs(graph: Graph, users: dict[Node, list[Node]], plan: Collapse) -> None:
    """Inputs read by one summary of a chain or of unrolled steps alone (a backward
    graph's values saved at each step) hide in it, and so do outputs of such a summary
    when it gives several (a forward graph's values saved at each step for the
    backward); a single output stays, and so does an input of repeated ops."""
    outputs: dict[int, list[Node]] = {}
    for n in graph.nodes:
        if n.kind == PLACEHOLDER and users[n]:
            groups = {id(plan.owner.get(u)): plan.owner.get(u) for u in users[n]}
            group = next(iter(groups.values())) if len(groups) == 1 else None
            if _absorbing(group):
                group.members.append(n)
                plan.owner[n] = group
        elif n.kind == OUTPUT and _absorbing(plan.owner.get(n.inputs[0])):
            outputs.setdefault(id(plan.owner[n.inputs[0]]), []).append(n)
    for found in outputs.values():
        if len(found) >= MIN_PERIODS:
            group = plan.owner[found[0].inputs[0]]
            group.members.extend(found)
            plan.owner.update((n, group) for n in found)


def _absorbing(group: Group | None) -> bool:
    return group is not None and group.kind in ("chain", "steps")


def _add_chain_group(plan: Collapse, members: list[Node], prefix: str) -> None:
    label = (f"… {summarize([n.op for n in members])} …",)  # type: ignore[misc]
    plan.add(Group(dot_id(f"{prefix}collapsed/{members[0].name}"), label, list(members)))


def _unowned_runs(chain: list[Node], plan: Collapse) -> list[list[Node]]:
    runs: list[list[Node]] = [[]]
    for n in chain:
        if n in plan.owner:
            runs.append([])
        else:
            runs[-1].append(n)
    return [run for run in runs if run]


def _absorb_step_inputs(
    graph: Graph, users: dict[Node, list[Node]], plan: Collapse, group: Group, chain: set[Node]
) -> None:
    """Ops off the chain read only by one step of a collapsed loop (its slice of the
    sequence) hide with it; their own inputs (the whole sequence) then feed the summary
    node. The chain's visible ends stay, so that the summary still connects."""
    for n in graph.nodes:
        if (
            _is_chain_op(n)
            and n not in plan.owner
            and n not in chain
            and len(users[n]) == 1
            and plan.owner.get(users[n][0]) is group
            and not any(plan.owner.get(x) is group for x in n.inputs)
        ):
            group.members.append(n)
            plan.owner[n] = group
