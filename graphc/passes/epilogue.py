"""Matmul epilogue fusion: act(x @ w + b) becomes one `matmul_epilogue` node.

Algorithm: one forward walk finds chains matmul -> add (the bias) -> activation
(relu, gelu, tanh or sigmoid; either step may be missing, not both) in which each
link is the only user of the previous one, so no intermediate is needed elsewhere;
the add must not change the product's type (the bias broadcasts into it). A second
forward walk emits the graph, placing the fused node where the chain's last node
was: every input of the chain is defined before that point, so the order stays
topological. Linear in nodes plus edges.
"""

from __future__ import annotations

from graphc.ir.graph import OP, Graph, Node
from graphc.ops.epilogue import ACTIVATIONS
from graphc.passes.builder import GraphBuilder, replacement_meta
from graphc.passes.report import PassLog


def _only_user(node: Node, users: dict[Node, list[Node]]) -> Node | None:
    us = users[node]
    return us[0] if len(us) == 1 and us[0].kind == OP else None


def find_chains(graph: Graph) -> dict[Node, tuple[Node, Node | None, Node | None, Node | None]]:
    """Last node of each chain -> (matmul, bias add, bias value, activation)."""
    users = graph.users()
    claimed: set[Node] = set()
    chains = {}
    for node in graph.nodes:
        if node.kind != OP or node.op != "matmul":
            continue
        last, add, bias, act = node, None, None, None
        user = _only_user(node, users)
        if user is not None and user.op == "add" and user not in claimed:
            other = user.inputs[1] if user.inputs[0] is node else user.inputs[0]
            if user.type == node.type and other is not node:
                last, add, bias = user, user, other
                user = _only_user(user, users)
        if user is not None and user.op in ACTIVATIONS and user.type == last.type:
            last, act = user, user
        if last is not node:
            chains[last] = (node, add, bias, act)
            claimed.update(n for n in (add, act) if n is not None)
    return chains


def fuse_matmul_epilogue(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with matmul + bias + activation chains as single `matmul_epilogue` nodes.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[4,3], %w: f32[3,2], %b: f32[2]) {
    ...   %m: f32[4,2] = matmul(%x, %w)
    ...   %a: f32[4,2] = add(%m, %b)
    ...   %r: f32[4,2] = relu(%a)
    ...   output %y = %r
    ... }''')
    >>> [n.op for n in gc.passes.fuse_matmul_epilogue(g).op_nodes]
    ['matmul_epilogue']
    """
    chains = find_chains(graph)
    inner = {n for chain in chains.values() for n in chain[:2] if n is not None}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in chains:
            matmul, add, bias, act = chains[node]
            inputs = [new[x] for x in matmul.inputs] + ([new[bias]] if bias is not None else [])
            attrs = {"bias": bias is not None, "activation": None if act is None else act.op}
            meta = replacement_meta(node)
            meta["members"] = [(m.name, m.op, m.loc) for m in (matmul, add, act) if m is not None]
            new[node] = builder.op("matmul_epilogue", inputs, attrs, meta=meta, replaces=node)
            if log is not None:
                steps = " -> ".join(m.op for m in (matmul, add, act) if m is not None)  # type: ignore[misc]
                log.note(f"'{new[node].name}' <- {steps}")
        elif node not in inner:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    return builder.graph
