"""Convolution as users call it: gc.conv2d and gc.conv_transpose2d (with a bias, and
padding as one int, a pair (h, w), four ints (top, left, bottom, right) or 'valid' /
'same'), and conv1d and conv_transpose1d, which are the 2-D ops on a unit height. The ops
themselves, with their gradients, are in conv_ops.py.
"""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import ShapeError
from graphc.ir.types import format_shape
from graphc.ops import shape as S
from graphc.ops.conv_ops import conv2d as _conv2d
from graphc.ops.conv_ops import conv_transpose2d as _conv_transpose2d
from graphc.ops.windows import pads, pair, same_padding, single

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]


def conv2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """2-D convolution (cross-correlation, as in PyTorch) of an (N, C, H, W) input with an
    (O, C/groups, kH, kW) weight, plus an optional bias of shape (O,).

    `padding` is one int, a pair (h, w), four ints (top, left, bottom, right) as in
    ONNX, or 'valid' / 'same' (stride 1; an odd total pads one more at the end).

    >>> import numpy as np, graphc as gc
    >>> x, w = np.ones((1, 1, 4, 4), np.float32), np.ones((2, 1, 3, 3), np.float32)
    >>> gc.conv2d(x, w, padding=1)[0, 0]
    array([[4., 6., 6., 4.],
           [6., 9., 9., 6.],
           [6., 9., 9., 6.],
           [4., 6., 6., 4.]], dtype=float32)
    """
    if isinstance(padding, str):
        padding = same_padding(
            padding,
            weight.shape[2:],
            pair(stride, "stride", "conv2d"),
            pair(dilation, "dilation", "conv2d"),
            "conv2d",
        )
    y = _conv2d(input, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return y if bias is None else y + S.reshape(bias, (-1, 1, 1))


def conv_transpose2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Any:
    """2-D transposed convolution (PyTorch's argument order) of an (N, C, H, W) input with
    a (C, O/groups, kH, kW) weight, plus an optional bias of shape (O,). `padding` is one
    int, a pair or four ints (top, left, bottom, right).

    >>> import numpy as np, graphc as gc
    >>> x, w = np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 2, 2), np.float32)
    >>> gc.conv_transpose2d(x, w, stride=2).shape
    (1, 1, 4, 4)
    """
    y = _conv_transpose2d(
        input,
        weight,
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
        groups=groups,
    )
    return y if bias is None else y + S.reshape(bias, (-1, 1, 1))


# -- 1-D: the 2-D ops on a unit height ---------------------------------------------------------


def _padding_1d(padding: Any, weight: Any, stride: int, dilation: int, op: str) -> tuple:
    if isinstance(padding, str):
        return same_padding(padding, (1, weight.shape[2]), (1, stride), (1, dilation), op)
    items = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,)
    if len(items) not in (1, 2):
        raise ShapeError(f"{op}: padding takes one int or two (left, right), got {padding!r}")
    left, right = (items[0], items[0]) if len(items) == 1 else items
    return pads((0, left, 0, right), op)


def _unit_height(v: Any, op: str, what: str) -> Any:
    if len(v.shape) != 3:
        raise ShapeError(f"{op}: {what} must have rank 3, got shape {format_shape(tuple(v.shape))}")
    return S.expand_dims(v, 2)


def conv1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """1-D convolution of an (N, C, L) input with an (O, C/groups, K) weight: conv2d on a
    unit height. `padding` is one int, (left, right), 'valid' or 'same'.

    >>> import numpy as np, graphc as gc
    >>> gc.conv1d(np.arange(5.0).reshape(1, 1, 5), np.ones((1, 1, 2)))
    array([[[1., 3., 5., 7.]]])
    """
    s, d = single(stride, "stride", "conv1d"), single(dilation, "dilation", "conv1d")
    padding = _padding_1d(padding, weight, s, d, "conv1d")
    x, w = (
        _unit_height(input, "conv1d", "the input (N, C, L)"),
        _unit_height(weight, "conv1d", "the weight"),
    )
    y = S.squeeze(_conv2d(x, w, stride=(1, s), padding=padding, dilation=(1, d), groups=groups), 2)
    return y if bias is None else y + S.reshape(bias, (-1, 1))


def conv_transpose1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Any:
    """1-D transposed convolution of an (N, C, L) input with a (C, O/groups, K) weight.

    >>> import numpy as np, graphc as gc
    >>> gc.conv_transpose1d(np.ones((1, 1, 3)), np.ones((1, 1, 2)))
    array([[[1., 2., 2., 1.]]])
    """
    op = "conv_transpose1d"
    s, d = single(stride, "stride", op), single(dilation, "dilation", op)
    extra = single(output_padding, "output_padding", op, 0)
    padding = _padding_1d(padding, weight, s, d, op)
    x, w = _unit_height(input, op, "the input (N, C, L)"), _unit_height(weight, op, "the weight")
    y = _conv_transpose2d(
        x,
        w,
        stride=(1, s),
        padding=padding,
        output_padding=(0, extra),
        dilation=(1, d),
        groups=groups,
    )
    y = S.squeeze(y, 2)
    return y if bias is None else y + S.reshape(bias, (-1, 1))
