"""The convolution ops: conv2d and conv_transpose2d (NCHW input, OIHW weight; stride,
padding (top, left, bottom, right), dilation, groups), with their type rules and gradient
rules; the kernels are in conv_kernels.py, the functions users call in conv.py.

Bias is not an input of the ops: the builders add it (`y + bias[:, None, None]`), so its
gradient is the ordinary `sum_to` of an add and a pass can fuse it into an epilogue.

Gradients. The input gradient of a convolution is a transposed convolution with the same
weight, and that of a transposed convolution is a convolution; each weight gradient is a
convolution of the (padded) input with the output gradient, whose stride and dilation
trade places (`_weight_grad`). The rules use these two ops only, so they differentiate
again (second derivatives, `create_graph`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.types import Dim, TensorType, as_dtype, format_shape, is_float
from graphc.ops import indexing as I
from graphc.ops import selection
from graphc.ops import shape as S
from graphc.ops.conv_kernels import (
    conv2d_kernel,
    conv2d_scratch,
    conv_transpose2d_kernel,
    conv_transpose2d_scratch,
)
from graphc.ops.defop import defop
from graphc.ops.windows import (
    expect_rank,
    pads,
    pair,
    positive,
    slack,
    transposed_out,
    window_out,
)

__all__: list[str] = []  # users call the builders of conv.py


def _float_dtype(op: str, x: TensorType, w: TensorType) -> np.dtype:
    dtype = as_dtype(np.result_type(x.dtype, w.dtype))
    if not is_float(dtype):
        raise DTypeError(f"{op}: needs a floating input or weight, got {x.dtype} and {w.dtype}")
    return dtype


def _shapes(op: str, x: TensorType, w: TensorType, layout: str) -> tuple:
    """The weight's dims, once the ranks and the kernel size are checked."""
    expect_rank(x, 4, "the input (N, C, H, W)", op)
    expect_rank(w, 4, f"the weight {layout}", op)
    if any(isinstance(k, int) and k < 1 for k in w.shape[2:]):
        raise ShapeError(f"{op}: the kernel must be at least 1x1, got {format_shape(w.shape)}")
    return w.shape


def _times(channels: Dim, groups: int) -> Dim | None:
    """channels * groups, or None where no dim is that (a symbolic count, as the batch
    in a weight gradient, times several groups)."""
    if isinstance(channels, int):
        return channels * groups
    return channels if groups == 1 else None


def _divides(groups: int, channels: Dim) -> bool:
    return groups == 1 or (isinstance(channels, int) and channels % groups == 0)


def _flops(size: int | None, per_element: tuple) -> int:
    known = all(isinstance(d, int) for d in per_element)
    return 2 * (size or 0) * math.prod(per_element) if known else 0  # type: ignore[arg-type]


def _like(grad: Any, x: Any) -> Any:
    """A gradient in its input's dtype (the op computed in the promoted one)."""
    return grad if grad.dtype == x.dtype else selection.cast(grad, x.dtype)


def _no_positions(x: Any, w: Any, needs: tuple) -> tuple | None:
    """The gradients where x has an empty height or width: none reach x (it has no
    elements) or the weight (every window met padding alone). None otherwise. The
    general rules would build a convolution whose window cannot fit (conv2d allows such
    an x with padding; PyTorch refuses it)."""
    if 0 not in tuple(x.shape[2:]):
        return None
    return (
        selection.full_like(x, 0) if needs[0] else None,
        selection.full_like(w, 0) if needs[1] else None,
    )


def _crop(v: Any, padding: tuple) -> tuple[Any, tuple]:
    """v without the rows and columns a negative padding removes, and the padding left."""
    if min(padding) >= 0:
        return v, padding
    top, left, bottom, right = padding
    rows = slice(-top if top < 0 else None, bottom if bottom < 0 else None)
    cols = slice(-left if left < 0 else None, right if right < 0 else None)
    v = I.getitem(v, (slice(None), slice(None), rows, cols))
    return v, tuple(max(p, 0) for p in padding)


