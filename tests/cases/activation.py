"""Op cases: activations and elementwise math (added to the table of tests/op_cases.py).

References compute in float64 with numpy and `math.erf`/`math.erfc`, then round to
the op's result dtype (ints give float64, as the type rules say).
"""

from __future__ import annotations

import math

import numpy as np

import graphc as gc
from graphc.ops.activation import SELU_ALPHA, SELU_SCALE
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, F, I, _case

_builder = {"table": BUILDER_CASES}
# inf, nan, signed zeros, the largest and tiniest values: for kernels, not gradients
EDGES = [-np.inf, -1e30, -30.0, -3.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 0.5, 3.0, 30.0, 1e30,
         np.inf, np.nan]  # fmt: skip
_EDGE = Arg((len(EDGES),), FLOAT, "fixed", value=EDGES)


def as_result(value: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A float64 reference rounded to the dtype of a float op on x."""
    return np.asarray(value).astype(np.result_type(x.dtype, np.float32))


def floats(fn: object) -> object:
    """A reference computing fn on x in float64, rounded to the result dtype."""

    def reference(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return as_result(fn(x.astype(np.float64)), x)  # type: ignore[operator]

    return reference


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _softplus(beta: float = 1.0, threshold: float = 20.0) -> object:
    return floats(lambda x: np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta))


def _elu(alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> object:
    return floats(lambda x: np.where(x > 0, x * scale, np.expm1(x * input_scale) * (alpha * scale)))


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    return x * 0.5 * _erfc(-x / math.sqrt(2.0))


# name: (op function, reference, kind of inputs drawn (away from kinks), smooth)
UNARY = {
    "softplus": (gc.softplus, _softplus(), "normal", True),
    "leaky_relu": (gc.leaky_relu, floats(lambda x: np.where(x > 0, x, x * 0.01)), "away", True),
    "elu": (gc.elu, _elu(), "away", True),
    "silu": (gc.silu, floats(lambda x: x / (1 + np.exp(-x))), "normal", True),
    "hardsigmoid": (gc.hardsigmoid, floats(lambda x: np.clip(x + 3, 0, 6) / 6), "normal", True),
    "hardtanh": (gc.hardtanh, floats(lambda x: np.clip(x, -1, 1)), "normal", True),
    "gelu_exact": (gc.gelu_exact, floats(_gelu_exact), "normal", True),
    "erf": (gc.erf, floats(_erf), "normal", True),
    "log1p": (gc.log1p, floats(np.log1p), "positive", True),
    "expm1": (gc.expm1, floats(np.expm1), "normal", True),
    "reciprocal": (gc.reciprocal, floats(lambda x: 1 / x), "away", True),
    "rsqrt": (gc.rsqrt, floats(lambda x: 1 / np.sqrt(x)), "positive", True),
}
for _name, (_fn, _ref, _kind, _smooth) in UNARY.items():
    _case(_name, "2d", _fn, [F(3, 4, kind=_kind)], _ref, smooth=_smooth)
    _case(_name, "0d", _fn, [F(kind=_kind)], _ref, smooth=_smooth)
    _case(_name, "big", _fn, [F(64, kind=_kind)], _ref, smooth=_smooth)
    _case(_name, "int", _fn, [I(2, 3, low=1, high=5)], _ref)
    _case(_name, "edges", _fn, [_EDGE], _ref, grad=(False,))

# attrs, and the linear part of softplus (beta x > threshold) in both dtypes
_case("softplus", "beta_threshold", lambda x: gc.softplus(x, beta=2.0, threshold=1.0),
      [F(4, 5, kind="away")], _softplus(2.0, 1.0))  # fmt: skip
_case("leaky_relu", "slope", lambda x: gc.leaky_relu(x, 0.2), [F(3, 4, kind="away")],
      floats(lambda x: np.where(x > 0, x, x * 0.2)))  # fmt: skip
_case("leaky_relu", "steep", lambda x: gc.leaky_relu(x, negative_slope=3.0), [F(6, kind="away")],
      floats(lambda x: np.where(x > 0, x, x * 3.0)))  # fmt: skip
_case("elu", "alpha", lambda x: gc.elu(x, alpha=0.5), [F(3, 4, kind="away")], _elu(0.5))
_case("elu", "selu", gc.selu, [F(3, 4, kind="away")], _elu(SELU_ALPHA, SELU_SCALE))
_case("elu", "celu", lambda x: gc.celu(x, 2.0), [F(3, 4, kind="away")], _elu(2.0, 1.0, 0.5))
_case("hardtanh", "bounds", lambda x: gc.hardtanh(x, -0.5, 2.0), [F(3, 4, kind="away")],
      floats(lambda x: np.clip(x, -0.5, 2.0)))  # fmt: skip
_case("hardtanh", "relu6", gc.relu6, [Arg((4,), FLOAT, "fixed", value=[-1.0, 0.5, 5.0, 9.0])],
      floats(lambda x: np.clip(x, 0, 6)), grad=(False,))  # fmt: skip
_case("hardsigmoid", "wide", gc.hardsigmoid, [Arg((5,), FLOAT, "fixed",
      value=[-4.0, -2.0, 0.0, 2.0, 4.0])], floats(lambda x: np.clip(x + 3, 0, 6) / 6))  # fmt: skip
# gelu's left tail: 1 + erf cancels there, the kernel takes erfc instead
_case("gelu_exact", "tail", gc.gelu_exact,
      [Arg((5,), FLOAT, "fixed", value=[-5.0, -9.0, -12.0, -20.0, -30.0])], floats(_gelu_exact),
      rtol=1e-6, atol=0.0, grad=(False,))  # fmt: skip
_case("erf", "wide", gc.erf, [Arg((8,), FLOAT, "fixed",
      value=[-6.0, -2.5, -1.0, -0.9999, 0.9999, 1.0, 2.5, 6.0])], floats(_erf))  # fmt: skip
_case("expm1", "tiny", gc.expm1, [Arg((3,), FLOAT, "fixed", value=[1e-12, -1e-10, 1e-5])],
      floats(np.expm1), rtol=1e-6, atol=0.0)  # fmt: skip

# -- rounding: gradient zero ---------------------------------------------------------------

_HALVES = Arg((8,), FLOAT, "fixed", value=[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7])
for _name, _fn, _ref in [
    ("floor", gc.floor, np.floor),
    ("ceil", gc.ceil, np.ceil),
    ("round", gc.round, np.rint),
    ("trunc", gc.trunc, np.trunc),
]:
    _case(_name, "2d", _fn, [F(3, 4)], _ref)
    _case(_name, "0d", _fn, [F()], _ref)
    _case(_name, "halves", _fn, [_HALVES], _ref)
    _case(_name, "int", _fn, [I(2, 3)], lambda x: x.copy())
    _case(_name, "edges", _fn, [_EDGE], _ref, grad=(False,))
_case("round", "decimals", lambda x: gc.round(x, decimals=2), [F(3, 4)],
      lambda x: np.round(x, 2))  # fmt: skip
_case("round", "decimals_neg", lambda x: gc.round(x, decimals=-1),
      [Arg((4,), FLOAT, "fixed", value=[15.0, 25.0, -35.0, 123.0])], lambda x: np.round(x, -1))  # fmt: skip

# -- remainders: the sign of y (remainder) or of x (fmod); floor_divide, remainder's quotient ---

for _name, _fn, _ref in [
    ("remainder", gc.remainder, np.remainder),
    ("fmod", gc.fmod, np.fmod),
    ("floor_divide", gc.floor_divide, np.floor_divide),
]:
    _case(_name, "same", _fn, [F(3, 4), F(3, 4, kind="away")], _ref)
    _case(_name, "bcast", _fn, [F(3, 1), F(4, kind="away")], _ref)
    _case(_name, "pyscalar", lambda x, f=_fn: f(x, 0.75), [F(2, 3)], lambda x, r=_ref: r(x, 0.75))
    _case(_name, "signs", _fn, [Arg((4,), FLOAT, "fixed", value=[5.5, -5.5, 5.5, -5.5]),
          Arg((4,), FLOAT, "fixed", value=[2.0, 2.0, -2.0, -2.0])], _ref)  # fmt: skip
    _case(_name, "int", _fn, [I(3, 4, low=-9, high=9), I(4, low=1, high=5)], _ref)
    _case(_name, "int_neg", _fn, [I(3, 4, low=-9, high=9), I(4, low=-5, high=-1)], _ref)
    _case(_name, "int_float", _fn, [I(3, 1), F(4, kind="away")], _ref, grad=(False, True))

# -- logical ops ---------------------------------------------------------------------------------

for _name, _fn, _ref in [
    ("logical_and", gc.logical_and, np.logical_and),
    ("logical_or", gc.logical_or, np.logical_or),
    ("logical_xor", gc.logical_xor, np.logical_xor),
]:
    _case(_name, "bool", _fn, [Arg((3, 4), "bool"), Arg((4,), "bool")], _ref)
    _case(_name, "int", _fn, [I(3, 4, low=0, high=2), I(3, 1, low=-1, high=2)], _ref)
    _case(_name, "float", _fn, [F(3, 4), Arg((4,), FLOAT, "fixed", value=[0.0, -0.0, 1.0, np.nan])],
          _ref, grad=(False, False))  # fmt: skip
_case("logical_not", "bool", gc.logical_not, [Arg((3, 4), "bool")], np.logical_not)
_case("logical_not", "int", gc.logical_not, [I(5, low=-1, high=2)], np.logical_not)
_case("logical_not", "float", gc.logical_not, [_EDGE], np.logical_not, grad=(False,))

# -- builders ----------------------------------------------------------------------------------

_case("softsign", "2d", gc.softsign, [F(3, 4)], lambda x: x / (1 + np.abs(x)), **_builder)
_case("selu", "2d", gc.selu, [F(3, 4, kind="away")], _elu(SELU_ALPHA, SELU_SCALE), **_builder)
_case("celu", "2d", lambda x: gc.celu(x, 0.5), [F(3, 4, kind="away")], _elu(0.5, 1.0, 2.0),
      **_builder)  # fmt: skip
_case("relu6", "2d", gc.relu6, [F(3, 4, kind="away")], floats(lambda x: np.clip(x, 0, 6)),
      **_builder)  # fmt: skip
_case("clamp", "tensor_bounds", gc.clamp, [F(3, 4), F(4), F(3, 1)],
      lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), **_builder)  # fmt: skip
_case("clamp", "tensor_min", lambda x, lo: gc.clamp(x, lo), [F(3, 4), F(3, 4)],
      lambda x, lo: np.maximum(x, lo), **_builder)  # fmt: skip
_case("clamp", "scalar_and_tensor", lambda x, hi: gc.clip(x, -0.5, hi), [F(2, 3), F(3)],
      lambda x, hi: np.minimum(np.maximum(x, -0.5), hi), **_builder)  # fmt: skip
