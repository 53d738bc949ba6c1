"""The C of each elementwise op, on vectors of lanes: numpy's semantics, bit for bit
where IEEE arithmetic fixes the bits, within a stated ulp bound where a math library does.

Each op's native facts are one `NativeOp` in `NATIVE_OPS` (its emitter, how its operands
are converted, its ulp bound, its cost, its libmvec functions), registered on the op as
its "native" rule: adding an op's native C is adding one entry there.

Values in a kernel are GCC vector-extension vectors of GC_W lanes (eight with AVX2,
sixteen with AVX-512): `vf32` (float32), `vf64` (float64, two registers), `vi64`
(int64, as float64's; the ops of `INT64_OPS`, wrapping as numpy's: the kernels are
built with -fwrapv) and `vb` (bool, as 32-bit lane masks of 0 or -1).
Every lane is computed by the same code whatever its position, the tail of an array
included (it is loaded into a zero-padded vector): so a value's bits depend on its
inputs only, never on the array's length, alignment, chunking or threads, and a fused
group computes exactly what its ops computed one by one. That keeps the native backend
exact across optimization levels, as the numpy backend is.

What differs from numpy: exp, log, tanh, sin, cos, expm1, log1p (and the ops built on
them: sigmoid, gelu) come from glibc's libmvec (its AVX2 or AVX-512 variants), where numpy has its
own SIMD code. glibc documents libmvec's error as at most 4 ulp. float32 tanh is
graphc's own (`tanh_f32`: libmvec's took 3x numpy's time, and GELU is mostly tanh): a
rational function x P(x^2) / Q(x^2) of degrees 9 and 8, fitted by graphc
(tools/fit_tanh.py, iteratively reweighted least squares on the relative error); it is
x itself below 1e-4 (where P and Q round to 1) and +-1 from 8.7 (where tanh rounds to +-1):
measured within 5 ulp of the correctly rounded tanh and of numpy's (its polynomials use
fused multiply-adds), on every third float32 in [1e-4, 10] and 2**24 random bit patterns.
tests/backends/test_native_ulp.py checks every op's `ulp_bound` against numpy over the
float range.
Everything else (+ - * / sqrt, comparisons, min/max with numpy's nan and -0.0 rules,
where, casts between floats, bools and from int64, floor/ceil/trunc/round, leaky_relu, and hardtanh and
hardsigmoid by numpy's clip rule, x kept where it equals a bound) gives numpy's bits.

An emitter gets a `Call`: the C expressions of its operands, converted as the op's rule
says (to the result's C type for most), and returns the C expression of its result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.backends.native.c_sources import c_source
from graphc.ir.registry import all_ops, get_op
from graphc.ir.types import TensorType
from graphc.ops.elementwise import PRODUCT_EXPONENTS

# the C vector type of each dtype a kernel may hold
CTYPE = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.bool_): "b",
    np.dtype(np.int64): "i64",
}
# the ops a kernel computes in int64 (their C is numpy's wrapping integer arithmetic,
# comparison or selection); any other op reading or making int64 values is declined
# unless it computes in a float type its operands are converted to (numpy's promotion)
INT64_OPS = frozenset(
    ("add", "sub", "mul", "neg", "abs", "maximum", "minimum", "where", "cast", "full_like")
    + ("eq", "ne", "lt", "le", "gt", "ge", "pow")
)

PRELUDE = c_source("prelude.h")


# float32 tanh: coefficients of P and Q in x^2 (lowest first), as float32 (tools/fit_tanh.py)
TANH_P = tuple(
    float.fromhex(h)
    for h in ("0x1p0", "0x1.120b12p-3", "0x1.ca2c12p-9", "0x1.59c21ap-16", "0x1.cad81p-27")
)
TANH_Q = tuple(
    float.fromhex(h)
    for h in ("0x1p0", "0x1.de5ad2p-2", "0x1.a7f7c4p-6", "0x1.588574p-12", "0x1.a17d8cp-21")
)


def _horner(coefficients: tuple[float, ...], var: str) -> str:
    # fused multiply-adds: graphc's own polynomial, so the ops need not round as numpy's
    # separate * and + would (tanh's ulp_bound is measured with them)
    expr = f"sp_f32({c_float(coefficients[-1], 'f32')})"
    for c in reversed(coefficients[:-1]):
        expr = f"fma_f32({expr}, {var}, sp_f32({c_float(c, 'f32')}))"
    return expr


def tanh_f32() -> str:
    # One compare and select, the sign by its bit, a min/max clamp: each select on a
    # compare's lane mask cost about as much as the division (1e6 float32 on one core:
    # 238 -> 130 us). Below 1e-4, P and Q round to 1, so r is x itself (-0.0 and
    # subnormals included) with no select; from 8.7 on (inf included, where r is nan)
    # the select gives +-1, so x needs no clamp to [-9, 9] against overflow. The same
    # bits as the form with those selects and that clamp, for every float32 (checked
    # exhaustively, with 8 and 16 lanes)
    return "\n".join(
        [
            "GC_INLINE vf32 tanh_f32(vf32 x) {",
            "    vf32 u = x * x;",
            f"    vf32 r = (x * {_horner(TANH_P, 'u')}) / {_horner(TANH_Q, 'u')};",
            "    vi32 sign = {0};",
            "    sign = sign + (int32_t)0x80000000;",
            "    vf32 one = (vf32)(((vi32)x & sign) | (vi32)sp_f32(1));  /* +-1, x's sign */",
            f"    return unit_f32(sel_f32((vb)(abs_f32(x) >= sp_f32({c_float(8.7, 'f32')})), one, r));",
            "}",
        ]
    )


def math_prelude() -> str:
    """Declarations of libmvec's functions and the 8-lane float64 forms of them."""
    lines = [
        "#ifdef __AVX512F__",
        "#define GC_F32(name) _ZGVeN16v_##name",
        "#define GC_F64(name) _ZGVeN8v_##name",
        "#else",
        "#define GC_F32(name) _ZGVdN8v_##name",
        "#define GC_F64(name) _ZGVdN4v_##name",
        "#endif",
    ]
    for op, rule in NATIVE_OPS.items():
        if rule.libmvec is None:
            continue
        f32_name, f64_name = rule.libmvec
        f64 = f"GC_F64({f64_name})"
        if callable(f32_name):  # graphc's own
            lines.append(f32_name())
        else:
            f32 = f"GC_F32({f32_name})"
            lines.append(f"extern vf32 {f32}(vf32);")
            f32_call = f"unit_f32({f32}(x))" if rule.unit_range else f"{f32}(x)"
            lines.append(f"GC_INLINE vf32 {op}_f32(vf32 x) {{ return {f32_call}; }}")
        lines.append(f"extern vf64h {f64}(vf64h);")
        if rule.unit_range:
            lines.append(f"GC_HALVES({op}_f64_raw, {f64}(lo), {f64}(hi))")
            lines.append(f"GC_INLINE vf64 {op}_f64(vf64 x) {{ return unit_f64({op}_f64_raw(x)); }}")
        else:
            lines.append(f"GC_HALVES({op}_f64, {f64}(lo), {f64}(hi))")
    return "\n".join(lines) + "\n"


