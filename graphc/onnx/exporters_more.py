"""ONNX forms of graphc's math, activation and array ops beyond the core set.

Where ONNX has the op with numpy's meaning it is used (Erf, CumSum, Trilu, GatherElements,
TopK, Pad); otherwise the form mirrors graphc's kernel step by step (trunc, softplus,
hardsigmoid, log1p and expm1 in Kahan's accurate forms), so results agree within
rounding, and bit for bit where the steps are the same IEEE operations.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.types import is_symbol
from graphc.onnx.exporters import INT64_MIN, _logistic, computed
from graphc.onnx.importer import OnnxError
from graphc.onnx.writer import Writer, exporter
from graphc.ops.padding import source_positions


def _c(w: Writer, value: Any, dtype: Any) -> str:
    return w.const(np.asarray(value, dtype))


def _x(w: Writer, node: Node, ins: list[str]) -> str:
    """The first input cast to the node's dtype."""
    return w.cast(ins[0], node.inputs[0].type.dtype, node.type.dtype)


# -- elementwise math -------------------------------------------------------------------

for _op, _type in {"erf": "Erf", "reciprocal": "Reciprocal"}.items():
    exporter(_op)(lambda w, node, ins, t=_type: [w.one(t, [_x(w, node, ins)])])


def _rounding(op_type: str) -> Any:
    def run(w: Writer, node: Node, ins: list[str]) -> list[str]:
        if node.type.dtype.kind in "iu":  # integers are already whole
            return [w.one("Identity", ins)]
        return [w.one(op_type, ins)]

    return run


exporter("floor")(_rounding("Floor"))
exporter("ceil")(_rounding("Ceil"))


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


def log1p(w: Writer, x: str, dtype: Any) -> str:
    """log(1 + x) accurate for small x: with u = 1 + x, log(u) * x / (u - 1) (Kahan)."""
    one = _c(w, 1, dtype)
    u = w.one("Add", [x, one])
    d = w.one("Sub", [u, one])
    log_u = w.one("Log", [u])
    scaled = w.one("Mul", [log_u, w.one("Div", [x, d])])
    exact = w.one("Or", [w.one("Equal", [d, _c(w, 0, dtype)]), w.one("IsInf", [u])])
    plain = w.one("Where", [w.one("IsInf", [u]), log_u, x])
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


# -- arrays -----------------------------------------------------------------------------


@exporter("flip")
def _flip(w: Writer, node: Node, ins: list[str]) -> list[str]:
    axes = node.attrs["axis"]
    axes = list(range(node.type.rank)) if axes is None else list(axes)
    if not axes:
        return [w.one("Identity", ins)]
    n = len(axes)
    starts, ends, steps = w.ints([-1] * n), w.ints([INT64_MIN] * n), w.ints([-1] * n)
    return [w.one("Slice", [ins[0], starts, ends, w.ints(axes), steps])]


def _trilu(upper: int) -> Any:
    def run(w: Writer, node: Node, ins: list[str]) -> list[str]:
        if w.opset < 14:
            raise OnnxError(f"export_model: {node.describe()}: Trilu needs opset 14")
        x = ins[0]
        flag = node.type.dtype == np.bool_  # onnxruntime's Trilu has no bool kernel
        if flag:
            x = w.cast(x, np.bool_, np.int32)
        out = w.one("Trilu", [x, w.const(np.asarray(node.attrs["k"], np.int64))], upper=upper)
        return [w.cast(out, np.int32, np.bool_) if flag else out]

    return run


exporter("tril")(_trilu(0))
exporter("triu")(_trilu(1))


@exporter("cumsum")
def _cumsum(w: Writer, node: Node, ins: list[str]) -> list[str]:
    axis = node.attrs["axis"]
    x = _x(w, node, ins)
    if node.inputs[0].type.rank == 0:
        return [w.one("Identity", [x])]
    if axis is None:  # over the flattened array
        x = w.one("Reshape", [x, w.ints([-1])])
        axis = 0
    return [w.one("CumSum", [x, w.const(np.asarray(axis, np.int64))])]


