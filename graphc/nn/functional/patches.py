"""torch.nn.functional spellings: unfold (im2col: every sliding window's values as a
column) and fold (col2im: columns summed back into an image, unfold's adjoint).

Each of the kernel's taps is one strided slice of the zero-padded input (unfold) or one
`unslice` of a row of columns into the padded image (fold), so values are copied, not
multiplied (an inf or nan stays where it was), and gradients are the slices' own.
Columns are ordered as torch's: channel, then kernel row, then kernel column.
"""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn.functional.arrays import pad
from graphc.ops import expand_dims, reshape, slice_, squeeze, stack, unslice

__all__ = ["fold", "unfold"]


def _pair(value: Any, name: str, op: str) -> tuple[int, int]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2 or not all(isinstance(v, int) for v in items):
        raise GraphcError(f"{op}: {name} must be one int or two, got {value!r}")
    return items


def _windows(size: tuple, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple,
             op: str) -> tuple[int, int]:  # fmt: skip
    """How many windows fit along H and W (torch's count; a named error for none)."""
    counts = []
    for s, k, d, p, st in zip(size, kernel, dilation, padding, stride):
        if not isinstance(s, int):
            raise ShapeError(f"{op}: the spatial dims must be known sizes, got {size}")
        if k < 1 or d < 1 or st < 1 or p < 0:
            raise GraphcError(
                f"{op}: kernel_size, dilation and stride must be positive and padding not "
                f"negative, got {kernel}, {dilation}, {stride} and {padding}"
            )
        counts.append((s + 2 * p - d * (k - 1) - 1) // st + 1)
    if min(counts) < 1:
        raise ShapeError(
            f"{op}: the kernel {kernel} (dilation {dilation}) does not fit the padded input "
            f"{size} (padding {padding})"
        )
    return counts[0], counts[1]


def _tap(i: int, j: int, rows: int, cols: int, dilation: tuple, stride: tuple) -> tuple:
    """The window positions tap (i, j) reads, as slices of the padded H and W."""
    top, left = i * dilation[0], j * dilation[1]
    return (
        slice(None),
        slice(None),
        slice(top, top + stride[0] * (rows - 1) + 1, stride[0]),
        slice(left, left + stride[1] * (cols - 1) + 1, stride[1]),
    )


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,  # noqa: A002
           stride: Any = 1) -> Any:  # fmt: skip
    """(N, C, H, W) or (C, H, W) to (N, C kh kw, L): each of the L sliding windows'
    values as a column (torch.nn.functional.unfold).

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.unfold(ge.arange(6.0).reshape(1, 1, 2, 3), (2, 2)).tolist()
    [[[0.0, 1.0], [1.0, 2.0], [3.0, 4.0], [4.0, 5.0]]]
    """
    op = "unfold"
    unbatched = len(input.shape) == 3
    if len(input.shape) not in (3, 4):
        raise ShapeError(f"{op}: expected a 3-D or 4-D input, got shape {tuple(input.shape)}")
    x = expand_dims(input, 0) if unbatched else input
    kernel, dilation = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    padding, stride = _pair(padding, "padding", op), _pair(stride, "stride", op)
    n, c, h, w = x.shape
    rows, cols = _windows((h, w), kernel, dilation, padding, stride, op)
    if padding != (0, 0):
        x = pad(x, (padding[1], padding[1], padding[0], padding[0]))
    taps = [
        slice_(x, index=_tap(i, j, rows, cols, dilation, stride))
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]
    columns = reshape(stack(taps, axis=2), (n, c * kernel[0] * kernel[1], rows * cols))
    return squeeze(columns, 0) if unbatched else columns


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1,  # noqa: A002
         padding: Any = 0, stride: Any = 1) -> Any:  # fmt: skip
    """(N, C kh kw, L) or (C kh kw, L) columns summed into (N, C, H, W) at the windows
    unfold reads (torch.nn.functional.fold); overlapping windows add up.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.fold(ge.ones(1, 4, 2), (2, 3), (2, 2)).tolist()   # the middle column is in both
    [[[[1.0, 2.0, 1.0], [1.0, 2.0, 1.0]]]]
    """
    op = "fold"
    unbatched = len(input.shape) == 2
    if len(input.shape) not in (2, 3):
        raise ShapeError(f"{op}: expected a 2-D or 3-D input, got shape {tuple(input.shape)}")
    x = expand_dims(input, 0) if unbatched else input
    size, kernel = _pair(output_size, "output_size", op), _pair(kernel_size, "kernel_size", op)
    dilation, padding = _pair(dilation, "dilation", op), _pair(padding, "padding", op)
    stride = _pair(stride, "stride", op)
    rows, cols = _windows(size, kernel, dilation, padding, stride, op)
    n, channels, count = x.shape
    taps = kernel[0] * kernel[1]
    if not isinstance(channels, int) or channels % taps or count != rows * cols:
        raise ShapeError(
            f"{op}: expected (N, C * {taps}, {rows * cols}) columns for kernel {kernel} and "
            f"output {size}, got shape {tuple(input.shape)}"
        )
    c = channels // taps
    blocks = reshape(x, (n, c, taps, rows, cols))
    padded = (n, c, size[0] + 2 * padding[0], size[1] + 2 * padding[1])
    image = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            tap = slice_(blocks, index=(slice(None), slice(None), i * kernel[1] + j))
            placed = unslice(tap, shape=padded, index=_tap(i, j, rows, cols, dilation, stride))
            image = placed if image is None else image + placed
    if padding != (0, 0):
        image = slice_(
            image,
            index=(
                slice(None),
                slice(None),
                slice(padding[0], padding[0] + size[0]),
                slice(padding[1], padding[1] + size[1]),
            ),
        )
    return squeeze(image, 0) if unbatched else image
