"""ONNX forms of graphc's array ops beyond the core set: flip, tril/triu (Trilu), cumsum,
arange, take_along_axis and scatters (GatherElements, ScatterElements), topk, padding.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.types import is_bfloat16, is_symbol
from graphc.onnx.exporters import INT64_MIN
from graphc.onnx.exporters_math import _c, _x
from graphc.onnx.importer import OnnxError
from graphc.onnx.writer import Writer, exporter
from graphc.ops.padding import source_positions

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
    zeros = w.filled(w.shape(node.type.shape), 0, node.type.dtype)
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
    dtype = node.inputs[0].type.dtype
    if dtype == np.bool_:
        x = w.cast(x, np.bool_, np.int32)
    elif is_bfloat16(dtype) and w.opset < 24:  # TopK has bfloat16 from opset 24: float32
        x = w.cast(x, dtype, np.float32)  # holds each value, so the order is the same
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