def _weight_grad(
    a: Any, b: Any, groups: int, stride: tuple, padding: tuple, dilation: tuple
) -> Any:
    """sum over n, y, x of b[n, g*B + o, y, x] * a_padded[n, g*A + c, i*stride + y*dilation, ...]
    as a (g*B, A, kH, kW) array: a convolution over the batch (N becomes the channels)."""
    a, padding = _crop(a, padding)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation}
    kernels = S.transpose(b, (1, 0, 2, 3))  # (g*B, N, Hb, Wb): per group, N in-channels
    batch = a.shape[0]
    if groups == 1:
        result = conv2d(S.transpose(a, (1, 0, 2, 3)), kernels, groups=1, **attrs)
    elif isinstance(batch, int):  # (N, g, A, H, W) -> (A, g*N, H, W): channel g*N + n
        n, channels, height, width = a.shape
        per = channels // groups
        grouped = S.transpose(S.reshape(a, (n, groups, per, height, width)), (2, 1, 0, 3, 4))
        result = conv2d(
            S.reshape(grouped, (per, groups * n, height, width)), kernels, groups=groups, **attrs
        )
    else:  # a symbolic batch cannot merge with the groups: one convolution per group
        per_a, per_b = a.shape[1] // groups, b.shape[1] // groups
        parts = []
        for g in range(groups):
            part_a = I.getitem(a, (slice(None), slice(g * per_a, (g + 1) * per_a)))
            part_b = I.getitem(b, (slice(None), slice(g * per_b, (g + 1) * per_b)))
            parts.append(
                conv2d(
                    S.transpose(part_a, (1, 0, 2, 3)), S.transpose(part_b, (1, 0, 2, 3)), **attrs
                )
            )
        result = S.concat(parts, axis=1)
    return S.transpose(result, (1, 0, 2, 3))


# -- conv2d ------------------------------------------------------------------------------


def _conv2d_canon(
    x: TensorType, w: TensorType, stride: Any, padding: Any, dilation: Any, groups: Any
) -> dict:
    return {
        "stride": pair(stride, "stride", "conv2d"),
        "padding": pads(padding, "conv2d"),
        "dilation": pair(dilation, "dilation", "conv2d"),
        "groups": positive(groups, "groups", "conv2d"),
    }


def _conv2d_infer(
    x: TensorType, w: TensorType, stride: tuple, padding: tuple, dilation: tuple, groups: int
) -> TensorType:
    dtype = _float_dtype("conv2d", x, w)
    out_ch, per_group, kh, kw = _shapes("conv2d", x, w, "(O, C/groups, kH, kW)")
    channels = _times(per_group, groups)
    if channels is None or x.shape[1] != channels or not _divides(groups, out_ch):
        raise ShapeError(
            f"conv2d: with groups={groups} a weight of shape {format_shape(w.shape)} takes "
            f"{per_group!r} * {groups} input channels (and needs out channels divisible by "
            f"groups), but the input {format_shape(x.shape)} has {x.shape[1]!r}"
        )
    top, left, bottom, right = padding
    height = window_out(x.shape[2], kh, stride[0], top, bottom, dilation[0], "conv2d")
    width = window_out(x.shape[3], kw, stride[1], left, right, dilation[1], "conv2d")
    return TensorType((x.shape[0], out_ch, height, width), dtype)


def _conv2d_vjp(
    ct: Any,
    out: Any,
    x: Any,
    w: Any,
    needs: tuple,
    stride: tuple,
    padding: tuple,
    dilation: tuple,
    groups: int,
) -> tuple:
    empty = _no_positions(x, w, needs)
    if empty is not None:
        return empty
    kh, kw = w.shape[2], w.shape[3]
    top, left, bottom, right = padding
    # the last rows and columns no window reached get no gradient: output_padding in the
    # input gradient, less padding (or a crop) in the weight gradient
    rh = slack(x.shape[2], kh, stride[0], top, bottom, dilation[0])
    rw = slack(x.shape[3], kw, stride[1], left, right, dilation[1])
    gx = gw = None
    if needs[0]:
        gx = conv_transpose2d(
            ct,
            w,
            stride=stride,
            padding=padding,
            output_padding=(rh, rw),
            dilation=dilation,
            groups=groups,
        )
        gx = _like(gx, x)
    if needs[1]:
        gw = _weight_grad(x, ct, groups, dilation, (top, left, bottom - rh, right - rw), stride)
        gw = _like(gw, w)
    return gx, gw


def _conv2d_cost(out: TensorType, x: TensorType, w: TensorType, **attrs: Any) -> int:
    return _flops(out.size, w.shape[1:])


def _conv2d_scratch(
    out: TensorType,
    x: TensorType,
    w: TensorType,
    stride: tuple,
    padding: tuple,
    groups: int,
    **attrs: Any,
) -> int:
    if not all(isinstance(d, int) for d in (*x.shape, *w.shape, *out.shape)):
        return 0  # planned types are concrete; a symbolic one has no byte count yet
    conv = (x.shape, w.shape, out.shape, x.dtype, w.dtype, stride, padding, groups)
    return conv2d_scratch(*conv)


