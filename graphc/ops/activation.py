"""Activations of real models: softplus, leaky_relu, elu (selu, celu), silu, hardsigmoid,
hardtanh (relu6), softsign, and gelu's exact form; erf and the float type rule they lean
on are in elementwise.py.

Each op computes what PyTorch's CPU kernel computes, with the formula and the gradient
at kinks PyTorch uses (leaky_relu's slope at 0 is the negative one, hardtanh passes no
gradient at its bounds). Activations are defined on floats: ints compute in float64
and bools are refused. Builders (selu, celu, relu6, softsign) are exactly PyTorch's own
definitions in terms of another op, so they add no kernel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.registry import get_op
from graphc.ops import elementwise as E
from graphc.ops.defop import defop
from graphc.ops.elementwise import erf, float_kernel, float_type
from graphc.ops.selection import gt, lt, where
from graphc.ops.special import gelu_exact_into

__all__ = [
    "celu",
    "elu",
    "gelu_exact",
    "hardsigmoid",
    "hardtanh",
    "leaky_relu",
    "relu6",
    "selu",
    "silu",
    "softplus",
    "softsign",
]


def _cost(per_element: int) -> Any:
    return lambda out, *inputs, **attrs: per_element * (out.size or 0)


def _floats(op: str, *names: str) -> Any:
    """A canonicalizer keeping the named attrs as Python floats (numbers only)."""

    def canon(x: Any, **given: Any) -> dict:
        result = {}
        for key in names:
            value = given[key]
            if isinstance(value, (bool, str, bytes)) or np.ndim(value) != 0:
                raise GraphcError(f"{op}: {key} must be a real number, got {value!r}")
            result[key] = float(value)
        return result

    return canon


# -- softplus -----------------------------------------------------------------------------


def _softplus_body(x: np.ndarray, out: np.ndarray, beta: float, threshold: float) -> np.ndarray:
    # PyTorch's formula: x where beta x > threshold (linear there), else log1p(exp(beta x))
    # / beta; the exponent is capped at the threshold so the unused lanes cannot overflow
    scaled = np.multiply(x, beta)
    linear = np.greater(scaled, threshold)
    np.minimum(scaled, threshold, out=scaled)
    np.exp(scaled, out=scaled)
    np.log1p(scaled, out=scaled)
    scaled /= beta
    np.copyto(scaled, x, where=linear)
    np.copyto(out, scaled)
    return out


# d softplus = sigmoid(beta x) dx, and dx where beta x > threshold
softplus = defop(
    "softplus",
    infer=float_type("softplus"),
    kernel=float_kernel(_softplus_body, "softplus"),
    attrs={"beta": 1.0, "threshold": 20.0},
    canonicalize=_floats("softplus", "beta", "threshold"),
    vjp=lambda ct, out, x, needs, beta, threshold: (
        where(gt(x * beta, threshold), ct, ct * E.sigmoid(x * beta)),
    ),
    elementwise=True,
    inplace=True,
    cost=_cost(4),
    doc="log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's "
    "Softplus). gc.softplus(np.zeros(1)) -> array([0.69314718])",
)

# -- piecewise linear ---------------------------------------------------------------------


def _leaky_relu_body(x: np.ndarray, out: np.ndarray, negative_slope: float) -> np.ndarray:
    positive = np.greater(x, 0)  # read before `out` (perhaps x itself) is written
    np.multiply(x, negative_slope, out=out, where=~positive)
    np.copyto(out, x, where=positive)
    return out


# d leaky_relu = dx where x > 0, else negative_slope dx (at 0 too, as PyTorch)
leaky_relu = defop(
    "leaky_relu",
    infer=float_type("leaky_relu"),
    kernel=float_kernel(_leaky_relu_body, "leaky_relu"),
    attrs={"negative_slope": 0.01},
    canonicalize=_floats("leaky_relu", "negative_slope"),
    vjp=lambda ct, out, x, needs, negative_slope: (where(gt(x, 0), ct, ct * negative_slope),),
    elementwise=True,
    inplace=True,
    cost=_cost(3),
    doc="x where x > 0, else negative_slope * x. gc.leaky_relu(np.array([-1.0, 2.0]), 0.1) "
    "-> array([-0.1,  2. ])",
)


# numpy's clip since 2.1: a bound where x is past it, else x itself, so a -0.0 at a bound
# of 0.0 stays and x past a -0.0 bound is -0.0; numpy 2.0's gave +0.0 there, which the
# native backend's hardtanh (the newer semantics) did not match
_CLIP_SELECTS = bool(np.signbit(np.clip(np.float32(-1.0), np.float32(-0.0), np.float32(0.0))))


def _hardtanh_body(x: np.ndarray, out: np.ndarray, min_val: float, max_val: float) -> np.ndarray:
    if _CLIP_SELECTS:
        return np.clip(x, min_val, max_val, out=out)
    low, high = np.asarray(min_val, x.dtype), np.asarray(max_val, x.dtype)
    if np.isnan(low) or np.isnan(high):  # numpy's clip by a nan bound: nan everywhere
        out[...] = np.nan
        return out
    kept = np.where(x < low, low, x)  # then the upper bound, as clip: it wins if they cross
    np.copyto(out, np.where(kept > high, high, kept))
    return out


def _inside_vjp(low: Any, high: Any, scale: float | None = None) -> Any:
    """ct (times scale) strictly between the bounds, 0 at and beyond them (PyTorch's rule)."""

    def pass_inside(ct: Any, x: Any) -> Any:
        inner = ct if scale is None else ct * scale
        return where(gt(x, low), where(lt(x, high), inner, 0), 0)

    return pass_inside


hardtanh = defop(
    "hardtanh",
    infer=float_type("hardtanh"),
    kernel=float_kernel(_hardtanh_body, "hardtanh"),
    attrs={"min_val": -1.0, "max_val": 1.0},
    canonicalize=_floats("hardtanh", "min_val", "max_val"),
    vjp=lambda ct, out, x, needs, min_val, max_val: (_inside_vjp(min_val, max_val)(ct, x),),
    elementwise=True,
    inplace=True,
    cost=_cost(1),
    doc="x clipped to [min_val, max_val]; unlike clip, no gradient at the bounds (as "
    "PyTorch's Hardtanh). gc.hardtanh(np.array([-3.0, 0.5])) -> array([-1. ,  0.5])",
)


def _hardsigmoid_body(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    # PyTorch's min(max(x + 3, 0), 6) / 6
    np.add(x, 3, out=out)
    np.clip(out, 0, 6, out=out)
    return np.divide(out, 6, out=out)


hardsigmoid = defop(
    "hardsigmoid",
    infer=float_type("hardsigmoid"),
    kernel=float_kernel(_hardsigmoid_body, "hardsigmoid"),
    vjp=lambda ct, out, x, needs: (_inside_vjp(-3.0, 3.0, 1.0 / 6.0)(ct, x),),
    elementwise=True,
    inplace=True,
    cost=_cost(3),
    doc="min(max(x + 3, 0), 6) / 6, a piecewise linear sigmoid. "
    "gc.hardsigmoid(np.zeros(1)) -> array([0.5])",
)


def relu6(x: Any) -> Any:
    """min(max(x, 0), 6): hardtanh(x, 0, 6), as PyTorch defines it.

    >>> import numpy as np, graphc as gc
    >>> gc.relu6(np.array([-1.0, 3.0, 9.0]))
    array([0., 3., 6.])
    """
    return hardtanh(x, 0.0, 6.0)


def softsign(x: Any) -> Any:
    """x / (1 + |x|), as PyTorch defines it (so the same bits and gradients).

    >>> import numpy as np, graphc as gc
    >>> gc.softsign(np.array([-3.0, 1.0]))
    array([-0.75,  0.5 ])
    """
    return x / (E.abs(x) + 1)


# -- exponential linear units ---------------------------------------------------------


def _elu_body(
    x: np.ndarray, out: np.ndarray, alpha: float, scale: float, input_scale: float
) -> np.ndarray:
    # PyTorch's kernel: x scale for x > 0, else expm1(x input_scale) (alpha scale)
    positive = np.greater(x, 0)
    negative = np.multiply(x, input_scale)
    np.copyto(negative, 0, where=positive)  # the unused lanes cannot overflow expm1
    np.expm1(negative, out=negative)
    negative *= alpha * scale
    np.multiply(x, scale, out=out)
    np.copyto(out, negative, where=~positive)
    return out


def _elu_vjp(
    ct: Any, out: Any, x: Any, needs: tuple, alpha: float, scale: float, input_scale: float
) -> tuple:
    # d/dx: scale for x > 0, else alpha scale input_scale exp(x input_scale); the exponent
    # is clipped at 0 so that the branch not taken stays finite (its gradient is 0, and
    # 0 * inf would be nan in a second derivative)
    slope = E.exp(E.clip(x * input_scale, None, 0.0)) * (alpha * scale * input_scale)
    return (where(gt(x, 0), ct * scale, ct * slope),)


elu = defop(
    "elu",
    infer=float_type("elu"),
    kernel=float_kernel(_elu_body, "elu"),
    attrs={"alpha": 1.0, "scale": 1.0, "input_scale": 1.0},
    canonicalize=_floats("elu", "alpha", "scale", "input_scale"),
    vjp=_elu_vjp,
    elementwise=True,
    inplace=True,
    cost=_cost(4),
    doc="scale * x for x > 0, else scale * alpha * (exp(input_scale * x) - 1): PyTorch's "
    "ELU (scale and input_scale as its internal elu, which SELU and CELU use). "
    "gc.elu(np.array([-1.0, 2.0])) -> array([-0.63212056,  2.        ])",
)

# PyTorch's SELU constants (Klambauer et al. 2017)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: Any) -> Any:
    """scale * elu(x, alpha) with SELU's fixed alpha and scale, as PyTorch computes it.

    >>> import numpy as np, graphc as gc
    >>> gc.selu(np.array([1.0]))
    array([1.05070099])
    """
    return elu(x, alpha=SELU_ALPHA, scale=SELU_SCALE)


def celu(x: Any, alpha: float = 1.0) -> Any:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), as PyTorch computes it.

    >>> import numpy as np, graphc as gc
    >>> gc.celu(np.array([2.0]))
    array([2.])
    """
    if alpha == 0:
        raise GraphcError("celu: alpha must not be 0")
    return elu(x, alpha=alpha, input_scale=1.0 / alpha)


# -- sigmoid-weighted ------------------------------------------------------------------

_sigmoid_kernel = get_op("sigmoid").kernel


def _silu_body(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    # x * sigmoid(x) with graphc's stable sigmoid (x / (1 + exp(-x)) overflows in exp)
    return np.multiply(x, _sigmoid_kernel(x), out=out)


def _silu_vjp(ct: Any, out: Any, x: Any, needs: tuple) -> tuple:
    # d silu = s (1 + x (1 - s)) dx, s = sigmoid(x) (PyTorch's formula)
    s = E.sigmoid(x)
    return (ct * (s * (1 + x * (1 - s))),)


silu = defop(
    "silu",
    infer=float_type("silu"),
    kernel=float_kernel(_silu_body, "silu"),
    vjp=_silu_vjp,
    elementwise=True,
    inplace=True,
    cost=_cost(5),
    doc="x * sigmoid(x) (SiLU, swish). gc.silu(np.array([1.0])) -> array([0.73105858])",
)

# -- gelu, exact --------------------------------------------------------------------------

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# past this |x| the density term x exp(-x^2/2) is 0 in any float: clipping there keeps
# x^2 finite, so gelu's slope at +-inf is 1 or 0 instead of 0 * inf = nan
_FLAT = 1e4


def _gelu_exact_vjp(ct: Any, out: Any, x: Any, needs: tuple) -> tuple:
    # d/dx x Phi(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
    x = E.clip(x, -_FLAT, _FLAT)
    cdf = (erf(x * _SQRT_HALF) + 1) * 0.5
    density = E.exp(x * x * -0.5) * _INV_SQRT_2PI
    return (ct * (cdf + x * density),)


gelu_exact = defop(
    "gelu_exact",
    infer=float_type("gelu_exact"),
    kernel=float_kernel(gelu_exact_into, "gelu_exact"),
    vjp=_gelu_exact_vjp,
    elementwise=True,
    inplace=True,
    cost=_cost(35),
    doc="GELU's exact form x/2 (1 + erf(x / sqrt 2)) (PyTorch's gelu(approximate='none'); "
    "gc.gelu is the tanh form, JAX's default). Accurate in the left tail too, where "
    "1 + erf cancels. gc.gelu_exact(np.array([1.0])) -> array([0.84134475])",
)
