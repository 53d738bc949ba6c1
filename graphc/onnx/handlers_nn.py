"""ONNX handlers: convolution, pooling, normalization and dropout layers.

1-D convolutions and pools are read as 2-D ones over a height of 1; 3-D ones are
refused by name. `auto_pad` SAME_UPPER / SAME_LOWER is turned into explicit pads from
the input's (known) spatial size. Normalizations in inference form (BatchNormalization
with running statistics, InstanceNormalization) are written with graphc's ops, so
known parameters fold at import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.importer import Context, Value, handler, known
from graphc.ops import elementwise as E
from graphc.ops import selection as S
from graphc.ops.shape import reshape

_gc: Any = None


def gc() -> Any:
    """graphc's public functions (imported late: graphc/__init__ imports this package)."""
    global _gc
    if _gc is None:
        import graphc

        _gc = graphc
    return _gc


# -- convolutions and pools --------------------------------------------------------------


def _spatial(ctx: Context, x: Value, op: str) -> int:
    n = len(x.shape) - 2
    if n not in (1, 2):
        raise ctx.error(f"{op} over {n} spatial dims is not supported (1-D and 2-D are)")
    return n


def _as_2d(x: Value) -> Value:
    """(N, C, L) as (N, C, 1, L)."""
    return reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))


def _from_2d(y: Value) -> Value:
    return reshape(y, (y.shape[0], y.shape[1], y.shape[3]))


