"""Algebraic simplification: the local rule table, run by the rewrite driver.

Every rule is tagged. An EXACT rule gives bit-identical results to the graph it
rewrites, for every input: inf, nan, -0.0, subnormals and integer overflow included.
The one latitude: where both results are NaN they count as equal, whatever their sign
and payload bits (IEEE 754 leaves those unspecified for arithmetic, and numpy's SIMD
and scalar loops do not keep them alike either). The default pipeline at every level
runs exact rules only, so O1 and O2 compute what O0 computes, bit for bit.

A VALUE-CHANGING rule (tag `exact=False`) may round differently, remove an overflow
or reorder a sum; it runs only with `fast_math=True` (`gc.optimize(g, fast_math=True)`,
`gc.compile(g, fast_math=True)`), and the optimization report marks it `[fast_math]`.

Why each rule has its tag:

- x+0 -> x is exact for integers and for a zero of -0.0 only (-0.0 + +0.0 = +0.0);
  x-0 -> x for +0.0 (x - +0.0 = x, -0.0 included), 0-x -> -x for -0.0 (+0.0 - +0.0 is
  +0.0, not -0.0); x*1, x/1, x*-1 -> -x, --x, x+(-y) -> x-y, x-(-y) -> x+y are exact
  (IEEE subtraction is addition of the negation; negation and scaling by 1 are exact);
  x+(-y) and x-(-y) need -y computed as the result's negation: not for an int32 y
  widened to int64 or float (-INT32_MIN wraps in int32 first).
  x*0 and x-x are exact for integer and bool results only (inf*0 and inf-inf are nan,
  and an integer times a float 0.0 is -0.0 where the integer is negative).
- Shape identities (reshape, transpose, broadcast_to, sum_to and cast that change
  nothing, compositions of reshapes, transposes and broadcasts, a broadcast_to that the
  binary op's own broadcasting does anyway) move no value: exact. Summing in two steps
  (sum_to of sum_to) adds in another order: value-changing. A where whose condition is
  a constant all true (all false) is its x (y) where that has the result's type: exact.
- (-x)*c -> x*(-c) is exact in floats (rounding is symmetric in sign); not for an
  integer x with a float c (-INT_MIN wraps to INT_MIN), where it does not apply; -c is
  made in the product's dtype (an int32 c = INT32_MIN negated in int32 would wrap).
  T(x)*c -> T(x*c) multiplies the same pairs, but the result is a transpose in x's
  memory order, where the product was C-contiguous: exact when every user is
  elementwise (not an output: the caller gets the layout, and a later call fed the
  array back rounds by it); before a matmul or a reduction, which round by memory
  order (runtime/plan.py, LAYOUT), value-changing. Where that scale goes is a
  backend's choice, so these two are not in the table: `scale_before_transposes` runs
  them, in the numpy backend's fusion step. x/c -> x*(1/c) is exact when c is
  a power of two whose reciprocal is representable (both round x*2^-k once); it does
  not apply where 1/c would overflow (c = 2^-130 in float32).
- pow(x, 0) -> 1 is exact (C's pow(x, 0) is 1, nan included). pow(x, 2) -> x*x and
  pow(x, 3) -> x*x*x are exact for a one-element exponent, because `pow` with a
  one-element exponent of 2 or 3 is defined as that product (as JAX's integer_pow; see
  the pow op), and for integers; an exponent of several elements goes to C's pow, which
  is not correctly rounded: value-changing. So is pow(x, 1) -> x: numpy's float32 pow
  of arrays (its SIMD loop) rounds some x**1 to a neighbour of x. A one-element exponent
  of 1 is counted exact, as it is wherever numpy broadcasts it over several elements of
  x; where x has one element too, that loop runs (a known gap: pow's kernel should mean
  x by x**1 as it means x*x by x**2).
- Value-changing: folding scales together ((x*c)*d -> x*(c*d), (x*c)/d; one rounding
  instead of two, and a folded c*d may overflow where the original did not: the fold
  is made in the expression's dtype and declines when not finite, or when nonzero
  scales fold below the smallest normal number; floats only, as an integer product
  would wrap differently), moving scales outward ((x*c)*y ->
  (x*y)*c) or across a matmul ((x@y)*c -> (x*c)@y, |c| <= 1), (x@y)^T -> y^T@x^T (BLAS
  may accumulate in another order), and the stable forms: exp(log x) -> x,
  log(exp x) -> x, log(softmax) -> log_softmax, log(sum(exp x)) -> logsumexp,
  x - logsumexp(x) -> log_softmax (they remove overflow and rounding, so they change
  values exactly where the original was inaccurate). The SGD fold w - s*(a@b) ->
  gemm(a, b, w, alpha=-s, beta=1) (passes/gemm_rules.py, a pass of its own that a
  backend with a gemm kernel runs in its fusion step): BLAS scales and accumulates into
  w in its own order, not matmul, scale, subtract.

The driver keeps only replacements of the same type as the node, which is the "same
shape" condition of rules such as `reshape(x) -> x`, and declines a replacement whose
type rule fails (x_bool * -1 has no neg).
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import finfo
from graphc.ir.types import is_float as is_float_dtype
from graphc.passes.fold import FOLD
from graphc.passes.gemm_rules import SGD_FOLD
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
    Z,
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
matmul, where = ops("matmul", "where")
gt = ops("gt")[0]


def nan_where_extremum_is(m: Match) -> bool:
    """Condition: where(z > 0, nan, y) with y a max, min or max_pool2d of x and z the
    same op (a max for min) of x's nan flags: the NaN check ONNX's export writes beside a
    ReduceMax or MaxPool, which onnxruntime computes skipping nans. graphc's y is nan
    exactly where z > 0 already."""
    y, z, c = m.y, m.z, m.c
    if y.kind != OP or y.op not in ("max", "min", "max_pool2d"):
        return False
    if not (is_float_dtype(y.type.dtype) and c.value.dtype == y.type.dtype):
        return False
    flags_op = "max_pool2d" if y.op == "max_pool2d" else "max"
    if z.kind != OP or z.op != flags_op or dict(z.attrs) != dict(y.attrs):
        return False
    cast = z.inputs[0]
    if cast.kind != OP or cast.op != "cast":
        return False
    flags, x = cast.inputs[0], y.inputs[0]
    return (
        flags.kind == OP
        and flags.op == "ne"
        and flags.inputs[0] is x
        and flags.inputs[1] is x
        and bool(np.isnan(c.value).all())
    )


def is_integer(name: str) -> object:
    """Condition: the bound node has an integer or bool dtype."""
    return lambda m: not is_float_dtype(getattr(m, name).type.dtype)


def integer_result(m: Match) -> bool:
    """Condition: the candidate's dtype is integer or bool (int x * 0.0 is a float, and
    -3 * 0.0 is -0.0: not zeros)."""
    return not is_float_dtype(m.type.dtype)


def _other(m: Match) -> Node:
    """The input of the candidate that is not the bound x (x itself for f(x, x))."""
    inputs = m.node.inputs
    return inputs[1] if inputs[0] is m.x else inputs[0]


def zero_of_sign(negative: bool) -> object:
    """Condition for x+0, x-0, 0-x: an integer result, or a float zero of this sign."""

    def when(m: Match) -> bool:
        if not is_float_dtype(m.type.dtype):
            return True
        zero = _other(m)
        if zero.op == "full_like":
            return bool(np.signbit(uniform_value(zero)) == negative)
        return zero.is_constant and bool(np.all(np.signbit(zero.value) == negative))

    return when


def power_is_product(m: Match) -> bool:
    """pow(x, 1, 2 or 3) is x, x*x or x*x*x bit for bit: a one-element exponent, which
    pow's kernel computes as the product (1: see the module docstring), or an integer
    result (numpy's integer power multiplies, wrapping as the product does)."""
    return m.node.inputs[1].type.size == 1 or integer_result(m)


def is_float(name: str) -> object:
    """Condition: the bound node has a floating dtype."""
    return lambda m: is_float_dtype(getattr(m, name).type.dtype)


def negation_commutes(m: Match) -> bool:
    """(-x)*c == x*(-c): floats, or integers whose product stays in x's dtype."""
    return is_float_dtype(m.x.type.dtype) or m.x.type.dtype == m.type.dtype


def negated_y_widens_exactly(m: Match) -> bool:
    """x+(-y) == x-y: -y in y's dtype is the negation in the result's (floats; integers
    of the result's dtype, whose wrap-around agrees; an int32 -INT32_MIN wraps in int32)."""
    return is_float_dtype(m.y.type.dtype) or m.y.type.dtype == m.type.dtype


def non_negative(node: Node) -> bool:
    if node.kind != OP:
        return False
    if get_op(node.op).has("non_negative"):
        return True
    if node.op == "mul" and node.inputs[0] is node.inputs[1]:  # x * x
        return True
    if node.is_constant:
        return bool(np.all(np.isnan(node.value) | (node.value >= 0)))
    value = uniform_value(node)
    return isinstance(value, (int, float)) and not value < 0


def identity_axes(m: Match) -> bool:
    return tuple(m.a) == tuple(range(len(m.a)))


def scale_before_transpose(m: Match) -> Node:
    return m.emit("transpose", m.emit("mul", m.x, m.c), axes=m.a)


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
    if not is_float_dtype(node.type.dtype):
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
    """1/c is exact when c is a power of two whose reciprocal the dtype holds (so x/c
    and x*(1/c) round the same value once each); not when 1/c overflows (c subnormal)."""
    c = float_value(m.c)
    if c is None or c == 0 or not np.isfinite(c):
        return False
    mantissa, _ = np.frexp(c)
    if abs(mantissa) != 0.5:
        return False
    with np.errstate(all="ignore"):
        inverse = np.divide(m.c.value.dtype.type(1), m.c.value.reshape(()))
    return bool(np.isfinite(inverse)) and float(inverse) * c == 1.0


def scales_fold(op: str) -> object:
    """(x*c)*d -> x*(c*d) and (x*c)/d -> x*(c/d): the scale folded in the expression's
    dtype, declining when it is not finite (fold returns None) or when nonzero scales
    fold to a zero or subnormal one (x*0 would turn a finite x*c*d to 0, inf*c*d to nan)."""

    def replace(m: Match) -> Node | None:
        scale = m.fold(op, m.c, m.d, dtype=m.type.dtype)
        if scale is None:
            return None
        nonzero = float(m.c.value.reshape(())) != 0 and float(m.d.value.reshape(())) != 0
        if nonzero and abs(float(scale.value.reshape(()))) < finfo(m.type.dtype).tiny:
            return None
        return m.emit("mul", m.x, scale)

    return replace


# One rule per line, the algebra in its comment; `exact=False` marks a value-changing
# rule (fast_math only). The formatter would break the long lines.
# fmt: off
ALGEBRA: list[Rule] = [
    # -- identities
    rule(add(X, ZERO), lambda m: m.x, when=zero_of_sign(negative=True)),  # x+(-0.0) -> x (ints: x+0)
    rule(add(X, ZERO), lambda m: m.x, exact=False),  # x+0 -> x: -0.0+0.0 is +0.0
    rule(sub(X, ZERO), lambda m: m.x, when=zero_of_sign(negative=False)),  # x-(+0.0) -> x
    rule(sub(X, ZERO), lambda m: m.x, exact=False),  # x-(-0.0) -> x: -0.0-(-0.0) is +0.0
    rule(sub(ZERO, X), lambda m: m.emit("neg", m.x), when=zero_of_sign(negative=True)),  # (-0.0)-x -> -x (ints: 0-x)
    rule(sub(ZERO, X), lambda m: m.emit("neg", m.x), exact=False),  # 0-x -> -x: 0.0-0.0 is +0.0
    rule(mul(X, ONE), lambda m: m.x),  # x*1 -> x
    rule(mul(X, MINUS_ONE), lambda m: m.emit("neg", m.x)),  # x*-1 -> -x
    rule(mul(X, ZERO), Match.zeros, when=integer_result),  # x*0 -> 0 (ints, bools)
    rule(div(X, ONE), lambda m: m.x),  # x/1 -> x
    rule(neg(neg(X)), lambda m: m.x),  # --x -> x
    rule(sub(X, X), Match.zeros, when=is_integer("x")),  # x-x -> 0 (ints)
    rule(add(X, neg(Y)), lambda m: m.emit("sub", m.x, m.y), when=negated_y_widens_exactly),  # x+(-y) -> x-y
    rule(sub(X, neg(Y)), lambda m: m.emit("add", m.x, m.y), when=negated_y_widens_exactly),  # x-(-y) -> x+y
    # -- shapes and dtypes
    rule(transpose(X, axes="a"), lambda m: m.x, when=identity_axes),  # transpose(x, id) -> x
    rule(transpose(transpose(X, axes="a"), axes="b"), composed_transpose),  # T_b(T_a x) -> T_a[b] x
    rule(transpose(matmul(X, Y), axes="a"), swapped_product, when=transposed_product_cancels, exact=False),  # (x@y)^T -> y^T @ x^T, one side a transpose
    rule(reshape(X), lambda m: m.x),  # reshape(x, x.shape) -> x
    rule(reshape(reshape(X), shape="s"), lambda m: m.emit("reshape", m.x, shape=m.s)),  # r(r(x)) -> r(x)
    rule(reshape(broadcast_to(X), shape="s"), broadcast_one_element, when=lambda m: m.x.type.size == 1),  # reshape(broadcast_to(c)) -> broadcast_to(c), c one element
    rule(broadcast_to(X), lambda m: m.x),  # broadcast_to(x, x.shape) -> x
    rule(broadcast_to(broadcast_to(X), shape="s"), lambda m: m.emit("broadcast_to", m.x, shape=m.s)),  # b(b(x)) -> b(x)
    rule(sum_to(X), lambda m: m.x),  # sum_to(x, x.shape) -> x
    rule(sum_to(sum_to(X), shape="s"), lambda m: m.emit("sum_to", m.x, shape=m.s), exact=False),  # s(s(x)) -> s(x): one sum, another order
    rule(cast(X), lambda m: m.x),  # cast(x, x.dtype) -> x
    rule(mul(broadcast_to(X, shape="s"), C), lambda m: m.emit("broadcast_to", m.emit("mul", m.x, m.c), shape=m.s)),  # broadcast_to(x)*c -> broadcast_to(x*c): scale the small operand
    rule(add(broadcast_to(X), Y), lambda m: m.emit("add", m.x, m.y)),  # broadcast_to(x)+y -> x+y
    rule(mul(broadcast_to(X), Y), lambda m: m.emit("mul", m.x, m.y)),  # broadcast_to(x)*y -> x*y
    rule(sub(broadcast_to(X), Y), lambda m: m.emit("sub", m.x, m.y)),  # broadcast_to(x)-y -> x-y
    rule(sub(Y, broadcast_to(X)), lambda m: m.emit("sub", m.y, m.x)),  # y-broadcast_to(x) -> y-x
    rule(div(broadcast_to(X), Y), lambda m: m.emit("div", m.x, m.y)),  # broadcast_to(x)/y -> x/y
    rule(div(Y, broadcast_to(X)), lambda m: m.emit("div", m.y, m.x)),  # y/broadcast_to(x) -> y/x
    rule(where(Z, broadcast_to(X), Y), lambda m: m.emit("where", m.z, m.x, m.y)),  # where(c, broadcast_to(x), y) -> where(c, x, y)
    rule(where(Z, Y, broadcast_to(X)), lambda m: m.emit("where", m.z, m.y, m.x)),  # where(c, y, broadcast_to(x)) -> where(c, y, x)
    rule(where(ONE, X, Y), lambda m: m.x),  # where(true, x, y) -> x (x of the result's type)
    rule(where(ZERO, X, Y), lambda m: m.y),  # where(false, x, y) -> y (y of the result's type)
    rule(where(gt(Z, ZERO), C, Y), lambda m: m.y, when=nan_where_extremum_is),  # where(any nan of x there, nan, max/min/max_pool2d x) -> that max
    # -- exp and log, and their stable forms (all value-changing)
    rule(exp(log(X)), lambda m: m.x, when=lambda m: non_negative(m.x), exact=False),  # exp(log x) -> x, x >= 0
    rule(log(exp(X)), lambda m: m.x, exact=False),  # log(exp x) -> x
    rule(log(softmax(X, axis="a")), lambda m: m.emit("log_softmax", m.x, axis=m.a), exact=False),  # log(softmax x) -> log_softmax x
    rule(log(sum(exp(X), axis="a", keepdims="k")), lambda m: m.emit("logsumexp", m.x, axis=m.a, keepdims=m.k), exact=False),  # log(sum(exp x)) -> logsumexp x
    rule(sub(X, logsumexp(X, axis="a", keepdims="k")), stable_log_softmax, when=lambda m: m.k, exact=False),  # x - logsumexp(x) -> log_softmax x
    # -- constants: scales fold together, small powers become products
    rule(mul(mul(X, C), D), scales_fold("mul"), when=is_float("x"), exact=False),  # (x*c)*d -> x*(c*d)
    rule(div(mul(X, C), D), scales_fold("div"), when=is_float("x"), exact=False),  # (x*c)/d -> x*(c/d)
    rule(mul(neg(X), C), lambda m: m.emit("mul", m.x, m.fold("neg", m.c, dtype=m.type.dtype)), when=negation_commutes),  # (-x)*c -> x*(-c), -c in the product's dtype (-INT32_MIN wraps in int32)
    rule(mul(mul(X, C), Y), lambda m: m.emit("mul", m.emit("mul", m.x, m.y), m.c), when=lambda m: not m.y.is_constant, exact=False),  # (x*c)*y -> (x*y)*c: scales move outward
    rule(mul(matmul(X, Y), C), scale_smaller_factor, exact=False),  # (x@y)*c -> (x*c)@y, x the smaller operand, 0 < |c| <= 1
    rule(div(X, C), lambda m: m.emit("mul", m.x, m.fold("div", m.constant(m.c.value.dtype.type(1)), m.c)), when=exact_reciprocal),  # x/c -> x*(1/c), c = 2^k, 1/c representable
    rule(pow(X, ZERO), lambda m: m.emit("full_like", m.x, value=1)),  # x**0 -> 1 (numpy: nan**0 and 0**0 are 1 too)
    rule(pow(X, ONE), lambda m: m.x, when=power_is_product),  # x**1 -> x (one-element exponent, or ints)
    rule(pow(X, ONE), lambda m: m.x, exact=False),  # x**1 -> x: C's pow of an exponent array
    rule(pow(X, TWO), lambda m: m.emit("mul", m.x, m.x), when=power_is_product),  # x**2 -> x*x (pow's meaning)
    rule(pow(X, TWO), lambda m: m.emit("mul", m.x, m.x), exact=False),  # x**2 -> x*x: C's pow of an exponent array
    rule(pow(X, THREE), lambda m: m.emit("mul", m.emit("mul", m.x, m.x), m.x), when=power_is_product),  # x**3 -> x*x*x (pow's meaning)
    rule(pow(X, THREE), lambda m: m.emit("mul", m.emit("mul", m.x, m.x), m.x), exact=False),  # x**3 -> x*x*x: C's pow
]
# folding (exact: the op's own kernel) also runs inside simplify, so constants that a
# rule builds (x*c with x a folded constant) fold in the same walk
EXACT: list[Rule] = [*(r for r in ALGEBRA if r.exact), FOLD]
FAST_MATH: list[Rule] = [*ALGEBRA, FOLD]
# a scale moved before a transpose: what a backend whose elementwise kernels read
# their operands in memory order prefers (the numpy backend's fusion step runs it;
# the native one's kernels read a transposed operand tile by tile, and keep the
# scale beside the op reading the transpose, to fuse)
TRANSPOSE_SCALES: list[Rule] = [
    rule(mul(transpose(X, axes="a"), C), scale_before_transpose, when=lambda m: m.c.type.rank <= m.x.type.rank and m.users_ignore_layout()),  # T(x)*c -> T(x*c): the scale reads x in its own layout, for elementwise users
    rule(mul(transpose(X, axes="a"), C), scale_before_transpose, when=lambda m: m.c.type.rank <= m.x.type.rank, exact=False),  # T(x)*c -> T(x*c) before matmul or a reduction: they round by layout
]
# every rewrite of the algebra: simplify's table, then those a backend's fusion step
# chooses (the scales above; the SGD fold, passes/gemm_rules.py). docs/trust.md lists
# them in this order, with their tags
REWRITES: list[Rule] = [*ALGEBRA, *TRANSPOSE_SCALES, *SGD_FOLD]
# fmt: on


def simplify(graph: Graph, log: PassLog | None = None, fast_math: bool = False) -> Graph:
    """`graph` with the exact algebra rules applied until none applies; with `fast_math`,
    the value-changing ones too (see the module docstring; `ALGEBRA` is the table).
    Constants fold as in `fold_constants`.

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
    return rewrite(graph, FAST_MATH if fast_math else EXACT, log)


def simplify_fast_math(graph: Graph, log: PassLog | None = None) -> Graph:
    """`simplify` with the value-changing rules too (what `fast_math=True` runs)."""
    return simplify(graph, log, fast_math=True)


def scale_before_transposes(
    graph: Graph, log: PassLog | None = None, fast_math: bool = False
) -> Graph:
    """`graph` with T(x)*c as T(x*c) where that is exact (every user ignores layout),
    and with `fast_math` before a matmul or a reduction too (`TRANSPOSE_SCALES`): the
    numpy backend's choice, made in its fusion step (backends/numpy/fusion.py)."""
    if not any(n.op == "transpose" for n in graph.op_nodes):
        return graph  # (every rule reads one: no walk; a plan's compile pays for it)
    rules = TRANSPOSE_SCALES if fast_math else [r for r in TRANSPOSE_SCALES if r.exact]
    return rewrite(graph, rules, log)
