"""The table of op cases: every registered op, with inputs, a numpy reference and grads.

A case builds its result from input values through graphc's public op functions, so
the same case runs the kernels (on numpy arrays), records a graph (on placeholders),
or runs eagerly (on tensors). Shared by the per-op tests, the round-trip tests, the
autodiff tests and the runtime tests:

>>> case = cases_for("add")[0]
>>> xs = case.inputs(seed=0)
>>> np.allclose(case.build(*xs), case.reference(*xs))
True
>>> g = build_graph(case)            # placeholders x0, x1, ... and one output "out"

Float cases come in a float32 and a float64 version; gradients are checked on the
float64 ones. `BUILDER_CASES` covers derived ops (builders over the primitives), which
have no registry entry of their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import graphc as gc
import graphc.ops.linalg
from graphc.ir.registry import all_ops, get_op
from graphc.ops.dispatch import bind

FLOATS = ("float32", "float64")
FLOAT = "float"  # an Arg dtype meaning "the case's float dtype"


@dataclass(frozen=True)
class Arg:
    """How to draw one input: shape, dtype and the kind of values.

    kinds: normal, positive (0.5..2), unit (-0.9..0.9), away (|x| in 0.3..2: no kink
    at 0), int (integers in [low, high)), bool, fixed (the array `value`).
    """

    shape: tuple = ()
    dtype: str = FLOAT
    kind: str = "normal"
    low: int = -4
    high: int = 5
    value: Any = None

    def draw(self, rng: np.random.Generator, float_dtype: str) -> np.ndarray:
        dtype = float_dtype if self.dtype == FLOAT else self.dtype
        shape = self.shape
        if self.kind == "fixed":
            return np.array(self.value, dtype=dtype)
        if self.kind == "bool" or dtype == "bool":
            return np.asarray(rng.random(shape) < 0.5)
        if self.kind == "int" or np.issubdtype(np.dtype(dtype), np.integer):
            return np.asarray(rng.integers(self.low, self.high, shape), dtype=dtype)
        if self.kind == "positive":
            values = rng.uniform(0.5, 2.0, shape)
        elif self.kind == "unit":
            values = rng.uniform(-0.9, 0.9, shape)
        elif self.kind == "away":
            values = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)
        else:
            values = rng.standard_normal(shape)
        return np.asarray(values, dtype=dtype)


@dataclass(frozen=True)
class OpCase:
    """One way of exercising an op: `build(*inputs)` against `reference(*inputs)`."""

    op: str
    label: str
    build: Callable[..., Any]
    args: tuple[Arg, ...]
    reference: Callable[..., Any]
    differentiable: tuple[bool, ...]
    float_dtype: str = "float64"
    rtol: float | None = None
    atol: float | None = None
    smooth: bool = True  # twice differentiable at the drawn inputs (second-derivative test)
    tags: frozenset = field(default_factory=frozenset)

    @property
    def id(self) -> str:
        floats = any(a.dtype == FLOAT for a in self.args)
        suffix = f"-{self.float_dtype}" if floats else ""
        return f"{self.op}-{self.label}{suffix}"

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [a.draw(rng, self.float_dtype) for a in self.args]

    @property
    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol) for comparing results against the reference."""
        low = self.float_dtype == "float32"
        rtol = self.rtol if self.rtol is not None else (2e-5 if low else 1e-12)
        atol = self.atol if self.atol is not None else (2e-6 if low else 1e-12)
        return rtol, atol

    @property
    def has_grad(self) -> bool:
        return any(self.differentiable)


def build_graph(case: OpCase, shapes: Sequence[tuple] | None = None) -> gc.Graph:
    """A graph with one placeholder per input (x0, x1, ...) and the output "out".

    `shapes` overrides the placeholders' shapes (symbolic dims for instance).
    """
    arrays = case.inputs(0)
    g = gc.Graph(case.id.replace("-", "_"))
    with g:
        xs = [
            gc.placeholder(f"x{i}", shape=a.shape if shapes is None else shapes[i], dtype=a.dtype)
            for i, a in enumerate(arrays)
        ]
        gc.output(case.build(*xs), name="out")
    return g


_CASES: list[OpCase] = []
BUILDER_CASES: list[OpCase] = []


