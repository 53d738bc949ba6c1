"""torch.nn.functional spellings: conv1d, conv2d, conv_transpose1d, conv_transpose2d.

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

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]


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
