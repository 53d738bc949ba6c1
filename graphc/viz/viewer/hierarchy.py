"""The viewer's groups: a graph of any size as a tree whose every level is small.

The page lays out only what is visible, so a graph opens fast when its top level has
a few dozen items and every group, once expanded, shows a few dozen more. The tree is
built in one walk over the graph (bodies included), then tidied group by group:

1. **Placement.** A joint graph's backward nodes (`painter.backward_nodes`) go under
   one "gradients" group; a node's ``meta["scope"]`` ("encoder/0/linear", set by name
   scopes and nn modules) puts it in nested scope groups; a node with bodies (cond,
   scan, while_loop, fused) is a group of its own whose children are its bodies' nodes
   (a group per body when it has several). Body placeholders read the operand that
   feeds them and a control node's `result` reads the body outputs that give it
   (`bodies.py`), so edges run through the bodies the way values do.
2. **Repeated structure.** Within a group, the longest stretch of children repeating
   with one period (`collapse.periodic_stretch`: an unrolled loop traced step by step,
   whose steps follow one another in topological order) becomes a "repeat" group of
   "step" groups; the parts before and after it are searched the same way.
3. **Blocks.** A group still holding more than `MAX_CHILDREN` children has its runs
   of plain nodes put into blocks, then, if still too many, all its children in order
   into blocks of `BLOCK`, block within block until the level is small: the fallback
   when a graph has neither names nor structure.

`initial_open` picks the groups expanded when the page opens: breadth first, while
the visible items stay within `INITIAL_BUDGET`, a step or a block only when it holds
nodes alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphc.ir.graph import PLACEHOLDER, Graph, Node
from graphc.viz.bodies import bodies_of, has_bodies, head_details, is_control
from graphc.viz.collapse import periodic_stretch, summarize
from graphc.viz.painter import backward_nodes

MAX_CHILDREN = 40  # the most children a group shows when expanded
BLOCK = 20  # the children of a block made because a group had too many
MIN_RUN = 12  # the fewest children a repeated stretch must cover to become a group
INITIAL_BUDGET = 60  # the most items visible when the page opens
# groups the page may open by itself: steps and blocks of a long run stay closed, since
# opened they draw a long column of look-alikes
OPEN_BY_ITSELF = ("graph", "backward", "scope", "control", "fused", "body", "repeat")


@dataclass(eq=False)
class Group:
    """A box of the viewer: its children are node ids and other groups, in order."""

    label: str
    kind: str  # graph, backward, scope, control, fused, body, repeat, step, block
    items: list[Group | int] = field(default_factory=list)
    head: int | None = None  # the node a control or fused group stands for
    id: int = -1  # set by `Hierarchy.finish`: the group's index, root first
    parent: int = -1
    size: int = 0  # nodes inside, nested groups' included


@dataclass
class Hierarchy:
    """Every node drawn (bodies' too), what each reads, and the groups holding them."""

    nodes: list[Node] = field(default_factory=list)
    inputs: list[list[int]] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    part: list[str] = field(default_factory=list)  # what a body's input or output stands for
    backward: list[bool] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)

    @property
    def root(self) -> Group:
        return self.groups[0]


def build(graph: Graph, all_backward: bool = False) -> Hierarchy:
    """The viewer's tree of `graph`; `all_backward` for a backward graph from
    split_backward, whose nodes need no "gradients" group.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2]) {
    ...   %y: f32[2] = tanh(%x)
    ...   output %out = %y
    ... }''')
    >>> [len(build(g).nodes), build(g).root.label]
    [3, 'g']
    """
    builder = _Builder()
    root = Group(graph.name, "graph")
    backward = set() if all_backward else backward_nodes(graph)
    builder.add_graph(graph, root, backward, feeds=None)
    _tidy(root, builder.h.nodes)
    return builder.finish(root)


