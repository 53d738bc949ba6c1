"""ONNX handlers: convolution, normalization and dropout layers (pools: handlers_pool).

1-D convolutions are read as 2-D ones over a height of 1, 3-D ones as sums of grouped
2-D ones (see _conv_3d). `auto_pad` SAME_UPPER / SAME_LOWER is turned into explicit
pads from the input's (known) spatial size. Normalizations (BatchNormalization with running
statistics, or in training mode with the batch's, InstanceNormalization) are written
with graphc's ops, so known parameters fold at import.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.importer import Context, Value, handler, known, needs_known
from graphc.ops import elementwise as E
from graphc.ops import selection
from graphc.ops.conv import conv2d, conv_transpose2d
from graphc.ops.indexing import getitem
from graphc.ops.norm import layer_norm
from graphc.ops.padding import pad
from graphc.ops.reduce import mean as reduce_mean
from graphc.ops.shape import concat, reshape, transpose

# -- convolutions -----------------------------------------------------------------------


def _spatial(ctx: Context, x: Value, op: str) -> int:
    n = len(x.shape) - 2
    if n not in (1, 2, 3):
        raise ctx.error(f"{op} over {n} spatial dims is not supported (1-D, 2-D and 3-D are)")
    if n == 3 and any(is_symbol(d) for d in x.shape[1:3]):
        raise ctx.error(f"a 3-D {op} over a symbolic channel or depth dim is not supported")
    return n


def as_2d(x: Value) -> Value:
    """(N, C, L) as (N, C, 1, L)."""
    return reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))


def from_2d(y: Value) -> Value:
    return reshape(y, (y.shape[0], y.shape[1], y.shape[3]))


def window_pads(
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


def to_2d_attrs(values: list[int], n: int, fill: int) -> list[int]:
    return values if n == 2 else [fill, *values]


def pads_2d(pads: list[int], n: int) -> tuple[int, int, int, int]:
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
    pads = window_pads(ctx, attrs, x, kernel, strides, dilations, n)
    if n == 3:
        window = (strides, dilations, pads, int(attrs.get("group", 1)))
        return [_conv_3d(x, weight, bias, window)]
    if n == 1:
        x, weight = as_2d(x), reshape(weight, (*weight.shape[:2], 1, weight.shape[2]))
    y = conv2d(
        x, weight, bias,
        stride=tuple(to_2d_attrs(strides, n, 1)),
        padding=pads_2d(pads, n),
        dilation=tuple(to_2d_attrs(dilations, n, 1)),
        groups=int(attrs.get("group", 1)),
    )  # fmt: skip
    return [from_2d(y) if n == 1 else y]


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
    if n == 3:
        window = (strides, dilations, pads, extra, int(attrs.get("group", 1)))
        return [_conv_transpose_3d(x, weight, bias, window)]
    if n == 1:
        x, weight = as_2d(x), reshape(weight, (*weight.shape[:2], 1, weight.shape[2]))
    y = conv_transpose2d(
        x, weight, bias,
        stride=tuple(to_2d_attrs(strides, n, 1)),
        padding=pads_2d(pads, n),
        output_padding=tuple(to_2d_attrs(extra, n, 0)),
        groups=int(attrs.get("group", 1)),
        dilation=tuple(to_2d_attrs(dilations, n, 1)),
    )  # fmt: skip
    return [from_2d(y) if n == 1 else y]


# A 3-D convolution is a sum over the kernel's depth taps of 2-D ones. For each tap, the
# depth slices it pairs are folded into the channels, (N, C, D, H, W) -> (N, D*C, H, W),
# and one grouped 2-D convolution (groups * D groups, the tap's weight tiled D times)
# convolves every slice over (H, W) at once; its result unfolds to (N, D, O, H', W').


def _fold_depth(x: Value) -> Value:
    """(N, C, D, H, W) as (N, D*C, H, W), depth major."""
    n, c, d, h, w = x.shape
    return reshape(transpose(x, (0, 2, 1, 3, 4)), (n, d * c, h, w))


def _unfold_depth(y: Value, depth: int) -> Value:
    """(N, D*O, H, W) as (N, D, O, H, W)."""
    n, channels, h, w = y.shape
    return reshape(y, (n, depth, channels // depth, h, w))


def _depth_tap(weight: Value, k: int, copies: int) -> Value:
    """The weight's depth tap k, (A, B, kD, kH, kW) -> (A, B, kH, kW), tiled `copies`
    times along its first axis (one copy per folded depth slice)."""
    tap = getitem(weight, (slice(None), slice(None), k))
    return concat([tap] * copies, axis=0) if copies > 1 else tap


def _with_bias(y: Value, bias: Value) -> Value:
    """y (N, O, D, H, W) plus a per-channel bias (O,), if any."""
    return y if bias is None else E.add(y, reshape(bias, (bias.shape[0], 1, 1, 1)))


def _along_depth(x: Value, index: slice) -> Value:
    return getitem(x, (slice(None), slice(None), index))


def _conv_3d(x: Value, weight: Value, bias: Value, window: tuple) -> Value:
    """Conv over (D, H, W): tap k reads input depth d * stride + k * dilation (of the
    depth-padded input) for output depth d."""
    strides, dilations, pads, groups = window
    depth, kernel = x.shape[2], weight.shape[2]
    padded = pad(x, ((0, 0), (0, 0), (pads[0], pads[3]), (0, 0), (0, 0)))
    span = (kernel - 1) * dilations[0] + 1
    out = (depth + pads[0] + pads[3] - span) // strides[0] + 1
    total = None
    for k in range(kernel):
        start = k * dilations[0]
        slices = _along_depth(padded, slice(start, start + (out - 1) * strides[0] + 1, strides[0]))
        y = conv2d(
            _fold_depth(slices), _depth_tap(weight, k, out),
            stride=tuple(strides[1:]), padding=(pads[1], pads[2], pads[4], pads[5]),
            dilation=tuple(dilations[1:]), groups=groups * out,
        )  # fmt: skip
        y = _unfold_depth(y, out)
        total = y if total is None else E.add(total, y)
    return _with_bias(transpose(total, (0, 2, 1, 3, 4)), bias)


def _conv_transpose_3d(x: Value, weight: Value, bias: Value, window: tuple) -> Value:
    """ConvTranspose over (D, H, W): tap k sends input depth d to output depth
    d * stride + k * dilation (zeros interleaved for the stride, then padded into
    place); the sum over taps is cropped by the depth pads."""
    strides, dilations, pads, extra, groups = window
    depth, kernel = x.shape[2], weight.shape[2]
    stride = strides[0]
    length = (depth - 1) * stride + (kernel - 1) * dilations[0] + 1 + extra[0]
    folded = _fold_depth(x)
    total = None
    for k in range(kernel):
        y = conv_transpose2d(
            folded, _depth_tap(weight, k, depth),
            stride=tuple(strides[1:]), padding=(pads[1], pads[2], pads[4], pads[5]),
            output_padding=tuple(extra[1:]), groups=groups * depth,
            dilation=tuple(dilations[1:]),
        )  # fmt: skip
        y = _unfold_depth(y, depth)  # (N, D, O, H', W')
        if stride > 1:  # each slice followed by stride - 1 slices of zeros
            n, d, o, h, w = y.shape
            one = reshape(y, (n, d, 1, o, h, w))
            spread = concat([one] + [selection.zeros_like(one)] * (stride - 1), axis=2)
            spread = reshape(spread, (n, d * stride, o, h, w))
            y = getitem(spread, (slice(None), slice(0, (depth - 1) * stride + 1)))
        start = k * dilations[0]
        widths = ((0, 0), (start, length - start - y.shape[1]), (0, 0), (0, 0), (0, 0))
        y = pad(y, widths)
        total = y if total is None else E.add(total, y)
    cropped = getitem(total, (slice(None), slice(pads[0], length - pads[3])))
    return _with_bias(transpose(cropped, (0, 2, 1, 3, 4)), bias)


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
    outs = [layer_norm(x, scale, bias, axis=axis, eps=eps)]
    if any(ctx.node.output[1:]):  # the statistics, as ONNX gives them (kept dims)
        axes = tuple(range(axis, len(x.shape)))
        average = reduce_mean(x, axis=axes, keepdims=True)
        centred = E.sub(x, average)
        var = reduce_mean(E.mul(centred, centred), axis=axes, keepdims=True)
        inv = E.div(np.ones((), np.dtype(x.dtype)), E.sqrt(E.add(var, np.asarray(eps, x.dtype))))
        outs += [average, inv]
    return outs


@handler("BatchNormalization", since=6)
def _batch_norm_spatial(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Opsets 6 to 8: `spatial` = 0 normalizes each feature (the statistics, scale and
    bias of shape (C, D1, ...), broadcast over the batch), 1 each channel, as later."""
    if attrs.get("spatial", 1) or any(ctx.node.output[1:]):
        return _batch_norm(ctx, inputs, attrs)
    x, scale, bias, mean, var = inputs
    eps = np.asarray(attrs.get("epsilon", 1e-5), np.dtype(x.dtype))
    factor = E.div(scale, E.sqrt(E.add(var, eps)))
    return [E.add(E.mul(E.sub(x, mean), factor), bias)]


