"""Window geometry shared by convolution and pooling (NCHW, two spatial axes).

Attrs are kept in one canonical form: `stride`, `dilation` and `kernel_size` as a pair
of ints (height, width); `padding` as four ints (top, left, bottom, right), ONNX's
order, so asymmetric padding is one attr; a pair (h, w) means (h, w, h, w) as in
PyTorch, one int means all four.

A *tap* is one kernel offset. `taps(small, big, stride, offset)` says which positions
`y` of the small axis (a convolution's output, a transposed convolution's input) meet
positions `y * stride + offset` of the big axis inside it, as two slices, so kernels
loop over the kernel's taps (never over the batch) and padding is never materialized.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import Dim, TensorType, format_shape

Pair = tuple[int, int]
Pads = tuple[int, int, int, int]


def _int(value: Any, what: str, op: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise GraphcError(f"{op}: {what} must be ints, got {value!r}")
    if value < minimum:
        raise GraphcError(f"{op}: {what} must be >= {minimum}, got {value!r}")
    return int(value)


def pair(value: Any, what: str, op: str, minimum: int = 1) -> Pair:
    """(h, w) from one int (alone or in a 1-tuple, as PyTorch takes it) or a pair of
    ints, each at least `minimum`."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    items = items * 2 if len(items) == 1 else items
    if len(items) != 2:
        raise GraphcError(f"{op}: {what} takes one int or two (h, w), got {value!r}")
    return _int(items[0], what, op, minimum), _int(items[1], what, op, minimum)


