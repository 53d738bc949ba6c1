"""Elementwise ops: arithmetic, unary math, activations, binary min/max, and the unary
float functions of real models (log1p, expm1, reciprocal, rsqrt, erf, the trigonometric
and hyperbolic functions and their inverses, atan2).

Comparisons, where, clip, cast and full_like are in selection.py (re-exported here).

One block per op: type rule, kernel, gradient rule (`vjp`), flags. Gradient rules are
written with graphc ops, so they build graph nodes, record eager tapes, or compute on
arrays alike. `vjp(ct, out, *inputs, needs)` returns one cotangent (or None) per input.
Ops that only exist for floats compute ints in float64 (numpy's rule for tanh), and
refuse bools, as `log` does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError
from graphc.ir.types import TensorType
from graphc.ops.defop import (
    defop,
    elementwise_cost,
    into,
    rounds_half,
    ufunc_dtype,
    ufunc_infer,
    ufunc_kernel,
)
from graphc.ops.selection import (  # noqa: F401 - re-exported: E.cast, E.where, ... stay valid
    cast,
    clamp,
    clip,
    eq,
    equal,
    full_like,
    ge,
    greater,
    greater_equal,
    gt,
    le,
    less,
    less_equal,
    lt,
    ne,
    not_equal,
    ones_like,
    unbroadcast,
    where,
    zeros_like,
)
from graphc.ops.special import erf_into

# this family's ops, which graphc.ops star-imports (the selection.py names above are only
# re-exported, as E.cast, E.where, ...)
__all__ = [
    "abs",
    "absolute",
    "acos",
    "acosh",
    "add",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cos",
    "cosh",
    "div",
    "divide",
    "erf",
    "exp",
    "expm1",
    "gelu",
    "log",
    "log10",
    "log1p",
    "log2",
    "logaddexp",
    "maximum",
    "minimum",
    "mul",
    "multiply",
    "neg",
    "negative",
    "pow",
    "power",
    "reciprocal",
    "relu",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "sub",
    "subtract",
    "tan",
    "tanh",
]


def _binary(
    name: str, ufunc: np.ufunc, vjp: Any, doc: str, inplace: bool = True, props: tuple = ()
) -> Any:
    return defop(
        name,
        inputs=("x", "y"),
        infer=ufunc_infer(ufunc, name),
        kernel=ufunc_kernel(ufunc),
        vjp=vjp,
        elementwise=True,
        inplace=inplace,
        cost=elementwise_cost,
        doc=doc,
        props=props,
    )


def unary_op(name: str, ufunc: np.ufunc, vjp: Any, doc: str, props: tuple = ()) -> Any:
    """An elementwise op that is numpy's `ufunc` of one input, in place where it may be."""
    return defop(
        name,
        infer=ufunc_infer(ufunc, name),
        kernel=ufunc_kernel(ufunc),
        vjp=vjp,
        elementwise=True,
        inplace=True,
        cost=elementwise_cost,
        doc=doc,
        props=props,
    )


