"""Convolution epilogue fusion: act(conv2d(x, w) + b) becomes one `conv2d_epilogue` node.

The same walks as the matmul epilogue (passes/epilogue.py): chains conv2d -> add (the
bias) -> activation in which each link is the only user of the previous one; either
step may be missing, not both. The bias must vary along the channels only ((C, 1, 1),
as `gc.conv2d(x, w, b)` and `nn.Conv2d` add it, or one element) and keep the
convolution's type, so the fused kernel can add it to each chunk of images in place
(ops/conv_epilogue.py). Exact: the node runs the members' own kernels on the same
values, so it gives their results bit for bit. Linear in nodes plus edges.
"""

from __future__ import annotations

from graphc.ir.graph import Graph, Node
from graphc.ops.conv_epilogue import per_channel
from graphc.passes.epilogue import find_chains, fuse_chains
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
    >>> [n.op for n in gc.passes.fuse_conv_epilogue(g).op_nodes]
    ['reshape', 'conv2d_epilogue']

    An activation in `keep` is left out of the chain (see `optimize(keep=...)`).
    """
    chains = find_chains(graph, "conv2d", _per_channel_bias, keep)
    return fuse_chains(graph, chains, "conv2d_epilogue", log)