def pads(value: Any, op: str) -> Pads:
    """(top, left, bottom, right) from one int, a pair (h, w), or four ints."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(items) == 1:
        items = items * 4
    elif len(items) == 2:
        items = items * 2
    elif len(items) != 4:
        raise GraphcError(
            f"{op}: padding takes one int, two (h, w) or four (top, left, bottom, right), "
            f"got {value!r}"
        )
    top, left, bottom, right = (_int(p, "padding", op, 0) for p in items)
    return top, left, bottom, right


def single(value: Any, what: str, op: str, minimum: int = 1) -> int:
    """One int, also spelled as a 1-tuple (PyTorch's 1-D layers take both)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise GraphcError(f"{op}: {what} takes one int, got {value!r}")
        value = value[0]
    return _int(value, what, op, minimum)


def same_padding(mode: str, kernel: Any, stride: Pair, dilation: Pair, op: str) -> Pads:
    """The padding PyTorch's padding='valid' or 'same' means (the odd one at the end)."""
    if mode == "valid":
        return 0, 0, 0, 0
    if mode != "same":
        raise GraphcError(f"{op}: padding must be 'valid', 'same' or ints, got {mode!r}")
    if stride != (1, 1):
        raise GraphcError(f"{op}: padding='same' is not supported for strided convolutions")
    total_h, total_w = (d * (concrete(k, "the kernel", op) - 1) for k, d in zip(kernel, dilation))
    return total_h // 2, total_w // 2, total_h - total_h // 2, total_w - total_w // 2


def positive(value: Any, what: str, op: str) -> int:
    return _int(value, what, op, 1)


def expect_rank(t: TensorType, rank: int, what: str, op: str) -> None:
    if t.rank != rank:
        raise ShapeError(f"{op}: {what} must have rank {rank}, got shape {format_shape(t.shape)}")


def concrete(dim: Dim, what: str, op: str) -> int:
    if isinstance(dim, str):
        raise ShapeError(f"{op}: {what} must be a known size, got the symbolic dim {dim!r}")
    return dim


def window_out(
    size: Dim,
    kernel: Dim,
    stride: int,
    before: int,
    after: int,
    dilation: int,
    op: str,
    ceil_mode: bool = False,
) -> Dim:
    """Output length of a sliding window over `size` positions padded by before/after.

    With `ceil_mode` a last partial window counts, unless it would start in the end
    padding (PyTorch's rule). A symbolic size passes through only where the output
    has the input's length whatever it is (stride 1, padding = dilated kernel - 1).
    """
    if isinstance(kernel, str):  # a weight gradient's kernel: the output gradient's size
        if kernel == size and dilation == 1:
            return (before + after) // stride + 1
        raise ShapeError(f"{op}: a kernel of symbolic size {kernel!r} must span the input")
    span = dilation * (kernel - 1) + 1
    if isinstance(size, str):
        if stride == 1 and before + after == span - 1:
            return size
        raise ShapeError(
            f"{op}: the spatial dim {size!r} must be a known size here (its output length "
            f"depends on it); only stride 1 with padding of {span - 1} keeps it symbolic"
        )
    room = size + before + after - span + (stride - 1 if ceil_mode else 0)
    length = room // stride + 1  # floor division: a negative room gives no window
    if ceil_mode and (length - 1) * stride >= size + before:
        length -= 1
    if length < 1:
        raise ShapeError(
            f"{op}: the window ({span} positions with dilation {dilation}) is larger than "
            f"the padded input ({size} + {before} + {after})"
        )
    return length


def transposed_out(
    size: Dim, kernel: Dim, stride: int, before: int, after: int, dilation: int, extra: int, op: str
) -> Dim:
    """Output length of a transposed convolution: (size - 1) * stride + dilated kernel,
    less the padding, plus `extra` (output_padding) positions at the end."""
    if isinstance(kernel, str):  # the size of a kernel of symbolic size, spread out
        if (
            dilation == 1
            and isinstance(size, int)
            and (size - 1) * stride + extra == before + after
        ):
            return kernel
        raise ShapeError(f"{op}: a kernel of symbolic size {kernel!r} gives no known length")
    span = dilation * (kernel - 1) + 1
    if isinstance(size, str):
        if stride == 1 and span - 1 + extra == before + after:
            return size
        raise ShapeError(
            f"{op}: the spatial dim {size!r} must be a known size here (its output length "
            "depends on it)"
        )
    length = (size - 1) * stride + span - before - after + extra
    if length < 1:
        raise ShapeError(
            f"{op}: the output would have {length} positions along an axis of {size} "
            f"(padding {before} + {after} crops more than the {(size - 1) * stride + span} "
            "positions the kernel covers)"
        )
    return length


def slack(size: Dim, kernel: int, stride: int, before: int, after: int, dilation: int) -> int:
    """Positions at the end of a padded axis that no window reaches (less than stride)."""
    if isinstance(size, str):  # symbolic sizes pass only at stride 1, which reaches all
        return 0
    return (size + before + after - dilation * (kernel - 1) - 1) % stride


def taps(small: int, big: int, stride: int, offset: int) -> tuple[slice, slice] | None:
    """The positions y < small with 0 <= y * stride + offset < big, as a slice over the
    small axis and the matching strided slice over the big one (None if there are none)."""
    first = -(offset // stride) if offset < 0 else 0  # ceil(-offset / stride)
    reach = big - 1 - offset
    last = min(small, reach // stride + 1) if reach >= 0 else 0
    if last <= first:
        return None
    start = first * stride + offset
    return slice(first, last), slice(start, start + (last - first - 1) * stride + 1, stride)


@functools.lru_cache(maxsize=512)
def kernel_taps(
    small_hw: Pair, big_hw: Pair, kernel: Pair, stride: Pair, dilation: Pair, before: Pair
) -> tuple[tuple[int, int, tuple, tuple], ...]:
    """(i, j, small index, big index) for every kernel offset (i, j) that meets the input,
    in row-major order; the indexes address (..., H, W) arrays. Cached by geometry: a
    pooling or convolution kernel asks for the same taps on every call (9 us of a 2x2
    max pool's 22 on a LeNet image)."""
    found = []
    for i in range(kernel[0]):
        rows = taps(small_hw[0], big_hw[0], stride[0], i * dilation[0] - before[0])
        if rows is None:
            continue
        for j in range(kernel[1]):
            cols = taps(small_hw[1], big_hw[1], stride[1], j * dilation[1] - before[1])
            if cols is None:
                continue
            found.append((i, j, (Ellipsis, rows[0], cols[0]), (Ellipsis, rows[1], cols[1])))
    return tuple(found)


def pool_attrs(
    op: str, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: Any
) -> dict:
    """A pooling op's canonical window attrs; the stride defaults to the kernel size
    (PyTorch's None, also spelled [] or ())."""
    kernel = pair(kernel_size, "kernel_size", op)
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise GraphcError(f"{op}: ceil_mode must be a bool, got {ceil_mode!r}")
    default = stride is None or (isinstance(stride, (tuple, list)) and not stride)
    return {
        "kernel_size": kernel,
        "stride": kernel if default else pair(stride, "stride", op),
        "padding": pads(padding, op),
        "dilation": pair(dilation, "dilation", op),
        "ceil_mode": bool(ceil_mode),
    }


def pooled_hw(
    hw: tuple,
    op: str,
    kernel_size: Pair,
    stride: Pair,
    padding: Pads,
    dilation: Pair = (1, 1),
    ceil_mode: bool = False,
    **rest: Any,
) -> tuple[Dim, Dim]:
    """(Ho, Wo) of a pooling window over the last two of `hw`."""
    top, left, bottom, right = padding
    return (
        window_out(hw[-2], kernel_size[0], stride[0], top, bottom, dilation[0], op, ceil_mode),
        window_out(hw[-1], kernel_size[1], stride[1], left, right, dilation[1], op, ceil_mode),
    )