class _Builder:
    def __init__(self) -> None:
        self.h = Hierarchy()
        self.children: dict[tuple[int, str, str], Group] = {}

    def child(self, container: Group, label: str, kind: str) -> Group:
        """The child group `label` of `container`, made where its first member comes."""
        key = (id(container), label, kind)
        if key not in self.children:
            self.children[key] = Group(label, kind)
            container.items.append(self.children[key])
        return self.children[key]

    def add_node(self, n: Node, backward: bool, part: str = "") -> int:
        self.h.nodes.append(n)
        self.h.inputs.append([])
        self.h.parent.append(-1)
        self.h.part.append(part)
        self.h.backward.append(backward)
        return len(self.h.nodes) - 1

    def add_graph(
        self,
        graph: Graph,
        top: Group,
        backward: set[Node],
        feeds: list[int] | None,
        parts: dict[Node, str] | None = None,
        in_backward: bool = False,
    ) -> dict[Node, int]:
        """Place `graph`'s nodes under `top`; `feeds` gives, per placeholder, the node
        that feeds it (a body's operands), `parts` what a body's inputs and outputs
        stand for, `in_backward` whether the graph is a body of a backward node.
        Returns the ids given to the nodes."""
        ids: dict[Node, int] = {}
        sources: dict[tuple[Node, int], list[int]] = {}  # a control node's results
        placeholders = {p: k for k, p in enumerate(graph.inputs)}
        for n in graph.nodes:
            container = top
            if n in backward:
                container = self.child(container, "gradients", "backward")
            for name in str(n.meta.get("scope") or "").split("/"):
                if name:
                    container = self.child(container, name, "scope")
            nid = self.add_node(n, in_backward or n in backward, (parts or {}).get(n, ""))
            ids[n] = nid
            if n.kind == PLACEHOLDER and feeds is not None:
                self.h.inputs[nid] = [feeds[placeholders[n]]]
            elif n.op == "result" and (n.inputs[0], int(n.attrs.get("index", 0))) in sources:
                self.h.inputs[nid] = sources[(n.inputs[0], int(n.attrs.get("index", 0)))]
            else:
                self.h.inputs[nid] = [ids[x] for x in n.inputs]
            if not has_bodies(n):
                container.items.append(nid)
                continue
            kind = "control" if is_control(n) else "fused"
            details = head_details(n)
            group = Group(f"{n.op} · {details}" if details else str(n.op), kind, head=nid)
            container.items.append(group)
            bodies = bodies_of(n)
            for body in bodies:
                target = group if len(bodies) == 1 else Group(body.title, "body")
                if target is not group:
                    group.items.append(target)
                # a fused body's inputs and outputs stand for its operands and its value
                body_parts = {
                    p: part or f"operand {body.feeds[k]}"
                    for k, (p, part) in enumerate(zip(body.graph.inputs, body.inputs))
                }
                body_parts.update(
                    (out, part or "value") for out, part in zip(body.graph.outputs, body.outputs)
                )
                operands = [ids[n.inputs[k]] for k in body.feeds]
                inner = self.add_graph(
                    body.graph, target, set(), operands, body_parts, self.h.backward[nid]
                )
                for out, result in zip(body.graph.outputs, body.results):
                    if result is not None and is_control(n):
                        sources.setdefault((n, result), []).append(inner[out])
        return ids

    def finish(self, root: Group) -> Hierarchy:
        """Number the groups root first and point every node and group at its parent."""
        order: list[Group] = []

        def visit(group: Group, parent: int) -> int:
            group.id, group.parent = len(order), parent
            order.append(group)
            group.size = 0
            if group.head is not None:
                self.h.parent[group.head] = group.id
                group.size += 1
            for item in group.items:
                if isinstance(item, Group):
                    group.size += visit(item, group.id)
                else:
                    self.h.parent[item] = group.id
                    group.size += 1
            return group.size

        visit(root, -1)
        self.h.groups = order
        return self.h


def _token(item: Group | int, nodes: list[Node]) -> str:
    """What must repeat for a stretch of children to be periodic."""
    if isinstance(item, Group):
        return f"[{item.kind} {item.label}]"
    n = nodes[item]
    return str(n.op) if n.op else n.kind


def _tidy(group: Group, nodes: list[Node]) -> None:
    """Steps 2 and 3 of the module docstring, in every group below `group` too."""
    for item in group.items:
        if isinstance(item, Group):
            _tidy(item, nodes)
    if group.kind not in ("repeat", "step"):
        group.items = _runs(group.items, nodes)
    group.items = _blocks(group.items, nodes)