def _pads(
    ctx: Context, attrs: dict, x: Value, kernel: list[int], strides: list[int],
    dilations: list[int], n: int,
) -> list[int]:  # fmt: skip
    """ONNX pads (begins, then ends) for n spatial dims, auto_pad resolved."""
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        pads = list(attrs.get("pads", [0] * 2 * n)) if auto == "NOTSET" else [0] * 2 * n
        return pads
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad '{auto}' is not supported")
    begins, ends = [], []
    for k in range(n):
        size = x.shape[2 + k]
        if is_symbol(size):
            raise ctx.error(f"auto_pad {auto} along a symbolic dim ({size}) is not supported")
        out = -(-size // strides[k])
        total = max((out - 1) * strides[k] + (kernel[k] - 1) * dilations[k] + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins + ends


def _to_2d_attrs(values: list[int], n: int, fill: int) -> list[int]:
    return values if n == 2 else [fill, *values]


def _pads_2d(pads: list[int], n: int) -> tuple[int, int, int, int]:
    if n == 2:
        return (pads[0], pads[1], pads[2], pads[3])
    return (0, pads[0], 0, pads[1])


@handler("Conv")
def _conv(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    n = _spatial(ctx, x, "Conv")
    kernel = list(weight.shape[2:])
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    pads = _pads(ctx, attrs, x, kernel, strides, dilations, n)
    if n == 1:
        x, weight = _as_2d(x), reshape(weight, (*weight.shape[:2], 1, weight.shape[2]))
    y = gc().conv2d(
        x, weight, bias,
        stride=tuple(_to_2d_attrs(strides, n, 1)),
        padding=_pads_2d(pads, n),
        dilation=tuple(_to_2d_attrs(dilations, n, 1)),
        groups=int(attrs.get("group", 1)),
    )  # fmt: skip
    return [_from_2d(y) if n == 1 else y]


@handler("ConvTranspose")
def _conv_transpose(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    n = _spatial(ctx, x, "ConvTranspose")
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    pads = list(attrs.get("pads", [0] * 2 * n))
    extra = list(attrs.get("output_padding", [0] * n))
    auto = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        pads, extra = _transpose_pads(ctx, x, weight, attrs, strides, dilations, extra, n)
    if n == 1:
        x, weight = _as_2d(x), reshape(weight, (*weight.shape[:2], 1, weight.shape[2]))
    y = gc().conv_transpose2d(
        x, weight, bias,
        stride=tuple(_to_2d_attrs(strides, n, 1)),
        padding=_pads_2d(pads, n),
        output_padding=tuple(_to_2d_attrs(extra, n, 0)),
        groups=int(attrs.get("group", 1)),
        dilation=tuple(_to_2d_attrs(dilations, n, 1)),
    )  # fmt: skip
    return [_from_2d(y) if n == 1 else y]


def _transpose_pads(
    ctx: Context, x: Value, weight: Value, attrs: dict, strides: list[int],
    dilations: list[int], extra: list[int], n: int,
) -> tuple[list[int], list[int]]:  # fmt: skip
    """ConvTranspose's pads and output padding for an output_shape (or auto_pad SAME:
    input * stride), as the ONNX spec generates them; a negative end pad (an output
    larger than the full result) is extra output padding."""
    sizes = list(x.shape[2:])
    if any(is_symbol(d) for d in sizes):
        raise ctx.error("ConvTranspose with output_shape or auto_pad over a symbolic dim")
    out = list(attrs.get("output_shape", [d * s for d, s in zip(sizes, strides)]))[-n:]
    kernel = list(weight.shape[2:])
    begins, ends, extra = [], [], list(extra)
    for k in range(n):
        total = strides[k] * (sizes[k] - 1) + extra[k] + (kernel[k] - 1) * dilations[k] + 1
        total -= out[k]
        if attrs.get("auto_pad", "NOTSET") == "SAME_UPPER":
            begin, end = total // 2, total - total // 2
        else:
            begin, end = total - total // 2, total // 2
        if begin < 0:
            raise ctx.error(f"ConvTranspose output_shape {out} needs a negative leading pad")
        begins.append(begin)
        ends.append(max(end, 0))
        extra[k] += max(-end, 0)
    return begins + ends, extra


def _pool_window(ctx: Context, x: Value, attrs: dict, op: str) -> tuple:
    n = _spatial(ctx, x, op)
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    pads = _pads(ctx, attrs, x, kernel, strides, dilations, n)
    return n, kernel, strides, dilations, pads


@handler("MaxPool", since=8)
def _max_pool(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    want_indices = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    if want_indices and attrs.get("storage_order", 0):
        raise ctx.error("MaxPool's Indices with storage_order=1 (column major) is not supported")
    n, kernel, strides, dilations, pads = _pool_window(ctx, x, attrs, "MaxPool")
    x2 = _as_2d(x) if n == 1 else x
    window = {
        "kernel_size": tuple(_to_2d_attrs(kernel, n, 1)),
        "stride": tuple(_to_2d_attrs(strides, n, 1)),
        "padding": _pads_2d(pads, n),
        "dilation": tuple(_to_2d_attrs(dilations, n, 1)),
        "ceil_mode": bool(attrs.get("ceil_mode", 0)),
    }
    y = gc().max_pool2d(x2, **window)
    outs = [_from_2d(y) if n == 1 else y]
    if want_indices:
        outs.append(_flat_indices(ctx, x2, y, window, n))
    return outs


def _flat_indices(ctx: Context, x: Value, pooled: Value, window: dict, n: int) -> Value:
    """ONNX's Indices: each window's first maximum as a flat index into x (N, C, H, W),
    read at the maxima (max_pool2d_select) from a table of positions, in float64 (exact
    below 2**53 elements)."""
    g = gc()
    batch, channels, height, width = x.shape
    if any(is_symbol(d) for d in (channels, height, width)):
        raise ctx.error("MaxPool's Indices over symbolic channel or spatial dims")
    plane = np.arange(height * width, dtype=np.float64).reshape(height, width)
    per_channel = np.arange(channels, dtype=np.float64).reshape(channels, 1, 1) * height * width
    with ctx.recording():
        images = g.arange(batch, dtype="float64").reshape((batch, 1, 1, 1))
        positions = g.cast(g.zeros_like(x), "float64") + plane + per_channel
        positions = positions + images * float(channels * height * width)
        found = g.cast(g.max_pool2d_select(positions, x, pooled, **window), "int64")
    return _from_2d(found) if n == 1 else found


@handler("AveragePool", since=7)
def _average_pool(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    n, kernel, strides, dilations, pads = _pool_window(ctx, x, attrs, "AveragePool")
    if any(d != 1 for d in dilations):
        raise ctx.error("AveragePool with dilations is not supported")
    y = gc().avg_pool2d(
        _as_2d(x) if n == 1 else x,
        tuple(_to_2d_attrs(kernel, n, 1)),
        stride=tuple(_to_2d_attrs(strides, n, 1)),
        padding=_pads_2d(pads, n),
        ceil_mode=bool(attrs.get("ceil_mode", 0)),
        count_include_pad=bool(attrs.get("count_include_pad", 0)),
    )
    return [_from_2d(y) if n == 1 else y]


def _global(reduce: str) -> Any:
    def run(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        x = inputs[0]
        axes = tuple(range(2, len(x.shape)))
        return [getattr(gc(), reduce)(x, axis=axes, keepdims=True)]

    return run


handler("GlobalAveragePool")(_global("mean"))
handler("GlobalMaxPool")(_global("max"))


# -- normalization ----------------------------------------------------------------------


def _per_channel(v: Value, rank: int) -> Value:
    """A (C,) value shaped (C, 1, ...) against (N, C, ...)."""
    return reshape(v, (v.shape[0], *[1] * (rank - 2)))


@handler("LayerNormalization", since=17)
def _layer_norm(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    axis = attrs.get("axis", -1) % len(x.shape)
    eps = attrs.get("epsilon", 1e-5)
    outs = [gc().layer_norm(x, scale, bias, axis=axis, eps=eps)]
    if any(ctx.node.output[1:]):  # the statistics, as ONNX gives them (kept dims)
        axes = tuple(range(axis, len(x.shape)))
        mean = gc().mean(x, axis=axes, keepdims=True)
        centred = E.sub(x, mean)
        var = gc().mean(E.mul(centred, centred), axis=axes, keepdims=True)
        inv = E.div(np.ones((), np.dtype(x.dtype)), E.sqrt(E.add(var, np.asarray(eps, x.dtype))))
        outs += [mean, inv]
    return outs


@handler("BatchNormalization", since=9)
def _batch_norm(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    if attrs.get("training_mode", 0) or any(ctx.node.output[1:]):
        raise ctx.error("BatchNormalization in training mode is not supported (inference only)")
    x, scale, bias, mean, var = inputs
    rank = len(x.shape)
    eps = np.asarray(attrs.get("epsilon", 1e-5), np.dtype(x.dtype))
    # y = (x - mean) * (scale / sqrt(var + eps)) + bias, per channel
    factor = E.div(scale, E.sqrt(E.add(var, eps)))
    shifted = E.sub(x, _per_channel(mean, rank))
    return [E.add(E.mul(shifted, _per_channel(factor, rank)), _per_channel(bias, rank))]


@handler("InstanceNormalization", since=6)
def _instance_norm(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, scale, bias = inputs
    rank = len(x.shape)
    normed = gc().layer_norm(x, None, None, axis=2, eps=attrs.get("epsilon", 1e-5))
    return [E.add(E.mul(normed, _per_channel(scale, rank)), _per_channel(bias, rank))]


@handler("Dropout", since=1)
def _dropout_old(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    if not attrs.get("is_test", 1) and ctx.opset < 7:
        raise ctx.error("Dropout in training mode is not supported (inference only)")
    return _dropout(ctx, inputs[:1], attrs)


@handler("Dropout", since=12)
def _dropout(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and (not known(training) or bool(np.asarray(training))):
        raise ctx.error("Dropout in training mode is not supported (inference only)")
    x = inputs[0]
    outs = [x]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:  # the mask: all kept
        outs.append(S.ge(S.full_like(x, 0), 0))  # 0 >= 0: true everywhere
    return outs


__all__: list[str] = []
