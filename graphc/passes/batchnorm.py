"""Batch norm folding: a per-channel scale and shift after conv2d or matmul moves into
the weight and one bias add. VALUE-CHANGING, so opt-in (see below).

In eval mode `batch_norm` is elementwise arithmetic with per-channel constants once its
parameters are constants (a model traced with its parameters bound, or a graph called
on arrays inside a trace):

    y = ((x - mean) * rsqrt(var + eps)) * gamma + beta      each of shape (C, 1, 1)

After `fold_constants` the chain is add/sub/mul/div nodes on (C, 1, 1) constants. When
it follows a `conv2d` (or a `matmul`, as `nn.Linear` builds) whose weight is a
constant, the whole chain is the affine map y = p * s + t per output channel, and

    conv2d(x, W) * s + t  ==  conv2d(x, W * s[:, None, None, None]) + t
    x @ V * s + t         ==  x @ (V * s[None, :]) + t

which is the folding W' = W * gamma / sqrt(var + eps), b' = (b - mean) * gamma /
sqrt(var + eps) + beta: one pass over the output instead of four or five.

Algorithm: one forward walk. For each conv2d or matmul with a constant weight (or, for
matmul, the transpose of one), follow its users while each is the only user of the
value before it and is add, sub, mul or div of that value (the left operand of sub and
div) by a constant that varies along the output channels only and keeps the value's
type: axis 1 of conv2d's (N, C, H, W), the last axis of matmul's output. A chain with
at least one scale is composed in float64 into s and t, and the new weight constant,
producer and bias add replace it where its last node was (every input is defined
before there, so the order stays topological). Chains whose folded constants are not
finite are left alone. Linear in nodes plus edges.

Why it is value-changing: W * s is rounded once and then summed, where the graph
rounded each sum and then scaled it, and the shifts fold into one constant in another
order, so results differ in the last bits (and x * s * w of an inf or nan in x may
differ from its folded form). graphc's default pipeline is exact at every level
(docs/trust.md), so this pass runs only when asked: `gc.passes.fold_batch_norm(g)`, or
`fast_math=True` in `gc.optimize` / `gc.compile`, where it runs in the cleanups after
`simplify` and the report tags it `[fast_math]` like the value-changing rules.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.types import is_float
from graphc.passes.builder import GraphBuilder, replacement_meta
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.report import PassLog

AFFINE = ("add", "sub", "mul", "div")
SCALES = ("mul", "div")
FOLDED = "fold a per-channel scale and shift into {op}'s weight [fast_math]"


class Chain:
    """A producer (conv2d or matmul), its weight, and the affine ops after it."""

    def __init__(self, producer: Node, weight: Node, transposed: bool) -> None:
        self.producer = producer
        self.weight = weight  # the constant holding the weight
        self.transposed = transposed  # matmul by transpose(weight)
        self.ops: list[tuple[Node, Node]] = []  # (node, its constant operand)
        self.own_transpose = False  # the transpose is read by the producer only

    @property
    def last(self) -> Node:
        return self.ops[-1][0]

    @property
    def nodes(self) -> list[Node]:
        """The nodes the folded form replaces, in order."""
        own = [self.producer.inputs[1]] if self.own_transpose else []
        return own + [self.producer] + [op for op, _ in self.ops]

    @property
    def channels(self) -> int:
        return self.producer.type.shape[1 if self.producer.op == "conv2d" else -1]

    def channel_shape(self) -> tuple[int, ...]:
        """How the shift broadcasts against the producer's output."""
        return (self.channels, 1, 1) if self.producer.op == "conv2d" else (self.channels,)


def _weight(node: Node) -> tuple[Node, bool] | None:
    """The constant weight of a conv2d or matmul, and whether matmul reads it transposed."""
    if node.op == "conv2d":
        w = node.inputs[1]
        return (w, False) if w.is_constant else None
    w = node.inputs[1]
    if node.type.rank < 1 or w.type.rank != 2 or not is_float(node.type.dtype):
        return None
    if w.is_constant:
        return w, False
    inner = w.inputs[0] if w.kind == OP and w.op == "transpose" else None
    if inner is not None and inner.is_constant and tuple(w.attrs["axes"]) == (1, 0):
        return inner, True
    return None


def _per_channel(c: Node, chain: Chain) -> bool:
    """Whether constant `c` varies along the producer's channel axis only."""
    out = chain.producer.type
    if not c.is_constant or c.type.rank > out.rank:
        return False
    shape = (1,) * (out.rank - c.type.rank) + tuple(c.type.shape)
    axis = 1 if chain.producer.op == "conv2d" else out.rank - 1
    return all(d == 1 or (k == axis and d == chain.channels) for k, d in enumerate(shape))


def _next(node: Node, chain: Chain, users: dict[Node, list[Node]]) -> tuple[Node, Node] | None:
    """The affine op after `node` and its constant, when it continues the chain."""
    us = users[node]
    if len(us) != 1 or us[0].kind != OP or us[0].op not in AFFINE:
        return None
    user = us[0]
    if user.type != chain.producer.type or user.inputs[0] is user.inputs[1]:
        return None
    if user.inputs[0] is node:
        c = user.inputs[1]
    elif user.op in ("add", "mul"):  # c + v, c * v; c - v and c / v are not affine in s
        c = user.inputs[0]
    else:
        return None
    return (user, c) if _per_channel(c, chain) else None


