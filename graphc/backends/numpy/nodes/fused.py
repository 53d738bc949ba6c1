"""The `fused` op: one node that computes a whole subgraph of elementwise ops.

`fuse_elementwise` (graphc.backends.numpy.fusion.elementwise) makes these. The attr `body` is a Graph
whose placeholders correspond 1:1, in order, to the node's inputs and which has
exactly one output. The type rule re-infers the body on the actual input types
(binding the body's symbolic dims to them), the reference kernel runs the body's
own op kernels one after the other (correct, not fast: the runtime generates a
chunked fast path), and the gradient chains the members' own VJP rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.ir.graph import OP, PLACEHOLDER, Graph, Node
from graphc.ir.registry import REQUIRED, bound_attrs, get_op
from graphc.ir.types import TensorType
from graphc.ops.body import body_cost, body_types, check_body, dims_of
from graphc.ops.defop import VARIADIC, defop, into


def _fused_infer(*types: TensorType, body: Graph) -> TensorType:
    return body_types(body, types)[check_body(body, len(types))]  # type: ignore[return-value]


def _fused_kernel(*arrays: np.ndarray, out: np.ndarray | None = None, body: Graph) -> np.ndarray:
    root = check_body(body, len(arrays))
    bindings = dims_of(body, arrays)
    values: dict[Node, np.ndarray] = dict(zip(body.inputs, arrays))
    for node in body.nodes:
        if node.kind == OP:
            ins = [values[x] for x in node.inputs]
            values[node] = get_op(node.op).kernel(*ins, **bound_attrs(node, bindings))
    result = values[root]
    if out is not None or root.kind == PLACEHOLDER or root.is_constant:
        return into(out, result)  # never hand out an input or a constant's array
    return np.asarray(result)


class BodySlots:
    """Where each op of an elementwise body writes when it runs chunk after chunk: the
    root into the caller's `out`, every other op into a slot, a buffer of one chunk that
    the next op of its type reuses once its value is dead (an op whose kernel may run in
    place can take one of its own operands' slots). `types` holds each slot's type in
    the body; the kernel of conv2d_fused (`run_body`) and the runtime's chunked fused
    steps (backends/numpy/chunked.py) both place a body's values this way."""

    def __init__(self, body: Graph) -> None:
        self.root = check_body(body, len(body.inputs))
        ops = body.op_nodes
        last_use = {x: i for i, node in enumerate(ops) for x in node.inputs}
        self.slot: dict[Node, int] = {}
        self.types: list[TensorType] = []
        free: list[int] = []
        for i, node in enumerate(ops):
            if node.is_constant:
                continue
            dying = [
                self.slot[x]
                for x in dict.fromkeys(node.inputs)
                if x in self.slot and last_use[x] == i
            ]
            if get_op(node.op).inplace:
                free += dying
            if node is not self.root:
                fits = [k for k in free if self.types[k] == node.type]
                if fits:
                    free.remove(fits[0])
                    self.slot[node] = fits[0]
                else:
                    self.slot[node] = len(self.types)
                    self.types.append(node.type)
            if not get_op(node.op).inplace:
                free += dying

    @property
    def dtypes(self) -> list[np.dtype]:
        return [np.dtype(t.dtype) for t in self.types]

    @property
    def count(self) -> int:
        return len(self.types)


def run_body(
    body: Graph, slots: BodySlots, buffers: list[np.ndarray], arrays: Sequence[Any], out: np.ndarray
) -> None:
    """Compute the elementwise `body` on `arrays` (one chunk) into `out`, each op writing
    into its slot's buffer (`buffers`, at least out's size each, reshaped here)."""
    values: dict[Node, Any] = dict(zip(body.inputs, arrays))
    views = [b[: out.size].reshape(out.shape) for b in buffers]
    bindings = dims_of(body, arrays)
    for node in body.nodes:
        if node.kind != OP:
            continue
        ins = [values[x] for x in node.inputs]
        kernel, attrs = get_op(node.op).kernel, bound_attrs(node, bindings)
        if node.is_constant:
            values[node] = kernel(*ins, **attrs)
        else:
            target = out if node is slots.root else views[slots.slot[node]]
            values[node] = kernel(*ins, out=target, **attrs)
    if slots.root.kind != OP or slots.root.is_constant:  # a body that computes nothing
        np.copyto(out, values[slots.root])


fused = defop(
    "fused",
    inputs=VARIADIC,
    infer=_fused_infer,
    kernel=_fused_kernel,
    attrs={"body": REQUIRED},
    bodies=("body",),
    elementwise=True,
    # the kernel and the chunked lowering write the result after reading every operand
    inplace=True,
    cost=body_cost,
    props=("fusion",),
    doc="A group of elementwise ops run as one node; made by gc.backends.numpy.fusion.fuse_elementwise.",
)