def splat(ctype: str, value: float | bool) -> str:
    """A vector of `value` in every lane, as exact C source."""
    if ctype == "b":
        return f"sp_b({1 if value else 0})"
    if ctype == "i64":
        return f"sp_i64({c_int64(int(value))})"
    return f"sp_{ctype}({c_float(float(value), ctype)})"


def c_int64(value: int) -> str:
    """An exact C literal of the int64 `value` (INT64_MIN has none of its own)."""
    if value == -(2**63):
        return "(-0x7fffffffffffffffLL - 1)"
    return f"{value}LL"


def c_float(value: float, ctype: str) -> str:
    """An exact C literal of `value` (hexadecimal: no decimal rounding)."""
    suffix = "f" if ctype == "f32" else ""
    if ctype == "f32":  # first: a value past float32's range rounds to an infinity
        with np.errstate(over="ignore"):
            value = float(np.float32(value))
    if value != value:
        return f'__builtin_nan{suffix}("")'
    if value in (float("inf"), float("-inf")):
        return f"{'-' if value < 0 else ''}__builtin_inf{suffix}()"
    return f"{value.hex()}{suffix}" if value != 0 or not _negative_zero(value) else f"-0.0{suffix}"


def _negative_zero(value: float) -> bool:
    return value == 0 and str(value).startswith("-")