def float_kernel(body: Any, op: str) -> Any:
    """A kernel running `body(x, out, **attrs)` on x in the float dtype numpy gives `op`
    (ints become float64), resolved once per input dtype."""
    dtypes: dict[np.dtype, np.dtype] = {}

    def kernel(x: np.ndarray, out: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
        dtype = dtypes.get(x.dtype)
        if dtype is None:
            dtype = dtypes[x.dtype] = ufunc_dtype(np.tanh, op, x.dtype)
        if out is None:
            out = np.empty(x.shape, dtype)
        x = x.astype(dtype, copy=False)
        if x.ndim == 0:  # numpy gives scalars, not arrays, for 0-d steps inside `body`
            body(x.reshape(1), out.reshape(1), **attrs)
            return out
        return body(x, out, **attrs)

    kernel.__name__ = op
    kernel.__module__ = body.__module__  # the family whose op it is, where `body` is written
    return kernel


def float_type(op: str) -> Any:
    """The type rule of an op defined on floats: ints give float64, bools are refused."""

    def infer(x: TensorType, **attrs: Any) -> TensorType:
        return x.with_dtype(ufunc_dtype(np.tanh, op, x.dtype))

    return infer


# -- arithmetic -----------------------------------------------------------------

# d(x+y) = dx + dy
add = _binary(
    "add",
    np.add,
    lambda ct, out, x, y, needs: (unbroadcast(ct, x), unbroadcast(ct, y)),
    "x + y, elementwise with broadcasting. gc.add(np.ones(2), 1.0) -> array([2., 2.])",
    props=("commutative",),
)

# d(x-y) = dx - dy
sub = _binary(
    "sub",
    np.subtract,
    lambda ct, out, x, y, needs: (
        unbroadcast(ct, x),
        unbroadcast(neg(ct), y) if needs[1] else None,
    ),
    "x - y, elementwise with broadcasting. gc.sub(np.ones(2), 1.0) -> array([0., 0.])",
)

# d(xy) = y dx + x dy
mul = _binary(
    "mul",
    np.multiply,
    lambda ct, out, x, y, needs: (
        unbroadcast(ct * y, x) if needs[0] else None,
        unbroadcast(ct * x, y) if needs[1] else None,
    ),
    "x * y, elementwise with broadcasting. gc.mul(np.ones(2), 3.0) -> array([3., 3.])",
    props=("commutative",),
)

# d(x/y) = dx / y - (x/y) dy / y
div = _binary(
    "div",
    np.true_divide,
    lambda ct, out, x, y, needs: (
        unbroadcast(ct / y, x) if needs[0] else None,
        unbroadcast(neg(ct) * out / y, y) if needs[1] else None,
    ),
    "x / y (true division; ints give floats). gc.div(np.ones(2), 4.0) -> array([.25, .25])",
)


def _pow_vjp(ct: Any, out: Any, x: Any, y: Any, needs: tuple) -> tuple:
    # d(x^y) = y x^(y-1) dx + log(x) x^y dy, with JAX's and torch's values where that
    # formula has 0 * inf: x^0 is flat in x everywhere (0^-1 would make it nan), and
    # 0^y is flat in y at x = 0 (log 0 = -inf): log(1) stands in for it there. The
    # masks are on the coefficients, not on ct, so that the rule stays linear in ct with
    # finite coefficients (forward mode transposes it: 0 * inf would be nan again), and
    # for a constant y they fold away, leaving (ct * y) * x^(y-1)
    gx = unbroadcast(ct * y * where(eq(y, 0), 0, x ** (y - 1)), x) if needs[0] else None
    gy = unbroadcast(ct * out * log(where(eq(x, 0), 1, x)), y) if needs[1] else None
    return gx, gy


# exponents computed as products: pow's meaning for these (see the op's doc)
PRODUCT_EXPONENTS = (2, 3)


def _product_exponent(y: np.ndarray) -> int | None:
    """2 or 3 when y is one element holding exactly that integer, else None."""
    if y.size != 1:
        return None
    e = y.reshape(()).item()
    return int(e) if e in PRODUCT_EXPONENTS and not isinstance(e, bool) else None


@rounds_half  # its products round in the 16-bit dtype, as x*x*x does; np.power has a loop
def _pow_kernel(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    e = _product_exponent(np.asarray(y))
    if e is not None:
        # x**2 = x*x and x**3 = (x*x)*x, one rounding each, in the result dtype: C's pow
        # is not correctly rounded, a product is, and the simplifier's x**2 -> x*x is
        # then exact (as JAX's integer_pow)
        dtype = ufunc_dtype(np.power, "pow", np.asarray(x).dtype, np.asarray(y).dtype)
        base = np.asarray(x).astype(dtype, copy=False)
        shape = np.broadcast_shapes(base.shape, np.shape(y))
        direct = out is not None and out.shape == base.shape == shape
        target = out if direct else None
        if e == 2:
            result = np.multiply(base, base, out=target)
        else:  # the square apart: `out` may be x itself, still needed for the third factor
            result = np.multiply(np.multiply(base, base), base, out=target)
        return result if direct else into(out, np.broadcast_to(result, shape))
    try:
        return np.power(x, y, out=out)
    except ValueError as exc:  # numpy refuses integers to negative integer powers
        raise DTypeError(f"pow: {exc} (cast to a float dtype first)") from None


pow = defop(
    "pow",
    inputs=("x", "y"),
    infer=ufunc_infer(np.power, "pow"),
    kernel=_pow_kernel,
    vjp=_pow_vjp,
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="x ** y. A one-element exponent of exactly 2 or 3 means x*x or x*x*x (each product "
    "rounded once, as JAX's integer_pow), so x**2 and x*x agree bit for bit. "
    "gc.pow(np.full(2, 3.0), 2) -> array([9., 9.])",
)

# d(-x) = -dx
neg = unary_op("neg", np.negative, lambda ct, out, x, needs: (neg(ct),), "-x, elementwise.")

# -- unary math -----------------------------------------------------------------

# d exp(x) = exp(x) dx
exp = unary_op(
    "exp",
    np.exp,
    lambda ct, out, x, needs: (ct * out,),
    "e ** x, elementwise.",
    props=("non_negative",),
)

# d log(x) = dx / x
log = unary_op("log", np.log, lambda ct, out, x, needs: (ct / x,), "Natural logarithm.")

# d sqrt(x) = dx / (2 sqrt(x))
sqrt = unary_op(
    "sqrt",
    np.sqrt,
    lambda ct, out, x, needs: (ct * 0.5 / out,),
    "Square root.",
    props=("non_negative",),
)

# d|x| = sign(x) dx
abs = unary_op(
    "abs",
    np.absolute,
    lambda ct, out, x, needs: (ct * sign(x),),
    "Absolute value.",
    props=("non_negative",),
)


def _zero_vjp(ct: Any, out: Any, x: Any, needs: tuple) -> tuple:
    return (full_like(x, 0),)


# sign is flat almost everywhere: its gradient is zero
sign = unary_op("sign", np.sign, _zero_vjp, "-1, 0 or 1 by the sign of x.")

# d sin(x) = cos(x) dx
sin = unary_op("sin", np.sin, lambda ct, out, x, needs: (ct * cos(x),), "Sine.")

# d cos(x) = -sin(x) dx
cos = unary_op("cos", np.cos, lambda ct, out, x, needs: (neg(ct) * sin(x),), "Cosine.")

# d tanh(x) = (1 - tanh(x)^2) dx
tanh = unary_op(
    "tanh",
    np.tanh,
    lambda ct, out, x, needs: (ct * (1 - out * out),),
    "Hyperbolic tangent.",
    props=("activation",),
)


def _sigmoid_body(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    # with e = exp(-|x|) <= 1 (never overflows): 1/(1+e) for x >= 0, e/(1+e) for x < 0,
    # so sigmoid(-20) is 2.06e-9 in float32 with full relative accuracy, where
    # (1 + tanh(x/2)) / 2 cancels to 0. Branch-free (a masked copy is 8x slower here),
    # one scratch array, and `out` may be x itself: x's signs are read first.
    numerator = np.greater_equal(x, 0, out=np.empty_like(out), casting="unsafe")  # 1 or 0
    np.absolute(x, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)  # e
    np.maximum(out, numerator, out=numerator)  # 1 for x >= 0, e for x < 0 (nan stays)
    np.add(out, 1, out=out)
    return np.divide(numerator, out, out=out)


# d sigmoid(x) = s (1 - s) dx
sigmoid = defop(
    "sigmoid",
    infer=ufunc_infer(np.tanh, "sigmoid"),
    kernel=float_kernel(_sigmoid_body, "sigmoid"),
    vjp=lambda ct, out, x, needs: (ct * out * (1 - out),),
    elementwise=True,
    inplace=True,
    cost=lambda out, x: 4 * (out.size or 0),
    doc="Logistic sigmoid 1 / (1 + exp(-x)).",
    props=("non_negative", "activation", "allocates_one_temporary"),
)


def _relu_infer(x: TensorType) -> TensorType:
    if x.dtype == np.bool_:  # max(x, 0) of a bool is the bool itself; torch refuses it too
        raise DTypeError("relu: not defined for bool (use the bool itself, or cast first)")
    return x


# d relu(x) = [x > 0] dx
relu = defop(
    "relu",
    infer=_relu_infer,
    kernel=lambda x, out=None: np.maximum(x, 0, out=out),
    vjp=lambda ct, out, x, needs: (where(gt(out, 0), ct, 0),),
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="max(x, 0), elementwise.",
    props=("non_negative", "activation"),
)

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _gelu_body(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    # (0.5 x) (1 + tanh(c (x + a x^3))), with one scratch array (an array even when 0-d:
    # `x * x` on a 0-d array would give a numpy scalar, which cannot be an `out=`).
    # 0.5 x first: 1 + tanh <= 2, so no intermediate exceeds |x| (gelu(3e38) is 3e38)
    with np.errstate(over="ignore"):  # x*x is inf past 1.8e19 in float32: tanh gives +-1
        inner = np.multiply(x, x, out=np.empty_like(out))
        inner *= _GELU_A
        inner += 1
        inner *= x
        inner *= _GELU_C
    np.tanh(inner, out=inner)
    inner += 1
    np.multiply(x, 0.5, out=out)
    out *= inner
    return out


# beyond this |x| the slope's second term is 0 (1 - t^2 underflows): clipping x there
# keeps x^2 finite, so the slope is 1 or 0 for huge |x| instead of 0 * inf = nan
_GELU_FLAT = 1e4


def _gelu_vjp(ct: Any, out: Any, x: Any, needs: tuple) -> tuple:
    # d/dx: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2), t = tanh(c (x + a x^3))
    x = clip(x, -_GELU_FLAT, _GELU_FLAT)
    x2 = x * x
    t = tanh(x * (x2 * (_GELU_A * _GELU_C) + _GELU_C))
    slope = 0.5 * (1 + t) + (0.5 * _GELU_C) * x * (1 - t * t) * (1 + (3 * _GELU_A) * x2)
    return (ct * slope,)


gelu = defop(
    "gelu",
    infer=ufunc_infer(np.tanh, "gelu"),
    kernel=float_kernel(_gelu_body, "gelu"),
    vjp=_gelu_vjp,
    elementwise=True,
    inplace=True,
    cost=lambda out, x: 8 * (out.size or 0),
    doc="GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).",
    props=("activation", "allocates_one_temporary"),
)

# -- binary min/max ---------------------------------------------------------------


def _extremum_vjp(pick: Any) -> Any:
    # the gradient goes to the chosen operand; ties split it evenly, as PyTorch does
    def vjp(ct: Any, out: Any, x: Any, y: Any, needs: tuple) -> tuple:
        half = ct * 0.5
        gx = unbroadcast(where(pick(x, y), ct, where(eq(x, y), half, 0)), x) if needs[0] else None
        gy = unbroadcast(where(pick(y, x), ct, where(eq(x, y), half, 0)), y) if needs[1] else None
        return gx, gy

    return vjp


maximum = _binary(
    "maximum",
    np.maximum,
    _extremum_vjp(lambda a, b: gt(a, b)),
    "Elementwise larger of x and y.",
)  # not commutative: on a tie it returns x, so maximum(0.0, -0.0) is -0.0, the other way 0.0
minimum = _binary(
    "minimum",
    np.minimum,
    _extremum_vjp(lambda a, b: lt(a, b)),
    "Elementwise smaller of x and y.",
)  # not commutative: on a tie it returns x (the sign of a zero follows the order)

# -- logarithms and exponentials near 0 -------------------------------------------

# d log1p(x) = dx / (1 + x)
log1p = unary_op(
    "log1p",
    np.log1p,
    lambda ct, out, x, needs: (ct / (x + 1),),
    "log(1 + x), accurate for small x. gc.log1p(np.array([1e-10])) -> array([1e-10])",
)

# d log2(x) = dx / (x ln 2): numpy's own kernel, not log(x) / ln 2 (which is off by an
# ulp here and there, and not exact at powers of 2)
log2 = unary_op(
    "log2",
    np.log2,
    lambda ct, out, x, needs: (ct / (x * math.log(2)),),
    "The base-2 logarithm, numpy's. gc.log2(np.array([8.0])) -> array([3.])",
)

# d log10(x) = dx / (x ln 10)
log10 = unary_op(
    "log10",
    np.log10,
    lambda ct, out, x, needs: (ct / (x * math.log(10)),),
    "The base-10 logarithm, numpy's. gc.log10(np.array([1000.0])) -> array([3.])",
)

# d logaddexp(x, y) = sigmoid(x - y) dx + sigmoid(y - x) dy: torch's slopes (1 and 0 at
# x = inf beside a finite y; nan where both are the same infinity, x - y is nan)
logaddexp = _binary(
    "logaddexp",
    np.logaddexp,
    lambda ct, out, x, y, needs: (
        unbroadcast(ct * sigmoid(x - y), x) if needs[0] else None,
        unbroadcast(ct * sigmoid(y - x), y) if needs[1] else None,
    ),
    "log(exp(x) + exp(y)) without overflow, numpy's kernel (x + log 2 where x == y, "
    "infinities too). gc.logaddexp(np.array([1000.0]), 1000.0) -> array([1000.69314718])",
    props=("commutative",),
)

# d expm1(x) = exp(x) dx = (out + 1) dx
expm1 = unary_op(
    "expm1",
    np.expm1,
    lambda ct, out, x, needs: (ct * (out + 1),),
    "exp(x) - 1, accurate for small x. gc.expm1(np.array([1e-10])) -> array([1e-10])",
)

# -- trigonometric and hyperbolic -------------------------------------------------

# d atan(x) = dx / (1 + x^2)
atan = unary_op(
    "atan",
    np.arctan,
    lambda ct, out, x, needs: (ct / (x * x + 1),),
    "The inverse tangent, in (-pi/2, pi/2). gc.atan(np.array([1.0])) -> array([0.78539816])",
)

# d sinh(x) = cosh(x) dx = (exp(x) + exp(-x)) / 2 dx
sinh = unary_op(
    "sinh",
    np.sinh,
    lambda ct, out, x, needs: (ct * ((exp(x) + exp(neg(x))) * 0.5),),
    "The hyperbolic sine (exp(x) - exp(-x)) / 2. gc.sinh(np.array([1.0])) -> array([1.17520119])",
)

# d tan(x) = (1 + tan(x)^2) dx
tan = unary_op(
    "tan",
    np.tan,
    lambda ct, out, x, needs: (ct * (out * out + 1),),
    "The tangent. gc.tan(np.array([1.0])) -> array([1.55740772])",
)


def _one_minus_square(x: Any) -> Any:
    """1 - x^2 as (1 - x)(1 + x): no cancellation near |x| = 1, where asin, acos and
    atanh have their steep slopes."""
    return (1 - x) * (x + 1)


# d asin(x) = dx / sqrt(1 - x^2): inf at |x| = 1, nan beyond (as torch)
asin = unary_op(
    "asin",
    np.arcsin,
    lambda ct, out, x, needs: (ct / sqrt(_one_minus_square(x)),),
    "The inverse sine, in [-pi/2, pi/2]; nan outside [-1, 1]. "
    "gc.asin(np.array([0.5])) -> array([0.52359878])",
)

# d acos(x) = -dx / sqrt(1 - x^2)
acos = unary_op(
    "acos",
    np.arccos,
    lambda ct, out, x, needs: (neg(ct) / sqrt(_one_minus_square(x)),),
    "The inverse cosine, in [0, pi]; nan outside [-1, 1]. "
    "gc.acos(np.array([0.5])) -> array([1.04719755])",
)


def _atan2_vjp(ct: Any, out: Any, x: Any, y: Any, needs: tuple) -> tuple:
    # atan2(x, y) is the angle of the point (y, x): d = (y dx - x dy) / (x^2 + y^2). At
    # the origin, where it has no derivative, both are 0, as torch gives (not 0 * inf)
    norm = x * x + y * y
    origin = eq(norm, 0)
    inverse = where(origin, 0, reciprocal(where(origin, 1, norm)))
    gx = unbroadcast(ct * y * inverse, x) if needs[0] else None
    gy = unbroadcast(neg(ct) * x * inverse, y) if needs[1] else None
    return gx, gy


# the angle of the point (y, x), x the vertical coordinate (torch.atan2(input, other),
# numpy.arctan2(x1, x2))
atan2 = _binary(
    "atan2",
    np.arctan2,
    _atan2_vjp,
    "The angle in [-pi, pi] of the point whose horizontal coordinate is y and vertical "
    "one x: the inverse tangent of x / y in the quadrant the signs of both give (signed "
    "zeros and infinities too), as torch.atan2(input, other) and numpy.arctan2(x1, x2). "
    "gc.atan2(np.array([1.0]), np.array([-1.0])) -> array([2.35619449])",
)

# d cosh(x) = sinh(x) dx
cosh = unary_op(
    "cosh",
    np.cosh,
    lambda ct, out, x, needs: (ct * sinh(x),),
    "The hyperbolic cosine (exp(x) + exp(-x)) / 2. gc.cosh(np.array([1.0])) -> array([1.54308063])",
    props=("non_negative",),
)

# d asinh(x) = dx / sqrt(x^2 + 1)
asinh = unary_op(
    "asinh",
    np.arcsinh,
    lambda ct, out, x, needs: (ct / sqrt(x * x + 1),),
    "The inverse hyperbolic sine log(x + sqrt(x^2 + 1)). "
    "gc.asinh(np.array([1.0])) -> array([0.88137359])",
)


def _square_minus_one(x: Any) -> Any:
    """x^2 - 1 as (|x| - 1)(|x| + 1): no cancellation near x = 1, and +0 (not -0) at
    x = -1, where torch's rsqrt(x^2 - 1) gives +inf."""
    size = abs(x)
    return (size - 1) * (size + 1)


# d acosh(x) = dx / sqrt(x^2 - 1)
acosh = unary_op(
    "acosh",
    np.arccosh,
    lambda ct, out, x, needs: (ct / sqrt(_square_minus_one(x)),),
    "The inverse hyperbolic cosine log(x + sqrt(x^2 - 1)), >= 0; nan below 1. "
    "gc.acosh(np.array([2.0])) -> array([1.3169579])",
    props=("non_negative",),
)

# d atanh(x) = dx / (1 - x^2)
atanh = unary_op(
    "atanh",
    np.arctanh,
    lambda ct, out, x, needs: (ct / _one_minus_square(x),),
    "The inverse hyperbolic tangent log((1 + x) / (1 - x)) / 2: +-inf at +-1, nan beyond. "
    "gc.atanh(np.array([0.5])) -> array([0.54930614])",
)

# -- reciprocals ------------------------------------------------------------------


def _reciprocal_infer(x: TensorType) -> TensorType:
    # 1/x as true division: ints and bools give float64, as gc.div does
    return x.with_dtype(ufunc_dtype(np.true_divide, "reciprocal", x.dtype, x.dtype))


# d (1/x) = -dx / x^2 = -out^2 dx
reciprocal = defop(
    "reciprocal",
    infer=_reciprocal_infer,
    kernel=lambda x, out=None: np.divide(1, x, out=out),
    vjp=lambda ct, out, x, needs: (neg(ct) * (out * out),),
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="1 / x, elementwise (ints give floats). gc.reciprocal(np.array([4.0])) -> array([0.25])",
)


def _rsqrt_kernel(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # 1 / sqrt(x), two roundings, as PyTorch computes it on the CPU
    if out is None:  # an array even when 0-d (numpy would give a scalar)
        out = np.empty(x.shape, ufunc_dtype(np.sqrt, "rsqrt", x.dtype))
    np.sqrt(x, out=out)
    return np.divide(1, out, out=out)


# d x^(-1/2) = -1/2 x^(-3/2) dx = -1/2 out^3 dx
rsqrt = defop(
    "rsqrt",
    infer=ufunc_infer(np.sqrt, "rsqrt"),
    kernel=_rsqrt_kernel,
    vjp=lambda ct, out, x, needs: (ct * (out * out * out) * -0.5,),
    elementwise=True,
    inplace=True,
    cost=lambda out, x: 2 * (out.size or 0),
    doc="1 / sqrt(x), elementwise. gc.rsqrt(np.array([4.0])) -> array([0.5])",
)

# -- the error function -----------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# d erf(x) = 2/sqrt(pi) exp(-x^2) dx
erf = defop(
    "erf",
    infer=float_type("erf"),
    kernel=float_kernel(erf_into, "erf"),
    vjp=lambda ct, out, x, needs: (ct * (exp(neg(x * x)) * _TWO_OVER_SQRT_PI),),
    elementwise=True,
    inplace=True,
    cost=lambda out, x: 30 * (out.size or 0),
    doc="The error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to x, within 1.5 ulp "
    "in float64 and correctly rounded in float32 (graphc/ops/special.py). "
    "gc.erf(np.array([0.5])) -> array([0.52049988])",
)

# -- derived (builders over the primitives above) ---------------------------------


def square(x: Any) -> Any:
    """x * x."""
    return mul(x, x)


def root_flat_at_zero(s: Any) -> Any:
    """sqrt(s) for s >= 0 (a sum of squares, a variance), with gradient 0 where s is 0,
    not ct * inf * 0 = nan: torch's norm and std backward (a norm of zeros, a spread
    of none). The same values as sqrt, bit for bit."""
    at_zero = eq(s, 0)
    return where(at_zero, 0, sqrt(where(at_zero, 1, s)))


# numpy's long names for the same ops
subtract, multiply, divide, negative, power, absolute = sub, mul, div, neg, pow, abs
arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2
arcsinh, arccosh, arctanh = asinh, acosh, atanh