@exporter("arange")
def _arange(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, dtype = node.attrs, node.type.dtype
    wide = np.int64 if dtype.kind == "i" else np.float64  # start + i * step, as graphc
    count = w.dim(a["length"])
    i = w.one("Range", [w.const(np.asarray(0, np.int64)), count, w.const(np.asarray(1, np.int64))])
    i = w.cast(i, np.int64, wide)
    values = w.one("Add", [w.one("Mul", [i, _c(w, a["step"], wide)]), _c(w, a["start"], wide)])
    return [w.cast(values, wide, dtype)]


@exporter("take_along_axis")
def _take_along_axis(w: Writer, node: Node, ins: list[str]) -> list[str]:
    if node.type.rank == 0:  # one element, picked by index 0 or -1
        return [w.one("Identity", [ins[0]])]
    indices = w.cast(ins[1], node.inputs[1].type.dtype, np.int64)
    return [w.one("GatherElements", [ins[0], indices], axis=node.attrs["axis"])]


@exporter("scatter_add_along_axis")
def _scatter_add_along_axis(w: Writer, node: Node, ins: list[str]) -> list[str]:
    if w.opset < 16:
        raise OnnxError(f"export_model: {node.describe()}: a scatter-add needs opset 16")
    from onnx import numpy_helper

    zero = numpy_helper.from_array(np.zeros((1,), node.type.dtype))
    zeros = w.one("ConstantOfShape", [w.shape(node.type.shape)], value=zero)
    if node.type.rank == 0:  # the one element, added to 0 as graphc's kernel does
        return [w.one("Add", [zeros, ins[0]])]
    indices = w.cast(ins[1], node.inputs[1].type.dtype, np.int64)
    return [
        w.one("ScatterElements", [zeros, indices, ins[0]], axis=node.attrs["axis"], reduction="add")
    ]


@exporter("embedding")
def _embedding(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [w.one("Gather", [ins[1], ins[0]], axis=0)]


@exporter("argsort")
def _argsort(w: Writer, node: Node, ins: list[str]) -> list[str]:
    x, rank = ins[0], node.inputs[0].type.rank
    if rank == 0:
        return [w.const(np.zeros((), np.int64))]
    axis = node.attrs["axis"] % rank
    if node.inputs[0].type.dtype == np.bool_:
        x = w.cast(x, np.bool_, np.int32)
    size = node.inputs[0].type.shape[axis]
    k = w.shape([size]) if is_symbol(size) else w.ints([size])
    # TopK keeps equal elements in index order, largest or smallest first: a stable sort
    largest = int(bool(node.attrs["descending"]))
    _, order = w.emit("TopK", [x, k], 2, axis=axis, largest=largest, sorted=1)
    return [order]


@exporter("pad")
def _pad(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    mode = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}[a["mode"]]
    if mode == "wrap" and w.opset < 19:
        raise OnnxError(f"export_model: {node.describe()}: pad mode 'wrap' needs opset 19")
    widths = a["pad_width"]
    if node.type.rank == 0:
        return [w.one("Identity", ins)]
    pads = w.ints([b for b, _ in widths] + [after for _, after in widths])
    extra = []
    if mode == "constant":
        extra = [w.const(np.asarray(a["constant_values"], node.type.dtype))]
    return [w.one("Pad", [ins[0], pads, *extra], mode=mode)]


@exporter("unpad")
def _unpad(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """The interior of the cotangent; for reflect, edge and wrap pads, axis by axis, each
    padded position added onto the one it copies, in the kernel's order (one Add on a
    one-wide slice, so every other element is untouched: adding a zero would turn -0.0
    into +0.0)."""
    widths, mode = node.attrs["pad_width"], node.attrs["mode"]
    source = node.inputs[0].type.shape
    axes = [k for k, (b, after) in enumerate(widths) if b or after]
    if not axes:
        return [w.one("Identity", ins)]
    if any(is_symbol(source[k]) for k in axes):
        raise OnnxError(f"export_model: {node.describe()}: unpad along a symbolic dim")
    if mode == "constant":
        starts = [widths[k][0] for k in axes]
        ends = [source[k] - widths[k][1] for k in axes]
        return [w.one("Slice", [ins[0], w.ints(starts), w.ints(ends), w.ints(axes)])]
    result = ins[0]
    for k in axes:
        b, after = widths[k]
        n = source[k] - b - after

        def cut(value: str, start: int, stop: int, k: int = k) -> str:
            return w.one("Slice", [value, w.ints([start]), w.ints([stop]), w.ints([k])])

        folded = cut(result, b, b + n)
        positions = source_positions(n, b, after, mode)
        for j in itertools.chain(range(b), range(b + n, b + n + after)):
            s = int(positions[j])
            parts = [cut(folded, 0, s)] if s > 0 else []
            parts.append(w.one("Add", [cut(folded, s, s + 1), cut(result, j, j + 1)]))
            parts += [cut(folded, s + 1, n)] if s < n - 1 else []
            folded = w.one("Concat", parts, axis=k) if len(parts) > 1 else parts[0]
        result = folded
    return [result]


__all__ = ["expm1", "log1p"]