conv2d = defop(
    "conv2d",
    inputs=("x", "weight"),
    infer=_conv2d_infer,
    kernel=conv2d_kernel,
    attrs={"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1},
    canonicalize=_conv2d_canon,
    vjp=_conv2d_vjp,
    cost=_conv2d_cost,
    scratch=_conv2d_scratch,
    doc="2-D cross-correlation of (N, C, H, W) with (O, C/groups, kH, kW); padding is "
    "(top, left, bottom, right). Users call gc.conv2d, which also adds a bias.",
)


# -- conv_transpose2d --------------------------------------------------------------------


def _conv_transpose2d_canon(
    x: TensorType,
    w: TensorType,
    stride: Any,
    padding: Any,
    output_padding: Any,
    dilation: Any,
    groups: Any,
) -> dict:
    op = "conv_transpose2d"
    return {
        "stride": pair(stride, "stride", op),
        "padding": pads(padding, op),
        "output_padding": pair(output_padding, "output_padding", op, 0),
        "dilation": pair(dilation, "dilation", op),
        "groups": positive(groups, "groups", op),
    }


def _conv_transpose2d_infer(
    x: TensorType,
    w: TensorType,
    stride: tuple,
    padding: tuple,
    output_padding: tuple,
    dilation: tuple,
    groups: int,
) -> TensorType:
    op = "conv_transpose2d"
    dtype = _float_dtype(op, x, w)
    in_ch, per_group, kh, kw = _shapes(op, x, w, "(C, O/groups, kH, kW)")
    out_ch = _times(per_group, groups)
    if x.shape[1] != in_ch or not _divides(groups, in_ch) or out_ch is None:
        raise ShapeError(
            f"{op}: a weight of shape {format_shape(w.shape)} takes {in_ch!r} input channels "
            f"(divisible by groups={groups}), but the input {format_shape(x.shape)} has "
            f"{x.shape[1]!r}"
        )
    top, left, bottom, right = padding
    height = transposed_out(
        x.shape[2], kh, stride[0], top, bottom, dilation[0], output_padding[0], op
    )
    width = transposed_out(
        x.shape[3], kw, stride[1], left, right, dilation[1], output_padding[1], op
    )
    return TensorType((x.shape[0], out_ch, height, width), dtype)


def _conv_transpose2d_vjp(
    ct: Any,
    out: Any,
    x: Any,
    w: Any,
    needs: tuple,
    stride: tuple,
    padding: tuple,
    output_padding: tuple,
    dilation: tuple,
    groups: int,
) -> tuple:
    empty = _no_positions(x, w, needs)
    if empty is not None:
        return empty
    top, left, bottom, right = padding
    # the output_padding rows lie past what the kernel covers: their gradient is dropped
    around = (top, left, bottom - output_padding[0], right - output_padding[1])
    gx = gw = None
    if needs[0]:
        cropped, rest = _crop(ct, around)
        gx = _like(
            conv2d(cropped, w, stride=stride, padding=rest, dilation=dilation, groups=groups), x
        )
    if needs[1]:
        gw = _like(_weight_grad(ct, x, groups, dilation, around, stride), w)
    return gx, gw


def _conv_transpose2d_cost(out: TensorType, x: TensorType, w: TensorType, **attrs: Any) -> int:
    return _flops(x.size, w.shape[1:])


def _conv_transpose2d_scratch(
    out: TensorType, x: TensorType, w: TensorType, groups: int, **attrs: Any
) -> int:
    if not all(isinstance(d, int) for d in (*x.shape, *w.shape, *out.shape)):
        return 0
    return conv_transpose2d_scratch(x.shape, w.shape, out.shape, x.dtype, w.dtype, groups)


conv_transpose2d = defop(
    "conv_transpose2d",
    inputs=("x", "weight"),
    infer=_conv_transpose2d_infer,
    kernel=conv_transpose2d_kernel,
    attrs={
        "stride": (1, 1),
        "padding": (0, 0, 0, 0),
        "output_padding": (0, 0),
        "dilation": (1, 1),
        "groups": 1,
    },
    canonicalize=_conv_transpose2d_canon,
    vjp=_conv_transpose2d_vjp,
    cost=_conv_transpose2d_cost,
    scratch=_conv_transpose2d_scratch,
    doc="2-D transposed convolution (the adjoint of conv2d) of (N, C, H, W) with "
    "(C, O/groups, kH, kW); padding (top, left, bottom, right) crops the result, "
    "output_padding adds rows and columns at the end. Users call gc.conv_transpose2d.",
)
