"""The SGD fold: `w - lr * g.T @ x` as one `gemm` accumulating into w (fast_math; and an
exact form for a backend whose gemm computes the matmul's own product, `fold_exact`).

SGD's update of a weight subtracts a scaled matrix product from it. As graph nodes that
is a scale (on the small operand, after `(x@y)*c -> (x*c)@y`), a transpose view, a
matmul into a buffer of the weight's size and a subtraction: two passes over the weight
besides the product. One BLAS call does all of it, `w := alpha op(a) op(b) + 1 * w`,
reading and writing w once, with no gradient buffer; the planner lets the gemm write
into w's own buffer when w dies there (`inplace_inputs`), which is how a train step's
parameter update goes.

`fold_sgd_updates` is the pass; a backend whose gemm is one accumulating call runs it in
its fusion step under fast_math (the native backend: on numpy's, gemm is a matmul, a
scale and a sum, and the fold saves nothing). Its rules (tagged value-changing: BLAS
scales and accumulates in another order than matmul-then-subtract) match `sub(w, matmul(x, z))` and
`sub(w, mul(matmul(x, z), c))`; `fold_update` peels a matrix transpose and a scale by a
one-element constant off each operand (each used only there) into the gemm's flags and
alpha. The matmul must have no other user, or it would be computed twice.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from graphc.ir.graph import Graph, Node
from graphc.passes.patterns import C, X, Y, Z, ops
from graphc.passes.report import PassLog
from graphc.passes.rewrite import Match, Rule, rewrite, rule


def _scale_of(node: Node) -> tuple[float, Node] | None:
    """For mul(v, c) with c a one-element float constant and v of the product's type:
    (c, v); else None."""
    if node.op != "mul":
        return None
    for c, other in (node.inputs, node.inputs[::-1]):
        if (
            c.is_constant
            and c.value.size == 1
            and np.issubdtype(c.value.dtype, np.floating)
            and other.type == node.type
        ):
            return float(c.value.reshape(())), other
    return None


def _peel(m: Match, node: Node) -> tuple[Node, bool, float]:
    """`node` as (base, transposed, scale): a matrix transpose and a scale, in either
    order, each with no user besides this one, peeled off."""
    transposed, scale = False, 1.0
    for _ in range(2):
        if not m.used_once(node):
            break
        if not transposed and node.op == "transpose" and tuple(node.attrs["axes"]) == (1, 0):
            node, transposed = node.inputs[0], True
            continue
        found = _scale_of(node) if scale == 1.0 else None
        if found is None:
            break
        scale, node = found
    return node, transposed, scale


def _scaled_product(m: Match) -> tuple[float, Node] | None:
    """For the candidate w - s * x @ z (or w - x @ z, s = 1): (s, the matmul), where the
    scale and the matmul have no other user and x and z are matrices; else None."""
    subtracted = m.node.inputs[1]
    scale, product = 1.0, subtracted
    if subtracted.op == "mul":  # the scale on the product itself
        found = _scale_of(subtracted)  # (a scale of another dtype would change the type)
        if found is None or not m.used_once(subtracted):
            return None
        scale, product = found
    if product.op != "matmul" or not m.used_once(product):
        return None
    x, z = product.inputs
    if x.type.rank != 2 or z.type.rank != 2:
        return None
    return scale, product


def fold_update(m: Match) -> Node | None:
    """w - s * op(a) @ op(b) -> gemm(a, b, w, alpha=-s, beta=1, trans_a, trans_b)."""
    found = _scaled_product(m)
    if found is None:
        return None
    scale, product = found
    x, z = product.inputs
    a, trans_a, scale_a = _peel(m, x)
    b, trans_b, scale_b = _peel(m, z)
    alpha = -scale * scale_a * scale_b
    if not math.isfinite(alpha) or alpha == 0.0:
        return None
    w = m.node.inputs[0]
    return m.emit("gemm", a, b, w, alpha=alpha, beta=1.0, trans_a=trans_a, trans_b=trans_b)


def fold_exact(m: Match, computes: Callable[[Node], bool]) -> Node | None:
    """w - a @ b * s -> gemm(a, b, w, alpha=-s, beta=1) where gemm's kernel is the same
    operations on the same product: nothing peeled off a and b (their transposes stay
    views), s a one-element float constant (the product's type is the scaled one's, so
    s has the product's dtype or is weak), every type the same, and
    `computes(gemm)`: the backend computes that gemm's product as it computes the matmul
    (an accumulating BLAS call would not)."""
    found = _scaled_product(m)
    if found is None:
        return None
    scale, product = found
    w = m.node.inputs[0]
    if not (w.type == product.type == m.node.type) or scale == 0.0 or not math.isfinite(scale):
        return None
    a, b = product.inputs
    gemm = m.emit("gemm", a, b, w, alpha=-scale, beta=1.0, trans_a=False, trans_b=False)
    return gemm if computes(gemm) else None


matmul, mul, sub = ops("matmul", "mul", "sub")

# fmt: off
SGD_FOLD: list[Rule] = [
    rule(sub(Y, matmul(X, Z)), fold_update, exact=False),  # w - op(a)@op(b) -> gemm(a, b, w, alpha=-s, beta=1), transposes and scales of a, b peeled
    rule(sub(Y, mul(matmul(X, Z), C)), fold_update, exact=False),  # w - (a@b)*c -> gemm(a, b, w, alpha=-c, beta=1)
]
# fmt: on


def _exact_rules(computes: Callable[[Node], bool]) -> list[Rule]:
    fold = functools.partial(fold_exact, computes=computes)
    # fmt: off
    return [
        rule(sub(Y, matmul(X, Z)), fold),  # w - a@b -> gemm(a, b, w, alpha=-1, beta=1): gemm's kernel subtracts the same product
        rule(sub(Y, mul(matmul(X, Z), C)), fold),  # w - (a@b)*c -> gemm(a, b, w, alpha=-c, beta=1): the same product, times c, subtracted
    ]
    # fmt: on


def fold_sgd_updates(
    graph: Graph,
    log: PassLog | None = None,
    computes: Callable[[Node], bool] | None = None,
) -> Graph:
    """`graph` with each `w - s * op(a) @ op(b)` as one `gemm` accumulating into w
    (value-changing: see the module docstring). Given `computes`, only the exact fold:
    `w - s * a @ b` with nothing peeled, for the gemms for which `computes` is true
    (`fold_exact`), the same operations as gemm's numpy kernel makes on the same
    product, so the same bits wherever the backend computes that gemm's product as it
    would the matmul's.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%w: f32[3,2], %x: f32[4,3], %d: f32[4,2]) {
    ...   %t: f32[3,4] = transpose(%x, axes=(1, 0))
    ...   %p: f32[3,2] = matmul(%t, %d)
    ...   %u: f32[3,2] = sub(%w, %p)
    ...   output %y = %u
    ... }''')
    >>> [n.op for n in gc.passes.fold_sgd_updates(g).op_nodes]
    ['gemm']
    >>> [n.op for n in gc.passes.fold_sgd_updates(g, computes=lambda n: True).op_nodes]
    ['transpose', 'gemm']
    """
    return rewrite(graph, SGD_FOLD if computes is None else _exact_rules(computes), log)
