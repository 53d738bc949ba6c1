"""Convolution epilogue fusion: conv2d and the elementwise work after it as one node,
in two passes.

`fuse_conv_epilogue`, before elementwise fusion: act(conv2d(x, w) + b) becomes one
`conv2d_epilogue` node (nodes/conv_epilogue.py). The same walks as the matmul epilogue
(fusion/epilogue.py): chains conv2d -> add (the bias) -> activation in which each link
is the only user of the previous one; either step may be missing, not both. The bias
must vary along the channels only ((C, 1, 1), as `gc.conv2d(x, w, b)` and `nn.Conv2d`
add it, or one element) and keep the convolution's type, so the fused kernel can add
it to each chunk of images in place. Exact: the node runs the members' own kernels on
the same values, so it gives their results bit for bit. Linear in nodes plus edges.

`fuse_conv_body`, after elementwise fusion: a `fused` node that is the only reader of
a plain conv2d's result and keeps its type (a batch norm in eval mode, a residual add,
a ReLU) becomes one `conv2d_fused` node (nodes/conv_fused.py) whose body is the group's,
the convolution its first placeholder, when each other input of the group is the same
for every image or has one row per image. Exact for the same reason, given that the
body holds no op in `keep` (a backend's inexact ops, which its own fused kernel would
have computed instead). One walk over the nodes, each fused node's inputs looked at
once.
"""

from __future__ import annotations

from graphc.backends.numpy.fusion.epilogue import find_chains, fuse_chains
from graphc.backends.numpy.nodes.conv_epilogue import per_channel
from graphc.backends.numpy.nodes.conv_fused import per_image
from graphc.ir.graph import OP, PLACEHOLDER, Graph, Node
from graphc.passes.builder import GraphBuilder, replacement_meta, sole_user
from graphc.passes.report import PassLog


def _per_channel_bias(add: Node, bias: Node) -> bool:
    return per_channel(bias.type, add.type)


def fuse_conv_epilogue(
    graph: Graph, log: PassLog | None = None, keep: frozenset[str] = frozenset()
) -> Graph:
    """`graph` with conv2d + per-channel bias + activation chains as `conv2d_epilogue` nodes.

    >>> import numpy as np, graphc as gc
    >>> x, w, b = np.ones((1, 2, 4, 4)), np.ones((3, 2, 3, 3)), np.ones(3)
    >>> g = gc.trace(lambda x, w, b: gc.relu(gc.conv2d(x, w, b)), x, w, b)
    >>> [n.op for n in gc.backends.numpy.fusion.fuse_conv_epilogue(g).op_nodes]
    ['reshape', 'conv2d_epilogue']

    An activation in `keep` is left out of the chain (a backend's inexact ops: backends/native/fusion.py).
    """
    chains = find_chains(graph, "conv2d", _per_channel_bias, keep)
    return fuse_chains(graph, chains, "conv2d_epilogue", log)


def fuse_conv_body(
    graph: Graph, log: PassLog | None = None, keep: frozenset[str] = frozenset()
) -> Graph:
    """`graph` with each conv2d -> fused pair as one `conv2d_fused` node.

    >>> import graphc as gc
    >>> g = gc.Graph("g")
    >>> with g:
    ...     x = gc.placeholder("x", (2, 3, 6, 6))
    ...     w, s = gc.placeholder("w", (4, 3, 3, 3)), gc.placeholder("s", (4, 1, 1))
    ...     _ = gc.output(gc.relu(gc.conv2d(x, w) * s), name="y")
    >>> fused = gc.backends.numpy.fusion.fuse_elementwise(g)
    >>> [(n.op, len(n.inputs)) for n in gc.backends.numpy.fusion.fuse_conv_body(fused).op_nodes]
    [('conv2d_fused', 3)]
    """
    users = graph.users()
    merged: dict[Node, tuple[Node, int]] = {}  # fused node -> (its conv2d, at which input)
    for node in graph.op_nodes:
        found = _conv_input(node, users, keep) if node.op == "fused" else None
        if found is not None:
            merged[node] = found
    if not merged:
        return graph  # (nothing to fuse: no copy)
    convs = {conv for conv, _ in merged.values()}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in merged:
            conv, k = merged[node]
            others = [new[x] for i, x in enumerate(node.inputs) if i != k]
            attrs = {**conv.attrs, "body": _conv_first(node.attrs["body"], k)}
            meta = replacement_meta(node)
            meta["members"] = [(m.name, m.op, m.loc) for m in (conv, node)]
            inputs = [new[conv.inputs[0]], new[conv.inputs[1]], *others]
            new[node] = builder.op("conv2d_fused", inputs, attrs, meta=meta, replaces=node)
            if log is not None:
                log.note(f"'{new[node].name}' <- conv2d -> fused '{node.name}'")
        elif node not in convs:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    return builder.graph


def _conv_input(
    node: Node, users: dict[Node, list[Node]], keep: frozenset[str]
) -> tuple[Node, int] | None:
    """The plain conv2d among `node`'s inputs that it can take as its body's first
    input, and at which index; None if there is none."""
    if any(n.op in keep for n in node.attrs["body"].op_nodes):
        return None
    for k, x in enumerate(node.inputs):
        fits = (
            x.kind == OP
            and x.op == "conv2d"
            and sole_user(x, users) is node
            and node.inputs.count(x) == 1
            and node.type == x.type
        )
        if fits and all(per_image(y.type, x.type) for y in node.inputs if y is not x):
            return x, k
    return None


def _conv_first(body: Graph, k: int) -> Graph:
    """A copy of `body` whose placeholder `k` comes first."""
    placeholders = body.inputs
    order = [placeholders[k], *(p for i, p in enumerate(placeholders) if i != k)]
    result = Graph(body.name)
    copies: dict[Node, Node] = {}
    for node in order + [n for n in body.nodes if n.kind != PLACEHOLDER]:
        result.append_copy(node, copies)
    return result
