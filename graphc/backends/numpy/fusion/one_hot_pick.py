"""One-hot pick fusion: sum(where(one_hot(labels), x, 0), axis=-1) becomes one `one_hot_pick`.

Algorithm: one walk over the nodes finds each sum over the last axis whose input is a
where of a one_hot's rows (its condition), an x of the where's own float dtype and a
one-element constant zero of any dtype (its fill: +0.0 or -0.0 in x's); the sum must
keep that dtype, and the rows must not be static and smaller than PICK_FROM elements
(there the unfused steps are cheaper). A second walk emits the graph with the fused node in the sum's place
(its inputs, one_hot's labels among them, are all defined before the where was, so the
order stays topological), and without the where unless another node reads it. The
one_hot node stays while anything else reads it. nodes/one_hot_pick.py says why the
node's result is the chain's bits. Linear in nodes plus edges.

This is the cross-entropy head: the loss picks each row's log-probability this way, and
its gradient picks the seed from a broadcast row the same way (as the keepdims sum the
log_softmax VJP reads). Without the sum as a second reader, the gradient's where (the
seed rows, which the VJP's sub reads too) fuses into the elementwise group after it
(fuse_elementwise runs after this pass), so the head's (N, C) arrays are the
log-probabilities, the one-hot mask and the gradient.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.passes.builder import GraphBuilder, replacement_meta, sole_user
from graphc.passes.report import PassLog

# the one-hot rows' element count (when static) from which the node is the cheaper: its
# kernel's Python costs about 7 us a call, more than the where and sum steps it replaces
# below (native, 64x10: 25.7 us a head's step against 20.9 unfused; 512x10: 64 against
# 60; 2048x50: 290 against 420)
PICK_FROM = 16384


def _is_zero_constant(node: Node) -> bool:
    if node.kind != OP or node.op != "constant" or node.type.size != 1:
        return False
    value = np.asarray(node.attrs["value"])
    return value.size == 1 and value.reshape(()) == 0


def _pick(total: Node, users: dict[Node, list[Node]]) -> tuple[list[Node], Node] | None:
    """The fused node's inputs (x, labels, zero) and the one_hot, if `total` ends a pick."""
    where = total.inputs[0]
    if where.kind != OP or where.op != "where":
        return None
    hot, x, zero = where.inputs
    if hot.kind != OP or hot.op != "one_hot" or where.type.shape != hot.type.shape:
        return None
    axis = total.attrs["axis"]  # None: every axis, the classes' alone for a 0-d label
    if (tuple(range(hot.type.rank)) if axis is None else tuple(axis)) != (hot.type.rank - 1,):
        return None
    if where.type.size is not None and where.type.size < PICK_FROM:
        return None
    dtype = where.type.dtype
    if dtype.kind != "f" or not (x.type.dtype == total.type.dtype == dtype):
        return None
    if not _is_zero_constant(zero) or x is hot:
        return None
    return [x, hot.inputs[0], zero], hot


def fuse_one_hot_pick(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with each sum(where(one_hot(labels), x, 0), axis=-1) as one `one_hot_pick`.

    >>> import numpy as np, graphc as gc
    >>> g = gc.trace(gc.cross_entropy, gc.TensorSpec(("N", 3)), gc.TensorSpec(("N",), "int64"))
    >>> [n.op for n in gc.backends.numpy.fusion.fuse_one_hot_pick(g).op_nodes]
    ['log_softmax', 'one_hot', 'constant', 'one_hot_pick', 'mean', 'neg']

    The one_hot left without readers goes at the end of the fusion step (its DCE).
    """
    users = graph.users()
    picks: dict[Node, tuple[list[Node], Node]] = {}
    for node in graph.nodes:
        if node.kind == OP and node.op == "sum":
            found = _pick(node, users)
            if found is not None:
                picks[node] = found
    if not picks:
        return graph  # (nothing to fuse: no copy)
    # a where read by other nodes stays for them (the gradient's seed rows: its sub reads them)
    dropped = {total.inputs[0] for total in picks if sole_user(total.inputs[0], users) is total}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in picks:
            inputs, hot = picks[node]
            meta = replacement_meta(node)
            where = node.inputs[0]
            meta["members"] = [(m.name, m.op, m.loc) for m in (where, node)]
            attrs = {
                "num_classes": hot.attrs["num_classes"],
                "ignore_index": hot.attrs["ignore_index"],
                "keepdims": node.attrs["keepdims"],
            }
            fused = builder.op(
                "one_hot_pick", [new[x] for x in inputs], attrs, meta=meta, replaces=node
            )
            new[node] = fused
            if log is not None:
                log.note(f"'{fused.name}' <- where -> sum")
        elif node not in dropped:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    return builder.graph