def convert(expr: str, source: str, target: str) -> str:
    """`expr` of C type `source` as C type `target` (numpy's astype)."""
    if source == target:
        return expr
    if target == "b":  # nonzero (nan included) is True
        if source == "f32":
            return f"((vb)(({expr}) != sp_f32(0)))"
        return f"__builtin_convertvector(({expr}) != sp_{source}(0), vb)"
    if source == "b":
        return f"sel_{target}({expr}, sp_{target}(1), sp_{target}(0))"
    if target == "i64":  # numpy's float -> int64 of a nan, an inf or a value past the
        # range is the platform's (and warns): not written again here
        raise DeclinedError("a cast of floats to int64")
    vector = "vf64" if target == "f64" else "vf32"  # int64 rounds to nearest, as C's
    return f"__builtin_convertvector({expr}, {vector})"


def compare(op: str, a: str, b: str, ctype: str) -> str:
    symbol = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
    if ctype == "f32":
        return f"((vb)(({a}) {symbol} ({b})))"
    if ctype in ("f64", "i64"):
        return f"__builtin_convertvector(({a}) {symbol} ({b}), vb)"
    # bools are 0 or -1: compared as signed masks, True < False; flip for numpy's order
    return f"((vb)((-({a})) {symbol} (-({b}))))"


GELU_A, GELU_C = 0.044715, float(np.sqrt(2.0 / np.pi))

# composite helpers, written as graphc's numpy kernels compute them (same roundings)
COMPOSITES = c_source("composites.h")


def composites() -> str:
    a32, c32 = c_float(GELU_A, "f32"), c_float(GELU_C, "f32")
    a64, c64 = c_float(GELU_A, "f64"), c_float(GELU_C, "f64")
    return COMPOSITES + f"GC_GELU(f32, {a32}, {c32})\nGC_GELU(f64, {a64}, {c64})\n"


def header() -> str:
    """Everything a kernel file starts with."""
    return PRELUDE + math_prelude() + composites()


class DeclinedError(Exception):
    """This step is not for the native backend (the reason says why, for explain)."""


@dataclass(frozen=True)
class Call:
    """What an emitter gets for one op: its operands' C expressions, converted as its
    rule's `operands` says, the C type they were converted to (the result's, save for
    comparisons and logical ops), and what some ops need besides: the op's attrs, each
    operand's C type before conversion, the result's type, and the operands' values
    where they are known when the kernel is built (a constant exponent)."""

    args: Sequence[str]
    ctype: str
    attrs: dict[str, Any]
    sources: Sequence[str]
    result: TensorType
    known: Sequence[np.ndarray | None]


# emitter(call) -> the C expression of the op's result; raises DeclinedError for a case
# it has no C for
Emitter = Callable[[Call], str]

# how the kernel converts an op's operands before its emitter sees them (a comparison's
# are converted to their common type, as the "comparison" property promises)
RESULT = "result"  # to the result's C type; an op with attrs or a bool result is declined
LOGICAL = "logical"  # to bool
CONDITION = "condition"  # the first (a bool) kept, the others to the result's C type
AS_IS = "as_is"  # unconverted: the emitter converts (cast) or checks (pow) itself


