"""ONNX forms of the ops graphc's gradient rules make, so training graphs (forward +
backward from `gc.gradients`) export too.

- max_pool2d_backward: MaxPool's Indices output (flat NCHW positions of each window's
  first maximum, as graphc routes; a window holding a nan is the exception: graphc
  routes to its last nan, as torch does, onnxruntime's Indices skip nans), taken within
  each (H, W) plane, and a
  ScatterElements add into zeros along the planes; max_pool2d_select reads v at those
  positions (GatherElements).
- avg_pool2d_backward: each cotangent divided by its window's count (graphc's own
  divisor table, computed at export from the known sizes), spread over its window by a
  ConvTranspose with a kernel of ones, a group per channel.
- layer_norm_grad: rstd (g - mean(g) - xhat mean(g xhat)), written out.
- contract_rows (matmul's weight gradient): both operands flattened to rows (Flatten
  at the last axis), then MatMul of the first one transposed; over several leading
  dims one of which is symbolic (rows of B*T have no graphc shape), a MatMul batched
  over the leading dims but the last, then a ReduceSum over them.
- gemm (made by matmul's fast_math SGD fold, or called as gc.gemm): ONNX's own Gemm,
  whose attributes are graphc's (c optional, broadcast into the product; beta = 0
  leaves c unread in onnxruntime as in graphc); Gemm's alpha and beta are float32, so a
  float64 gemm whose alpha or beta float32 does not hold scales by constants instead.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.types import is_symbol
from graphc.onnx.exporters_nn import pool_window, working_dtype
from graphc.onnx.importer import OnnxError
from graphc.onnx.writer import Writer, computed, exporter
from graphc.ops.pool import window_divisor


def _window(node: Node) -> dict:
    a = node.attrs
    kernel = list(a["kernel_size"])
    stride = kernel if a["stride"] is None else list(a["stride"])
    return {"kernel_shape": kernel, "strides": stride, "pads": list(a["padding"])}


def _indices(w: Writer, node: Node, x: str, pooled: tuple) -> str:
    """The positions of each window's maximum (`pooled`: the pool's shape; a window
    graphc drops in ceil_mode as pool_window says, onnxruntime drops it too): within
    each (H, W) plane, (N, C, OH*OW), where H and W are known; flat in x otherwise.
    (Flat positions need x's size, a product of a symbolic batch and C, which a graphc
    shape cannot say: the model would not read back.)"""
    window, _ = pool_window(node, node.inputs[1].type.shape[2:], pooled[2:])
    dtype = node.inputs[1].type.dtype
    x = w.cast(x, dtype, working_dtype(w, dtype))  # (the same positions)
    _, found = w.emit("MaxPool", [x], 2, **window, dilations=list(node.attrs["dilation"]))
    n, c, h, width = node.inputs[1].type.shape
    if not _in_planes(node):
        return w.one("Reshape", [found, w.ints([-1])])
    rows = w.one("Reshape", [found, w.shape([n, c, pooled[2] * pooled[3]])])
    return w.one("Mod", [rows, w.const(np.asarray(h * width, np.int64))])  # NCHW: past n, c


def _in_planes(node: Node) -> bool:
    return not any(is_symbol(d) for d in node.inputs[1].type.shape[2:])


def _layout(w: Writer, node: Node, value: str) -> str:
    """`value` (of x's shape) as _indices' positions index it: (N, C, H*W), or flat."""
    n, c, h, width = node.inputs[1].type.shape
    shape = w.shape([n, c, h * width]) if _in_planes(node) else w.ints([-1])
    return w.one("Reshape", [value, shape])


@exporter("max_pool2d_backward")
def _max_pool2d_backward(w: Writer, node: Node, ins: list[str]) -> list[str]:
    if w.opset < 16:
        raise OnnxError(f"export_model: {node.describe()}: max_pool2d_backward needs opset 16")
    ct, x, _ = ins
    pooled = node.inputs[0].type.shape
    zeros = w.filled(w.one("Shape", [_layout(w, node, x)]), 0, node.type.dtype)
    n, c = pooled[:2]
    cts = w.one("Reshape", [ct, w.shape([n, c, pooled[2] * pooled[3]])]) if _in_planes(node) else (
        w.one("Reshape", [ct, w.ints([-1])])
    )  # fmt: skip
    routed = w.one(
        "ScatterElements",
        [zeros, _indices(w, node, x, pooled), cts],
        axis=2 if _in_planes(node) else 0,
        reduction="add",
    )
    return [w.one("Reshape", [routed, w.one("Shape", [x])])]


@exporter("max_pool2d_select")
def _max_pool2d_select(w: Writer, node: Node, ins: list[str]) -> list[str]:
    v, x, pooled = ins
    at = _indices(w, node, x, node.inputs[2].type.shape)
    if _in_planes(node):
        picked = w.one("GatherElements", [_layout(w, node, v), at], axis=2)
    else:
        picked = w.one("Gather", [_layout(w, node, v), at], axis=0)
    return [w.one("Reshape", [picked, w.one("Shape", [pooled])])]


@exporter("avg_pool2d_backward")
def _avg_pool2d_backward(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a, dtype = node.attrs, node.type.dtype
    size = tuple(a["input_size"])
    pooled = tuple(node.inputs[0].type.shape[2:])
    if any(is_symbol(d) for d in size + pooled):
        raise OnnxError(
            f"export_model: {node.describe()}: avg_pool2d_backward over symbolic spatial dims"
        )
    window = _window(node)
    divisor = np.broadcast_to(window_divisor(size, pooled, dtype, a), pooled)
    share = w.one("Div", [ins[0], w.const(np.ascontiguousarray(divisor, dtype))])
    kernel, channels = window["kernel_shape"], node.type.shape[1]
    # every (image, channel) alone, spread by a kernel of ones: a ConvTranspose with a
    # group per channel (no reshape merging the batch into the channels: a symbolic
    # batch times C has no graphc form, so the model would not read back), or with a
    # symbolic C, planes (N*C, 1, OH, OW)
    depthwise = not is_symbol(channels)
    work = working_dtype(w, dtype)
    share = w.cast(share, dtype, work)
    planes = share if depthwise else w.one("Reshape", [share, w.ints([-1, 1, *pooled])])
    ones = w.const(np.ones((channels if depthwise else 1, 1, *kernel), work))
    top, left, _, _ = window["pads"]  # the ends follow from the sizes (ceil mode may pass them)
    pads, extra = [top, left], []
    for k, (before, length) in enumerate(zip((top, left), pooled)):
        full = (length - 1) * window["strides"][k] + kernel[k]  # rows from -before
        end = full - before - size[k]  # rows past the input's end to drop (< 0: to add)
        pads.append(max(end, 0))
        extra.append(max(-end, 0))
    spread = w.one(
        "ConvTranspose", [planes, ones], strides=window["strides"], pads=pads,
        output_padding=extra, group=channels if depthwise else 1,
    )  # fmt: skip
    spread = spread if depthwise else w.one("Reshape", [spread, w.shape(node.type.shape)])
    return [w.cast(spread, work, dtype)]


@exporter("layer_norm_grad")
def _layer_norm_grad(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype, rank = node.type.dtype, node.type.rank
    x, g = (w.cast(n, v.type.dtype, dtype) for n, v in zip(ins, node.inputs))
    axes = list(range(node.attrs["axis"] % rank, rank))

    def mean(v: str) -> str:
        if w.opset >= 18:
            return w.one("ReduceMean", [v, w.ints(axes)], keepdims=1)
        return w.one("ReduceMean", [v], axes=axes, keepdims=1)

    centred = w.one("Sub", [x, mean(x)])
    var = mean(w.one("Mul", [centred, centred]))
    eps = w.const(np.asarray(node.attrs["eps"], dtype))
    rstd = w.one("Div", [w.const(np.asarray(1, dtype)), w.one("Sqrt", [w.one("Add", [var, eps])])])
    xhat = w.one("Mul", [centred, rstd])
    projected = w.one(
        "Sub", [w.one("Sub", [g, mean(g)]), w.one("Mul", [xhat, mean(w.one("Mul", [g, xhat]))])]
    )
    return [w.one("Mul", [rstd, projected])]


__all__: list[str] = []


@exporter("contract_rows")
def _contract_rows(w: Writer, node: Node, ins: list[str]) -> list[str]:
    bools = node.type.dtype == np.bool_
    x, y = (w.cast(n, np.bool_, np.int32) for n in ins) if bools else computed(w, node, ins)
    axis = node.inputs[0].type.rank - 1
    lead = node.inputs[0].type.shape[:axis]
    if len(lead) > 1 and any(is_symbol(d) for d in lead):
        # rows of a product of a symbolic dim and another have no graphc shape (the model
        # would not read back): a matmul batched over all leading dims but the last,
        # which it contracts, then a sum over the batch
        perm = [*range(axis - 1), axis, axis - 1]
        batched = w.one("MatMul", [w.one("Transpose", [x], perm=perm), y])
        product = w.one("ReduceSum", [batched, w.ints(list(range(axis - 1)))], keepdims=0)
    else:
        rows_x, rows_y = (w.one("Flatten", [v], axis=axis) for v in (x, y))
        product = w.one("MatMul", [w.one("Transpose", [rows_x], perm=[1, 0]), rows_y])
    if bools:  # any(a and b) over the rows: a count above zero
        return [w.one("Greater", [product, w.const(np.zeros((), np.int32))])]
    return [product]


@exporter("gemm")
def _gemm(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    flags = {"transA": int(a["trans_a"]), "transB": int(a["trans_b"])}
    alpha, beta = float(a["alpha"]), float(a["beta"])
    if node.type.dtype == np.float32 or all(float(np.float32(v)) == v for v in (alpha, beta)):
        return [w.one("Gemm", ins, alpha=alpha, beta=beta, **flags)]
    # ONNX's alpha and beta are float32: scale a float64 product by float64 constants
    y = w.one("Mul", [w.one("Gemm", ins[:2], **flags), w.const(np.asarray(alpha, np.float64))])
    if len(ins) == 3 and beta != 0.0:
        c = ins[2] if beta == 1.0 else w.one("Mul", [ins[2], w.const(np.asarray(beta, np.float64))])
        y = w.one("Add", [y, c])
    return [y]
