"""Op cases: the trigonometric and hyperbolic functions and their inverses, and atan2
(added to the table of tests/op_cases.py; atan and sinh are in its unary table).

Each draws inputs inside its domain for the gradient checks (asin, acos and atanh in
(-0.9, 0.9), acosh above 1); fixed cases hold the ends of the domains, overflow and
signed zeros, without gradients (there the slopes are infinite or undefined).
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from tests.op_cases import FLOAT, Arg, F, I, _case

# name: (op function, numpy's, how to draw x, integers inside the domain as (low, high))
_UNARY = {
    "tan": (gc.tan, np.tan, "unit", (-1, 2)),
    "asin": (gc.asin, np.arcsin, "unit", (-1, 2)),
    "acos": (gc.acos, np.arccos, "unit", (-1, 2)),
    "cosh": (gc.cosh, np.cosh, "normal", (-4, 5)),
    "asinh": (gc.asinh, np.arcsinh, "normal", (-4, 5)),
    "acosh": (gc.acosh, np.arccosh, "above_one", (1, 5)),
    "atanh": (gc.atanh, np.arctanh, "unit", (0, 1)),
}
for _name, (_fn, _ref, _kind, (_low, _high)) in _UNARY.items():
    if _kind == "above_one":  # acosh's domain: x + 1 for x in (0.5, 2)
        _build, _reference, _kind = (
            lambda x, f=_fn: f(x + 1.0),
            lambda x, r=_ref: r(x + 1.0),
            "positive",
        )
    else:
        _build, _reference = _fn, _ref
    _case(_name, "2d", _build, [F(3, 4, kind=_kind)], _reference)
    _case(_name, "0d", _build, [F(kind=_kind)], _reference)
    _case(_name, "empty", _build, [F(0, 3, kind=_kind)], _reference)
    _case(_name, "int", _fn, [I(2, 3, low=_low, high=_high)], _ref)

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, 1e-30, 1e30, 1e3, -1e3, np.inf, -np.inf, np.nan]

# the ends of each domain (+-1: +-inf for atanh, nan beyond), overflow (cosh of 1e3 is
# inf), signed zeros kept (tan, asin, asinh, atanh of -0.0 is -0.0), inf and nan
for _name, (_fn, _ref, _, _) in _UNARY.items():
    _case(_name, "special", _fn, [Arg((len(_SPECIAL),), FLOAT, "fixed", value=_SPECIAL)], _ref,
          grad=(False,))  # fmt: skip

# -- atan2: the angle of the point (other, input) -------------------------------------------------

_case("atan2", "same", gc.atan2, [F(3, 4), F(3, 4)], np.arctan2)
_case("atan2", "bcast", gc.atan2, [F(3, 1), F(4)], np.arctan2)
_case("atan2", "scalar0d", gc.atan2, [F(2, 3), F()], np.arctan2)
_case("atan2", "pyscalar", lambda x: gc.atan2(x, -1.5), [F(2, 3)], lambda x: np.arctan2(x, -1.5))
_case("atan2", "pyscalar_left", lambda x: gc.atan2(2.0, x), [F(2, 3, kind="away")],
      lambda x: np.arctan2(2.0, x))  # fmt: skip
_case("atan2", "int", gc.atan2, [I(3, 4), I(4)], np.arctan2)
_case("atan2", "int_float", gc.atan2, [I(3, 1), F(4, kind="away")], np.arctan2, grad=(False, True))
_case("atan2", "empty", gc.atan2, [F(0, 3), F(3)], np.arctan2)
# every pair of signed zeros, infinities and nan: the quadrant of each
_PAIRS = np.array(np.meshgrid([0.0, -0.0, 2.0, -2.0, np.inf, -np.inf, np.nan],
                              [0.0, -0.0, 3.0, -3.0, np.inf, -np.inf, np.nan])).reshape(2, -1)  # fmt: skip
_case("atan2", "special", gc.atan2,
      [Arg(_PAIRS[0].shape, FLOAT, "fixed", value=_PAIRS[0]),
       Arg(_PAIRS[1].shape, FLOAT, "fixed", value=_PAIRS[1])],
      np.arctan2, grad=(False, False))  # fmt: skip