@dataclass(frozen=True)
class NativeOp:
    """An elementwise op's native C: registered on the op as its "native" rule.

    emit        its C expression, on vectors of lanes (`Emitter`)
    operands    how its operands are converted first (RESULT, LOGICAL, CONDITION, AS_IS)
    ulp_bound   None where its bits are numpy's; else by how many ulp of the result its
                native value may differ (measured by tests/backends/test_native_ulp.py)
    cost        its work per element, about its time relative to an add: with the
                loads and stores, says from what size a kernel runs in parallel and how
                many blocks of lanes it interleaves (kernels.py)
    calls       the C types in which its C calls libmvec out of line: every vector
                register is then the callee's to clobber, so a kernel holding it goes a
                block of lanes at a time
    libmvec     (float32, float64) names of the libmvec functions the prelude binds to
                `op_f32` and `op_f64`; a function in place of the float32 name gives
                graphc's own C for float32 (tanh_f32)
    unit_range  results known to lie in [-1, 1], kept there (libmvec may round one ulp
                past 1, numpy does not)
    fuses       fusion may put it in a group with an inexact op (pow's C covers only
                exponents 2 and 3: a group holding a pow of another exponent would be
                declined whole, and numpy's fused kernel would then run the inexact op)
    beyond      what its declared bound leaves out, where not all of its error is in ulp
                of the result (gelu's), said in its declaration (`Inexact.why`)
    """

    emit: Emitter
    operands: str = RESULT
    ulp_bound: int | None = None
    cost: int = 1
    calls: tuple[str, ...] = ()
    libmvec: tuple[str | Callable[[], str], str] | None = None
    unit_range: bool = False
    fuses: bool = True
    beyond: str = ""


def native_rule(op: str) -> NativeOp | None:
    """The native C of registered op `op`, or None when it has none."""
    return get_op(op).rules.get("native")


def ulp_bounds() -> dict[str, int]:
    """The ops whose native values may differ from numpy's, with their bounds in ulp."""
    rules = ((name, opdef.rules.get("native")) for name, opdef in all_ops().items())
    return {name: rule.ulp_bound for name, rule in rules if rule and rule.ulp_bound is not None}


def _binary(symbol: str) -> Emitter:
    return lambda c: f"(({c.args[0]}) {symbol} ({c.args[1]}))"


def _unary(function: str) -> Emitter:
    """`function_f32(x)` (or _f64): a helper of the prelude, or libmvec's through it."""
    return lambda c: f"{function}_{c.ctype}({c.args[0]})"


def _comparison(op: str) -> Emitter:
    return lambda c: compare(op, c.args[0], c.args[1], c.ctype)


def _sigmoid(c: Call) -> str:
    # graphc's kernel: e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e), via numpy's maximum
    x, t = c.args[0], c.ctype
    e = f"exp_{t}(-abs_{t}({x}))"
    ge = compare("ge", x, f"sp_{t}(0)", t)
    return f"sigmoid_{t}({x}, {e}, {ge})"


def _cast(c: Call) -> str:
    return convert(c.args[0], c.sources[0], c.ctype)


def _full_like(c: Call) -> str:
    value = c.attrs["value"]
    if not isinstance(value, (bool, int, float)) or isinstance(value, np.ndarray):
        raise DeclinedError("full_like of a non-scalar value")
    if c.ctype == "b":
        return splat("b", bool(value))
    if c.ctype == "i64":
        if isinstance(value, float) and not np.isfinite(value):
            raise DeclinedError("full_like of a non-finite value in int64")
        with np.errstate(all="ignore"):
            return splat("i64", int(np.asarray(value).astype(np.int64)))
    return splat(c.ctype, float(np.asarray(value).astype(c.result.dtype)))


def _pow(c: Call) -> str:
    exponent = c.known[1]
    if exponent is None or exponent.size != 1:
        raise DeclinedError("pow with an exponent that is not a known constant")
    e = exponent.reshape(()).item()
    if isinstance(e, bool) or e not in PRODUCT_EXPONENTS or c.ctype == "b":
        raise DeclinedError(f"pow with exponent {e!r} (only 2 and 3, as products)")
    base = convert(c.args[0], c.sources[0], c.ctype)
    return f"(({base}) * ({base}))" if e == 2 else f"((({base}) * ({base})) * ({base}))"


def _attr_float(c: Call, name: str) -> str:
    """The C splat of float attr `name` in the result's type, as numpy's kernel takes a
    Python float: rounded to the result's dtype."""
    return splat(c.ctype, float(c.attrs[name]))


