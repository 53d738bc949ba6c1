"""torch.nn.functional spellings: max_pool2d, avg_pool2d, adaptive_avg_pool2d,
adaptive_max_pool2d, lp_pool2d, max_pool3d, avg_pool3d, adaptive_avg_pool3d, and the 1-D
forms (max_pool1d, avg_pool1d, adaptive_avg_pool1d,
adaptive_max_pool1d, lp_pool1d: an (N, C, L) input pooled as (N, C, 1, L)).

PyTorch's arguments and defaults (stride defaults to the kernel size), and its checks:
padding is one int or (h, w), at most half the (dilated) kernel, so every window holds
an input element. An input without its batch dim, (C, H, W), is one image.
`return_indices=True` gives PyTorch's indices into each flattened H x W plane.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc import ops
from graphc.ir.errors import GraphcError
from graphc.ir.types import is_float
from graphc.nn.functional.conv import batched
from graphc.ops.pool import _bins
from graphc.ops.windows import concrete, positive, window_out

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
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


def _bin_table(size: int, length: int) -> np.ndarray:
    """PyTorch's adaptive bins of `size` positions into `length` as a (length, widest)
    table of indices: bin i covers floor(i * size / length) up to, not including,
    ceil((i + 1) * size / length); a narrower bin repeats its last index, which leaves
    its maximum and the first place of it as they are."""
    starts = [(i * size) // length for i in range(length)]
    ends = [-(-(i + 1) * size // length) for i in range(length)]
    widest = max(end - start for start, end in zip(starts, ends))
    table = [[min(start + k, end - 1) for k in range(widest)] for start, end in zip(starts, ends)]
    return np.array(table, np.int64)


def _scan_winner(windows: Any, axis: int, inside: np.ndarray | None = None) -> Any:
    """Where PyTorch's max pooling kernels find the maximum of each window laid out along
    `axis` (its taps in row-major order), that axis kept: their scan takes a tap greater
    than the maximum so far, or nan, so the first of equal maxima wins (argmax's) and of
    nans the last. `inside` (broadcasting against windows, a bool per tap) marks the taps
    in the input: the padding (-inf) never wins, not even in a window of -inf."""
    if inside is None:
        first = ops.argmax(windows, axis=axis, keepdims=True)
    else:
        peak = ops.max(windows, axis=axis, keepdims=True)
        at_peak = ops.logical_and(ops.equal(windows, peak), inside)
        first = ops.argmax(ops.cast(at_peak, np.int8), axis=axis, keepdims=True)
    if not is_float(np.dtype(windows.dtype)):
        return first
    rank, axis = len(windows.shape), axis % len(windows.shape)
    taps = np.arange(windows.shape[axis], dtype=np.int64).reshape((-1,) + (1,) * (rank - axis - 1))
    last_nan = ops.max(ops.where(ops.isnan(windows), taps, -1), axis=axis, keepdims=True)
    return ops.where(ops.greater_equal(last_nan, 0), last_nan, first)


def _adaptive_max(x: Any, output_size: Any, return_indices: bool) -> Any:
    op = "adaptive_max_pool2d"
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(sizes) != 2:
        raise GraphcError(f"{op}: output_size takes one int or two (h, w), got {output_size!r}")
    height, width = (concrete(d, "a spatial dim", op) for d in x.shape[2:])
    if height == 0 or width == 0:
        raise GraphcError(f"{op}: expected a non-empty H and W, got input of shape {x.shape}")
    oh, ow = (
        d if s is None else positive(s, "output_size", op) for s, d in zip(sizes, (height, width))
    )
    if height % oh == 0 and width % ow == 0:  # equal bins side by side: max_pool2d's windows
        return max_pool2d(x, (height // oh, width // ow), return_indices=return_indices)
    # the bins differ in width (and may overlap by one): gather each bin's positions
    rows, cols = _bin_table(height, oh), _bin_table(width, ow)
    kh, kw = rows.shape[1], cols.shape[1]
    windows = ops.take(ops.take(x, rows, axis=2), cols, axis=4)  # (N, C, oh, kh, ow, kw)
    windows = ops.transpose(windows, (0, 1, 2, 4, 3, 5))
    windows = ops.reshape(windows, (x.shape[0], x.shape[1], oh, ow, kh * kw))
    # where torch's scan finds each maximum; the gradient flows to it alone
    first = _scan_winner(windows, -1)
    values = ops.squeeze(ops.take_along_axis(windows, first, axis=-1), -1)
    if not return_indices:
        return values
    # each window's positions in the flattened H x W plane, window after window
    plane = rows[:, None, :, None] * width + cols[None, :, None, :]  # (oh, ow, kh, kw)
    starts = np.arange(oh * ow, dtype=np.int64).reshape(oh, ow, 1) * (kh * kw)
    where = ops.take(plane.reshape(-1), ops.squeeze(first + starts, -1), axis=0)
    return values, where


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """torch.nn.functional.adaptive_max_pool2d: the maximum of each of PyTorch's adaptive
    bins of (N, C, H, W) or (C, H, W) (output_size one int, or (h, w) where None keeps
    that dim; the bins may overlap by one when the sizes do not divide); with
    `return_indices`, also where each is (an int64 index into H x W, the first maximum
    in row-major order; a bin holding nan gives nan, at its last nan, as PyTorch).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> values, where = F.adaptive_max_pool2d(
    ...     ge.tensor([[[[1.0, 5.0, 2.0, 0.0, 3.0]]]]), (1, 3), return_indices=True)
    >>> values.tolist(), where.tolist()
    ([[[[5.0, 5.0, 3.0]]]], [[[[1, 1, 4]]]])
    """
    return batched(
        input, 4, "adaptive_max_pool2d", lambda x: _adaptive_max(x, output_size, return_indices)
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


def adaptive_max_pool1d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """torch.nn.functional.adaptive_max_pool1d: (N, C, L) or (C, L) max-pooled to
    `output_size` positions with PyTorch's bins; with `return_indices`, also where along L.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.adaptive_max_pool1d(ge.tensor([[1.0, 5.0, 2.0, 0.0, 3.0]]), 2).tolist()
    [[5.0, 3.0]]
    """
    size = _single(output_size, "output_size", "adaptive_max_pool1d")
    return _as_rows(
        input,
        "adaptive_max_pool1d",
        lambda x: adaptive_max_pool2d(x, (1, size), return_indices),
    )


def _lp_root(mean: Any, count: int, norm_type: float) -> Any:
    """(count * mean) ** (1 / p) of a window mean of x ** p, as torch's: sign(mean) *
    relu(|mean|), which passes no gradient where the mean is 0."""
    total = ops.sign(mean) * ops.relu(ops.abs(mean)) * count
    return total ** (1.0 / norm_type)


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:  # fmt: skip
    """torch.nn.functional.lp_pool2d: (sum of x ** p over each window) ** (1 / p) of
    (N, C, H, W) or (C, H, W); p = inf is the max of |x|, -inf the min.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.lp_pool2d(ge.tensor([[[[3.0, 4.0]]]]), 2, (1, 2)).tolist()
    [[[[5.0]]]]
    """
    if math.isinf(norm_type):
        sign = 1.0 if norm_type > 0 else -1.0
        return sign * max_pool2d(sign * ops.abs(input), kernel_size, stride, 0, 1, ceil_mode)
    kh, kw = _pair(kernel_size)
    mean = avg_pool2d(input**norm_type, kernel_size, stride, 0, ceil_mode)
    return _lp_root(mean, kh * kw, norm_type)


def lp_pool1d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:  # fmt: skip
    """torch.nn.functional.lp_pool1d: (sum of x ** p over each window) ** (1 / p) along
    L of (N, C, L) or (C, L).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.lp_pool1d(ge.tensor([[3.0, 4.0, 0.0, 0.0]]), 1, 2).tolist()
    [[7.0, 0.0]]
    """
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    if math.isinf(norm_type):
        sign = 1.0 if norm_type > 0 else -1.0
        return sign * max_pool1d(sign * ops.abs(input), k, stride, 0, 1, ceil_mode)
    mean = avg_pool1d(input**norm_type, k, stride, 0, ceil_mode)
    return _lp_root(mean, k, norm_type)


def _triple(value: Any, name: str, op: str) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * 3
    if len(items) != 3:
        raise GraphcError(f"{op}: {name} must be one int or three, got {value!r}")
    return items


def _max_pool3d(x: Any, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                ceil_mode: bool) -> Any:  # fmt: skip
    """max_pool2d over H and W of every depth slice (the depths side by side as channels),
    then the maximum over each depth window's taps (stacked) where torch's scan finds it
    (`_scan_winner`: the first of equal ones, the last nan, never the padding), so the
    gradient reaches one element of each window, torch's."""
    op = "max_pool3d"
    n, channels = x.shape[:2]
    depth, height, width = (concrete(d, "a spatial dim", op) for d in x.shape[2:])
    flat = ops.reshape(x, (n, channels * depth, height, width))
    planes = max_pool2d(flat, kernel[1:], stride[1:], padding[1:], dilation[1:], ceil_mode)
    planes = ops.reshape(planes, (n, channels, depth, *planes.shape[2:]))
    out = window_out(
        depth, kernel[0], stride[0], padding[0], padding[0], dilation[0], op, ceil_mode
    )
    # the lowest value before the first depth and after the last, as far as the windows
    # reach
    after = max((out - 1) * stride[0] + dilation[0] * (kernel[0] - 1) + 1 - depth - padding[0], 0)
    if padding[0] or after:
        pads = ((0, 0), (0, 0), (padding[0], after), (0, 0), (0, 0))
        dtype = np.dtype(x.dtype)
        lowest = -np.inf if is_float(dtype) else np.iinfo(dtype).min
        planes = ops.pad(planes, pads, constant_values=lowest)
    taps = []
    starts = np.arange(out) * stride[0] - padding[0]
    inside = np.zeros((kernel[0], 1, 1, out, 1, 1), bool)  # the taps within the depths
    for k in range(kernel[0]):
        start = k * dilation[0]
        depths = slice(start, start + stride[0] * (out - 1) + 1, stride[0])
        taps.append(ops.slice_(planes, index=(slice(None), slice(None), depths)))
        inside[k, 0, 0, :, 0, 0] = (starts + start >= 0) & (starts + start < depth)
    if len(taps) == 1:
        return taps[0]
    stacked = ops.stack(taps, axis=0)
    winner = _scan_winner(stacked, 0, None if inside.all() else inside)
    return ops.squeeze(ops.take_along_axis(stacked, winner, axis=0), 0)


def max_pool3d(
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """torch.nn.functional.max_pool3d: the maximum of each window of (N, C, D, H, W) or
    (C, D, H, W) (stride defaults to the kernel size); return_indices is not supported.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.max_pool3d(ge.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten().tolist()
    [7.0]
    """
    op = "max_pool3d"
    if return_indices:
        raise GraphcError(f"{op}: return_indices=True is not supported")
    kernel = _triple(kernel_size, "kernel_size", op)
    strides = kernel if stride is None or stride == () else _triple(stride, "stride", op)
    pads, dilations = _triple(padding, "padding", op), _triple(dilation, "dilation", op)
    for p, k, d in zip(pads, kernel, dilations):
        _check_padding(p, k, d, op)
    return batched(
        input, 5, op, lambda x: _max_pool3d(x, kernel, strides, pads, dilations, bool(ceil_mode))
    )


def _adaptive_avg3d(x: Any, output_size: Any) -> Any:
    op = "adaptive_avg_pool3d"
    sizes = _triple(output_size, "output_size", op)
    depth, height, width = (concrete(d, "a spatial dim", op) for d in x.shape[2:])
    out_depth, out_h, out_w = (
        d if s is None else positive(s, "output_size", op)
        for s, d in zip(sizes, (depth, height, width))
    )
    n, channels = x.shape[:2]
    flat = ops.reshape(x, (n, channels * depth, height, width))
    planes = adaptive_avg_pool2d(flat, (out_h, out_w))
    planes = ops.reshape(planes, (n, channels, depth, out_h, out_w))
    if out_depth == depth:
        return planes
    # the depth bins: a (out_depth, depth) averaging matrix applied along dim 2
    bins = _bins(depth, out_depth)
    averaging = (bins / bins.sum(axis=1, keepdims=True)).astype(np.dtype(x.dtype))
    moved = ops.transpose(planes, (0, 1, 3, 4, 2))  # depth last
    return ops.transpose(ops.matmul(moved, averaging.T), (0, 1, 4, 2, 3))


def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:  # noqa: A002 - torch's name
    """torch.nn.functional.adaptive_avg_pool3d: (N, C, D, H, W) or (C, D, H, W) averaged to
    output_size (one int, or three where None keeps that dim), with PyTorch's bins.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.adaptive_avg_pool3d(ge.ones(2, 3, 5, 6, 7), (2, 1, None)).shape
    (2, 3, 2, 1, 7)
    """
    return batched(input, 5, "adaptive_avg_pool3d", lambda x: _adaptive_avg3d(x, output_size))


def _window_counts(size: int, out: int, kernel: int, stride: int, pad: int,
                   include_pad: bool) -> np.ndarray:  # fmt: skip
    """How many positions each of the `out` windows along one dim divides by, torch's
    way: the window within the padded input, or (include_pad False) within the input."""
    starts = np.arange(out) * stride - pad
    ends = np.minimum(starts + kernel, size + pad)
    if include_pad:
        return ends - starts
    return np.minimum(ends, size) - np.maximum(starts, 0)


def _avg_pool3d(x: Any, kernel: tuple, stride: tuple, padding: tuple, ceil_mode: bool,
                include_pad: bool, divisor: int | None) -> Any:  # fmt: skip
    """Window sums of every depth slice by avg_pool2d (divisor 1), then summed over each
    depth window's taps, divided by torch's count, a product of one count per dim."""
    op = "avg_pool3d"
    n, channels = x.shape[:2]
    depth, height, width = (concrete(d, "a spatial dim", op) for d in x.shape[2:])
    flat = ops.reshape(x, (n, channels * depth, height, width))
    sums = avg_pool2d(flat, kernel[1:], stride[1:], padding[1:], ceil_mode, True, 1)
    out_h, out_w = sums.shape[2:]
    sums = ops.reshape(sums, (n, channels, depth, out_h, out_w))
    out = window_out(depth, kernel[0], stride[0], padding[0], padding[0], 1, op, ceil_mode)
    after = max((out - 1) * stride[0] + kernel[0] - depth - padding[0], 0)
    if padding[0] or after:
        sums = ops.pad(sums, ((0, 0), (0, 0), (padding[0], after), (0, 0), (0, 0)))
    total = None
    for k in range(kernel[0]):
        depths = slice(k, k + stride[0] * (out - 1) + 1, stride[0])
        tap = ops.slice_(sums, index=(slice(None), slice(None), depths))
        total = tap if total is None else total + tap
    if divisor is not None:
        return total / float(divisor)
    counts = [
        _window_counts(size, length, k, s, p, include_pad)
        for size, length, k, s, p in zip(
            (depth, height, width), (out, out_h, out_w), kernel, stride, padding
        )
    ]
    volume = np.multiply.outer(np.multiply.outer(counts[0], counts[1]), counts[2])
    return total / volume.astype(np.dtype(x.dtype))


def avg_pool3d(
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    """torch.nn.functional.avg_pool3d: the mean of each window of (N, C, D, H, W) or
    (C, D, H, W), with torch's divisors (count_include_pad, ceil_mode, divisor_override).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.avg_pool3d(ge.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten().tolist()
    [3.5]
    """
    op = "avg_pool3d"
    kernel = _triple(kernel_size, "kernel_size", op)
    strides = kernel if stride is None or stride == () else _triple(stride, "stride", op)
    pads = _triple(padding, "padding", op)
    for p, k in zip(pads, kernel):
        _check_padding(p, k, 1, op)
    if divisor_override is not None and divisor_override <= 0:
        raise GraphcError(f"{op}: divisor_override must be positive, got {divisor_override}")
    return batched(
        input,
        5,
        op,
        lambda x: _avg_pool3d(
            x, kernel, strides, pads, bool(ceil_mode), count_include_pad, divisor_override
        ),
    )
