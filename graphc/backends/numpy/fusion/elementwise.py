"""Elementwise fusion: connected elementwise ops become one `fused` node.

A group is a set of elementwise op nodes (registry flag `elementwise`; inputs may
broadcast) with one *root*, the group's only value seen outside it. The fused node
replaces the root; its attr `body` is the group as a graph whose placeholders are
the group's outside inputs (small constants are copied into the body instead).

Legality, and why it suffices: every member other than the root has all of its
users inside the group (an intermediate used outside, by another op or as a graph
output, must end its group and become the root of its own node, since nodes are
single-output). Then no path leaves the group and comes back into it: such a path
would leave through the root, and every member reaches the root, so the original
graph would have a cycle. So emitting the fused node at the root's place keeps the
topological order. Members must also have the root's shape (only the group's
inputs broadcast), so the body runs in one iteration space, as the runtime's
chunked loops need.

Algorithm: one reverse walk over the topological order. An elementwise node joins
the group of its users when they are all in one group and it has that group's
shape; otherwise it roots a new group, and the reason is recorded for the report.
One forward walk then emits the graph. Linear in nodes plus edges. Groups of one
op stay as they are.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from graphc.ir.graph import OP, OUTPUT, Graph, Node
from graphc.ir.registry import get_op
from graphc.passes.builder import GraphBuilder, replacement_meta
from graphc.passes.report import PassLog

EMBED_LIMIT = 64  # constants up to this many elements are copied into a body


def is_fusible(node: Node) -> bool:
    if node.kind != OP or node.is_constant:
        return False
    opdef = get_op(node.op)
    return opdef.elementwise and opdef.pure


def _why_alone(node: Node, users: list[Node], group_of: dict[Node, Node]) -> str | None:
    """Why `node` cannot join its users' group (None if it has no fusible user)."""
    inside = [u for u in users if u in group_of]
    if not inside:
        return None
    outside = [u for u in users if u not in group_of]
    if outside:
        u = outside[0]
        what = f"output '{u.name}'" if u.kind == OUTPUT else u.describe()
        return f"its value is also used by {what}, so it ends a group"
    roots = {group_of[u] for u in inside}
    if len(roots) > 1:
        names = ", ".join(sorted(f"'{r.name}'" for r in roots))
        return f"it is used by several groups ({names}), so it ends a group"
    root = roots.pop()
    return f"its shape {node.type} differs from its group's ({root.type} at '{root.name}')"


# dtypes a backend's fused kernels hold (see `keep` in find_groups)
KERNEL_DTYPES = frozenset(np.dtype(name) for name in ("float32", "float64", "bool"))


def _in_kernel(node: Node, lowered: frozenset[str]) -> bool:
    """Can the backend's fused kernel compute `node` (its op and every dtype it touches)?"""
    if node.op not in lowered or node.type.dtype not in KERNEL_DTYPES:
        return False
    return all(x.type.dtype in KERNEL_DTYPES for x in node.inputs)


def find_groups(
    graph: Graph,
    log: PassLog | None = None,
    keep: frozenset[str] = frozenset(),
    lowered: frozenset[str] = frozenset(),
) -> dict[Node, list[Node]]:
    """Root -> members (in graph order) of every group of two or more ops.

    With `keep` (ops a backend computes with other bits than numpy's kernels), a group
    holding one of them contains only ops the backend's own fused kernel computes
    (`lowered`, on float and bool values): were the group run by numpy's fused kernel
    instead, the kept op would get numpy's bits at this level and the backend's at O0."""
    users = graph.users()
    group_of: dict[Node, Node] = {}
    members: dict[Node, list[Node]] = {}
    kept: dict[Node, bool] = {}  # root -> the group holds an op of `keep`
    native: dict[Node, bool] = {}  # root -> every member is in the backend's kernel
    for node in reversed(graph.nodes):
        if not is_fusible(node):
            continue
        us = users[node]
        roots = {group_of.get(u) for u in us}
        root = roots.pop() if len(roots) == 1 else None
        is_kept, in_kernel = node.op in keep, _in_kernel(node, lowered)
        if root is not None and node.type.shape == root.type.shape:
            # a group with a kept op may only hold ops the backend's kernel computes
            if not (kept[root] or is_kept) or (native[root] and in_kernel):
                group_of[node] = root
                members[root].append(node)
                kept[root] = kept[root] or is_kept
                native[root] = native[root] and in_kernel
                continue
            if log is not None:
                log.note(
                    f"not fused: {node.describe()}: the backend's kernels compute "
                    f"{sorted(keep & {node.op, *(m.op for m in members[root])})} with their own "
                    "bits and cannot hold every op of this group in one kernel"
                )
            group_of[node] = node
            members[node] = [node]
            kept[node], native[node] = is_kept, in_kernel
            continue
        reason = _why_alone(node, us, group_of)
        if reason is not None and log is not None:
            log.note(f"not fused: {node.describe()}: {reason}")
        group_of[node] = node
        members[node] = [node]
        kept[node], native[node] = is_kept, in_kernel
    return {root: ms[::-1] for root, ms in members.items() if len(ms) > 1}