def _keep_at_least(x: str, low: str, t: str) -> str:
    # numpy's clip: the bound where x is past it, else x itself (a nan, and a -0.0 at a
    # bound of 0.0, stay: clip(-0.0, 0.0, 6.0) is -0.0, where maximum would give 0.0)
    return f"sel_{t}({compare('lt', x, low, t)}, {low}, {x})"


def _keep_at_most(x: str, high: str, t: str) -> str:
    return f"sel_{t}({compare('gt', x, high, t)}, {high}, {x})"


def _hardtanh(c: Call) -> str:
    # graphc's kernel: np.clip(x, min_val, max_val), the bounds rounded to x's dtype;
    # numpy's clip by a nan bound is nan everywhere
    x, t = convert(c.args[0], c.sources[0], c.ctype), c.ctype
    if any(float(c.attrs[name]) != float(c.attrs[name]) for name in ("min_val", "max_val")):
        return splat(t, float("nan"))
    low = _keep_at_least(x, _attr_float(c, "min_val"), t)
    return _keep_at_most(low, _attr_float(c, "max_val"), t)


def _leaky_relu(c: Call) -> str:
    # graphc's kernel: x where x > 0, else x * negative_slope (rounded to x's dtype)
    x, t = convert(c.args[0], c.sources[0], c.ctype), c.ctype
    scaled = f"(({x}) * {_attr_float(c, 'negative_slope')})"
    return f"sel_{t}({compare('gt', x, f'sp_{t}(0)', t)}, {x}, {scaled})"


def _hardsigmoid(c: Call) -> str:
    # graphc's kernel: x + 3, np.clip to [0, 6], / 6, each rounded in x's dtype
    x, t = convert(c.args[0], c.sources[0], c.ctype), c.ctype
    shifted = f"(({x}) + sp_{t}(3))"
    clipped = _keep_at_most(_keep_at_least(shifted, f"sp_{t}(0)", t), f"sp_{t}(6)", t)
    return f"(({clipped}) / sp_{t}(6))"


def _power_of_ten(n: int) -> float:
    """10**n as numpy's round computes it (calculation.c's power_of_ten): exact to 1e8,
    then 1e9 times 10 again and again, each product rounded."""
    if n < 9:
        return float(10**n)
    value = 1e9
    for _ in range(n - 9):
        if value == float("inf"):
            break
        value *= 10.0
    return value


def _round(c: Call) -> str:
    # numpy's round: np.rint for decimals 0; else x times 10**d (a Python float, so in
    # x's dtype), rint, divided by it again (x divided, then multiplied, for d < 0)
    x, t = convert(c.args[0], c.sources[0], c.ctype), c.ctype
    decimals = int(c.attrs["decimals"])
    if decimals == 0:
        return f"rint_{t}({x})"
    scale = splat(t, _power_of_ten(abs(decimals)))
    if decimals > 0:
        return f"(rint_{t}(({x}) * {scale}) / {scale})"
    return f"(rint_{t}(({x}) / {scale}) * {scale})"


def _libmvec(
    op: str, f32: str | Callable[[], str], f64: str, ulp_bound: int, cost: int, unit: bool = False
) -> NativeOp:
    """An op computed by libmvec's `f32` and `f64` (or for float32 by graphc's own C)."""
    calls = ("f32", "f64") if isinstance(f32, str) else ("f64",)
    return NativeOp(
        _unary(op), ulp_bound=ulp_bound, cost=cost, calls=calls, libmvec=(f32, f64), unit_range=unit
    )


