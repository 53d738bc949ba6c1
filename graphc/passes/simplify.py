"""Algebraic simplification: the local rule table, run by the rewrite driver.

NaN and inf: a rule applies only where it gives the same value for every input the
original could see, NaN and inf included, with two deliberate exceptions:

- signed zeros are not kept apart (x+0 -> x turns -0.0 + 0.0 = +0.0 into -0.0), as
  in XLA and most compilers;
- a rewrite may remove an overflow or a rounding error: log(exp x) -> x gives x
  where exp(x) overflowed to inf, and (x*c)*d -> x*(c*d) rounds once instead of twice;
  (x*c)*y -> (x*y)*c rounds as often but in another order (last-bit differences). It
  moves constant scales outward, where they fold together and where a fused kernel
  applies them in place (one scratch buffer fewer in the GELU chain). Across a
  matmul, (x@y)*c -> (x*c)@y moves a scale of magnitude <= 1 onto the smaller
  operand (rounding differences again, and a tiny operand element may underflow to a
  subnormal or zero where the product's would not; with |c| <= 1 it cannot overflow).
  A scale also moves inside a transpose, T(x)*c -> T(x*c), which is exact: the
  multiply then walks x's memory in order, and the transpose stays a free view.

Hence x*0 -> 0 and x-x -> 0 apply to integers and bools only (inf*0 and inf-inf are
nan in floats), and exp(log x) -> x only for x known to be >= 0 or nan (log of a
negative is nan, not x). The driver keeps only replacements of the same type as the
node, which is the "same shape" condition of rules such as `reshape(x) -> x` and
of dropping a broadcast_to that the binary op's own broadcasting would do anyway.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.passes.patterns import (
    MINUS_ONE,
    ONE,
    THREE,
    TWO,
    ZERO,
    C,
    D,
    X,
    Y,
    ops,
    uniform_value,
)
from graphc.passes.report import PassLog
from graphc.passes.rewrite import Match, Rule, rewrite, rule

add, sub, mul, div, neg, pow, exp, log, cast = ops(
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "cast"
)
reshape, transpose, broadcast_to, sum_to = ops("reshape", "transpose", "broadcast_to", "sum_to")
softmax, log_softmax, sum, logsumexp = ops("softmax", "log_softmax", "sum", "logsumexp")
matmul = ops("matmul")[0]

# ops whose result is >= 0 or nan for every input
NON_NEGATIVE = frozenset({"exp", "sqrt", "abs", "relu", "sigmoid", "softmax", "one_hot", "count"})


def is_integer(name: str) -> object:
    """Condition: the bound node has an integer or bool dtype."""
    return lambda m: not np.issubdtype(getattr(m, name).type.dtype, np.inexact)


def non_negative(node: Node) -> bool:
    if node.kind != OP:
        return False
    if node.op in NON_NEGATIVE or (node.op == "mul" and node.inputs[0] is node.inputs[1]):
        return True
    if node.is_constant:
        return bool(np.all(np.isnan(node.value) | (node.value >= 0)))
    value = uniform_value(node)
    return isinstance(value, (int, float)) and not value < 0


def identity_axes(m: Match) -> bool:
    return tuple(m.a) == tuple(range(len(m.a)))


def composed_transpose(m: Match) -> Node:
    return m.emit("transpose", m.x, axes=tuple(m.a[i] for i in m.b))


def _is_matrix_transpose(node: Node) -> bool:
    return node.kind == OP and node.op == "transpose" and tuple(node.attrs["axes"]) == (1, 0)


def transposed_product_cancels(m: Match) -> bool:
    """(x @ y)^T of matrices, where x or y is itself a transpose that will cancel."""
    matrices = m.x.type.rank == 2 and m.y.type.rank == 2 and tuple(m.a) == (1, 0)
    return matrices and (_is_matrix_transpose(m.x) or _is_matrix_transpose(m.y))


def swapped_product(m: Match) -> Node:
    flip = {"axes": (1, 0)}
    return m.emit("matmul", m.emit("transpose", m.y, **flip), m.emit("transpose", m.x, **flip))


def broadcast_one_element(m: Match) -> Node:
    """broadcast_to(c as a scalar, shape): a constant c is reshaped now, not at run time."""
    make = m.fold if m.x.is_constant else m.emit
    return m.emit("broadcast_to", make("reshape", m.x, shape=()), shape=m.s)


def stable_log_softmax(m: Match) -> Node | None:
    axes = m.a
    if axes is None and len(m.x.type.shape) == 1:
        axes = (0,)
    return None if axes is None or len(axes) != 1 else m.emit("log_softmax", m.x, axis=axes[0])


def float_value(node: Node) -> float | None:
    """The value of a one-element constant of floating dtype, else None."""
    if not np.issubdtype(node.type.dtype, np.floating):
        return None
    return float(node.value.reshape(()))


def scale_smaller_factor(m: Match) -> Node | None:
    """(x@y)*c -> (x*c)@y or x@(y*c): the scale moves to the operand with fewer elements,
    when that has fewer than the product (a weight gradient scaled by a learning rate
    is one multiply on the batch-sized operand instead of a pass over the weight).
    Shapes must be concrete, so this fires once symbolic dims are bound; the product
    must have no other user, which would keep the unscaled matmul too."""
    c = float_value(m.c)
    if c is None or not 0 < abs(c) <= 1:
        return None  # |c| <= 1: scaling an operand first cannot overflow
    x, y, product = m.x.type.size, m.y.type.size, m.type.size
    if x is None or y is None or product is None or min(x, y) >= product:
        return None
    if not m.used_once(next(v for v in m.node.inputs if v is not m.c)):
        return None
    if x <= y:
        return m.emit("matmul", m.emit("mul", m.x, m.c), m.y)
    return m.emit("matmul", m.x, m.emit("mul", m.y, m.c))


def exact_reciprocal(m: Match) -> bool:
    """1/c is exact when c is a power of two (so x/c and x*(1/c) agree bit for bit)."""
    c = float_value(m.c)
    if c is None or c == 0 or not np.isfinite(c):
        return False
    mantissa, _ = np.frexp(c)
    return abs(mantissa) == 0.5


# One rule per line, the algebra in its comment; the formatter would break the long ones.
# fmt: off
ALGEBRA: list[Rule] = [
    # -- identities
    rule(add(X, ZERO), lambda m: m.x),  # x+0 -> x
    rule(sub(X, ZERO), lambda m: m.x),  # x-0 -> x
    rule(sub(ZERO, X), lambda m: m.emit("neg", m.x)),  # 0-x -> -x
    rule(mul(X, ONE), lambda m: m.x),  # x*1 -> x
    rule(mul(X, MINUS_ONE), lambda m: m.emit("neg", m.x)),  # x*-1 -> -x
    rule(mul(X, ZERO), Match.zeros, when=is_integer("x")),  # x*0 -> 0 (ints, bools)
    rule(div(X, ONE), lambda m: m.x),  # x/1 -> x
    rule(neg(neg(X)), lambda m: m.x),  # --x -> x
    rule(sub(X, X), Match.zeros, when=is_integer("x")),  # x-x -> 0 (ints)
    rule(add(X, neg(Y)), lambda m: m.emit("sub", m.x, m.y)),  # x+(-y) -> x-y
    rule(sub(X, neg(Y)), lambda m: m.emit("add", m.x, m.y)),  # x-(-y) -> x+y
    # -- shapes and dtypes
    rule(transpose(X, axes="a"), lambda m: m.x, when=identity_axes),  # transpose(x, id) -> x
    rule(transpose(transpose(X, axes="a"), axes="b"), composed_transpose),  # T_b(T_a x) -> T_a[b] x
    rule(transpose(matmul(X, Y), axes="a"), swapped_product, when=transposed_product_cancels),  # (x@y)^T -> y^T @ x^T, one side a transpose
    rule(reshape(X), lambda m: m.x),  # reshape(x, x.shape) -> x
    rule(reshape(reshape(X), shape="s"), lambda m: m.emit("reshape", m.x, shape=m.s)),  # r(r(x)) -> r(x)
    rule(reshape(broadcast_to(X), shape="s"), broadcast_one_element, when=lambda m: m.x.type.size == 1),  # reshape(broadcast_to(c)) -> broadcast_to(c), c one element
    rule(broadcast_to(X), lambda m: m.x),  # broadcast_to(x, x.shape) -> x
    rule(broadcast_to(broadcast_to(X), shape="s"), lambda m: m.emit("broadcast_to", m.x, shape=m.s)),  # b(b(x)) -> b(x)
    rule(sum_to(X), lambda m: m.x),  # sum_to(x, x.shape) -> x
    rule(sum_to(sum_to(X), shape="s"), lambda m: m.emit("sum_to", m.x, shape=m.s)),  # s(s(x)) -> s(x)
    rule(cast(X), lambda m: m.x),  # cast(x, x.dtype) -> x
    rule(add(broadcast_to(X), Y), lambda m: m.emit("add", m.x, m.y)),  # broadcast_to(x)+y -> x+y
    rule(mul(broadcast_to(X), Y), lambda m: m.emit("mul", m.x, m.y)),  # broadcast_to(x)*y -> x*y
    rule(sub(broadcast_to(X), Y), lambda m: m.emit("sub", m.x, m.y)),  # broadcast_to(x)-y -> x-y
    rule(sub(Y, broadcast_to(X)), lambda m: m.emit("sub", m.y, m.x)),  # y-broadcast_to(x) -> y-x
    rule(div(broadcast_to(X), Y), lambda m: m.emit("div", m.x, m.y)),  # broadcast_to(x)/y -> x/y
    rule(div(Y, broadcast_to(X)), lambda m: m.emit("div", m.y, m.x)),  # y/broadcast_to(x) -> y/x
    # -- exp and log, and their stable forms
    rule(exp(log(X)), lambda m: m.x, when=lambda m: non_negative(m.x)),  # exp(log x) -> x, x >= 0
    rule(log(exp(X)), lambda m: m.x),  # log(exp x) -> x
    rule(log(softmax(X, axis="a")), lambda m: m.emit("log_softmax", m.x, axis=m.a)),  # log(softmax x) -> log_softmax x
    rule(log(sum(exp(X), axis="a", keepdims="k")), lambda m: m.emit("logsumexp", m.x, axis=m.a, keepdims=m.k)),  # log(sum(exp x)) -> logsumexp x
    rule(sub(X, logsumexp(X, axis="a", keepdims="k")), stable_log_softmax, when=lambda m: m.k),  # x - logsumexp(x) -> log_softmax x
    # -- constants: scales fold together, small powers become products
    rule(mul(mul(X, C), D), lambda m: m.emit("mul", m.x, m.fold("mul", m.c, m.d))),  # (x*c)*d -> x*(c*d)
    rule(div(mul(X, C), D), lambda m: m.emit("mul", m.x, m.fold("div", m.c, m.d))),  # (x*c)/d -> x*(c/d)
    rule(mul(neg(X), C), lambda m: m.emit("mul", m.x, m.fold("neg", m.c))),  # (-x)*c -> x*(-c)
    rule(mul(mul(X, C), Y), lambda m: m.emit("mul", m.emit("mul", m.x, m.y), m.c), when=lambda m: not m.y.is_constant),  # (x*c)*y -> (x*y)*c: scales move outward
    rule(mul(matmul(X, Y), C), scale_smaller_factor),  # (x@y)*c -> (x*c)@y, x the smaller operand, 0 < |c| <= 1
    rule(mul(transpose(X, axes="a"), C), lambda m: m.emit("transpose", m.emit("mul", m.x, m.c), axes=m.a), when=lambda m: m.c.type.rank <= m.x.type.rank),  # T(x)*c -> T(x*c): the scale reads x in its own layout
    rule(div(X, C), lambda m: m.emit("mul", m.x, m.fold("div", m.constant(m.c.value.dtype.type(1)), m.c)), when=exact_reciprocal),  # x/c -> x*(1/c), c = 2^k
    rule(pow(X, ZERO), lambda m: m.emit("full_like", m.x, value=1)),  # x**0 -> 1 (numpy: nan**0 and 0**0 are 1 too)
    rule(pow(X, ONE), lambda m: m.x),  # x**1 -> x
    rule(pow(X, TWO), lambda m: m.emit("mul", m.x, m.x)),  # x**2 -> x*x
    rule(pow(X, THREE), lambda m: m.emit("mul", m.emit("mul", m.x, m.x), m.x)),  # x**3 -> x*x*x
]
# fmt: on


def simplify(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with the algebra rules (`ALGEBRA`) applied until none applies.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2]) {
    ...   %two: f32[] = constant(value=2.0)
    ...   %p: f32[2] = pow(%x, %two)
    ...   output %y = %p
    ... }''')
    >>> print(gc.passes.simplify(g))
    graph g(%x: f32[2]) {
      %mul: f32[2] = mul(%x, %x)
      output %y = %mul
    }
    """
    return rewrite(graph, ALGEBRA, log)
