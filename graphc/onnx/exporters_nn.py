"""ONNX forms of graphc's layer ops: convolutions, pooling, layer norm.

Their attrs map one to one onto ONNX's (padding (top, left, bottom, right) is ONNX's
pads order), except avg_pool2d's divisor_override, written as a sum pool divided by
the divisor. The ops graphc's gradient rules make (pool backwards, layer_norm_grad)
are written in exporters_grad.py.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.types import is_bfloat16
from graphc.onnx.importer import OnnxError
from graphc.onnx.writer import Exporter, Writer, computed, exporter
from graphc.ops.pool import window_divisor


def _pair(value: object) -> list[int]:
    return [int(v) for v in value] if isinstance(value, (tuple, list)) else [int(value)] * 2


def pool_window(node: Node, sizes: tuple, pooled: tuple) -> tuple[dict, list[int]]:
    """A pool's ONNX attributes (for input sizes `sizes` pooled to `pooled`), and the axes
    whose result must still be sliced to `pooled` (see `_without_late_windows`).

    In ceil_mode graphc and PyTorch (and ONNX from opset 22) drop a last window that
    would start in the end padding; ONNX's shape rule before opset 22 keeps it, while
    onnxruntime drops it. A pool whose declared shape is not the one computed breaks
    onnxruntime's buffer planning (a later value of the declared size reuses the smaller
    buffer: "Shape mismatch attempting to re-use buffer"), so where it can, the end pad
    is cut to end the last kept window: then every rule counts the same windows, over
    the same elements (a dropped window's pads were read by no kept one past that end)."""
    a = node.attrs
    kernel = _pair(a["kernel_size"])
    stride = kernel if a["stride"] is None else _pair(a["stride"])
    dilation, pads = _pair(a.get("dilation", 1)), list(a["padding"])
    late = []
    for k in range(2) if a["ceil_mode"] else ():
        if isinstance(sizes[k], str):  # stride 1 at a symbolic dim: no partial windows
            continue
        span = dilation[k] * (kernel[k] - 1) + 1
        room = sizes[k] + pads[k] + pads[k + 2] - span
        if -(-room // stride[k]) + 1 <= pooled[k]:
            continue
        end = (pooled[k] - 1) * stride[k] - pads[k] + span - sizes[k]
        if end >= 0:
            pads[k + 2] = end
        else:  # a stride past the kernel: the last window ends before the input does
            late.append(k)
    attrs = {"kernel_shape": kernel, "strides": stride, "pads": pads}
    return {**attrs, "ceil_mode": int(bool(a["ceil_mode"]))}, late


def _window(node: Node) -> tuple[dict, list[int]]:
    return pool_window(node, node.inputs[0].type.shape[2:], node.type.shape[2:])


def working_dtype(w: Writer, dtype: np.dtype) -> np.dtype:
    """The dtype a layer op computes in: float32 for bfloat16 before opset 22, where
    Conv, ConvTranspose and the pools lack it (graphc computes bfloat16 in float32 and
    rounds the result, so the cast back gives its answer)."""
    return np.dtype(np.float32) if is_bfloat16(dtype) and w.opset < 22 else np.dtype(dtype)


def _convolution(op_type: str, **extra: str) -> Exporter:
    def write(w: Writer, node: Node, ins: list[str]) -> list[str]:
        a, dtype = node.attrs, node.type.dtype
        work = working_dtype(w, dtype)
        operands = [w.cast(v, dtype, work) for v in computed(w, node, ins)]
        attrs = {key: list(a[name]) for key, name in extra.items()}
        y = w.one(
            op_type, operands, strides=list(a["stride"]), pads=list(a["padding"]),
            dilations=list(a["dilation"]), group=int(a["groups"]), **attrs,
        )  # fmt: skip
        return [w.cast(y, work, dtype)]

    return write


exporter("conv2d")(_convolution("Conv"))
exporter("conv_transpose2d")(_convolution("ConvTranspose", output_padding="output_padding"))


@exporter("max_pool2d")
def _max_pool2d(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, dtype = node.attrs, node.type.dtype
    if dtype in (np.int64, np.uint64):
        raise OnnxError(
            f"export_model: {node.describe()}: ONNX's MaxPool has no {dtype} form, and "
            f"{dtype} values past 2**53 would round through float64; cast to float first"
        )
    work = np.dtype(np.float64) if dtype.kind in "iub" else working_dtype(w, dtype)
    x = w.cast(ins[0], dtype, work)  # (exact for int32 in float64)

    window, late = _window(node)

    def pool(value: str) -> str:
        pooled = w.one("MaxPool", [value], **window, dilations=list(a["dilation"]))
        return _without_late_windows(w, node, pooled, late)

    pooled = pool(x)
    if dtype.kind in "iub":  # a window of padding only is the dtype's least value
        least = np.iinfo(dtype).min if dtype.kind in "iu" else 0
        return [w.cast(w.one("Max", [pooled, w.const(np.asarray(least, work))]), work, dtype)]
    # a window holding a nan pools to nan in graphc (and torch); onnxruntime's MaxPool
    # skips nans: the same pool of the nan flags says where
    flags = pool(w.cast(w.one("IsNaN", [x]), np.bool_, work))
    found = w.one("Greater", [flags, w.const(np.zeros((), work))])
    nan = w.one("Where", [found, w.const(np.asarray(np.nan, work)), pooled])
    return [w.cast(nan, work, dtype)]


@exporter("avg_pool2d")
def _avg_pool2d(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, (window, late) = node.attrs, _window(node)
    dtype = node.type.dtype
    work = working_dtype(w, dtype)
    divisor = a["divisor_override"]
    include = int(bool(a["count_include_pad"]) or divisor is not None)
    x = w.cast(computed(w, node, ins)[0], dtype, work)
    pooled = w.one("AveragePool", [x], **window, count_include_pad=include)
    pooled = _without_late_windows(w, node, pooled, late)
    if divisor is None:
        return [w.cast(pooled, work, dtype)]
    # a sum over the window (the mean over its positions in the padded input, times
    # their number: the kernel's size, less for a last partial window in ceil_mode),
    # divided by the given divisor
    hw = node.inputs[0].type.shape[2:]
    counts = np.asarray(np.prod(window["kernel_shape"]), work)
    if all(isinstance(d, int) for d in hw):  # symbolic dims only pool in full windows
        full = {**a, "divisor_override": None, "count_include_pad": True}
        counts = np.asarray(window_divisor(hw, node.type.shape[2:], work, full), work)
    scaled = w.one("Mul", [pooled, w.const(counts / np.asarray(divisor, work))])
    return [w.cast(scaled, work, dtype)]


def _without_late_windows(w: Writer, node: Node, pooled: str, late: list[int]) -> str:
    """`pooled` less the last window along the `late` axes, where graphc drops a window
    that ONNX's shape rule before opset 22 keeps (pool_window)."""
    if not late:
        return pooled
    starts, ends = w.ints([0] * len(late)), w.ints([node.type.shape[2 + k] for k in late])
    return w.one("Slice", [pooled, starts, ends, w.ints([k + 2 for k in late])])


@exporter("layer_norm")
def _layer_norm(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, dtype = node.attrs, node.type.dtype
    x, weight, bias = computed(w, node, ins)
    # ONNX's epsilon is a float32 attribute: where that would change a float64 eps, and
    # before opset 17, the decomposition
    exact_eps = dtype != np.float64 or float(np.float32(a["eps"])) == a["eps"]
    if w.opset >= 17 and exact_eps:
        return [w.one("LayerNormalization", [x, weight, bias], axis=a["axis"], epsilon=a["eps"])]
    axes = list(range(a["axis"] % node.type.rank, node.type.rank))
    centred = w.one("Sub", [x, _mean_over(w, x, axes)])
    var = _mean_over(w, w.one("Mul", [centred, centred]), axes)
    eps = w.const(np.asarray(a["eps"], dtype))
    normed = w.one("Div", [centred, w.one("Sqrt", [w.one("Add", [var, eps])])])
    return [w.one("Add", [w.one("Mul", [normed, weight]), bias])]


def _mean_over(w: Writer, x: str, axes: list[int]) -> str:
    if w.opset >= 18:  # axes became an input
        return w.one("ReduceMean", [x, w.ints(axes)], keepdims=1)
    return w.one("ReduceMean", [x], axes=axes, keepdims=1)


__all__: list[str] = []