# The native C of each elementwise op, one entry per op with all its facts, registered
# on the op by the backend (`register_rule(op, "native", rule)` in __init__.py). Costs:
# math functions are polynomials of 15-30 operations. libmvec's functions are within 4
# ulp (glibc's documented bound); float32 log is 8, numpy's own being 3-4 ulp from the
# true one; float32 tanh is graphc's (within 5 ulp of numpy's); sigmoid and gelu carry
# exp's and tanh's error through a few exactly rounded operations.
NATIVE_OPS: dict[str, NativeOp] = {
    "add": NativeOp(_binary("+")),
    "sub": NativeOp(_binary("-")),
    "mul": NativeOp(_binary("*")),
    "div": NativeOp(_binary("/"), cost=4),
    "neg": NativeOp(lambda c: f"(-({c.args[0]}))"),
    "abs": NativeOp(_unary("abs")),
    "sqrt": NativeOp(_unary("sqrt"), cost=4),
    "maximum": NativeOp(lambda c: f"max_{c.ctype}({c.args[0]}, {c.args[1]})"),
    "minimum": NativeOp(lambda c: f"min_{c.ctype}({c.args[0]}, {c.args[1]})"),
    "relu": NativeOp(lambda c: f"max_{c.ctype}({c.args[0]}, sp_{c.ctype}(0))"),
    "reciprocal": NativeOp(lambda c: f"(sp_{c.ctype}(1) / ({c.args[0]}))", cost=4),
    "rsqrt": NativeOp(lambda c: f"(sp_{c.ctype}(1) / sqrt_{c.ctype}({c.args[0]}))", cost=6),
    "floor": NativeOp(_unary("floor")),
    "ceil": NativeOp(_unary("ceil")),
    "trunc": NativeOp(_unary("trunc")),
    "round": NativeOp(_round, operands=AS_IS, cost=2),
    "sign": NativeOp(_unary("sign")),
    # attrs, so AS_IS: the emitter converts x itself (the type rules refuse bools)
    "hardtanh": NativeOp(_hardtanh, operands=AS_IS, cost=2),
    "leaky_relu": NativeOp(_leaky_relu, operands=AS_IS, cost=2),
    "hardsigmoid": NativeOp(_hardsigmoid, operands=AS_IS, cost=6),
    "pow": NativeOp(_pow, operands=AS_IS, fuses=False),
    "cast": NativeOp(_cast, operands=AS_IS),
    "full_like": NativeOp(_full_like, operands=AS_IS),
    "where": NativeOp(
        lambda c: f"sel_{c.ctype}({c.args[0]}, {c.args[1]}, {c.args[2]})", operands=CONDITION
    ),
    "logical_not": NativeOp(lambda c: f"(~({c.args[0]}))", operands=LOGICAL),
    "logical_and": NativeOp(_binary("&"), operands=LOGICAL),
    "logical_or": NativeOp(_binary("|"), operands=LOGICAL),
    "logical_xor": NativeOp(_binary("^"), operands=LOGICAL),
    **{op: NativeOp(_comparison(op)) for op in ("eq", "ne", "lt", "le", "gt", "ge")},
    # (the prelude declares the libmvec functions in this order)
    "exp": _libmvec("exp", "expf", "exp", ulp_bound=4, cost=16),
    "log": _libmvec("log", "logf", "log", ulp_bound=8, cost=16),
    "tanh": _libmvec("tanh", tanh_f32, "tanh", ulp_bound=8, cost=24, unit=True),
    "sin": _libmvec("sin", "sinf", "sin", ulp_bound=4, cost=20, unit=True),
    "cos": _libmvec("cos", "cosf", "cos", ulp_bound=4, cost=20, unit=True),
    "expm1": _libmvec("expm1", "expm1f", "expm1", ulp_bound=4, cost=16),
    "log1p": _libmvec("log1p", "log1pf", "log1p", ulp_bound=4, cost=16),
    "atan": _libmvec("atan", "atanf", "atan", ulp_bound=4, cost=20),
    "sinh": _libmvec("sinh", "sinhf", "sinh", ulp_bound=4, cost=20),
    "sigmoid": NativeOp(_sigmoid, ulp_bound=8, cost=20, calls=("f32", "f64")),
    # gelu's 1 + tanh(...) cancels for x below about -3, so there its error is absolute,
    # not in ulp of the result (tests/native_checks.py: gelu_allowance)
    "gelu": NativeOp(
        _unary("gelu"),
        ulp_bound=8,
        cost=30,
        calls=("f64",),
        beyond="; its bound in ulp of the result, plus, where 1 + tanh cancels (x below about"
        " -3), tanh's bound carried through x/2: tanh's ulp_bound times eps/4 times |x|",
    ),
}
