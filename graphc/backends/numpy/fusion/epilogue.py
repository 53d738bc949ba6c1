"""Matmul epilogue fusion: act(x @ w + b) becomes one `matmul_epilogue` node.

Algorithm: one forward walk finds chains matmul -> add (the bias) -> activation
(relu, gelu, tanh or sigmoid; either step may be missing, not both) in which each
link is the only user of the previous one, so no intermediate is needed elsewhere;
the add must not change the product's type (the bias broadcasts into it). A second
forward walk emits the graph, placing the fused node where the chain's last node
was: every input of the chain is defined before that point, so the order stays
topological. Linear in nodes plus edges.

`find_chains` and `fuse_chains` take the producing op and the fused op as parameters:
`fuse_conv_epilogue` (fusion/conv_epilogue.py) runs the same walks for conv2d.
"""

from __future__ import annotations

from collections.abc import Callable

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.passes.builder import GraphBuilder, replacement_meta, sole_user
from graphc.passes.report import PassLog


def _any_bias(add: Node, bias: Node) -> bool:
    return True


Chain = tuple[Node, Node | None, Node | None, Node | None]  # producer, add, bias, activation


def find_chains(
    graph: Graph,
    producer: str = "matmul",
    bias_fits: Callable[[Node, Node], bool] = _any_bias,
    keep: frozenset[str] = frozenset(),
) -> dict[Node, Chain]:
    """Last node of each chain -> (producer, bias add, bias value, activation).
    `bias_fits(add, bias)` may refuse a bias the fused kernel cannot take; activations
    in `keep` stay nodes of their own (a backend's inexact ops: backends/native/fusion.py)."""
    users = graph.users()
    claimed: set[Node] = set()
    chains = {}
    for node in graph.nodes:
        if node.kind != OP or node.op != producer:
            continue
        last, add, bias, act = node, None, None, None
        user = sole_user(node, users)
        if user is not None and user.op == "add" and user not in claimed:
            other = user.inputs[1] if user.inputs[0] is node else user.inputs[0]
            if user.type == node.type and other is not node and bias_fits(user, other):
                last, add, bias = user, user, other
                user = sole_user(user, users)
        if (
            user is not None
            and get_op(user.op).has("activation")
            and user.op not in keep
            and user.type == last.type
        ):
            last, act = user, user
        if last is not node:
            chains[last] = (node, add, bias, act)
            claimed.update(n for n in (add, act) if n is not None)
    return chains


def fuse_chains(
    graph: Graph,
    chains: dict[Node, Chain],
    fused_op: str,
    log: PassLog | None = None,
) -> Graph:
    """`graph` with each chain replaced by one `fused_op` node on the producer's inputs
    (and the bias), with the producer's attrs plus `bias` and `activation`."""
    if not chains:
        return graph  # (nothing to fuse: no copy, as a compile runs this on every graph)
    inner = {n for chain in chains.values() for n in chain[:2] if n is not None}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in chains:
            producer, add, bias, act = chains[node]
            inputs = [new[x] for x in producer.inputs] + ([new[bias]] if bias is not None else [])
            attrs = {
                **producer.attrs,
                "bias": bias is not None,
                "activation": None if act is None else act.op,
            }
            meta = replacement_meta(node)
            members = [m for m in (producer, add, act) if m is not None]
            meta["members"] = [(m.name, m.op, m.loc) for m in members]
            new[node] = builder.op(fused_op, inputs, attrs, meta=meta, replaces=node)
            if log is not None:
                steps = " -> ".join(str(m.op) for m in members)
                log.note(f"'{new[node].name}' <- {steps}")
        elif node not in inner:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    return builder.graph


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
    >>> [n.op for n in gc.backends.numpy.fusion.fuse_matmul_epilogue(g).op_nodes]
    ['matmul_epilogue']
    """
    return fuse_chains(graph, find_chains(graph), "matmul_epilogue", log)
