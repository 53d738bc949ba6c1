"""ONNX forms of graphc's elementwise math and activations that are more than one ONNX op
(those that are one, erf or floor, are in direct.py's table): rounding, remainders,
the trigonometric and hyperbolic functions (one op type each, and atan2 composed),
cumprod (a Scan: ONNX has no CumProd),
log1p and expm1 (Kahan's accurate forms), log2 and log10 (Log over a constant),
logaddexp (numpy's steps), logical ops, and the activations.

Where ONNX has the op with numpy's meaning it is used (Round, Clip); otherwise the form
mirrors graphc's kernel step by step (trunc, softplus, hardsigmoid), so results agree
within rounding, and bit for bit where the steps are the same IEEE operations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.types import TensorType
from graphc.onnx.exporters import _logistic
from graphc.onnx.writer import Writer, computed, exporter, value_info


def _c(w: Writer, value: Any, dtype: Any) -> str:
    return w.const(np.asarray(value, dtype))


def _x(w: Writer, node: Node, ins: list[str]) -> str:
    """The first input cast to the node's dtype."""
    return w.cast(ins[0], node.inputs[0].type.dtype, node.type.dtype)


# -- elementwise math -------------------------------------------------------------------


@exporter("trunc")
def _trunc(w: Writer, node: Node, ins: list[str]) -> list[str]:
    if node.type.dtype.kind in "iu":
        return [w.one("Identity", ins)]
    below = w.one("Less", [ins[0], _c(w, 0, node.type.dtype)])
    return [w.one("Where", [below, w.one("Ceil", ins), w.one("Floor", ins)])]


