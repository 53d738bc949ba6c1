"""torch's elementwise functions that are a few ops each: `exp2`, `float_power`, `logit`,
`xlogy`, `hypot`, `fmax`, `fmin`, `heaviside`, `isposinf`, `isneginf`, `sgn`, `sinc`,
`deg2rad`, `rad2deg`.

Built from op functions, so they trace, differentiate and run eagerly alike; numpy has
most of them under the same names (np.exp2, np.hypot, np.fmax, ...), and gives the same
values. Where torch and numpy differ in the result's dtype, graphc's promotion decides,
as for every op (an int's exp2 is a float64, as numpy's `2.0 ** x`).

>>> import numpy as np, graphc as gc
>>> gc.fmax(np.array([1.0, np.nan, 3.0]), np.array([2.0, 5.0, np.nan])).tolist()
[2.0, 5.0, 3.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ops import elementwise as E
from graphc.ops import logical as L
from graphc.ops import rounding, selection
from graphc.ops.dispatch import dtype_of

__all__ = [
    "exp2",
    "float_power",
    "fmax",
    "fmin",
    "heaviside",
    "hypot",
    "isneginf",
    "isposinf",
    "logit",
    "deg2rad",
    "rad2deg",
    "sgn",
    "sinc",
    "xlogy",
]


def exp2(x: Any) -> Any:
    """2 ** x."""
    return E.pow(2.0, x)


def float_power(x: Any, exponent: Any) -> Any:
    """x ** exponent computed in float64 (torch.float_power, np.float_power)."""
    wide = np.dtype(np.float64)
    base = E.cast(x, wide) if hasattr(x, "shape") else np.asarray(x, wide)
    if hasattr(exponent, "shape") and dtype_of(exponent) != wide:
        exponent = E.cast(exponent, wide)
    return E.pow(base, exponent)


def logit(x: Any, eps: float | None = None) -> Any:
    """log(x / (1 - x)), x first clamped into [eps, 1 - eps] when eps is given
    (torch.logit)."""
    if eps is not None:
        x = rounding.clamp(x, eps, 1.0 - eps)
    return E.log(E.div(x, E.sub(1.0, x)))


def xlogy(x: Any, other: Any) -> Any:
    """x * log(other), 0 where x is 0 (unless other is nan), as torch.xlogy and
    scipy.special.xlogy."""
    product = E.mul(x, E.log(other))
    zero = L.logical_and(E.eq(x, 0), L.logical_not(selection.isnan(other)))
    return E.where(zero, 0, product)


def hypot(x: Any, other: Any) -> Any:
    """sqrt(x**2 + other**2), the gradient 0 where both are 0 (torch.hypot, np.hypot):
    inf where either is infinite, even beside a nan, as C's hypot. The squares are not
    rescaled, so beyond 1e154 (float64) they overflow to inf, where C's do not."""
    root = E.root_flat_at_zero(E.add(E.mul(x, x), E.mul(other, other)))
    infinite = L.logical_or(selection.isinf(x), selection.isinf(other))
    return E.where(infinite, np.inf, root)


def _nan_ignoring(x: Any, other: Any, pick: Any) -> Any:
    """pick(x, other), or the one that is not nan (nan where both are)."""
    return E.where(selection.isnan(other), x, E.where(selection.isnan(x), other, pick(x, other)))


def fmax(x: Any, other: Any) -> Any:
    """The larger of x and other, a nan ignored when the other is not one (np.fmax)."""
    return _nan_ignoring(x, other, E.maximum)


def fmin(x: Any, other: Any) -> Any:
    """The smaller of x and other, a nan ignored when the other is not one (np.fmin)."""
    return _nan_ignoring(x, other, E.minimum)


def heaviside(x: Any, values: Any) -> Any:
    """0 where x < 0, `values` where x is 0, 1 where x > 0, nan where x is nan
    (np.heaviside, torch's)."""
    step = E.where(selection.isnan(x), x, E.cast(E.gt(x, 0), dtype_of(x)))
    return E.where(E.eq(x, 0), values, step)


def isposinf(x: Any) -> Any:
    """True where x is +inf."""
    return L.logical_and(selection.isinf(x), E.gt(x, 0))


def isneginf(x: Any) -> Any:
    """True where x is -inf."""
    return L.logical_and(selection.isinf(x), E.lt(x, 0))


def sgn(x: Any) -> Any:
    """The sign of x: torch's sgn, which for real values is `sign`."""
    return E.sign(x)


def sinc(x: Any) -> Any:
    """sin(pi x) / (pi x), 1 at 0 with gradient 0 there (torch.sinc, np.sinc)."""
    zero = E.eq(x, 0)
    # the quotient is taken of 1 where x is 0: its gradient there would be 0/0, and even
    # an unselected branch's nan would reach x through where's rule
    safe = E.mul(E.where(zero, 1, x), np.pi)
    return E.where(zero, 1, E.div(E.sin(safe), safe))


def deg2rad(x: Any) -> Any:
    """Degrees to radians: x * (pi / 180)."""
    return E.mul(x, np.pi / 180)


def rad2deg(x: Any) -> Any:
    """Radians to degrees: x * (180 / pi)."""
    return E.mul(x, 180 / np.pi)
