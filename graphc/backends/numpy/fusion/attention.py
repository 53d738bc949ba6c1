"""Attention fusion: softmax(mask(q @ kt * scale)) @ v becomes one `attention` node.

Algorithm: one forward walk starts at each matmul and follows its only user through
the chain `F.scaled_dot_product_attention` and `nn.MultiheadAttention` trace to (and a
hand-written attention too): an optional mul (the scale), any number of mask steps —
where(mask, s, fill), where(mask, fill, s) or add(s, mask) on either side — softmax
over the last axis, optionally dropout's mul(w, c) then where(keep, w, 0), and a
matmul with the weights on the left. Every link must be the only user of the one
before (an output is a user too) and keep the scores' type, so no intermediate is
needed elsewhere and the node computes exactly its members (nodes/attention.py); the
last matmul must not widen the batch axes. A second forward walk emits the graph,
placing the fused node where the last matmul was: every input of the chain is defined
before that point (no operand can depend on a member, whose only user is the next
member), so the order stays topological. Linear in nodes plus edges.

Gradient graphs do not fuse, by design: the backward pass reads the softmax weights
(softmax's VJP is written with its output, the last matmul's VJP reads its left
operand), so the weights have other users and the chain stays as it is; so do graphs
that return the weights (nn.MultiheadAttention with need_weights=True). The pass runs
at O2 after differentiation, before the matmul epilogue (which would otherwise take
the last matmul and an add after it), so it finds inference and forward-only graphs.
"""

from __future__ import annotations

from collections.abc import Callable

from graphc.ir.graph import OP, Graph, Node
from graphc.passes.builder import GraphBuilder, replacement_meta, sole_user
from graphc.passes.report import PassLog

# the node at the end of the chain -> the chain's members and the fused node's inputs and attrs
Chain = tuple[list[Node], list[Node], dict]


def _other(node: Node, value: Node) -> Node | None:
    """The operand of the binary `node` that is not `value` (None if both are)."""
    a, b = node.inputs
    if a is value and b is not value:
        return b
    if b is value and a is not value:
        return a
    return None


def _mask_step(node: Node, scores: Node) -> tuple[str, list[Node]] | None:
    """The mask step `node` makes of `scores` (see nodes/attention.py), and its operands."""
    if node.op == "where":
        cond, x, y = node.inputs
        if x is scores and cond is not scores and y is not scores:
            return "where", [cond, y]
        if y is scores and cond is not scores and x is not scores:
            return "where_not", [cond, x]
    if node.op == "add" and _other(node, scores) is not None:
        return "add", [_other(node, scores)]  # type: ignore[list-item]
    return None


def _chain(start: Node, users: dict[Node, list[Node]]) -> Chain | None:
    """The attention chain that begins at the matmul `start`, if there is one."""
    q, kt = start.inputs
    if q.type.rank < 2 or kt.type.rank < 2 or start.type.dtype.kind != "f":
        return None
    scores_type = start.type
    members, operands = [start], []
    attrs: dict = {"scale": False, "mask": (), "dropout": False}
    node = sole_user(start, users)

    def same(n: Node | None) -> bool:
        return n is not None and n.type == scores_type

    if same(node) and node.op == "mul" and _other(node, members[-1]) is not None:
        operands.append(_other(node, members[-1]))
        attrs["scale"] = True
        members.append(node)
        node = sole_user(node, users)
    mask: list[str] = []
    while same(node):
        step = _mask_step(node, members[-1])  # type: ignore[arg-type]
        if step is None:
            break
        kind, step_operands = step
        mask.append(kind)
        operands += step_operands
        members.append(node)  # type: ignore[arg-type]
        node = sole_user(node, users)  # type: ignore[arg-type]
    attrs["mask"] = tuple(mask)
    if not same(node) or node.op != "softmax" or node.attrs["axis"] != scores_type.rank - 1:
        return None
    members.append(node)
    node = sole_user(node, users)
    if same(node) and node.op == "mul" and _other(node, members[-1]) is not None:
        after = sole_user(node, users)
        if same(after) and after.op == "where":
            keep, x, zero = after.inputs
            if x is node and keep is not node and zero is not node:
                operands += [_other(node, members[-1]), keep, zero]  # type: ignore[list-item]
                attrs["dropout"] = True
                members += [node, after]
                node = sole_user(after, users)
    if node is None or node.op != "matmul" or node.inputs[0] is not members[-1]:
        return None
    v = node.inputs[1]
    if v is members[-1] or v.type.rank < 2 or node.type.shape[:-2] != scores_type.shape[:-2]:
        return None
    members.append(node)
    return members, [q, kt, v, *operands], attrs