def _body(root: Node, members: list[Node]) -> tuple[Graph, list[Node]]:
    """The group as a graph, and the outside nodes feeding its placeholders, in order."""
    inside = set(members)
    body = Graph(f"{root.name}_body")
    new: dict[Node, Node] = {}
    outside: list[Node] = []
    for m in members:
        for x in m.inputs:
            if x in inside or x in new:
                continue
            if x.is_constant and x.value.size <= EMBED_LIMIT:
                continue  # copied into the body below, where it is used
            outside.append(x)
            new[x] = body.add_placeholder(x.name, x.type)
    for m in members:
        for x in m.inputs:
            if x not in new:
                new[x] = body.add_op("constant", (), x.attrs, x.type, name=x.name, meta=x.meta)
        ins = tuple(new[x] for x in m.inputs)
        new[m] = body.add_op(m.op, ins, m.attrs, m.type, name=m.name, meta=m.meta)
    body.add_output(new[root], body.fresh_name("out"))
    return body, outside


def describe_ops(members: list[Node]) -> str:
    """'exp mul' for a few members, '3750 ops: 625 add, 625 exp, ...' for many."""
    if len(members) <= 8:
        return f"{len(members)} ops ({' '.join(m.op for m in members)})"  # type: ignore[misc]
    counts = Counter(m.op for m in members)
    return f"{len(members)} ops ({', '.join(f'{n} {op}' for op, n in sorted(counts.items()))})"


def fuse_elementwise(
    graph: Graph,
    log: PassLog | None = None,
    keep: frozenset[str] = frozenset(),
    lowered: frozenset[str] = frozenset(),
) -> Graph:
    """`graph` with each group of connected elementwise ops replaced by one `fused` node
    (`keep` and `lowered`: see `find_groups`).

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[3], %y: f32[3]) {
    ...   %a: f32[3] = add(%x, %y)
    ...   %t: f32[3] = tanh(%a)
    ...   output %out = %t
    ... }''')
    >>> [n.op for n in gc.backends.numpy.fusion.fuse_elementwise(g).op_nodes]
    ['fused']
    """
    groups = find_groups(graph, log, keep, lowered)
    member_of = {m: root for root, ms in groups.items() for m in ms}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        root = member_of.get(node)
        if root is None:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
        elif node is root:
            body, outside = _body(root, groups[root])
            meta = replacement_meta(root)
            meta["members"] = [(m.name, m.op, m.loc) for m in groups[root]]
            # the body holds the members' own types, so the root's type is the fused
            # node's: no need to re-infer the whole body here (verify() still does)
            new[node] = builder.graph.add_op(
                "fused",
                [new[x] for x in outside],
                {"body": body},
                root.type,
                name=builder.fresh_name("fused"),
                meta=meta,
            )
            if log is not None:
                log.note(
                    f"fused '{new[node].name}' <- {describe_ops(groups[root])} "
                    f"ending at '{root.name}', {len(outside)} input(s)"
                )
    return builder.graph