def _runs(items: list[Group | int], nodes: list[Node]) -> list[Group | int]:
    """`items` with their longest periodic stretch as one "repeat" group of steps, and
    the parts before and after it searched the same way."""
    if len(items) < MIN_RUN:
        return items
    tokens = [_token(item, nodes) for item in items]
    stretch = periodic_stretch(tokens)
    if stretch is None or stretch[1] - stretch[0] < MIN_RUN:
        return items
    start, stop, period = stretch
    run = Group(summarize(tokens[start:stop]), "repeat")
    if period == 1:
        run.items = items[start:stop]
    else:
        for k, first in enumerate(range(start, stop, period)):
            run.items.append(Group(f"step {k + 1}", "step", items[first : first + period]))
    run.items = _blocks(run.items, nodes)
    return _runs(items[:start], nodes) + [run] + _runs(items[stop:], nodes)


def _blocks(items: list[Group | int], nodes: list[Node]) -> list[Group | int]:
    """`items`, when more than MAX_CHILDREN: first each run of plain nodes between
    groups as a block, then blocks of BLOCK, nested until one level holds them."""
    if len(items) > MAX_CHILDREN and any(isinstance(item, Group) for item in items):
        grouped: list[Group | int] = []
        for item in items:
            plain = isinstance(item, int) and grouped and isinstance(grouped[-1], list)
            if plain:
                grouped[-1].append(item)  # type: ignore[union-attr]
            else:
                grouped.append([item] if isinstance(item, int) else item)  # type: ignore[arg-type]
        items = []
        for entry in grouped:
            if isinstance(entry, list) and len(entry) > 2:
                ops = [_token(n, nodes) for n in entry]
                items += _nest([Group(summarize(ops), "block", entry)])
            else:
                items += entry if isinstance(entry, list) else [entry]
    return _nest(items)


def _nest(items: list[Group | int]) -> list[Group | int]:
    """Blocks of BLOCK consecutive items, block within block, until one level holds
    at most MAX_CHILDREN; a block's own too many children likewise."""
    for item in items:
        if isinstance(item, Group) and item.kind == "block" and len(item.items) > MAX_CHILDREN:
            item.items = _nest(item.items)
    # what each item covers, for the blocks' labels: ("steps", k, k) for step k, else
    # ("items", i, i) for the i-th item of this level
    spans = [_span(item, i + 1) for i, item in enumerate(items)]
    while len(items) > MAX_CHILDREN:
        blocks: list[Group | int] = []
        merged: list[tuple[str, int, int]] = []
        for first in range(0, len(items), BLOCK):
            chunk, parts = items[first : first + BLOCK], spans[first : first + BLOCK]
            if len(chunk) == 1:
                blocks.append(chunk[0])
                merged.append(parts[0])
                continue
            word = parts[0][0] if all(p[0] == parts[0][0] for p in parts) else "mixed"
            span = (word, parts[0][1], parts[-1][2])
            label = f"{word} {span[1]}–{span[2]}" if word != "mixed" else f"{len(chunk)} items"
            blocks.append(Group(label, "block", chunk))
            merged.append(span)
        items, spans = blocks, merged
    return items


def _span(item: Group | int, position: int) -> tuple[str, int, int]:
    if isinstance(item, Group) and item.kind == "step":
        k = int(item.label.split()[-1])
        return ("steps", k, k)
    return ("items", position, position)


def visible_items(h: Hierarchy, expanded: set[int]) -> int:
    """How many boxes the page draws with the groups `expanded` open (the root always):
    the children of every open group whose ancestors are open too."""
    count = 0
    stack = [h.root]
    while stack:
        group = stack.pop()
        count += len(group.items)
        stack += [g for g in group.items if isinstance(g, Group) and g.id in expanded]
    return count


def initial_open(h: Hierarchy, budget: int = INITIAL_BUDGET) -> list[int]:
    """The groups open when the page opens: breadth first from the root, each opened
    while the boxes drawn stay within `budget`; steps and blocks then only when they
    hold nodes alone (a small graph opens whole, a long run stays one column of boxes)."""
    opened = [h.root.id]
    visible = len(h.root.items)
    for by_itself in (True, False):
        queue = [g for g in h.root.items if isinstance(g, Group)]
        while queue:
            group = queue.pop(0)
            inner = [g for g in group.items if isinstance(g, Group)]
            if group.id not in opened:
                fits = visible + len(group.items) <= budget
                if not fits or (group.kind not in OPEN_BY_ITSELF and (by_itself or inner)):
                    continue
                opened.append(group.id)
                visible += len(group.items)
            if group.id in opened:
                queue += inner
    return opened