def find_attention(
    graph: Graph, keep: frozenset[str] = frozenset(), computes: Callable[[Node], bool] | None = None
) -> dict[Node, Chain]:
    """Last node of each chain -> (members, the fused node's inputs, its attrs). With
    matmul in `keep`, chains whose kt or v is one matrix (rank 2) are left alone, or,
    given `computes` (which products the backend computes with its own bits), chains
    with a product it computes."""
    users = graph.users()
    chains: dict[Node, Chain] = {}
    for node in graph.nodes:
        # a chain's last matmul may start another chain (attention fed by attention): the
        # first one found keeps it
        if node.kind == OP and node.op == "matmul" and node not in chains:
            chain = _chain(node, users)
            if chain is not None and not ("matmul" in keep and _own(chain, computes)):
                chains[chain[0][-1]] = chain
    return chains


def _own(chain: Chain, computes: Callable[[Node], bool] | None) -> bool:
    """Whether a backend that keeps matmul computes a product of the chain itself: by
    `computes` when given, else where kt or v is one matrix (`_by_a_matrix`)."""
    if computes is None:
        return _by_a_matrix(chain)
    members = chain[0]
    return computes(members[0]) or computes(members[-1])


def _by_a_matrix(chain: Chain) -> bool:
    """Whether a product of the chain multiplies by one matrix (kt or v of rank 2): the
    products a backend that keeps matmul may compute with its own bits (the native
    backend's float32 products by a matrix: backends/native/matmul.py), which the
    attention node's kernel would not reproduce."""
    _, (_, kt, v, *_), _ = chain
    return kt.type.rank == 2 or v.type.rank == 2


def fuse_attention(
    graph: Graph,
    log: PassLog | None = None,
    keep: frozenset[str] = frozenset(),
    computes: Callable[[Node], bool] | None = None,
) -> Graph:
    """`graph` with each softmax(mask(q @ kt * scale)) @ v chain as one `attention` node.

    >>> import numpy as np, graphc as gc
    >>> from graphc.nn import functional as F
    >>> q = np.ones((2, 4, 8), np.float32)
    >>> g = gc.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, q, q)
    >>> [n.op for n in gc.backends.numpy.fusion.fuse_attention(g).op_nodes]
    ['transpose', 'constant', 'attention']

    Ops in `keep` are a backend's own (a backend's inexact ops: backends/native/fusion.py): with matmul among
    them, a chain is fused only where both products are batched (`_by_a_matrix`), or,
    given `computes`, where the backend computes neither of its products itself.
    """
    chains = find_attention(graph, keep, computes)
    if not chains:
        return graph  # (nothing to fuse: no copy)
    inner = {m for members, _, _ in chains.values() for m in members[:-1]}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in chains:
            members, inputs, attrs = chains[node]
            meta = replacement_meta(node)
            meta["members"] = [(m.name, m.op, m.loc) for m in members]
            fused = builder.op(
                "attention", [new[x] for x in inputs], attrs, meta=meta, replaces=node
            )
            new[node] = fused
            if log is not None:
                log.note(f"'{fused.name}' <- {' -> '.join(str(m.op) for m in members)}")
        elif node not in inner:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    return builder.graph
