"""Elementwise math of real models: log1p, expm1, reciprocal, rsqrt, erf, rounding,
remainder and fmod, logical ops, and clamp with tensor bounds.

One block per op, as in elementwise.py. Ops that only exist for floats compute ints
in float64 (numpy's rule for tanh), and refuse bools, as `log` does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.types import TensorType
from graphc.ops import elementwise as E
from graphc.ops.defop import (
    defop,
    elementwise_cost,
    into,
    ufunc_dtype,
    ufunc_infer,
    ufunc_kernel,
)
from graphc.ops.dispatch import is_python_scalar
from graphc.ops.selection import full_like, unbroadcast
from graphc.ops.special import erf_into

__all__ = [
    "atan",
    "ceil",
    "clamp",
    "clip",
    "erf",
    "expm1",
    "floor",
    "fmod",
    "log1p",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "mod",
    "reciprocal",
    "remainder",
    "round",
    "rsqrt",
    "sinh",
    "trunc",
]


def float_type(op: str) -> Any:
    """The type rule of an op defined on floats: ints give float64, bools are refused."""

    def infer(x: TensorType, **attrs: Any) -> TensorType:
        return x.with_dtype(ufunc_dtype(np.tanh, op, x.dtype))

    return infer


# -- logarithms and exponentials near 0 -------------------------------------------------

# d log1p(x) = dx / (1 + x)
log1p = E.unary_op(
    "log1p",
    np.log1p,
    lambda ct, out, x, needs: (ct / (x + 1),),
    "log(1 + x), accurate for small x. gc.log1p(np.array([1e-10])) -> array([1e-10])",
)

# d expm1(x) = exp(x) dx = (out + 1) dx
expm1 = E.unary_op(
    "expm1",
    np.expm1,
    lambda ct, out, x, needs: (ct * (out + 1),),
    "exp(x) - 1, accurate for small x. gc.expm1(np.array([1e-10])) -> array([1e-10])",
)

# -- trigonometric and hyperbolic -------------------------------------------------------

# d atan(x) = dx / (1 + x^2)
atan = E.unary_op(
    "atan",
    np.arctan,
    lambda ct, out, x, needs: (ct / (x * x + 1),),
    "The inverse tangent, in (-pi/2, pi/2). gc.atan(np.array([1.0])) -> array([0.78539816])",
)

# d sinh(x) = cosh(x) dx = (exp(x) + exp(-x)) / 2 dx
sinh = E.unary_op(
    "sinh",
    np.sinh,
    lambda ct, out, x, needs: (ct * ((E.exp(x) + E.exp(E.neg(x))) * 0.5),),
    "The hyperbolic sine (exp(x) - exp(-x)) / 2. gc.sinh(np.array([1.0])) -> array([1.17520119])",
)


def _reciprocal_infer(x: TensorType) -> TensorType:
    # 1/x as true division: ints and bools give float64, as gc.div does
    return x.with_dtype(ufunc_dtype(np.true_divide, "reciprocal", x.dtype, x.dtype))


# d (1/x) = -dx / x^2 = -out^2 dx
reciprocal = defop(
    "reciprocal",
    infer=_reciprocal_infer,
    kernel=lambda x, out=None: np.divide(1, x, out=out),
    vjp=lambda ct, out, x, needs: (E.neg(ct) * (out * out),),
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

# -- the error function ---------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# d erf(x) = 2/sqrt(pi) exp(-x^2) dx
erf = defop(
    "erf",
    infer=float_type("erf"),
    kernel=E.float_kernel(erf_into, "erf"),
    vjp=lambda ct, out, x, needs: (ct * (E.exp(E.neg(x * x)) * _TWO_OVER_SQRT_PI),),
    elementwise=True,
    inplace=True,
    cost=lambda out, x: 30 * (out.size or 0),
    doc="The error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to x, within 1.5 ulp "
    "in float64 and correctly rounded in float32 (graphc/ops/special.py). "
    "gc.erf(np.array([0.5])) -> array([0.52049988])",
)

# -- rounding (flat almost everywhere: gradient zero) ----------------------------------------


def _zero_vjp(ct: Any, out: Any, x: Any, needs: tuple, **attrs: Any) -> tuple:
    return (full_like(x, 0),)


def _rounding_infer(name: str) -> Any:
    def infer(x: TensorType, **attrs: Any) -> TensorType:
        if x.dtype == np.bool_:  # as PyTorch: "floor" is not implemented for 'Bool'
            raise DTypeError(f"{name}: not defined for bool (cast to a number first)")
        return x

    return infer


def _rounding(name: str, ufunc: np.ufunc, doc: str) -> Any:
    def kernel(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if x.dtype.kind in "iu":  # integers are already whole (numpy 2.0 would give floats)
            return into(out, x)
        return ufunc(x, out=out)

    return defop(
        name,
        infer=_rounding_infer(name),
        kernel=kernel,
        vjp=_zero_vjp,
        elementwise=True,
        inplace=True,
        cost=elementwise_cost,
        doc=doc,
    )


floor = _rounding("floor", np.floor, "The largest whole number <= x. gc.floor(-0.5) -> -1.0")
ceil = _rounding("ceil", np.ceil, "The smallest whole number >= x. gc.ceil(0.5) -> 1.0")
trunc = _rounding("trunc", np.trunc, "x rounded towards zero. gc.trunc(-1.5) -> -1.0")


def _round_canon(x: TensorType, decimals: Any) -> dict:
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise GraphcError(f"round: decimals must be an int, got {decimals!r}")
    if decimals and x.dtype.kind in "iu":  # PyTorch: "round_cpu" not implemented for 'Long'
        raise DTypeError(f"round: decimals={decimals} needs a float input, got {x.dtype}")
    return {"decimals": int(decimals)}


def _round_kernel(x: np.ndarray, out: np.ndarray | None = None, decimals: int = 0) -> np.ndarray:
    if x.dtype.kind in "iu":
        return into(out, x)
    if decimals == 0:
        return np.rint(x, out=out)  # half to even, as torch.round
    # numpy's and PyTorch's way: rint(x * 10^d) / 10^d, or rint(x / 10^-d) * 10^-d
    return np.round(x, decimals, out=np.empty_like(x) if out is None else out)


round = defop(
    "round",
    infer=_rounding_infer("round"),
    kernel=_round_kernel,
    attrs={"decimals": 0},
    canonicalize=_round_canon,
    vjp=_zero_vjp,
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="x rounded to `decimals` places, halves to even (as torch.round and numpy.round). "
    "gc.round(np.array([0.5, 1.5, 2.5])) -> array([0., 2., 2.])",
)

# -- remainders ---------------------------------------------------------------------------


def _remainder_kernel(ufunc: np.ufunc, name: str) -> Any:
    def kernel(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # numpy answers 0 (and warns) for an integer divided by zero; PyTorch raises
        integers = np.asarray(y).dtype.kind in "iub" and np.asarray(x).dtype.kind in "iub"
        if integers and not np.all(y):
            raise GraphcError(f"{name}: integer division by zero")
        return ufunc(x, y, out=out)

    kernel.__name__ = name
    return kernel


def _remainder_vjp(quotient: Any) -> Any:
    # x - y q(x/y) with q = floor or trunc, flat between its jumps:
    # d/dx = 1, d/dy = -q(x/y)
    def vjp(ct: Any, out: Any, x: Any, y: Any, needs: tuple) -> tuple:
        gx = unbroadcast(ct, x) if needs[0] else None
        gy = unbroadcast(E.neg(ct) * quotient(x / y), y) if needs[1] else None
        return gx, gy

    return vjp


def _remainder_op(name: str, ufunc: np.ufunc, quotient: Any, doc: str) -> Any:
    return defop(
        name,
        inputs=("x", "y"),
        infer=ufunc_infer(ufunc, name),
        kernel=_remainder_kernel(ufunc, name),
        vjp=_remainder_vjp(quotient),
        elementwise=True,
        inplace=True,
        cost=elementwise_cost,
        doc=doc,
    )


remainder = _remainder_op(
    "remainder",
    np.remainder,
    floor,
    "x - y * floor(x / y): the sign of y, as Python's %, numpy.remainder and "
    "torch.remainder. gc.remainder(np.array([-5, 5]), 3) -> array([1, 2])",
)
fmod = _remainder_op(
    "fmod",
    np.fmod,
    trunc,
    "x - y * trunc(x / y): the sign of x, as C's fmod, numpy.fmod and torch.fmod. "
    "gc.fmod(np.array([-5, 5]), 3) -> array([-2, 2])",
)
mod = remainder  # numpy.mod is numpy.remainder

# -- logical ops (bool results, no gradient) ---------------------------------------------


def _logical(name: str, ufunc: np.ufunc, doc: str) -> Any:
    return defop(
        name,
        inputs=("x", "y") if ufunc.nin == 2 else ("x",),
        infer=ufunc_infer(ufunc, name),
        kernel=ufunc_kernel(ufunc),
        elementwise=True,
        cost=elementwise_cost,
        doc=doc,
    )


logical_and = _logical("logical_and", np.logical_and, "x and y, elementwise, nonzero as true.")
logical_or = _logical("logical_or", np.logical_or, "x or y, elementwise, nonzero as true.")
logical_xor = _logical("logical_xor", np.logical_xor, "x xor y, elementwise, nonzero as true.")
logical_not = _logical("logical_not", np.logical_not, "not x, elementwise (x == 0).")

# -- clamp with scalar or tensor bounds ---------------------------------------------------


def _scalar_bound(bound: Any) -> bool:
    """None, a Python or numpy scalar, or a 0-d array: a `clip` attribute."""
    if bound is None or is_python_scalar(bound) or isinstance(bound, np.generic):
        return True
    return isinstance(bound, np.ndarray) and bound.ndim == 0


def _pick(name: str, numpy_name: str, torch_value: Any, numpy_value: Any) -> Any:
    if torch_value is not None and numpy_value is not None:
        raise GraphcError(f"clamp: give either {name} or {numpy_name}, not both")
    return numpy_value if torch_value is None else torch_value


def clamp(x: Any, min: Any = None, max: Any = None, *, a_min: Any = None,  # noqa: A002
          a_max: Any = None) -> Any:  # fmt: skip
    """min(max(x, min), max), as torch.clamp: bounds may be scalars, arrays, tensors or
    graph values (broadcasting against x), and a nan anywhere gives nan. numpy's names
    a_min and a_max work too.

    Scalar bounds record one `clip` node. Tensor bounds are `maximum` and `minimum`:
    where x equals a bound they split the gradient between the two (PyTorch gives it
    all to x).

    >>> import numpy as np, graphc as gc
    >>> gc.clamp(np.array([-2.0, 0.5, 3.0]), np.zeros(3), 1.0)
    array([0. , 0.5, 1. ])
    """
    low, high = _pick("min", "a_min", min, a_min), _pick("max", "a_max", max, a_max)
    scalar_low, scalar_high = _scalar_bound(low), _scalar_bound(high)
    if scalar_low and scalar_high:
        return E.clip(x, low, high)
    if low is not None:
        x = E.clip(x, low, None) if scalar_low else E.maximum(x, low)
    if high is not None:
        x = E.clip(x, None, high) if scalar_high else E.minimum(x, high)
    return x


def clip(x: Any, a_min: Any = None, a_max: Any = None, *, min: Any = None,  # noqa: A002
         max: Any = None) -> Any:  # fmt: skip
    """numpy.clip's spelling of `clamp` (bounds may be arrays or tensors too).

    >>> import numpy as np, graphc as gc
    >>> gc.clip(np.array([-1.0, 2.0]), 0.0, 1.0)
    array([0., 1.])
    """
    return clamp(x, _pick("min", "a_min", min, a_min), _pick("max", "a_max", max, a_max))
