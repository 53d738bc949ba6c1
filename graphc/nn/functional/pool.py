"""torch.nn.functional spellings: max_pool2d, avg_pool2d, adaptive_avg_pool2d, and
their 1-D forms (max_pool1d, avg_pool1d, adaptive_avg_pool1d: an (N, C, L) input pooled
as (N, C, 1, L)).

PyTorch's arguments and defaults (stride defaults to the kernel size), and its checks:
padding is one int or (h, w), at most half the (dilated) kernel, so every window holds
an input element. An input without its batch dim, (C, H, W), is one image.
`return_indices=True` gives PyTorch's indices into each flattened H x W plane.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc import ops
from graphc.ir.errors import GraphcError
from graphc.nn.functional.conv import batched

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "max_pool1d",
    "max_pool2d",
]


def _pair(value: Any) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return items * 2 if len(items) == 1 else items


def _check_padding(padding: Any, kernel_size: Any, dilation: Any, op: str) -> None:
    if isinstance(padding, (tuple, list)) and len(padding) not in (1, 2):
        raise GraphcError(f"{op}: padding must be one int or two (h, w), got {padding!r}")
    for pad, k, d in zip(_pair(padding), _pair(kernel_size), _pair(dilation)):
        ints = all(isinstance(v, int) for v in (pad, k, d))
        if ints and pad * 2 > d * (k - 1) + 1:
            raise GraphcError(
                f"{op}: pad should be at most half of effective kernel size, but got "
                f"pad={pad}, kernel_size={k} and dilation={d}"
            )


def _indices(x: Any, pooled: Any, attrs: dict) -> Any:
    """Each window's argmax as an index into its flattened H x W plane: the plane of
    positions 0, 1, ..., H*W - 1 read at the maxima (max_pool2d_select)."""
    height, width = x.shape[2:]
    # exact in float32 below 2**24 positions; zeros_like carries x's (maybe symbolic) shape
    dtype = np.float32 if x.dtype == np.float32 and height * width < 2**24 else np.float64
    plane = np.arange(height * width, dtype=dtype).reshape(height, width)
    positions = ops.cast(ops.zeros_like(x), dtype) + plane
    return ops.cast(ops.max_pool2d_select(positions, x, pooled, **attrs), "int64")


def max_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """torch.nn.functional.max_pool2d: the maximum of each window of (N, C, H, W) or
    (C, H, W); with `return_indices`, also where it is (an int64 index into H x W).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> values, where = F.max_pool2d(ge.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
    >>> values.tolist(), where.tolist()
    ([[[[5.0, 7.0], [13.0, 15.0]]]], [[[[5, 7], [13, 15]]]])
    """
    _check_padding(padding, kernel_size, dilation, "max_pool2d")
    attrs = {
        "kernel_size": kernel_size,
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "ceil_mode": bool(ceil_mode),
    }

    def pool(x: Any) -> Any:
        pooled = ops.max_pool2d(x, **attrs)
        return (pooled, _indices(x, pooled, attrs)) if return_indices else pooled

    return batched(input, 4, "max_pool2d", pool)


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    """torch.nn.functional.avg_pool2d: the mean of each window of (N, C, H, W) or (C, H, W).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.avg_pool2d(ge.ones(1, 1, 4, 4), 3, stride=1, padding=1,
    ...              count_include_pad=False).tolist()[0][0][0]
    [1.0, 1.0, 1.0, 1.0]
    """
    _check_padding(padding, kernel_size, 1, "avg_pool2d")
    return batched(
        input,
        4,
        "avg_pool2d",
        lambda x: ops.avg_pool2d(
            x, kernel_size, stride, padding, bool(ceil_mode), count_include_pad, divisor_override
        ),
    )


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """torch.nn.functional.adaptive_avg_pool2d: (N, C, H, W) or (C, H, W) averaged to
    output_size (one int, or (h, w) where None keeps that dim), with PyTorch's bins.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.adaptive_avg_pool2d(ge.ones(2, 3, 7, 7), (2, None)).shape
    (2, 3, 2, 7)
    """
    return batched(
        input,
        4,
        "adaptive_avg_pool2d",
        lambda x: ops.adaptive_avg_pool2d(x, output_size),
    )


def _single(value: Any, name: str, op: str) -> Any:
    """One int of a 1-D pool's setting (given as an int or a 1-tuple)."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(items) != 1:
        raise GraphcError(f"{op}: {name} must be one int, got {value!r}")
    return items[0]


def _as_rows(input: Any, op: str, pool: Any) -> Any:
    """pool(x) of an (N, C, L) or (C, L) input as (N, C, 1, L): a 1-D pool is the 2-D
    pool of one row (its results, indices too, get their row axis back off)."""
    if len(input.shape) not in (2, 3):
        raise GraphcError(
            f"{op}: expected a 2-D (unbatched) or 3-D (batched) input, got shape "
            f"{tuple(input.shape)}"
        )
    result = pool(ops.expand_dims(input, -2))
    if isinstance(result, tuple):
        return tuple(ops.squeeze(r, -2) for r in result)
    return ops.squeeze(result, -2)


def max_pool1d(
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """torch.nn.functional.max_pool1d: the maximum of each window of (N, C, L) or (C, L);
    with `return_indices`, also where it is along L.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.max_pool1d(ge.tensor([[3.0, 1.0, 4.0, 1.0, 5.0]]), 2, return_indices=True)[1].tolist()
    [[0, 2]]
    """
    op = "max_pool1d"
    k, d = _single(kernel_size, "kernel_size", op), _single(dilation, "dilation", op)
    p = _single(padding, "padding", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    _check_padding(p, k, d, op)
    return _as_rows(
        input,
        op,
        lambda x: max_pool2d(x, (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices),
    )


def avg_pool1d(
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Any:
    """torch.nn.functional.avg_pool1d: the mean of each window of (N, C, L) or (C, L).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.avg_pool1d(ge.tensor([[1.0, 3.0, 5.0, 7.0]]), 2).tolist()
    [[2.0, 6.0]]
    """
    op = "avg_pool1d"
    k, p = _single(kernel_size, "kernel_size", op), _single(padding, "padding", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    _check_padding(p, k, 1, op)
    return _as_rows(
        input, op, lambda x: avg_pool2d(x, (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    )


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:  # noqa: A002 - torch's name
    """torch.nn.functional.adaptive_avg_pool1d: (N, C, L) or (C, L) averaged to
    `output_size` positions, with PyTorch's bins.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.adaptive_avg_pool1d(ge.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]]), 2).tolist()
    [[2.0, 4.0]]
    """
    size = _single(output_size, "output_size", "adaptive_avg_pool1d")
    return _as_rows(input, "adaptive_avg_pool1d", lambda x: adaptive_avg_pool2d(x, (1, size)))