@handler("BatchNormalization", since=9)
def _batch_norm(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, scale, bias, mean, var = inputs
    rank = len(x.shape)
    dtype = np.dtype(x.dtype)
    eps = np.asarray(attrs.get("epsilon", 1e-5), dtype)
    training = bool(attrs.get("training_mode", 0)) if ctx.opset >= 14 else any(ctx.node.output[1:])
    if training and ctx.opset < 14:  # before 14 its outputs were saved statistics
        raise ctx.error(
            "BatchNormalization in training mode is not supported before opset 14 "
            "(its mean, var, saved_mean and saved_var outputs)"
        )
    if training:
        return _batch_norm_training(x, scale, bias, mean, var, eps, attrs)
    # y = (x - mean) * (scale / sqrt(var + eps)) + bias, per channel
    factor = E.div(scale, E.sqrt(E.add(var, eps)))
    shifted = E.sub(x, _per_channel(mean, rank))
    return [E.add(E.mul(shifted, _per_channel(factor, rank)), _per_channel(bias, rank))]


def _batch_norm_training(
    x: Value, scale: Value, bias: Value, mean: Value, var: Value, eps: np.ndarray, attrs: dict
) -> list[Value]:
    """Training mode (opset 14 on): y normalized with the batch's statistics (the mean
    and population variance over every dim but the channels'), and the running
    statistics moved towards them: running = input * momentum + batch * (1 - momentum)."""
    rank = len(x.shape)
    dtype = np.dtype(x.dtype)
    axes = (0, *range(2, rank))
    batch_mean = reduce_mean(x, axis=axes)
    centred = E.sub(x, _per_channel(batch_mean, rank))
    batch_var = reduce_mean(E.mul(centred, centred), axis=axes)
    factor = E.div(scale, E.sqrt(E.add(batch_var, eps)))
    y = E.add(E.mul(centred, _per_channel(factor, rank)), _per_channel(bias, rank))
    momentum = float(attrs.get("momentum", 0.9))
    keep, take = np.asarray(momentum, dtype), np.asarray(1.0 - momentum, dtype)
    running_mean = E.add(E.mul(mean, keep), E.mul(batch_mean, take))
    running_var = E.add(E.mul(var, keep), E.mul(batch_var, take))
    return [y, running_mean, running_var]


@handler("InstanceNormalization", since=6)
def _instance_norm(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, scale, bias = inputs
    rank = len(x.shape)
    normed = layer_norm(x, None, None, axis=2, eps=attrs.get("epsilon", 1e-5))
    return [E.add(E.mul(normed, _per_channel(scale, rank)), _per_channel(bias, rank))]


@handler("Dropout", since=1)
def _dropout_old(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    if not attrs.get("is_test", 1) and ctx.opset < 7:
        raise ctx.error("Dropout in training mode is not supported (inference only)")
    return _dropout(ctx, inputs[:1], attrs)


@handler("Dropout", since=12)
def _dropout(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and not known(training):
        raise needs_known(ctx, training, "Dropout's training_mode")
    if training is not None and bool(np.asarray(training)):
        # training drops at random, except with ratio 0: then it is the identity
        ratio = inputs[1] if len(inputs) > 1 and inputs[1] is not None else np.float32(0.5)
        if not known(ratio):
            raise needs_known(ctx, ratio, "the ratio of a Dropout in training mode")
        if float(np.asarray(ratio)) != 0:
            raise ctx.error(
                "Dropout in training mode is not supported (a random mask) unless its ratio is 0"
            )
    x = inputs[0]
    outs = [x]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:  # the mask: all kept
        outs.append(selection.ge(selection.full_like(x, 0), 0))  # 0 >= 0: true everywhere
    return outs


__all__: list[str] = []
