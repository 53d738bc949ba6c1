"""ONNX forms of graphc's layer ops: convolutions, pooling, layer norm.

Their attrs map one to one onto ONNX's (padding (top, left, bottom, right) is ONNX's
pads order), except avg_pool2d's divisor_override, written as a sum pool divided by
the divisor. The ops graphc's gradient rules make (pool backwards, layer_norm_grad)
are refused by name: an exported model is an inference graph.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import Node
from graphc.onnx.exporters import computed
from graphc.onnx.importer import OnnxError
from graphc.onnx.writer import Writer, exporter


def _pair(value: object) -> list[int]:
    return [int(v) for v in value] if isinstance(value, (tuple, list)) else [int(value)] * 2


def _window(node: Node) -> dict:
    a = node.attrs
    kernel = _pair(a["kernel_size"])
    stride = kernel if a["stride"] is None else _pair(a["stride"])
    return {"kernel_shape": kernel, "strides": stride, "pads": list(a["padding"])}


@exporter("conv2d")
def _conv2d(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    return [
        w.one(
            "Conv",
            computed(w, node, ins),
            strides=list(a["stride"]),
            pads=list(a["padding"]),
            dilations=list(a["dilation"]),
            group=int(a["groups"]),
        )
    ]


@exporter("conv_transpose2d")
def _conv_transpose2d(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    return [
        w.one(
            "ConvTranspose",
            computed(w, node, ins),
            strides=list(a["stride"]),
            pads=list(a["padding"]),
            output_padding=list(a["output_padding"]),
            dilations=list(a["dilation"]),
            group=int(a["groups"]),
        )
    ]


@exporter("max_pool2d")
def _max_pool2d(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, dtype = node.attrs, node.type.dtype
    if dtype == np.int64:
        raise OnnxError(
            f"export_model: {node.describe()}: ONNX's MaxPool has no int64 form, and int64 "
            "values past 2**53 would round through float64; cast to float first"
        )
    x = w.cast(ins[0], dtype, np.float64) if dtype.kind in "iub" else ins[0]  # exact for int32
    pooled = w.one(
        "MaxPool", [x], **_window(node), dilations=list(a["dilation"]),
        ceil_mode=int(bool(a["ceil_mode"])),
    )  # fmt: skip
    return [w.cast(pooled, np.float64, dtype) if dtype.kind in "iub" else pooled]


@exporter("avg_pool2d")
def _avg_pool2d(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, window = node.attrs, _window(node)
    divisor = a["divisor_override"]
    include = int(bool(a["count_include_pad"]) or divisor is not None)
    pooled = w.one(
        "AveragePool",
        computed(w, node, ins),
        **window,
        ceil_mode=int(bool(a["ceil_mode"])),
        count_include_pad=include,
    )
    if divisor is None:
        return [pooled]
    # a sum over the window (the mean over all its positions, padding included, times
    # their number), divided by the given divisor
    dtype = node.type.dtype
    size = np.asarray(np.prod(window["kernel_shape"]) / divisor, dtype)
    return [w.one("Mul", [pooled, w.const(size)])]


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


def _gradient_op(w: Writer, node: Node, ins: list[str]) -> list[str]:
    raise OnnxError(
        f"export_model: {node.describe()}: '{node.op}' is made by a gradient rule and has no "
        "ONNX form; export the forward graph"
    )


for _op in (
    "avg_pool2d_backward",
    "max_pool2d_backward",
    "max_pool2d_select",
    "layer_norm_grad",
):
    exporter(_op)(_gradient_op)

__all__: list[str] = []