def find_chains(graph: Graph) -> dict[Node, Chain]:
    """Last node of each foldable chain -> the chain."""
    users = graph.users()
    chains: dict[Node, Chain] = {}
    for node in graph.nodes:
        if node.kind != OP or node.op not in ("conv2d", "matmul"):
            continue
        found = _weight(node)
        if found is None or not isinstance(node.type.shape[1 if node.op == "conv2d" else -1], int):
            continue
        chain = Chain(node, *found)
        chain.own_transpose = chain.transposed and len(users[node.inputs[1]]) == 1
        value = node
        while (step := _next(value, chain, users)) is not None:
            chain.ops.append(step)
            value = step[0]
        if any(op.op in SCALES for op, _ in chain.ops):  # shifts alone: nothing to fold
            chains[chain.last] = chain
    return chains


def compose(chain: Chain) -> tuple[np.ndarray, np.ndarray]:
    """s and t (float64, one per channel) with chain(p) == p * s + t."""
    scale, shift = np.ones(chain.channels), np.zeros(chain.channels)
    with np.errstate(all="ignore"):
        for node, c in chain.ops:
            v = np.broadcast_to(np.asarray(c.value, np.float64).reshape(-1), scale.shape)
            if node.op == "add":
                shift = shift + v
            elif node.op == "sub":
                shift = shift - v
            elif node.op == "mul":
                scale, shift = scale * v, shift * v
            else:
                scale, shift = scale / v, shift / v
    return scale, shift


def _folded_weight(chain: Chain, scale: np.ndarray) -> np.ndarray | None:
    """The weight with each output channel scaled, in the dtype the producer computes in
    (a float32 weight of a float64 convolution becomes float64: the output's type stays);
    None where scaling makes a finite weight overflow."""
    w = chain.weight.value
    if chain.producer.op == "conv2d" or chain.transposed:  # output channels first
        factor = scale.reshape((-1,) + (1,) * (w.ndim - 1))
    else:  # (K, O): output channels last
        factor = scale
    dtype = np.result_type(w.dtype, chain.producer.type.dtype)
    with np.errstate(all="ignore"):
        folded = (w.astype(np.float64) * factor).astype(dtype)
    return folded if np.isfinite(folded).all() or not np.isfinite(w).all() else None


def _emit(builder: GraphBuilder, chain: Chain, new: dict[Node, Node]) -> Node | None:
    """The folded producer and its bias add, appended; None (nothing appended) when the
    folded constants would not be finite."""
    scale, shift = compose(chain)
    if not (np.isfinite(scale).all() and np.isfinite(shift).all()):
        return None
    folded = _folded_weight(chain, scale)
    if folded is None:
        return None
    producer, dtype = chain.producer, chain.producer.type.dtype
    meta = replacement_meta(producer)
    weight = builder.constant(folded, meta=meta, name=f"{chain.weight.name}_folded")
    if chain.transposed:
        old = chain.producer.inputs[1]
        weight = builder.op("transpose", [weight], old.attrs, meta=meta, replaces=old)
    inputs = [new[producer.inputs[0]], weight]
    product = builder.op(producer.op, inputs, producer.attrs, meta=meta, replaces=producer)
    bias = builder.constant(
        shift.astype(dtype).reshape(chain.channel_shape()), meta=meta, name=f"{producer.name}_bias"
    )
    last = chain.last
    return builder.op("add", [product, bias], meta=replacement_meta(last), replaces=last)


def fold_batch_norm(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with per-channel scales and shifts after conv2d and matmul (eval-mode batch
    norm on constant statistics) folded into the weight and one bias add. Value-changing:
    opt-in, or with fast_math (see the module docstring).

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2,3]) {
    ...   %w: f32[3,2] = constant(value=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    ...   %s: f32[2] = constant(value=[0.5, 2.0])
    ...   %t: f32[2] = constant(value=[1.0, -1.0])
    ...   %m: f32[2,2] = matmul(%x, %w)
    ...   %a: f32[2,2] = mul(%m, %s)
    ...   %b: f32[2,2] = add(%a, %t)
    ...   output %y = %b
    ... }''')
    >>> print(gc.passes.fold_batch_norm(g))
    graph g(%x: f32[2,3]) {
      %w_folded: f32[3,2] = constant(value=[[0.5, 4.0], [1.5, 8.0], [2.5, 12.0]])
      %m: f32[2,2] = matmul(%x, %w_folded)
      %m_bias: f32[2] = constant(value=[1.0, -1.0])
      %b: f32[2,2] = add(%m, %m_bias)
      output %y = %b
    }
    """
    chains = find_chains(graph)
    if not chains:
        return graph
    skipped = {n for chain in chains.values() for n in chain.nodes}
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    folded = 0
    for node in graph.nodes:
        if node in chains:
            result = _emit(builder, chains[node], new)
            if result is not None:
                new[node] = result
                folded += 1
                if log is not None:
                    chain = chains[node]
                    log.count(FOLDED.format(op=chain.producer.op))
                    steps = " -> ".join(str(n.op) for n in chain.nodes)
                    log.note(f"'{result.name}' <- {steps}")
                continue
            _copy_chain(builder, chains[node], new)  # declined: the chain as it was
        elif node not in skipped:
            new[node] = builder.copy(node, (new[x] for x in node.inputs))
    return eliminate_dead_code(builder.graph) if folded else graph


def _copy_chain(builder: GraphBuilder, chain: Chain, new: dict[Node, Node]) -> None:
    for node in chain.nodes:
        new[node] = builder.copy(node, (new[x] for x in node.inputs))
