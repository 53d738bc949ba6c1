"""ONNX handlers: MaxPool, AveragePool and the global pools.

1-D and 2-D pools are graphc's max_pool2d / avg_pool2d (1-D over a height of 1). Pools
graphc has no op for (3-D ones, and AveragePool with dilations) are separable: a max
over a box is the max along each of its axes in turn, and an average over a box is
the sum along each axis in turn divided by the number of the box's taps counted (with
count_include_pad=0 those inside the input, else inside the padded input), which is
the product of the per-axis counts; so each axis is pooled alone, as a max or a sum
of its strided taps (slices of the padded input) divided by that axis's counts,
computed when the model is read. The maxima are exact; the averages differ from a
box's one sum and one division in the last bits: the additions come in another order
and each axis divides once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.handlers_nn import as_2d, from_2d, pads_2d, to_2d_attrs, window_pads
from graphc.onnx.importer import Context, Value, handler
from graphc.ops import elementwise as E
from graphc.ops.indexing import getitem
from graphc.ops.maxpool import max_pool2d, max_pool2d_select
from graphc.ops.padding import pad
from graphc.ops.pool import avg_pool2d
from graphc.ops.reduce import max as max_
from graphc.ops.reduce import mean
from graphc.ops.selection import cast, zeros_like
from graphc.ops.sequences import arange


def _pool_window(ctx: Context, x: Value, attrs: dict, op: str) -> tuple:
    n = len(x.shape) - 2
    if n not in (1, 2, 3):
        raise ctx.error(f"{op} over {n} spatial dims is not supported (1-D, 2-D and 3-D are)")
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    pads = window_pads(ctx, attrs, x, kernel, strides, dilations, n)
    return n, kernel, strides, dilations, pads


@handler("MaxPool")  # opset 1-7: no Indices, ceil_mode or dilations (their defaults)
def _max_pool(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    want_indices = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    n, kernel, strides, dilations, pads = _pool_window(ctx, x, attrs, "MaxPool")
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if n == 3:
        if want_indices:
            raise ctx.error("MaxPool's Indices over 3 spatial dims is not supported")
        window = (kernel, strides, dilations, pads, ceil_mode)
        return [_separable(ctx, x, window, "max", count_include_pad=False)]
    x2 = as_2d(x) if n == 1 else x
    window_2d = {
        "kernel_size": tuple(to_2d_attrs(kernel, n, 1)),
        "stride": tuple(to_2d_attrs(strides, n, 1)),
        "padding": pads_2d(pads, n),
        "dilation": tuple(to_2d_attrs(dilations, n, 1)),
        "ceil_mode": ceil_mode,
    }
    y = max_pool2d(x2, **window_2d)
    outs = [from_2d(y) if n == 1 else y]
    if want_indices:
        column_major = bool(attrs.get("storage_order", 0))
        outs.append(_flat_indices(ctx, x2, y, window_2d, n, column_major))
    return outs


def _flat_indices(
    ctx: Context, x: Value, pooled: Value, window: dict, n: int, column_major: bool
) -> Value:
    """ONNX's Indices: each window's first maximum as a flat index into x (N, C, H, W),
    read at the maxima (max_pool2d_select) from a table of positions, in float64 (exact
    below 2**53 elements). With storage_order=1 the position within a plane is column
    major (h + w * H); the channel and image offsets are as in row-major order."""
    batch, channels, height, width = x.shape
    if any(is_symbol(d) for d in (channels, height, width)):
        raise ctx.error("MaxPool's Indices over symbolic channel or spatial dims")
    ctx.check_size(channels * height * width, "MaxPool's table of positions")
    plane = np.arange(height * width, dtype=np.float64).reshape(height, width)
    if column_major:
        plane = np.arange(height * width, dtype=np.float64).reshape(width, height).T
    per_channel = np.arange(channels, dtype=np.float64).reshape(channels, 1, 1) * height * width
    with ctx.recording():
        images = arange(batch, dtype="float64").reshape((batch, 1, 1, 1))
        positions = cast(zeros_like(x), "float64") + plane + per_channel
        positions = positions + images * float(channels * height * width)
        found = cast(max_pool2d_select(positions, x, pooled, **window), "int64")
    return from_2d(found) if n == 1 else found


@handler("AveragePool")  # opset 1-6: no count_include_pad (its default, 0)
def _average_pool(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    n, kernel, strides, dilations, pads = _pool_window(ctx, x, attrs, "AveragePool")
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    count_include_pad = bool(attrs.get("count_include_pad", 0))
    if n == 3 or any(d != 1 for d in dilations):
        window = (kernel, strides, dilations, pads, ceil_mode)
        return [_separable(ctx, x, window, "average", count_include_pad)]
    y = avg_pool2d(
        as_2d(x) if n == 1 else x,
        tuple(to_2d_attrs(kernel, n, 1)),
        stride=tuple(to_2d_attrs(strides, n, 1)),
        padding=pads_2d(pads, n),
        ceil_mode=ceil_mode,
        count_include_pad=count_include_pad,
    )
    return [from_2d(y) if n == 1 else y]


def _separable(ctx: Context, x: Value, window: tuple, kind: str, count_include_pad: bool) -> Value:
    """A max or average pool over every spatial axis, one axis at a time."""
    kernel, strides, dilations, pads, ceil_mode = window
    n = len(kernel)
    for k in range(n):
        size = x.shape[2 + k]
        if is_symbol(size):
            raise ctx.error(f"a {n}-D pool along the symbolic dim {size!r} is not supported")
        x = _pool_axis(
            x, 2 + k, kernel[k], strides[k], dilations[k], (pads[k], pads[n + k]),
            ceil_mode, kind, count_include_pad,
        )  # fmt: skip
    return x


def _pool_axis(
    x: Value, axis: int, kernel: int, stride: int, dilation: int, pads: tuple[int, int],
    ceil_mode: bool, kind: str, count_include_pad: bool,
) -> Value:  # fmt: skip
    """Pool x along one axis: the max, or the mean of the counted taps, of each window
    of `kernel` taps `dilation` apart, windows `stride` apart, over x padded by `pads`
    (ONNX's output size: floor, or with ceil_mode the ceiling, less a last window that
    would start in the end padding)."""
    size = x.shape[axis]
    begin, end = pads
    span = (kernel - 1) * dilation + 1
    room = size + begin + end - span
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + begin:
        out -= 1
    needed = (out - 1) * stride + span  # the padded length the windows read
    rank = len(x.shape)
    widths = [(0, 0)] * rank
    widths[axis] = (begin, max(needed - size - begin, 0))
    dtype = np.dtype(x.dtype)
    fill = -np.inf if kind == "max" else 0
    padded = pad(x, tuple(widths), "constant", constant_values=fill)
    result = None
    for j in range(kernel):
        index = [slice(None)] * rank
        index[axis] = slice(j * dilation, j * dilation + (out - 1) * stride + 1, stride)
        tap = getitem(padded, tuple(index))
        if result is None:
            result = tap
        else:
            result = E.maximum(result, tap) if kind == "max" else E.add(result, tap)
    if kind == "max":
        return result
    # each window's taps counted: inside the input, or inside the padded input
    low, high = (-begin, size + end) if count_include_pad else (0, size)
    taps = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation - begin
    counts = np.sum((taps >= low) & (taps < high), axis=1).astype(dtype)
    shape = [1] * rank
    shape[axis] = out
    return E.div(result, counts.reshape(shape))


def _global(reduce: Any) -> Any:
    def run(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        x = inputs[0]
        axes = tuple(range(2, len(x.shape)))
        return [reduce(x, axis=axes, keepdims=True)]

    return run


handler("GlobalAveragePool")(_global(mean))
handler("GlobalMaxPool")(_global(max_))


__all__: list[str] = []
