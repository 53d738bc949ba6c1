"""torch.nn.functional spellings: conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d.

PyTorch's argument names, order and defaults, and its checks: padding is one int, one
per spatial dim, or 'valid' / 'same' (convolutions only); a transposed convolution's
output_padding is smaller than its stride or dilation. An input without its batch dim
((C, H, W), or (C, L) in 1-D) is one image, as in PyTorch. The general forms (four-sided
padding) are graphc's own `gc.conv2d` and `gc.conv_transpose2d`, which these call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphc import ops
from graphc.ir.errors import GraphcError, ShapeError

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"]


def _check_padding(padding: Any, dims: int, op: str, strings: bool = True) -> None:
    """PyTorch's spellings only: a 4-tuple would mean (top, left, bottom, right) to graphc
    but is an error in PyTorch (and F.pad orders sides differently), so it is refused."""
    if isinstance(padding, str):
        if strings:
            return
        raise GraphcError(f"{op}: padding must be ints, got {padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) not in (1, dims):
        raise GraphcError(
            f"{op}: expected padding to be one int or {dims} ints (one per spatial dim), got "
            f"{padding!r}; for (top, left, bottom, right) call gc.conv2d / gc.conv_transpose2d"
        )


def _ints(value: Any, dims: int) -> tuple[int, ...]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return items * dims if len(items) == 1 else items


def _check_output_padding(
    output_padding: Any, stride: Any, dilation: Any, dims: int, op: str
) -> None:
    for extra, s, d in zip(_ints(output_padding, dims), _ints(stride, dims), _ints(dilation, dims)):
        if not extra < max(s, d):
            raise GraphcError(
                f"{op}: output padding must be smaller than either stride or dilation, got "
                f"output_padding={output_padding!r}, stride={stride!r}, dilation={dilation!r}"
            )


def batched(input: Any, rank: int, op: str, run: Callable[[Any], Any]) -> Any:
    """run(input) on a batch: an input of rank - 1 (no batch dim) runs as a batch of one
    (and so does each of several results)."""
    if len(input.shape) == rank:
        return run(input)
    if len(input.shape) == rank - 1:
        result = run(ops.expand_dims(input, 0))
        if isinstance(result, tuple):
            return tuple(ops.squeeze(r, 0) for r in result)
        return ops.squeeze(result, 0)
    raise ShapeError(
        f"{op}: expected a {rank - 1}-D (unbatched) or {rank}-D (batched) input, got shape "
        f"{tuple(input.shape)}"
    )


def conv2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """torch.nn.functional.conv2d: (N, C, H, W) or (C, H, W) with (O, C/groups, kH, kW).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.conv2d(ge.ones(1, 2, 5, 5), ge.ones(3, 2, 3, 3), padding="same").shape
    (1, 3, 5, 5)
    """
    _check_padding(padding, 2, "conv2d")
    return batched(
        input,
        4,
        "conv2d",
        lambda x: ops.conv2d(x, weight, bias, stride, padding, dilation, groups),
    )


def _conv3d(x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
            groups: int) -> Any:  # fmt: skip
    """conv3d of a batch (N, C, D, H, W) as a sum over the kernel's depth taps of conv2d's
    of depth slices: tap k reads the input depths k * dilation + i * stride of the
    output depths i, laid side by side as channel groups, (N, D_out * C, H, W), and
    convolved with the tap's weights repeated per depth (D_out * groups groups), so the
    batch dim stays apart (a symbolic batch cannot be merged with another dim)."""
    stride, dilation = _ints(stride, 3), _ints(dilation, 3)
    kernel = tuple(weight.shape[2:])
    if padding == "valid":
        pairs = [(0, 0)] * 3
    elif padding == "same":
        if stride != (1, 1, 1):
            raise GraphcError("conv3d: padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        pairs = [(t // 2, t - t // 2) for t in totals]
    else:
        pairs = [(p, p) for p in _ints(padding, 3)]
    if any(before or after for before, after in pairs):
        x = ops.pad(x, ((0, 0), (0, 0), *pairs))
    n, channels, depth = x.shape[:3]
    out_depth = (depth - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    if out_depth < 1:
        raise ShapeError(
            f"conv3d: the kernel {kernel} (dilation {dilation}) does not fit the padded input "
            f"of shape {tuple(x.shape)}"
        )
    total = None
    for k in range(kernel[0]):
        start = k * dilation[0]
        depths = slice(start, start + stride[0] * (out_depth - 1) + 1, stride[0])
        slab = ops.slice_(x, index=(slice(None), slice(None), depths))  # (N, C, D_out, H, W)
        side_by_side = ops.reshape(
            ops.transpose(slab, (0, 2, 1, 3, 4)), (n, out_depth * channels, *x.shape[3:])
        )
        taps = ops.slice_(weight, index=(slice(None), slice(None), k))  # (O, C/g, kH, kW)
        repeated = ops.concat([taps] * out_depth, axis=0)
        y = ops.conv2d(
            side_by_side, repeated, None, stride[1:], 0, dilation[1:], groups * out_depth
        )
        total = y if total is None else total + y
    out_channels = weight.shape[0]
    out = ops.reshape(total, (n, out_depth, out_channels, *total.shape[2:]))
    out = ops.transpose(out, (0, 2, 1, 3, 4))
    if bias is not None:
        out = out + ops.reshape(bias, (-1, 1, 1, 1))
    return out


def conv3d(
    input: Any,  # noqa: A002 - torch's name
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """torch.nn.functional.conv3d: (N, C, D, H, W) or (C, D, H, W) with
    (O, C/groups, kD, kH, kW), as a sum of conv2d's over the depth taps (graphc has no
    3-D convolution op).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.conv3d(ge.ones(1, 2, 4, 5, 5), ge.ones(3, 2, 3, 3, 3), padding=1).shape
    (1, 3, 4, 5, 5)
    """
    _check_padding(padding, 3, "conv3d")
    return batched(
        input,
        5,
        "conv3d",
        lambda x: _conv3d(x, weight, bias, stride, padding, dilation, groups),
    )


def conv1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """torch.nn.functional.conv1d: (N, C, L) or (C, L) with (O, C/groups, K).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.conv1d(ge.ones(2, 4, 10), ge.ones(8, 4, 3), stride=2).shape
    (2, 8, 4)
    """
    _check_padding(padding, 1, "conv1d")
    return batched(
        input,
        3,
        "conv1d",
        lambda x: ops.conv1d(x, weight, bias, stride, padding, dilation, groups),
    )


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
    """torch.nn.functional.conv_transpose2d: (N, C, H, W) or (C, H, W) with a weight of
    (C, O/groups, kH, kW); the output is (H - 1) * stride - 2 * padding +
    dilation * (kH - 1) + output_padding + 1 high.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.conv_transpose2d(ge.ones(1, 4, 5, 5), ge.ones(4, 2, 3, 3), stride=2, padding=1,
    ...                    output_padding=1).shape
    (1, 2, 10, 10)
    """
    op = "conv_transpose2d"
    _check_padding(padding, 2, op, strings=False)
    _check_output_padding(output_padding, stride, dilation, 2, op)
    return batched(
        input,
        4,
        op,
        lambda x: ops.conv_transpose2d(
            x, weight, bias, stride, padding, output_padding, groups, dilation
        ),
    )


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
    """torch.nn.functional.conv_transpose1d: (N, C, L) or (C, L) with (C, O/groups, K).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.conv_transpose1d(ge.ones(1, 4, 5), ge.ones(4, 2, 3), stride=2).shape
    (1, 2, 11)
    """
    op = "conv_transpose1d"
    _check_padding(padding, 1, op, strings=False)
    _check_output_padding(output_padding, stride, dilation, 1, op)
    return batched(
        input,
        3,
        op,
        lambda x: ops.conv_transpose1d(
            x, weight, bias, stride, padding, output_padding, groups, dilation
        ),
    )
