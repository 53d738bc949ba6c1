"""Op cases for numpy's function names: builders over existing ops (BUILDER_CASES of
tests/op_cases.py) and three registry ops with numpy's own kernels.

Builders: amax, amin, all, any, nanmax, nanmin (reductions), moveaxis, ravel, hstack,
vstack (shapes), dot and tensordot (products), repeat, diag, nan_to_num, and the creation
functions full, zeros, ones, eye, linspace beside an input. Registry ops: log2, log10,
logaddexp. References are numpy's own functions. Cases at nans take the gradient only where every group holds a
number (stepping a nan leaves it nan and the result unmoved, so finite differences see 0).
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, B, F, I, _case

_builder = {"table": BUILDER_CASES}

# -- reductions -----------------------------------------------------------------------------------

for _name, _fn, _ref in [("amax", gc.amax, np.amax), ("amin", gc.amin, np.amin)]:
    _case(_name, "axis1", lambda x, f=_fn: f(x, axis=1), [F(3, 4)],
          lambda x, r=_ref: r(x, axis=1), **_builder)  # fmt: skip
    _case(_name, "dim_keep", lambda x, f=_fn: f(x, dim=(0, 2), keepdim=True), [F(2, 3, 2)],
          lambda x, r=_ref: r(x, axis=(0, 2), keepdims=True), **_builder)  # fmt: skip
    _case(_name, "int", _fn, [I(3, 4)], lambda x, r=_ref: np.asarray(r(x)), **_builder)

_ZEROS = Arg((3, 3), FLOAT, "fixed", value=[[1.0, np.nan, 0.0], [-0.0, 0.0, 0.0], [2, -1, np.inf]])
for _name, _fn, _ref in [("all", gc.all, np.all), ("any", gc.any, np.any)]:
    _case(_name, "axis1", lambda x, f=_fn: f(x, axis=1), [_ZEROS],
          lambda x, r=_ref: r(x, axis=1), **_builder)  # fmt: skip
    _case(_name, "dim_keep", lambda x, f=_fn: f(x, dim=0, keepdim=True), [I(3, 4, low=0, high=2)],
          lambda x, r=_ref: r(x, axis=0, keepdims=True), **_builder)  # fmt: skip
    _case(_name, "bool", _fn, [B(2, 3)], lambda x, r=_ref: np.asarray(r(x)), **_builder)
    _case(_name, "empty", lambda x, f=_fn: f(x, axis=1), [F(2, 0)],
          lambda x, r=_ref: r(x, axis=1), grad=(False,), **_builder)  # fmt: skip
    _case(_name, "0d", _fn, [F()], lambda x, r=_ref: np.asarray(r(x)), grad=(False,),
          **_builder)  # fmt: skip

_NANS = Arg((2, 4), FLOAT, "fixed", value=[[1.5, np.nan, -0.5, 2.0], [np.nan, -3.0, 0.25, -1]])
_ALL_NAN = Arg((2, 3), FLOAT, "fixed", value=[[np.nan, np.nan, np.nan], [np.nan, 1.0, np.inf]])
for _name, _fn, _ref in [("nanmax", gc.nanmax, np.nanmax), ("nanmin", gc.nanmin, np.nanmin)]:
    _case(_name, "axis1", lambda x, f=_fn: f(x, axis=1), [F(3, 4)],
          lambda x, r=_ref: r(x, axis=1), **_builder)  # fmt: skip
    _case(_name, "nans", lambda x, f=_fn: f(x, dim=1, keepdim=True), [_NANS],
          lambda x, r=_ref: r(x, axis=1, keepdims=True), grad=(True,), **_builder)  # fmt: skip
    _case(_name, "all_nan", lambda x, f=_fn: f(x, axis=1), [_ALL_NAN],
          lambda x, r=_ref: np.array([np.nan, r(x[1])], x.dtype), **_builder)  # fmt: skip
    _case(_name, "int", lambda x, f=_fn: f(x, axis=0), [I(3, 4)],
          lambda x, r=_ref: r(x, axis=0), **_builder)  # fmt: skip

# -- shapes ---------------------------------------------------------------------------------------

for _label, _source, _dest in [("one", 0, -1), ("two", (0, 1), (2, 0)), ("same", 1, 1)]:
    _case("moveaxis", _label, lambda x, s=_source, d=_dest: gc.moveaxis(x, s, d), [F(2, 3, 4)],
          lambda x, s=_source, d=_dest: np.moveaxis(x, s, d).copy(), **_builder)  # fmt: skip
_case("moveaxis", "int", lambda x: gc.moveaxis(x, -1, 0), [I(2, 3)],
      lambda x: np.moveaxis(x, -1, 0).copy(), **_builder)  # fmt: skip

_case("ravel", "2d", gc.ravel, [F(2, 3)], np.ravel, **_builder)
_case("ravel", "0d", gc.ravel, [F()], np.ravel, **_builder)
_case("ravel", "bool", gc.ravel, [B(2, 2)], np.ravel, **_builder)
_case("ravel", "empty", gc.ravel, [F(0, 3)], np.ravel, **_builder)

for _name, _fn, _ref in [("hstack", gc.hstack, np.hstack), ("vstack", gc.vstack, np.vstack)]:
    for _label, _shapes in [("matrices", [(2, 3), (2, 3)]), ("vectors", [(3,), (3,)]),
                            ("0d", [(), ()])]:  # fmt: skip
        _case(_name, _label, lambda a, b, f=_fn: f([a, b]), [F(*s) for s in _shapes],
              lambda a, b, r=_ref: r([a, b]), **_builder)  # fmt: skip
    _case(_name, "int_float", lambda a, b, f=_fn: f([a, b]), [I(2, 2), F(2, 2)],
          lambda a, b, r=_ref: r([a, b]), **_builder)  # fmt: skip
_case("hstack", "widths", lambda a, b: gc.hstack([a, b]), [F(2, 1), F(2, 3)],
      lambda a, b: np.hstack([a, b]), **_builder)  # fmt: skip
_case("vstack", "row_and_matrix", lambda a, b: gc.vstack([a, b]), [F(3), F(2, 3)],
      lambda a, b: np.vstack([a, b]), **_builder)  # fmt: skip

# -- products -------------------------------------------------------------------------------------

for _label, _a, _b in [
    ("vectors", (4,), (4,)),
    ("matrix_vector", (2, 4), (4,)),
    ("matrices", (2, 3), (3, 4)),
    ("scalar", (), (2, 3)),
    ("vector_stack", (3,), (2, 3, 4)),
    ("stacks", (2, 2, 3), (4, 3, 2)),
    ("empty", (2, 0), (0, 3)),
]:
    _case("dot", _label, gc.dot, [F(*_a), F(*_b)], np.dot, rtol=1e-5, atol=1e-6, **_builder)
_case("dot", "int", gc.dot, [I(2, 3), I(3)], np.dot, **_builder)
_case("dot", "bool", gc.dot, [B(3), B(3)], lambda a, b: np.asarray(np.dot(a, b)), **_builder)

for _label, _axes, _b in [
    ("default", 2, (2, 4, 3)),
    ("one", 1, (4, 3)),
    ("outer", 0, (2,)),
    ("pairs", ([1, 0], [0, 2]), (2, 4, 3)),
]:
    _case("tensordot", _label, lambda a, b, x=_axes: gc.tensordot(a, b, x), [F(3, 2, 4), F(*_b)],
          lambda a, b, x=_axes: np.tensordot(a, b, x), rtol=1e-5, atol=1e-6,
          **_builder)  # fmt: skip
_case("tensordot", "dims", lambda a, b: gc.tensordot(a, b, dims=([0], [1])), [I(3, 2), I(2, 3)],
      lambda a, b: np.tensordot(a, b, ([0], [1])), **_builder)  # fmt: skip

# -- repeat, diag, nan_to_num ---------------------------------------------------------------------

for _label, _repeats, _axis in [
    ("flat", 2, None),
    ("axis1", 3, 1),
    ("counts", [2, 0, 1], 1),
    ("none", 0, 0),
    ("one_count", [2], -1),
]:
    _case("repeat", _label, lambda x, r=_repeats, a=_axis: gc.repeat(x, r, a), [F(2, 3)],
          lambda x, r=_repeats, a=_axis: np.repeat(x, r, a), **_builder)  # fmt: skip
_case("repeat", "dim", lambda x: gc.repeat(x, [1, 3], dim=0), [I(2, 2)],
      lambda x: np.repeat(x, [1, 3], 0), **_builder)  # fmt: skip
_case("repeat", "0d", lambda x: gc.repeat(x, 3), [F()], lambda x: np.repeat(x, 3), **_builder)
_case("repeat", "bool", lambda x: gc.repeat(x, 2, 0), [B(3)], lambda x: np.repeat(x, 2, 0),
      **_builder)  # fmt: skip

for _k in (0, 2, -1):
    _case("diag", f"vector_k{_k}".replace("-", "m"), lambda v, k=_k: gc.diag(v, k), [F(3)],
          lambda v, k=_k: np.diag(v, k), **_builder)  # fmt: skip
    _case("diag", f"matrix_k{_k}".replace("-", "m"), lambda v, k=_k: gc.diag(v, k), [F(3, 4)],
          lambda v, k=_k: np.diag(v, k).copy(), **_builder)  # fmt: skip
_case("diag", "diagonal", lambda v: gc.diag(v, diagonal=1), [I(2)], lambda v: np.diag(v, 1),
      **_builder)  # fmt: skip
_case("diag", "bool", gc.diag, [B(3)], np.diag, **_builder)
_case("diag", "empty", gc.diag, [F(0)], np.diag, **_builder)
_case("diag", "specials", gc.diag, [Arg((3,), FLOAT, "fixed", value=[np.inf, -0.0, np.nan])],
      np.diag, **_builder)  # fmt: skip

_SPECIALS = Arg((2, 3), FLOAT, "fixed", value=[[np.nan, np.inf, -np.inf], [1.5, -0.0, -2.0]])
_case("nan_to_num", "defaults", gc.nan_to_num, [_SPECIALS], np.nan_to_num,
      **_builder)  # fmt: skip
_case("nan_to_num", "values", lambda x: gc.nan_to_num(x, nan=-1.0, posinf=2.5, neginf=-7.0),
      [_SPECIALS], lambda x: np.nan_to_num(x, nan=-1.0, posinf=2.5, neginf=-7.0), grad=(True,),
      **_builder)  # fmt: skip
_case("nan_to_num", "normal", gc.nan_to_num, [F(3, 4)], np.nan_to_num, **_builder)
_case("nan_to_num", "int", gc.nan_to_num, [I(2, 3)], np.nan_to_num, **_builder)
_case("nan_to_num", "0d", gc.nan_to_num, [F()], np.nan_to_num, **_builder)

# -- log2, log10, logaddexp: registry ops (numpy's own kernels) -----------------------------------

_LOG_EDGES = Arg((8,), FLOAT, "fixed", value=[0.0, -0.0, np.inf, -1.0, np.nan, 8.0, 1e3, 2**-30])
for _name, _fn, _ref in [("log2", gc.log2, np.log2), ("log10", gc.log10, np.log10)]:
    _case(_name, "2d", _fn, [F(3, 4, kind="positive")], _ref)
    _case(_name, "0d", _fn, [F(kind="positive")], _ref)
    _case(_name, "int", _fn, [I(2, 3, low=1, high=9)], _ref)
    _case(_name, "edges", _fn, [_LOG_EDGES], _ref)
    _case(_name, "empty", _fn, [F(0, 2, kind="positive")], _ref)

_case("logaddexp", "same", gc.logaddexp, [F(3, 4), F(3, 4)], np.logaddexp)
_case("logaddexp", "bcast", gc.logaddexp, [F(3, 1), F(4)], np.logaddexp)
_case("logaddexp", "pyscalar", lambda x: gc.logaddexp(x, 0.5), [F(2, 3)],
      lambda x: np.logaddexp(x, 0.5))  # numpy's weak Python float: x's float dtype, float64 for ints  # fmt: skip
_case("logaddexp", "int", gc.logaddexp, [I(2, 3), I(3)], np.logaddexp)
_case("logaddexp", "int_float", gc.logaddexp, [I(3, 1), F(4)], np.logaddexp, grad=(False, True))
_case("logaddexp", "far_apart", gc.logaddexp,
      [Arg((3,), FLOAT, "fixed", value=[800.0, -800.0, 30.0]), F(3)], np.logaddexp,
      grad=(False, True))  # fmt: skip
_case("logaddexp", "edges", gc.logaddexp,
      [Arg((6,), FLOAT, "fixed", value=[np.inf, -np.inf, np.inf, np.nan, -0.0, 3.0]),
       Arg((6,), FLOAT, "fixed", value=[np.inf, -np.inf, -np.inf, 1.0, 0.0, 3.0])],
      np.logaddexp)  # fmt: skip

# -- creation: each beside an input, so every engine meets its constant --------------------------

_case("full", "fill_array", lambda v: gc.full((2, 3), v), [F(3)], lambda v: np.full((2, 3), v),
      **_builder)  # fmt: skip
_case("full", "number", lambda x: x * gc.full(x.shape, 3, x.dtype), [F(2, 3)], lambda x: x * 3,
      **_builder)  # fmt: skip
_case("zeros", "shape_of_x", lambda x: x + gc.zeros(x.shape, x.dtype), [F(2, 3)],
      lambda x: x + np.zeros(x.shape, x.dtype), **_builder)  # fmt: skip
_case("ones", "int", lambda x: x + gc.ones((2, 1), "int64"), [I(2, 3)],
      lambda x: x + np.ones((2, 1), np.int64), **_builder)  # fmt: skip
_case("eye", "offset", lambda x: x * gc.eye(3, 4, k=1, dtype=x.dtype), [F(3, 4)],
      lambda x: x * np.eye(3, 4, 1, dtype=x.dtype), **_builder)  # fmt: skip
_case("linspace", "steps", lambda x: x - gc.linspace(-1, 2, 5, dtype=x.dtype), [F(5)],
      lambda x: x - np.linspace(-1, 2, 5, dtype=x.dtype), **_builder)  # fmt: skip