def case_feeds(case: OpCase) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The case's own inputs (placeholders x0, x1, ...) and hostile ones of the same
    shapes and dtypes (nan, inf, -0.0, extremes: tests/edge_values.py); integer and bool
    inputs may be indices or exponents, so they stay tame."""
    from tests.edge_values import edge_array

    tame = {f"x{i}": a for i, a in enumerate(case.inputs(seed=1))}
    rng = np.random.default_rng(7)
    hostile = {
        name: a if a.dtype.kind in "iub" else edge_array(rng, a.shape, a.dtype)
        for name, a in tame.items()
    }
    return tame, hostile


def _case(
    op: str,
    label: str,
    build: Callable[..., Any],
    args: Sequence[Arg],
    reference: Callable[..., Any],
    grad: Sequence[bool] | None = None,
    table: list[OpCase] | None = None,
    **options: Any,
) -> None:
    """Add the case, once per float dtype when it has float inputs."""
    args = tuple(args)
    if grad is None:
        grad = tuple(a.dtype == FLOAT and a.kind != "fixed" for a in args)
    if op in all_ops() and get_op(op).has("fusion"):  # made after differentiation
        grad = (False,) * len(args)
    base = OpCase(op, label, build, args, reference, tuple(grad), **options)
    target = _CASES if table is None else table
    if any(a.dtype == FLOAT for a in args):
        target.extend(replace(base, float_dtype=d) for d in FLOATS)
    else:
        target.append(replace(base, differentiable=(False,) * len(args)))


def F(*shape: int, kind: str = "normal") -> Arg:  # noqa: N802 - short table spelling
    return Arg(tuple(shape), FLOAT, kind)


def I(*shape: int, low: int = -4, high: int = 5, dtype: str = "int64") -> Arg:  # noqa: E743, N802
    return Arg(tuple(shape), dtype, "int", low, high)


def B(*shape: int) -> Arg:  # noqa: N802
    return Arg(tuple(shape), "bool", "bool")


# -- elementwise binary ---------------------------------------------------------------

_BINARY = {
    "add": (gc.add, np.add, "normal"),
    "sub": (gc.sub, np.subtract, "normal"),
    "mul": (gc.mul, np.multiply, "normal"),
    "div": (gc.div, np.true_divide, "away"),
    "maximum": (gc.maximum, np.maximum, "normal"),
    "minimum": (gc.minimum, np.minimum, "normal"),
}
for _name, (_fn, _ref, _kind) in _BINARY.items():
    _case(_name, "same", _fn, [F(3, 4), F(3, 4, kind=_kind)], _ref)
    _case(_name, "bcast", _fn, [F(3, 1), F(4, kind=_kind)], _ref)
    _case(_name, "bcast3", _fn, [F(2, 1, 4), F(3, 1, kind=_kind)], _ref)
    _case(_name, "scalar0d", _fn, [F(2, 3), F(kind=_kind)], _ref)
    _case(_name, "pyscalar", lambda x, f=_fn: f(x, 1.5), [F(2, 3)], lambda x, r=_ref: r(x, 1.5))
    _case(_name, "pyscalar_left", lambda x, f=_fn: f(-2.5, x), [F(2, 3, kind=_kind)],
          lambda x, r=_ref: r(-2.5, x))  # fmt: skip
    _case(_name, "int", _fn, [I(3, 4), I(4, low=1, high=5)], _ref)
    _case(_name, "int_pyint", lambda x, f=_fn: f(x, 3), [I(2, 3)], lambda x, r=_ref: r(x, 3))
    _case(_name, "int_pyfloat", lambda x, f=_fn: f(x, 0.5), [I(2, 3)], lambda x, r=_ref: r(x, 0.5))
    _case(_name, "int_float", _fn, [I(3, 1), F(4, kind=_kind)], _ref, grad=(False, True))
    _case(_name, "f32_f64", _fn, [Arg((3,), "float32"), Arg((2, 3), "float64", "away")], _ref)
_case("add", "bool", gc.add, [B(4), B(4)], np.add)
_case("mul", "bool_int", gc.mul, [B(2, 3), I(3)], np.multiply)

_case("pow", "same", gc.pow, [F(3, 4, kind="positive"), F(3, 4)], np.power)
_case("pow", "bcast", gc.pow, [F(3, 1, kind="positive"), F(4)], np.power)
_case("pow", "pyint", lambda x: gc.pow(x, 3), [F(2, 3)], lambda x: np.power(x, 3))
_case("pow", "square", lambda x: gc.pow(x, 2), [F(2, 3)], lambda x: x * x)
_case("pow", "cube_int32", lambda x: gc.pow(x, 3), [I(5, dtype="int32")], lambda x: x * x * x)
_case("pow", "pyfloat_left", lambda x: gc.pow(2.0, x), [F(2, 3)], lambda x: np.power(2.0, x))
_case("pow", "int", gc.pow, [I(3, 4), I(4, low=0, high=4)], np.power)

# -- comparisons ------------------------------------------------------------------------

_COMPARE = {
    "eq": (gc.eq, np.equal),
    "ne": (gc.ne, np.not_equal),
    "lt": (gc.lt, np.less),
    "le": (gc.le, np.less_equal),
    "gt": (gc.gt, np.greater),
    "ge": (gc.ge, np.greater_equal),
}
for _name, (_fn, _ref) in _COMPARE.items():
    _case(_name, "float", _fn, [F(3, 4), F(4)], _ref, grad=(False, False))
    _case(_name, "int", _fn, [I(3, 4, low=0, high=3), I(3, 1, low=0, high=3)], _ref)
    _case(_name, "pyscalar", lambda x, f=_fn: f(x, 1), [I(5, low=0, high=3)],
          lambda x, r=_ref: r(x, 1))  # fmt: skip
    _case(_name, "bool", _fn, [B(4), B(4)], _ref)

# -- elementwise unary ---------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.result_type(x.dtype, np.float32))


def _gelu(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    value = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
    return value.astype(np.result_type(x.dtype, np.float32))


_UNARY = {
    "neg": (gc.neg, np.negative, "normal", True),
    "exp": (gc.exp, np.exp, "normal", False),
    "log": (gc.log, np.log, "positive", False),
    "sqrt": (gc.sqrt, np.sqrt, "positive", False),
    "abs": (gc.abs, np.absolute, "away", True),
    "sign": (gc.sign, np.sign, "away", True),
    "sin": (gc.sin, np.sin, "normal", False),
    "cos": (gc.cos, np.cos, "normal", False),
    "tanh": (gc.tanh, np.tanh, "normal", False),
    "sigmoid": (gc.sigmoid, _sigmoid, "normal", False),
    "relu": (gc.relu, lambda x: np.maximum(x, 0), "away", True),
    "gelu": (gc.gelu, _gelu, "normal", False),
    "atan": (gc.atan, np.arctan, "normal", False),
    "sinh": (gc.sinh, np.sinh, "normal", False),
}
for _name, (_fn, _ref, _kind, _int_ok) in _UNARY.items():
    _case(_name, "2d", _fn, [F(3, 4, kind=_kind)], _ref)
    _case(_name, "0d", _fn, [F(kind=_kind)], _ref)
    _case(_name, "big", _fn, [F(64, kind=_kind)], _ref)
    _case(_name, "int", _fn, [I(2, 3, low=1, high=5) if not _int_ok else I(2, 3)], _ref)

_case("sigmoid", "large", gc.sigmoid, [Arg((4,), FLOAT, "fixed", value=[-800, -30, 30, 800])],
      _sigmoid)  # fmt: skip
# relative accuracy for negative x: (1 + tanh(x/2)) / 2 gave 0 for sigmoid(-20) in float32
_case("sigmoid", "negative", gc.sigmoid,
      [Arg((5,), FLOAT, "fixed", value=[-80.0, -40.0, -20.0, -17.5, -5.0])], _sigmoid,
      rtol=1e-6, atol=0.0)  # fmt: skip
# no intermediate overflows (0.5 x (1 + t) computed 2x first: gelu(3e38) was inf)
_case("gelu", "huge", gc.gelu,
      [Arg((6,), FLOAT, "fixed", value=[3e38, -3e38, 1e30, -1e30, 1e5, -1e5])], _gelu,
      grad=(False,))  # fmt: skip
# sinh overflows to inf near 89 (float32) and 710 (float64); atan saturates at pi/2
_case("sinh", "huge", gc.sinh, [Arg((4,), FLOAT, "fixed", value=[-1e3, -50.0, 50.0, 1e3])],
      np.sinh, grad=(False,))  # fmt: skip
_case("atan", "huge", gc.atan, [Arg((4,), FLOAT, "fixed", value=[-1e30, -1e8, 1e8, 1e30])],
      np.arctan)  # fmt: skip
_case("relu", "int32", gc.relu, [I(2, 3, dtype="int32")], lambda x: np.maximum(x, 0))

# -- where, clip, cast, full_like --------------------------------------------------------------

_case("where", "same", gc.where, [B(3, 4), F(3, 4), F(3, 4)], np.where)
_case("where", "bcast", gc.where, [B(3, 1), F(4), F(3, 4)], np.where)
_case("where", "scalar", lambda c, x: gc.where(c, x, 0.0), [B(2, 3), F(2, 3)],
      lambda c, x: np.where(c, x, np.zeros((), x.dtype)))  # fmt: skip
_case("where", "mixed", gc.where, [B(3), Arg((3,), "float32"), I(2, 3)], np.where,
      grad=(False, False, False))  # fmt: skip
_case("where", "int", gc.where, [B(3, 4), I(3, 4), I(4)], np.where)

_case("clip", "both", lambda x: gc.clip(x, -0.5, 0.5), [F(3, 4, kind="normal")],
      lambda x: np.clip(x, -0.5, 0.5), smooth=False)  # fmt: skip
_case("clip", "low", lambda x: gc.clip(x, a_min=0.0), [F(3, 4)],
      lambda x: np.clip(x, 0.0, None), smooth=False)  # fmt: skip
_case("clip", "high", lambda x: gc.clamp(x, a_max=0.25), [F(5)],
      lambda x: np.clip(x, None, 0.25), smooth=False)  # fmt: skip
_case("clip", "none", lambda x: gc.clip(x), [F(5)], lambda x: x.copy())
_case("clip", "int", lambda x: gc.clip(x, -1, 2), [I(3, 4)], lambda x: np.clip(x, -1, 2))
_case("clip", "int_float_bounds", lambda x: gc.clip(x, -0.5, 2.5), [I(3, 4)],
      lambda x: np.clip(x, -0.5, 2.5))  # fmt: skip

_case("cast", "to_f64", lambda x: gc.cast(x, "float64"), [Arg((3, 4), "float32")],
      lambda x: x.astype(np.float64))  # fmt: skip
_case("cast", "to_f32", lambda x: gc.cast(x, "float32"), [F(3, 4)],
      lambda x: x.astype(np.float32), rtol=1e-6, atol=1e-7)  # fmt: skip
_case("cast", "to_int", lambda x: gc.cast(x, "int64"), [F(3, 4)],
      lambda x: x.astype(np.int64), grad=(False,))  # fmt: skip
_case("cast", "int_to_float", lambda x: gc.cast(x, np.float64), [I(3, 4)],
      lambda x: x.astype(np.float64))  # fmt: skip
_case("cast", "bool_to_f32", lambda x: gc.cast(x, "float32"), [B(5)],
      lambda x: x.astype(np.float32))  # fmt: skip

_case("full_like", "float", lambda x: gc.full_like(x, 2.5), [F(3, 4)],
      lambda x: np.full_like(x, 2.5), grad=(False,))  # fmt: skip
_case("full_like", "int", lambda x: gc.full_like(x, 7), [I(2, 3)], lambda x: np.full_like(x, 7))
_case("full_like", "zeros", gc.zeros_like, [F(4)], np.zeros_like, grad=(False,))
_case("full_like", "ones", gc.ones_like, [B(4)], np.ones_like)

# -- reductions ---------------------------------------------------------------------------------

_AXES = [(None, False), (1, False), (-1, True), ((0, 2), False), ((0, 2), True), (0, True)]
for _name, _fn, _ref in [
    ("sum", gc.sum, np.sum),
    ("prod", gc.prod, np.prod),
    ("mean", gc.mean, np.mean),
    ("max", gc.max, np.max),
    ("min", gc.min, np.min),
]:
    for _axis, _keep in _AXES:
        _case(_name, f"axis{_axis}_keep{int(_keep)}".replace(" ", ""),
              lambda x, f=_fn, a=_axis, k=_keep: f(x, axis=a, keepdims=k), [F(2, 3, 4)],
              lambda x, r=_ref, a=_axis, k=_keep: r(x, axis=a, keepdims=k),
              rtol=2e-5 if _name in ("sum", "mean") else None,
              smooth=_name in ("sum", "prod", "mean"))  # fmt: skip
    _case(_name, "int", lambda x, f=_fn: f(x, axis=0), [I(3, 4)], lambda x, r=_ref: r(x, axis=0))
    _case(_name, "0d", _fn, [F()], _ref)
_case("sum", "bool", lambda x: gc.sum(x, axis=1), [B(3, 4)], lambda x: np.sum(x, axis=1))
_case("prod", "bool", lambda x: gc.prod(x, axis=1), [B(3, 4)], lambda x: np.prod(x, axis=1))
_case("prod", "int32", lambda x: gc.prod(x, axis=1), [I(3, 4, dtype="int32")],
      lambda x: np.prod(x, axis=1))  # fmt: skip
# the gradient at zeros: the product of the others (not out / x, nan there), in rows with
# no zero, one and two; smooth: the product of the others is differentiable again
_case("prod", "zeros", lambda x: gc.prod(x, axis=1),
      [Arg((3, 4), FLOAT, "fixed", value=[[1.5, -2.0, 0.5, 3.0], [0.0, 2.0, -1.5, 0.5],
                                          [0.0, 2.0, 0.0, 0.5]])],
      lambda x: np.prod(x, axis=1), grad=(True,))  # fmt: skip
_case("prod", "empty_axis", lambda x: gc.prod(x, axis=1), [F(2, 0)],
      lambda x: np.prod(x, axis=1))  # fmt: skip
_case("prod", "zeros_all", gc.prod,
      [Arg((2, 3), FLOAT, "fixed", value=[[1.5, -2.0, 0.5], [0.0, 2.0, -1.5]])],
      np.prod, grad=(True,))  # fmt: skip
# a 0-d input has the one axis 0 (also -1), as in PyTorch: its element is reduced
for _name, _fn, _ref in [
    ("sum", gc.sum, np.sum),
    ("prod", gc.prod, np.prod),
    ("mean", gc.mean, np.mean),
    ("max", gc.max, np.max),
    ("min", gc.min, np.min),
    ("logsumexp", gc.logsumexp, lambda x, keepdims=False: _logsumexp(x)),
]:
    for _axis, _keep in [(0, False), (-1, True), ((-1,), False)]:
        _case(_name, f"0d_axis{_axis}_keep{int(_keep)}".replace(" ", ""),
              lambda x, f=_fn, a=_axis, k=_keep: f(x, axis=a, keepdims=k), [F()],
              lambda x, r=_ref, k=_keep: r(x, keepdims=k))  # fmt: skip
_case("max", "ties", lambda x: gc.max(x, axis=1),
      [Arg((2, 3), FLOAT, "fixed", value=[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])],
      lambda x: np.max(x, axis=1), grad=(False,))  # fmt: skip

_case("argmax", "all", gc.argmax, [F(3, 4)], np.argmax, grad=(False,))
_case("argmax", "axis", lambda x: gc.argmax(x, axis=-1, keepdims=True), [F(3, 4)],
      lambda x: np.argmax(x, axis=-1, keepdims=True), grad=(False,))  # fmt: skip
_case("argmax", "int", lambda x: gc.argmax(x, axis=0), [I(3, 4)], lambda x: np.argmax(x, axis=0))
_case("argmin", "all", gc.argmin, [F(3, 4)], np.argmin, grad=(False,))
_case("argmin", "axis", lambda x: gc.argmin(x, axis=-1, keepdims=True), [F(3, 4)],
      lambda x: np.argmin(x, axis=-1, keepdims=True), grad=(False,))  # fmt: skip
_case("argmin", "int", lambda x: gc.argmin(x, axis=0), [I(3, 4)], lambda x: np.argmin(x, axis=0))
for _name, _fn, _ref in [("argmax", gc.argmax, np.argmax), ("argmin", gc.argmin, np.argmin)]:
    for _axis in (0, -1):
        _case(_name, f"0d_axis{_axis}", lambda x, f=_fn, a=_axis: f(x, axis=a, keepdims=True),
              [F()], lambda x, r=_ref: np.asarray(r(x)), grad=(False,))  # fmt: skip


def _logsumexp(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    x64 = x.astype(np.float64)
    peak = np.max(x64, axis=axis, keepdims=True, initial=-np.inf)  # an empty sum's log: -inf
    peak = np.where(np.isfinite(peak), peak, 0)
    value = np.log(np.sum(np.exp(x64 - peak), axis=axis, keepdims=True)) + peak
    if not keepdims:
        value = np.squeeze(value, axis=axis)
    return value.astype(np.result_type(x.dtype, np.float32))


for _axis, _keep in _AXES:
    _case("logsumexp", f"axis{_axis}_keep{int(_keep)}".replace(" ", ""),
          lambda x, a=_axis, k=_keep: gc.logsumexp(x, axis=a, keepdims=k), [F(2, 3, 4)],
          lambda x, a=_axis, k=_keep: _logsumexp(x, a, k))  # fmt: skip
_case("logsumexp", "int", lambda x: gc.logsumexp(x, axis=1), [I(3, 4)],
      lambda x: _logsumexp(x, 1))  # fmt: skip
# ints compute in the float result dtype: x - max(x) in int64 wrapped around
_case("logsumexp", "int_wide", lambda x: gc.logsumexp(x, axis=1),
      [Arg((2, 2), "int64", "fixed", value=[[2**62, -(2**62) - 5], [-(2**62), 2**62]])],
      lambda x: _logsumexp(x, 1))  # fmt: skip
# the log of an empty sum is -inf (as torch), with an empty gradient
_case("logsumexp", "empty_axis", lambda x: gc.logsumexp(x, axis=1), [F(2, 0)],
      lambda x: _logsumexp(x, 1))  # fmt: skip
_case("logsumexp", "empty_all", gc.logsumexp, [F(0, 3)], _logsumexp)
_case("logsumexp", "large", lambda x: gc.logsumexp(x, axis=1),
      [Arg((3, 2), FLOAT, "fixed", value=[[1000.0, 1000.0], [-np.inf, -np.inf], [-np.inf, 0.0]])],
      lambda x: _logsumexp(x, 1), grad=(False,))  # fmt: skip

_case("count", "all", lambda: bind("count", shape=(3, 4), dtype="float64"), [],
      lambda: np.asarray(12, np.float64))  # fmt: skip
_case("count", "axes", lambda: bind("count", shape=(2, 3, 4), axis=(0, -1), dtype="float32"), [],
      lambda: np.asarray(8, np.float32))  # fmt: skip

# -- shape ops ---------------------------------------------------------------------------------

for _label, _shape in [
    ("flat", (24,)),
    ("minus1", (4, -1)),
    ("lead", (-1, 2, 3)),
    ("same", (2, 3, 4)),
]:
    _case("reshape", _label, lambda x, s=_shape: gc.reshape(x, s), [F(2, 3, 4)],
          lambda x, s=_shape: np.reshape(x, s))  # fmt: skip
_case("reshape", "to0d", lambda x: gc.reshape(x, ()), [F(1, 1)], lambda x: np.reshape(x, ()))
_case("reshape", "int", lambda x: gc.reshape(x, (3, 2)), [I(6)], lambda x: np.reshape(x, (3, 2)))

for _label, _axes in [("default", None), ("perm", (1, 2, 0)), ("neg", (-1, 0, -2))]:
    _case("transpose", _label, lambda x, a=_axes: gc.transpose(x, a), [F(2, 3, 4)],
          lambda x, a=_axes: np.transpose(x, a))  # fmt: skip
_case("transpose", "bool", gc.transpose, [B(2, 3)], np.transpose)

for _label, _src, _dst in [("rows", (3, 1), (2, 3, 4)), ("vec", (4,), (3, 4)), ("0d", (), (2, 2))]:
    _case("broadcast_to", _label, lambda x, s=_dst: gc.broadcast_to(x, s), [F(*_src)],
          lambda x, s=_dst: np.broadcast_to(x, s))  # fmt: skip
_case("broadcast_to", "int", lambda x: gc.broadcast_to(x, (2, 3)), [I(3)],
      lambda x: np.broadcast_to(x, (2, 3)))  # fmt: skip


def _sum_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    lead = x.ndim - len(shape)
    summed = np.sum(x, axis=tuple(range(lead))) if lead else x
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and summed.shape[i] != 1)
    return np.sum(summed, axis=axes, keepdims=True) if axes else summed.copy()


for _label, _dst in [
    ("rows", (3, 1)),
    ("vec", (4,)),
    ("0d", ()),
    ("same", (2, 3, 4)),
    ("mid", (2, 1, 4)),
]:
    _case("sum_to", _label, lambda x, s=_dst: gc.sum_to(x, s), [F(2, 3, 4)],
          lambda x, s=_dst: _sum_to(x, s), rtol=2e-5)  # fmt: skip
_case("sum_to", "int", lambda x: gc.sum_to(x, (3,)), [I(2, 3)], lambda x: _sum_to(x, (3,)))

_case("concat", "two", lambda x, y: gc.concat([x, y], axis=1), [F(2, 3), F(2, 2)],
      lambda x, y: np.concatenate([x, y], axis=1))  # fmt: skip
_case("concat", "three", lambda x, y, z: gc.concat([x, y, z], axis=-1), [F(2, 1), F(2, 3), F(2, 2)],
      lambda x, y, z: np.concatenate([x, y, z], axis=-1))  # fmt: skip
_case("concat", "one", lambda x: gc.concat([x]), [F(3)], lambda x: np.concatenate([x]))
_case("concat", "mixed", lambda x, y: gc.concat([x, y]), [Arg((2,), "float32"), F(3)],
      lambda x, y: np.concatenate([x, y]), grad=(False, True))  # fmt: skip
_case("concat", "int", lambda x, y: gc.concat([x, y], axis=0), [I(2, 3), I(1, 3)],
      lambda x, y: np.concatenate([x, y], axis=0))  # fmt: skip
# an empty piece after the others (symbolically: (N2, N3) then (N2, 0) adds nothing)
_case("concat", "empty_piece", lambda x, y: gc.concat([x, y], axis=1), [F(2, 3), F(2, 0)],
      lambda x, y: np.concatenate([x, y], axis=1))  # fmt: skip

_INDICES = {
    "int": 1,
    "negint": -1,
    "range": slice(1, 3),
    "step": (slice(None), slice(None, None, 2)),
    "negstep": (slice(None, None, -1), slice(3, 0, -2)),
    "neg": (slice(-2, None), -3),
    "none": (None, slice(1, 3), None),
    "ellipsis": (Ellipsis, 1),
    "ellipsis_none": (0, Ellipsis, None),
    "mixed": (slice(0, 1), None, 2, slice(None, None, 3)),
    "empty": slice(3, 1),
    "clipped": (slice(-10, 10),),
}
for _label, _index in _INDICES.items():
    _case("slice", _label, lambda x, i=_index: gc.getitem(x, i), [F(3, 4, 5)],
          lambda x, i=_index: x[i])  # fmt: skip
_case("slice", "int", lambda x: gc.getitem(x, (slice(None), 0)), [I(3, 4)], lambda x: x[:, 0])


def _unslice(ct: np.ndarray, shape: tuple, index: Any) -> np.ndarray:
    out = np.zeros(shape, ct.dtype)
    out[index] = ct
    return out


_case("unslice", "window", lambda c: gc.unslice(c, shape=(3, 4, 5), index="1:3,::2"), [F(2, 2, 5)],
      lambda c: _unslice(c, (3, 4, 5), (slice(1, 3), slice(None, None, 2))))  # fmt: skip
_case("unslice", "int_none", lambda c: gc.unslice(c, shape=(3, 4), index="None,-1"), [F(1, 4)],
      lambda c: _unslice(c, (3, 4), (None, -1)))  # fmt: skip
_case("unslice", "ints", lambda c: gc.unslice(c, shape=(2, 3), index="1,-1"), [F()],
      lambda c: _unslice(c, (2, 3), (1, -1)))  # fmt: skip

_IDX = Arg((2, 3), "int64", "fixed", value=[[0, 2, -1], [1, 1, 0]])
_case("take", "axis0", lambda x, i: gc.take(x, i, axis=0), [F(4, 3), _IDX],
      lambda x, i: np.take(x, i, axis=0))  # fmt: skip
_case("take", "axis1", lambda x, i: gc.take(x, i, axis=-1), [F(2, 4, 3), _IDX],
      lambda x, i: np.take(x, i, axis=-1))  # fmt: skip
_case("take", "getitem", lambda x, i: gc.getitem(x, (slice(None), i)), [F(2, 4), I(5, low=-4, high=4)],
      lambda x, i: x[:, i])  # fmt: skip
_case("take", "int", lambda x, i: gc.take(x, i), [I(5), I(3, low=0, high=5)], np.take)
# a zero-size dim beside the taken axis: the gradient's scatter_add reshaped by -1 (crash)
_case("take", "empty_dim", lambda x, i: gc.take(x, i, axis=1),
      [F(0, 4), Arg((2,), "int64", "fixed", value=[1, 3])],
      lambda x, i: np.take(x, i, axis=1))  # fmt: skip
_case("take", "no_indices", lambda x, i: gc.take(x, i, axis=0),
      [F(3, 2), Arg((0,), "int64", "fixed", value=[])],
      lambda x, i: np.take(x, i, axis=0))  # fmt: skip


def _scatter_add(ct: np.ndarray, i: np.ndarray, shape: tuple, axis: int) -> np.ndarray:
    out = np.zeros(shape, ct.dtype)
    for position in np.ndindex(*i.shape):
        source = (slice(None),) * axis + position
        target = (slice(None),) * axis + (i[position],)
        out[target] += ct[source]
    return out


_case("scatter_add", "axis0", lambda c, i: gc.scatter_add(c, i, shape=(4, 3), axis=0),
      [F(2, 3, 3), _IDX], lambda c, i: _scatter_add(c, i, (4, 3), 0))  # fmt: skip
_case("scatter_add", "axis1", lambda c, i: gc.scatter_add(c, i, shape=(2, 4), axis=1),
      [F(2, 2, 3), _IDX], lambda c, i: _scatter_add(c, i, (2, 4), 1))  # fmt: skip
_case("scatter_add", "empty_dim", lambda c, i: gc.scatter_add(c, i, shape=(0, 4), axis=1),
      [F(0, 2), Arg((2,), "int64", "fixed", value=[1, 1])],
      lambda c, i: _scatter_add(c, i, (0, 4), 1))  # fmt: skip

# -- linalg, nn, constant ------------------------------------------------------------------------

for _label, _a, _b in [
    ("2d", (3, 4), (4, 5)),
    ("vec_mat", (4,), (4, 5)),
    ("mat_vec", (3, 4), (4,)),
    ("vec_vec", (4,), (4,)),
    ("batch", (2, 3, 4), (4, 5)),
    ("batch_bcast", (2, 1, 3, 4), (5, 4, 2)),
    ("vec_batch", (4,), (2, 4, 3)),
    ("batch_vec", (2, 3, 4), (4,)),
    ("batch_empty_inner", (2, 3, 0), (0, 4)),  # the weight gradient's rows have k = 0
]:
    _case("matmul", _label, gc.matmul, [F(*_a), F(*_b)], np.matmul, rtol=1e-5, atol=1e-5)
_case("matmul", "int", gc.matmul, [I(2, 3), I(3, 2)], np.matmul)
_case("matmul", "mixed", gc.matmul, [I(2, 3), F(3)], np.matmul, grad=(False, True))

_contract_rows = graphc.ops.linalg.contract_rows


def _rows_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    leading = list(range(x.ndim - 1))
    return np.tensordot(x, y, axes=(leading, leading))


for _label, _a, _b in [("2d", (5, 3), (5, 4)), ("3d", (2, 5, 3), (2, 5, 4)), ("1d", (3,), (4,))]:
    _case(
        "contract_rows", _label, _contract_rows, [F(*_a), F(*_b)], _rows_ref, rtol=1e-5, atol=1e-5
    )
_case("contract_rows", "empty", _contract_rows, [F(0, 3), F(0, 2)], _rows_ref)
_case("contract_rows", "empty_k", _contract_rows, [F(2, 3, 0), F(2, 3, 4)], _rows_ref)
_case("contract_rows", "int", _contract_rows, [I(4, 2), I(4, 3)], _rows_ref)


def _gemm_ref(alpha: float, beta: float, ta: bool, tb: bool) -> Callable[..., Any]:
    def ref(a: np.ndarray, b: np.ndarray, *c: np.ndarray) -> np.ndarray:
        x, y = (a.T if ta else a), (b.T if tb else b)
        result = alpha * (x.astype(np.float64) @ y)
        return (result + beta * c[0] if c and beta else result).astype(a.dtype)

    return ref


# gemm: every transpose flag with alpha, beta and a broadcast c; no c; 0-size dims
for _ta, _tb in [(False, False), (True, False), (False, True), (True, True)]:
    _label = "tn"[not _ta] + "tn"[not _tb]
    _a, _b = ((4, 3) if _ta else (3, 4)), ((5, 4) if _tb else (4, 5))
    _case("gemm", _label, lambda a, b, c, ta=_ta, tb=_tb: gc.gemm(a, b, c, 0.5, 2.0, ta, tb),
          [F(*_a), F(*_b), F(5)], _gemm_ref(0.5, 2.0, _ta, _tb), rtol=1e-5, atol=1e-5)  # fmt: skip
_case("gemm", "no_c", lambda a, b: gc.gemm(a, b, alpha=-1.5, trans_b=True), [F(3, 4), F(2, 4)],
      _gemm_ref(-1.5, 1.0, False, True), rtol=1e-5, atol=1e-5)  # fmt: skip
_case("gemm", "full_c", lambda a, b, c: gc.gemm(a, b, c, -0.01, 1.0, True), [F(6, 3), F(6, 4), F(3, 4)],
      _gemm_ref(-0.01, 1.0, True, False), rtol=1e-5, atol=1e-5)  # fmt: skip
_case("gemm", "column_c", lambda a, b, c: gc.gemm(a, b, c), [F(3, 4), F(4, 2), F(3, 1)],
      _gemm_ref(1.0, 1.0, False, False), rtol=1e-5, atol=1e-5)  # fmt: skip
_case("gemm", "beta0", lambda a, b, c: gc.gemm(a, b, c, beta=0.0), [F(3, 4), F(4, 2), F(3, 2)],
      _gemm_ref(1.0, 0.0, False, False), rtol=1e-5, atol=1e-5)  # fmt: skip
_case("gemm", "empty_k", lambda a, b, c: gc.gemm(a, b, c, 2.0, 0.5), [F(3, 0), F(0, 2), F(2)],
      _gemm_ref(2.0, 0.5, False, False))  # fmt: skip
_case("gemm", "empty_m", lambda a, b, c: gc.gemm(a, b, c, trans_a=True), [F(4, 0), F(4, 2), F(2)],
      _gemm_ref(1.0, 1.0, True, False))  # fmt: skip


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.result_type(x.dtype, np.float32))


def _log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    x64 = x.astype(np.float64)
    value = x64 - _logsumexp(x64, axis=axis, keepdims=True)
    return value.astype(np.result_type(x.dtype, np.float32))


_LARGE = Arg((2, 3), FLOAT, "fixed", value=[[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -999.0]])
for _name, _fn, _ref in [
    ("softmax", gc.softmax, _softmax),
    ("log_softmax", gc.log_softmax, _log_softmax),
]:
    _case(_name, "last", _fn, [F(3, 5)], _ref)
    _case(_name, "axis0", lambda x, f=_fn: f(x, axis=0), [F(3, 4, 2)], lambda x, r=_ref: r(x, 0))
    _case(_name, "large", _fn, [_LARGE], _ref, grad=(False,))
    _case(_name, "int", _fn, [I(2, 3)], _ref)
    _case(_name, "empty_axis", _fn, [F(3, 0)], lambda x: np.empty(x.shape, x.dtype))
    for _axis in (0, -1):
        _case(_name, f"0d_axis{_axis}", lambda x, f=_fn, a=_axis: f(x, axis=a), [F()],
              lambda x, r=_ref: r(x.reshape(1)).reshape(()))  # fmt: skip

_case("one_hot", "vec", lambda y: gc.one_hot(y, num_classes=4), [I(5, low=0, high=4)],
      lambda y: np.eye(4, dtype=np.float32)[y])  # fmt: skip
_case("one_hot", "2d_int", lambda y: gc.one_hot(y, num_classes=3, dtype="int64"), [I(2, 3, low=0, high=3)],
      lambda y: np.eye(3, dtype=np.int64)[y])  # fmt: skip
_case("one_hot", "ignore_index", lambda y: gc.one_hot(y, num_classes=3, ignore_index=-1),
      [I(7, low=-1, high=3)], lambda y: np.eye(3, dtype=np.float32)[y] * (y != -1)[:, None])  # fmt: skip
_case("one_hot", "ignore_a_class", lambda y: gc.one_hot(y, num_classes=3, dtype=bool, ignore_index=1),
      [I(2, 4, low=0, high=3)], lambda y: np.eye(3, dtype=bool)[y] & (y != 1)[..., None])  # fmt: skip

_CONST = np.arange(6, dtype=np.float32).reshape(2, 3)
_case("constant", "array", lambda: bind("constant", value=_CONST), [], lambda: _CONST)
_case("constant", "scalar", lambda: bind("constant", value=np.array(2, np.int64)), [],
      lambda: np.array(2, np.int64))  # fmt: skip

# -- derived ops: builders over the primitives ------------------------------------------------------

_builder = {"table": BUILDER_CASES}
_case("stack", "axis0", lambda x, y: gc.stack([x, y]), [F(2, 3), F(2, 3)],
      lambda x, y: np.stack([x, y]), **_builder)  # fmt: skip
_case("stack", "axis_neg", lambda x, y: gc.stack([x, y], axis=-1), [F(2, 3), F(2, 3)],
      lambda x, y: np.stack([x, y], axis=-1), **_builder)  # fmt: skip
_case("squeeze", "all", gc.squeeze, [F(1, 3, 1)], np.squeeze, **_builder)
_case("squeeze", "axis", lambda x: gc.squeeze(x, -1), [F(1, 3, 1)],
      lambda x: np.squeeze(x, -1), **_builder)  # fmt: skip
_case("unsqueeze", "mid", lambda x: gc.unsqueeze(x, 1), [F(2, 3)],
      lambda x: np.expand_dims(x, 1), **_builder)  # fmt: skip
_case("expand_dims", "neg", lambda x: gc.expand_dims(x, -1), [F(2, 3)],
      lambda x: np.expand_dims(x, -1), **_builder)  # fmt: skip
_case("expand", "minus1", lambda x: gc.expand(x, 2, -1, 4), [F(3, 1)],
      lambda x: np.broadcast_to(x, (2, 3, 4)), **_builder)  # fmt: skip
_case("permute", "args", lambda x: gc.permute(x, 2, 0, 1), [F(2, 3, 4)],
      lambda x: np.transpose(x, (2, 0, 1)), **_builder)  # fmt: skip
_case("swapaxes", "neg", lambda x: gc.swapaxes(x, 0, -1), [F(2, 3, 4)],
      lambda x: np.swapaxes(x, 0, -1), **_builder)  # fmt: skip
_case("index_select", "rows", lambda x, i: gc.index_select(x, i, axis=0), [F(4, 3), _IDX],
      lambda x, i: np.take(x, i, axis=0), **_builder)  # fmt: skip
_case("square", "2d", gc.square, [F(3, 4)], np.square, **_builder)
for _ddof in (0, 1):
    _case("var", f"ddof{_ddof}", lambda x, d=_ddof: gc.var(x, axis=1, ddof=d), [F(3, 5)],
          lambda x, d=_ddof: np.var(x, axis=1, ddof=d), rtol=1e-5, **_builder)  # fmt: skip
_case("var", "0d_axis-1", lambda x: gc.var(x, axis=-1, ddof=0), [F()],
      lambda x: np.var(x), **_builder)  # fmt: skip
_case("var", "all_keep", lambda x: gc.var(x, keepdims=True), [F(3, 5)],
      lambda x: np.var(x, keepdims=True), rtol=1e-5, **_builder)  # fmt: skip
_case("mse_loss", "2d", gc.mse_loss, [F(3, 4), F(3, 4)],
      lambda p, t: np.mean((p - t) ** 2), rtol=1e-5, **_builder)  # fmt: skip


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    logp = _log_softmax(logits)
    return np.asarray(-np.mean(np.take_along_axis(logp, labels[:, None], axis=1)), logp.dtype)


_case("cross_entropy", "labels", gc.cross_entropy, [F(4, 3), I(4, low=0, high=3)],
      _cross_entropy, rtol=1e-5, **_builder)  # fmt: skip
_case("cross_entropy", "probs", gc.cross_entropy, [F(4, 3), F(4, 3, kind="positive")],
      lambda x, p: np.asarray(-np.mean(np.sum(p * _log_softmax(x), axis=-1)), x.dtype),
      rtol=1e-5, **_builder)  # fmt: skip


# -- ops made by the fusion passes ------------------------------------------------------------


def _fused_body(x: Any, y: Any) -> gc.Graph:
    """tanh(x * y) + x, typed like the operands (the body's dtypes are fixed)."""
    body = gc.Graph("body")
    with body:
        a = gc.placeholder("a", shape=x.shape, dtype=x.dtype)
        b = gc.placeholder("b", shape=y.shape, dtype=y.dtype)
        gc.output(gc.tanh(a * b) + a, name="out")
    return body


_case("fused", "bcast", lambda x, y: bind("fused", x, y, body=_fused_body(x, y)),
      [F(3, 4), F(4)], lambda x, y: np.tanh(x * y) + x)  # fmt: skip
_case("matmul_epilogue", "bias_tanh",
      lambda x, w, b: bind("matmul_epilogue", x, w, b, bias=True, activation="tanh"),
      [F(3, 4), F(4, 2), F(2)], lambda x, w, b: np.tanh(x @ w + b), rtol=1e-5, atol=1e-5)  # fmt: skip
_case("matmul_epilogue", "sigmoid",
      lambda x, w: bind("matmul_epilogue", x, w, activation="sigmoid"),
      [F(2, 3, 4), F(4, 2)], lambda x, w: 1 / (1 + np.exp(-(x @ w))), rtol=1e-5, atol=1e-5)  # fmt: skip


# -- custom gradients (traced autograd.Function, gc.custom_vjp) --------------------------------


def _custom_bodies(x: Any, y: Any) -> tuple[gc.Graph, gc.Graph]:
    """x * sin(y) with its true derivative written by hand (so numeric checks hold)."""
    forward, backward = gc.Graph("f_forward"), gc.Graph("f_backward")
    with forward:
        a = gc.placeholder("a", shape=x.shape, dtype=x.dtype)
        b = gc.placeholder("b", shape=y.shape, dtype=y.dtype)
        gc.output(a * gc.sin(b), name="out")
    with backward:
        a = gc.placeholder("a", shape=x.shape, dtype=x.dtype)
        b = gc.placeholder("b", shape=y.shape, dtype=y.dtype)
        gc.placeholder("out", shape=x.shape, dtype=x.dtype)
        ct = gc.placeholder("ct", shape=x.shape, dtype=x.dtype)
        gc.output(ct * gc.sin(b), name="ct_a")
        gc.output(ct * a * gc.cos(b), name="ct_b")
    return forward, backward


def _custom(x: Any, y: Any) -> Any:
    forward, backward = _custom_bodies(x, y)
    return bind("custom_vjp", x, y, forward=forward, backward=backward, function="XSinY")


_case("custom_vjp", "x_sin_y", _custom, [F(3, 4), F(3, 4)], lambda x, y: x * np.sin(y))


# -- control flow (gc.cond, gc.scan, gc.while_loop; `result` reads their results) -----------------
# On graph values these record cond/scan/while_loop nodes; on arrays and tensors they run
# Python control flow, so the reference below is the Python loop written out in numpy.


def _rnn(h: Any, xs: Any, w: Any) -> Any:
    """h <- tanh(h @ w + x) over xs; the final state plus the sum of the states."""
    last, states = gc.scan(lambda c, x: (gc.tanh(c @ w + x), c), h, xs)  # w: a captured value
    return last + gc.sum(states, axis=0)


def _rnn_ref(h: np.ndarray, xs: np.ndarray, w: np.ndarray) -> np.ndarray:
    total = np.zeros_like(h)
    for x in xs:
        total = total + h
        h = np.tanh(h @ w + x)
    return h + total


def _decay(x: Any, xs: Any) -> Any:
    """Two carries (a tuple), reverse order, two ys, one of them a pair."""

    def step(carry: Any, v: Any) -> Any:
        a, b = carry
        return (a * 0.5 + v, b + a * v), (gc.sin(a), (b, v * 2.0))

    (a, b), (s, (bs, _)) = gc.scan(step, (x, x * 0.0), xs, reverse=True)
    return a + b + gc.sum(s, axis=0) + gc.sum(bs, axis=0)


def _decay_ref(x: np.ndarray, xs: np.ndarray) -> np.ndarray:
    a, b = x, x * 0.0
    s, bs = [None] * len(xs), [None] * len(xs)
    for t in range(len(xs) - 1, -1, -1):
        s[t], bs[t] = np.sin(a), b
        a, b = a * 0.5 + xs[t], b + a * xs[t]
    return a + b + np.sum(s, axis=0) + np.sum(bs, axis=0)


_case("scan", "rnn", _rnn, [F(2, 3, kind="unit"), F(4, 2, 3, kind="unit"), F(3, 3, kind="unit")],
      _rnn_ref)  # fmt: skip
_case("scan", "reverse_pytree", _decay, [F(3), F(5, 3, kind="unit")], _decay_ref)
_case("scan", "length_only", lambda x: gc.scan(lambda c, _: (c * 1.5 - 0.25, c), x, length=3)[1],
      [F(2)], lambda x: np.stack([x, x * 1.5 - 0.25, (x * 1.5 - 0.25) * 1.5 - 0.25]))  # fmt: skip
_case("result", "scan_carry", lambda x, xs: gc.scan(lambda c, v: (c * v, c), x, xs)[0],
      [F(3), F(2, 3)], lambda x, xs: x * xs[0] * xs[1])  # fmt: skip


def _branches(x: Any, y: Any) -> Any:
    return gc.cond(gc.sum(x) > 0, lambda a: (a * y, gc.exp(a)), lambda a: (a - y, a * a), x)


def _branches_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a, b = (x * y, np.exp(x)) if np.sum(x) > 0 else (x - y, x * x)
    return a + b


_case("cond", "captured", lambda x, y: sum(_branches(x, y)), [F(3, 4), F(4)], _branches_ref)
_case("cond", "bool_input", lambda p, x: gc.cond(p, gc.sin, lambda v: gc.cos(v) * 2.0, x),
      [Arg((), "bool", "bool"), F(3)], lambda p, x: np.sin(x) if p else np.cos(x) * 2.0)  # fmt: skip
_case("while_loop", "grow",
      lambda x: gc.while_loop(lambda v: gc.sum(v * v) < 50.0, lambda v: v * 1.5 + 0.1, x),
      [F(4, kind="positive")], lambda x: _grow(x), grad=(False,))  # fmt: skip


def _grow(x: np.ndarray) -> np.ndarray:
    while np.sum(x * x) < 50.0:
        x = x * 1.5 + 0.1
    return x


_case("fori_loop", "static", lambda x: gc.fori_loop(1, 4, lambda i, v: gc.tanh(v) * 0.5 + v, x),
      [F(3)], lambda x: _fori_ref(x), **_builder)  # fmt: skip


def _fori_ref(x: np.ndarray) -> np.ndarray:
    for _ in range(1, 4):
        x = np.tanh(x) * 0.5 + x
    return x


# -- the families of real models, one module each (they add to the table on import) ------------

import tests.cases.activation  # noqa: E402, F401
import tests.cases.arrays  # noqa: E402, F401
import tests.cases.attention  # noqa: E402, F401
import tests.cases.closeness  # noqa: E402, F401
import tests.cases.conv  # noqa: E402, F401
import tests.cases.matrices  # noqa: E402, F401
import tests.cases.nan_reductions  # noqa: E402, F401
import tests.cases.norm  # noqa: E402, F401
import tests.cases.numpy_functions  # noqa: E402, F401
import tests.cases.one_hot_pick  # noqa: E402, F401
import tests.cases.random  # noqa: E402, F401
import tests.cases.sequences  # noqa: E402, F401
import tests.cases.trigonometric  # noqa: E402, F401

# -- access ----------------------------------------------------------------------------------------


def all_cases() -> list[OpCase]:
    """Every case of every registered op (derived builders are in BUILDER_CASES)."""
    return list(_CASES)


def cases_for(op_name: str) -> list[OpCase]:
    """The cases of one op (or of one builder in BUILDER_CASES)."""
    return [c for c in _CASES + BUILDER_CASES if c.op == op_name]


def ops_without_cases() -> list[str]:
    """Registered ops that this table does not cover yet."""
    covered = {c.op for c in _CASES}
    return sorted(set(all_ops()) - covered)