@exporter("round")
def _round(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype, d = node.type.dtype, node.attrs["decimals"]
    if dtype.kind in "iu":
        return [w.one("Identity", ins)]
    if d == 0:
        return [w.one("Round", ins)]  # half to even, as rint
    # numpy's way: rint(x * 10^d) / 10^d, or rint(x / 10^-d) * 10^-d
    scale = _c(w, 10.0 ** abs(d), dtype)
    there, back = ("Mul", "Div") if d > 0 else ("Div", "Mul")
    return [w.one(back, [w.one("Round", [w.one(there, [ins[0], scale])]), scale])]


@exporter("rsqrt")
def _rsqrt(w: Writer, node: Node, ins: list[str]) -> list[str]:
    x = _x(w, node, ins)
    return [w.one("Div", [_c(w, 1, node.type.dtype), w.one("Sqrt", [x])])]


@exporter("fmod")
def _fmod(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [w.one("Mod", computed(w, node, ins), fmod=1)]


@exporter("remainder")
def _remainder(w: Writer, node: Node, ins: list[str]) -> list[str]:
    x, y = computed(w, node, ins)
    if node.type.dtype.kind in "iu":
        return [w.one("Mod", [x, y], fmod=0)]  # the sign of y, as Python's %
    # floats: fmod, moved by y where it is nonzero and its sign differs from y's
    r = w.one("Mod", [x, y], fmod=1)
    zero = _c(w, 0, node.type.dtype)
    differ = w.one("Xor", [w.one("Less", [r, zero]), w.one("Less", [y, zero])])
    move = w.one("And", [differ, w.one("Not", [w.one("Equal", [r, zero])])])
    return [w.one("Where", [move, w.one("Add", [r, y]), r])]


@exporter("floor_divide")
def _floor_divide(w: Writer, node: Node, ins: list[str]) -> list[str]:
    x, y = computed(w, node, ins)
    dtype = node.type.dtype
    if dtype.kind in "iu":  # (x - x mod y) / y divides exactly: Div's truncation is floor
        return [w.one("Div", [w.one("Sub", [x, w.one("Mod", [x, y], fmod=0)]), y])]
    # numpy's steps (npy_divmod): the quotient of x - fmod(x, y), one less where the
    # remainder's sign differs from y's, floored and rounded up past a half; x / y
    # where y is 0, and a signed zero for a zero quotient
    zero, one = _c(w, 0, dtype), _c(w, 1, dtype)
    r = w.one("Mod", [x, y], fmod=1)
    div = w.one("Div", [w.one("Sub", [x, r]), y])
    differ = w.one("Xor", [w.one("Less", [y, zero]), w.one("Less", [r, zero])])
    moved = w.one("And", [differ, w.one("Not", [w.one("Equal", [r, zero])])])
    div = w.one("Where", [moved, w.one("Sub", [div, one]), div])
    floor = w.one("Floor", [div])
    past_half = w.one("Greater", [w.one("Sub", [div, floor]), _c(w, 0.5, dtype)])
    floor = w.one("Where", [past_half, w.one("Add", [floor, one]), floor])
    quotient = w.one("Div", [x, y])
    negative = w.one("Less", [w.one("Div", [one, quotient]), zero])  # -0.0 too: 1/-0 = -inf
    signed_zero = w.one("Where", [negative, _c(w, -0.0, dtype), zero])  # copysign(0, x / y)
    floor = w.one("Where", [w.one("Equal", [div, zero]), signed_zero, floor])
    return [w.one("Where", [w.one("Equal", [y, zero]), quotient, floor])]


def _one_op_type(op_type: str) -> Any:
    """The form of an op that is ONNX's `op_type` (ints computed in the float dtype).
    Direct entries in direct.py would serve as well, and read back too; the handlers of
    these op types are in handlers_math.py."""

    def write(w: Writer, node: Node, ins: list[str]) -> list[str]:
        return [w.one(op_type, computed(w, node, ins))]

    return write


exporter("tan")(_one_op_type("Tan"))
exporter("asin")(_one_op_type("Asin"))
exporter("acos")(_one_op_type("Acos"))
exporter("cosh")(_one_op_type("Cosh"))
exporter("asinh")(_one_op_type("Asinh"))
exporter("acosh")(_one_op_type("Acosh"))
exporter("atanh")(_one_op_type("Atanh"))


def _sign_bit(w: Writer, v: str, zero: str) -> str:
    """Whether v is negative, -0.0 included (1 / -0.0 is -inf); nan gives False."""
    negative_zero = w.one(
        "And", [w.one("Equal", [v, zero]), w.one("Less", [w.one("Reciprocal", [v]), zero])]
    )
    return w.one("Or", [w.one("Less", [v, zero]), negative_zero])


@exporter("atan2")
def _atan2(w: Writer, node: Node, ins: list[str]) -> list[str]:
    # ONNX has no Atan2: atan(x / y), moved by pi toward x's side where y's sign bit is
    # set; where x / y is 0 / 0 or inf / inf (nan though the angle exists) C's values:
    # both zeros give x (a signed zero) or +-pi, both infinities +-pi/4 or +-3pi/4
    x, y = computed(w, node, ins)
    dtype = node.type.dtype
    zero = _c(w, 0, dtype)
    x_negative, y_negative = _sign_bit(w, x, zero), _sign_bit(w, y, zero)
    half_turn = w.one("Where", [x_negative, _c(w, -np.pi, dtype), _c(w, np.pi, dtype)])
    angle = w.one("Atan", [w.one("Div", [x, y])])
    angle = w.one("Where", [y_negative, w.one("Add", [angle, half_turn]), angle])
    zeros = w.one("And", [w.one("Equal", [x, zero]), w.one("Equal", [y, zero])])
    angle = w.one("Where", [zeros, w.one("Where", [y_negative, half_turn, x]), angle])
    corner = w.one("Where", [y_negative, _c(w, 0.75 * np.pi, dtype), _c(w, 0.25 * np.pi, dtype)])
    corner = w.one("Where", [x_negative, w.one("Neg", [corner]), corner])
    infinities = w.one("And", [w.one("IsInf", [x]), w.one("IsInf", [y])])
    return [w.one("Where", [infinities, corner, angle])]


@exporter("cumprod")
def _cumprod(w: Writer, node: Node, ins: list[str]) -> list[str]:
    # ONNX has no CumProd (and exp of CumSum of logs is neither exact for integers nor
    # defined at zeros): a Scan along the axis whose body multiplies the running product
    # by the next entry, from ones: numpy's products in numpy's order, so the same bits,
    # along a symbolic axis too (read back, it is a graphc scan doing the same)
    from onnx import helper, numpy_helper

    x = _x(w, node, ins)
    source, dtype = node.inputs[0].type, node.type.dtype
    axis = node.attrs["axis"]
    if source.rank == 0 or source.shape[axis] == 0:
        return [w.one("Identity", [x])]
    others = [k for k in range(source.rank) if k != axis]
    row = TensorType(tuple(source.shape[k] for k in others), dtype)
    row_shape = w.one("Gather", [w.one("Shape", [x]), w.ints(others)], axis=0)
    ones = w.one("ConstantOfShape", [row_shape], value=numpy_helper.from_array(np.ones(1, dtype)))
    sub = Writer(w.opset, outer=w, prefix=f"{node.name}_")
    running, entry = sub.fresh("running"), sub.fresh("entry")
    product = sub.one("Mul", [running, entry])
    outputs = [sub.one("Identity", [product]), sub.one("Identity", [product])]  # state, output
    body = helper.make_graph(
        sub.nodes,
        sub.fresh("cumprod_body"),
        [value_info(running, row), value_info(entry, row)],
        [value_info(name, row) for name in outputs],
    )
    _, products = w.emit(
        "Scan",
        [ones, x],
        2,
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[axis],
        scan_output_axes=[axis],
    )
    return [products]


def log1p(w: Writer, x: str, dtype: Any) -> str:
    """log(1 + x) accurate for small x: with u = 1 + x, log(u) * x / (u - 1) (Kahan)."""
    one = _c(w, 1, dtype)
    u = w.one("Add", [x, one])
    d = w.one("Sub", [u, one])
    log_u = w.one("Log", [u])
    scaled = w.one("Mul", [log_u, w.one("Div", [x, d])])
    infinite = w.one("IsInf", [u])
    exact = w.one("Or", [w.one("Equal", [d, _c(w, 0, dtype)]), infinite])
    plain = w.one("Where", [infinite, log_u, x])
    return w.one("Where", [exact, plain, scaled])


def expm1(w: Writer, x: str, dtype: Any) -> str:
    """exp(x) - 1 accurate for small x: with u = exp(x), (u - 1) * x / log(u) (Kahan)."""
    one = _c(w, 1, dtype)
    u = w.one("Exp", [x])
    d = w.one("Sub", [u, one])
    scaled = w.one("Mul", [d, w.one("Div", [x, w.one("Log", [u])])])
    # u == 1: x itself; u - 1 == -1 (x very negative) or u infinite: u - 1
    small = w.one("Equal", [u, one])
    edge = w.one("Or", [w.one("Equal", [d, _c(w, -1, dtype)]), w.one("IsInf", [u])])
    return w.one("Where", [small, x, w.one("Where", [edge, d, scaled])])


def _log_base(base: float) -> Any:
    """log2 or log10 as Log(x) / log(base): ONNX has neither. float32 (and narrower) is
    computed in float64 and rounded once, so correctly rounded (numpy's float32 kernels
    are up to 2 and 3 ulps off that); float64 is within 3 ulps of numpy's."""

    def write(w: Writer, node: Node, ins: list[str]) -> list[str]:
        dtype = node.type.dtype
        wide = np.dtype(np.float64)
        x = w.cast(_x(w, node, ins), dtype, wide)
        quotient = w.one("Div", [w.one("Log", [x]), _c(w, np.log(base), wide)])
        return [w.cast(quotient, wide, dtype)]

    return write


exporter("log2")(_log_base(2.0))
exporter("log10")(_log_base(10.0))


@exporter("logaddexp")
def _logaddexp(w: Writer, node: Node, ins: list[str]) -> list[str]:
    # numpy's steps: x + log 2 where x == y (two equal infinities too), else the larger
    # plus log1p(exp(-|x - y|)); a nan makes |x - y| nan, and so the result
    x, y = computed(w, node, ins)
    dtype = node.type.dtype
    gap = w.one("Abs", [w.one("Sub", [x, y])])
    rest = log1p(w, w.one("Exp", [w.one("Neg", [gap])]), dtype)
    apart = w.one("Add", [w.one("Max", [x, y]), rest])
    same = w.one("Add", [x, _c(w, np.log(2.0), dtype)])
    return [w.one("Where", [w.one("Equal", [x, y]), same, apart])]


exporter("log1p")(lambda w, node, ins: [log1p(w, _x(w, node, ins), node.type.dtype)])
exporter("expm1")(lambda w, node, ins: [expm1(w, _x(w, node, ins), node.type.dtype)])


def _logical(op_type: str) -> Any:
    def run(w: Writer, node: Node, ins: list[str]) -> list[str]:
        flags = [w.cast(n, x.type.dtype, np.bool_) for n, x in zip(ins, node.inputs)]
        return [w.one(op_type, flags)]

    return run


for _op, _type in {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}.items():
    exporter(_op)(_logical(_type))
exporter("logical_not")(_logical("Not"))


# -- activations ------------------------------------------------------------------------


@exporter("hardtanh")
def _hardtanh(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype = node.type.dtype
    low, high = (_c(w, node.attrs[k], dtype) for k in ("min_val", "max_val"))
    return [w.one("Clip", [_x(w, node, ins), low, high])]


@exporter("leaky_relu")
def _leaky_relu(w: Writer, node: Node, ins: list[str]) -> list[str]:
    x, dtype = _x(w, node, ins), node.type.dtype
    scaled = w.one("Mul", [x, _c(w, node.attrs["negative_slope"], dtype)])
    return [w.one("Where", [w.one("Greater", [x, _c(w, 0, dtype)]), x, scaled])]


@exporter("hardsigmoid")
def _hardsigmoid(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype = node.type.dtype  # min(max(x + 3, 0), 6) / 6, as graphc's kernel
    shifted = w.one("Add", [_x(w, node, ins), _c(w, 3, dtype)])
    clipped = w.one("Clip", [shifted, _c(w, 0, dtype), _c(w, 6, dtype)])
    return [w.one("Div", [clipped, _c(w, 6, dtype)])]


@exporter("elu")
def _elu(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, dtype, x = node.attrs, node.type.dtype, _x(w, node, ins)
    positive = w.one("Greater", [x, _c(w, 0, dtype)])
    inner = w.one("Mul", [x, _c(w, a["input_scale"], dtype)])
    inner = w.one("Where", [positive, _c(w, 0, dtype), inner])  # unused lanes stay finite
    negative = w.one("Mul", [expm1(w, inner, dtype), _c(w, a["alpha"] * a["scale"], dtype)])
    linear = w.one("Mul", [x, _c(w, a["scale"], dtype)])
    return [w.one("Where", [positive, linear, negative])]


@exporter("softplus")
def _softplus(w: Writer, node: Node, ins: list[str]) -> list[str]:
    beta, threshold, dtype = node.attrs["beta"], node.attrs["threshold"], node.type.dtype
    x = _x(w, node, ins)
    scaled = w.one("Mul", [x, _c(w, beta, dtype)])
    linear = w.one("Greater", [scaled, _c(w, threshold, dtype)])
    capped = w.one("Min", [scaled, _c(w, threshold, dtype)])
    soft = w.one("Div", [log1p(w, w.one("Exp", [capped]), dtype), _c(w, beta, dtype)])
    return [w.one("Where", [linear, x, soft])]


@exporter("silu")
def _silu(w: Writer, node: Node, ins: list[str]) -> list[str]:
    x = _x(w, node, ins)
    return [w.one("Mul", [x, _logistic(w, x, node.type.dtype)])]


@exporter("gelu_exact")
def _gelu_exact(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype, x = node.type.dtype, _x(w, node, ins)
    if w.opset >= 20:
        return [w.one("Gelu", [x], approximate="none")]
    cdf = w.one("Erf", [w.one("Mul", [x, _c(w, np.sqrt(0.5), dtype)])])
    cdf = w.one("Mul", [w.one("Add", [cdf, _c(w, 1, dtype)]), _c(w, 0.5, dtype)])
    return [w.one("Mul", [x, cdf])]


__all__ = ["expm1", "log1p"]
