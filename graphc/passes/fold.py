"""Constant folding: an op whose inputs are all constants becomes a constant.

The value is computed by the op's own kernel (never a second implementation), so
folding agrees with the interpreter bit for bit. Ops whose value depends only on
their input's type (`full_like`) fold as soon as that type is concrete, and ops
with shape attributes (`count`) once those hold no symbolic dim.
A fold is skipped when its result would hold more than `FOLD_LIMIT` elements, or when
it would materialize data: a result larger than `SMALL` elements and larger than
every constant it reads (a scalar broadcast to (512, 10), `full_like` of a big
shape) stays a cheap op, which the simplifier can then drop into its user's own
broadcasting. Also skipped: impure ops, symbolic output types, kernels that raise, and
transposes (a view in another memory order than a constant's; the runtime keeps it).
Runs as the one rule of a rewrite-driver table, so folds cascade bottom-up in one walk.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import attr_dims, get_op
from graphc.ir.types import TensorType
from graphc.passes.patterns import Pattern
from graphc.passes.report import PassLog
from graphc.passes.rewrite import Match, rewrite, rule

FOLD_LIMIT = 1 << 16  # elements
SMALL = 16  # results this small always fold (they print inline)


class Foldable(Pattern):
    """Any pure op (not a constant) whose value is known before the graph runs."""

    def match(self, node: Node, bound: dict) -> bool:
        if node.kind != OP or node.is_constant or not isinstance(node.type, TensorType):
            return False  # (a node with several results stays: its results fold one by one)
        opdef = get_op(node.op)
        if opdef.has("reads_only_type"):  # full_like: the inputs' types are enough
            known = all(x.type.is_concrete for x in node.inputs)
        else:
            known = all(x.is_constant for x in node.inputs)
        if not known or not opdef.pure or opdef.permutes:
            return False
        if any(isinstance(d, str) for key in opdef.shape_attrs for d in attr_dims(node.attrs[key])):
            return False  # a symbolic dim in a shape attribute: known only at run time
        size = node.type.size
        if size is None or size > FOLD_LIMIT:
            return False
        read = [x.type.size or 0 for x in node.inputs if x.is_constant]
        return size <= SMALL or size <= max(read, default=0)

    def __str__(self) -> str:
        return "constant inputs -> constant"


def _placeholder_value(node: Node) -> np.ndarray:
    if node.is_constant:
        return node.value
    return np.zeros(node.type.shape, node.type.dtype)  # only its type is read


def folded(m: Match) -> Node | None:
    node = m.node
    values = [_placeholder_value(x) for x in node.inputs]
    try:
        with np.errstate(all="ignore"):
            value = np.asarray(get_op(node.op).kernel(*values, **node.attrs))
    except Exception:  # a kernel that rejects these values is left for run time to report
        return None
    if TensorType.of(value) != node.type:
        return None
    return m.constant(value, replaces=node)


FOLD = rule(Foldable(), folded)


def fold_constants(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with every op on constants replaced by its value (up to `FOLD_LIMIT`),
    computed by the op's own (numpy) kernel.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2]) {
    ...   %a: f32[] = constant(value=2.25)
    ...   %b: f32[] = sqrt(%a)
    ...   %c: f32[2] = mul(%x, %b)
    ...   output %y = %c
    ... }''')
    >>> print(gc.passes.fold_constants(g))
    graph g(%x: f32[2]) {
      %b: f32[] = constant(value=1.5)
      %c: f32[2] = mul(%x, %b)
      output %y = %c
    }
    """
    return rewrite(graph, [FOLD], log)
