"""numpy kernels of conv2d and conv_transpose2d (the op blocks are in conv_ops.py).

conv2d is im2col plus matmul: the input's windows are copied into a buffer with one
`copyto` and multiplied by the (group, O/groups, C/groups*kH*kW) weight matrix with one
matmul call. Images go a few at a time so the buffer stays small (`SCRATCH_BYTES`):
measured, that beats one buffer for the whole batch (fewer page faults, warm caches).
Three layouts of the buffer, by the convolution's shape:

- stride 1 (`_wide`, most convolutions): each chunk of images is padded into a small
  buffer with one spare row, and the output is computed over the padded width Wp
  instead of Wo. Then a kernel tap's windows over a channel are one contiguous run of
  Ho*Wp elements of the padded image, so the buffer (image, C, kH, kW, Ho*Wp) is
  filled by long copies instead of runs of Wo (measured on (32, 64, 28, 28) with a
  3x3 kernel: 1.0 ms against 2.8 ms), and the products run from a warm buffer.
  The products at the Wp - Wo extra columns read past the row's end (into the next row
  or the spare one) and are dropped when the chunk is copied into the output.
- other strides, (image, C, kH, kW, Ho, Wo) (`_windows_last`): per image and group one
  matmul writes the output.
- a weight gradient (a large kernel, the output gradient, over a few output positions,
  the weight's taps), (image, Ho, Wo, C, kH, kW) (`_taps_last`): one matmul takes
  every window of a chunk at once (one BLAS call per group), then a transposed copy
  into the output.

conv_transpose2d is the adjoint: one batched matmul by the transposed weight gives every
kernel tap's contribution (col2im), and each tap is added into its strided window of the
output in turn.

Depthwise convolutions (one input and one output channel per group) skip the matmul,
whose matrices would be 1 x kH*kW: the output accumulates one multiply-add per kernel
tap over the whole batch.

An `epilogue` (conv2d_epilogue's bias and activation, conv2d_fused's elementwise body)
runs in place on each chunk of images as soon as the chunk is final, while it is still
in cache; elementwise work on a chunk gives the same bits as on the whole array.

`conv2d_scratch` and `conv_transpose2d_scratch` say how many bytes of working memory
(buffers, padded and converted copies) a call allocates besides its result, mirroring
the allocations below, so the planner can count them; change both together.

float16 and bfloat16 convolutions compute in float32 (`_in_float32`), rounded once: a loop
of taps in float16 would round at every tap (numpy's float16 matmul sums in float32 too,
as PyTorch's and onnxruntime's float16 convolutions do); the epilogue then runs on the
float16 (bfloat16) result, as the ops it fuses would.

Every loop runs over kernel taps or batch chunks whose sizes depend only on shapes, and
every output element sums its terms in one fixed order, so results are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from graphc.ir.types import is_half
from graphc.ops.windows import kernel_taps, transposed_out, window_out

SCRATCH_BYTES = 1 << 22  # the im2col buffer of one batch chunk (at least one image)
# `_taps_last` (a weight gradient) contracts at most this many terms per matmul and adds
# the pieces: OpenBLAS took 750 us for the product of LeNet's first weight gradient,
# (6, 50176) by (50176, 25), in one call, and 130-160 us in pieces of 784 to 6272 (the
# whole gradient: 1.08 ms -> 0.47 ms; pieces of 7168 or 12544 were slow again). The
# second one, (16, 6400) by (6400, 150), takes the same time whole or in two pieces
DEPTH_PIECE = 4096
# `_wide`'s buffers of one chunk get twice the budget: 2 images of (64, 28, 28) with a
# 3x3 kernel, measured 0.5 ms faster a convolution of 32 than one at a time
WIDE = 2

# runs in place on a final (images, O, Ho, Wo) chunk, given which images it holds
Epilogue = Callable[[np.ndarray, slice], None]
# the rule kind of a node fusing work after a convolution: (*its other inputs, **attrs)
# -> the Epilogue doing that work
CHUNK_EPILOGUE = "chunk_epilogue"


def contiguous_result(out: np.ndarray | None, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array to compute into: `out` itself when it is one."""
    if out is not None and out.flags.c_contiguous and out.dtype == dtype:
        return out
    return np.empty(shape, dtype)


def deliver(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """`result` in `out` (copied there unless it is `out`), or `result` itself."""
    if out is None or out is result:
        return result
    np.copyto(out, result, casting="unsafe")
    return out


def _chunk(batch: int, bytes_per_image: int, budget: int = 0) -> int:
    return max(1, min(batch, (budget or SCRATCH_BYTES) // max(1, bytes_per_image)))


def conv2d_scratch(
    x: tuple,
    w: tuple,
    out: tuple,
    x_dtype: np.dtype,
    w_dtype: np.dtype,
    stride: tuple,
    padding: tuple,
    groups: int,
    epilogue_copies: int = 0,
) -> int:
    """The bytes `conv2d_kernel` allocates besides an `out=` of the result's dtype, for
    input, weight and output shapes `x`, `w`, `out`. The weight counts once more, as
    the matmul's reshape copies it when it is a transposed view (a weight gradient's
    output gradient); `epilogue_copies` is how many temporaries of one chunk of output
    the epilogue makes (an activation's)."""
    dtype = np.result_type(x_dtype, w_dtype)
    if is_half(dtype):  # _in_float32: wide copies of both operands and the result
        wide = np.dtype(np.float32)
        inner = conv2d_scratch(x, w, out, wide, wide, stride, padding, groups)
        copies = math.prod(x) + math.prod(w) + math.prod(out)
        return inner + copies * wide.itemsize + epilogue_copies * math.prod(out) * dtype.itemsize
    item = dtype.itemsize
    n, channels, height, width = x
    out_ch, per_group, kh, kw = w
    ho, wo = out[2:]
    total = (x_dtype != dtype) * math.prod(x) * item + (w_dtype != dtype) * math.prod(w) * item
    if math.prod(out) == 0:
        return total
    if per_group == 1 and out_ch == groups:  # _depthwise
        return total + (1 + epilogue_copies) * math.prod(out) * item
    total += math.prod(w) * item
    if _is_wide(stride, (kh, kw), (ho, wo)):
        padded, cols, products = _wide_sizes(x, w, out, padding)
        chunk = _chunk(n, (padded + cols + products) * item, WIDE * SCRATCH_BYTES)
        return (
            total + chunk * (padded + cols + products + epilogue_copies * out_ch * ho * wo) * item
        )
    top, left, bottom, right = padding
    if any(padding):
        total += n * channels * (height + top + bottom) * (width + left + right) * item
    per_image = channels * kh * kw * ho * wo * item
    if kh * kw <= ho * wo:  # _windows_last
        chunk = _chunk(n, per_image)
        total += chunk * per_image
    else:  # _taps_last: the buffer and the products (twice when the sum is in pieces)
        chunk = _chunk(n, per_image, 4 * SCRATCH_BYTES)
        pieced = per_group * kh * kw > DEPTH_PIECE
        total += chunk * per_image + (1 + pieced) * chunk * out_ch * ho * wo * item
    return total + epilogue_copies * chunk * out_ch * ho * wo * item


def _is_wide(stride: tuple, kernel: tuple, out: tuple) -> bool:
    """Whether `_wide` computes this convolution: stride 1, and not a weight gradient's
    shape (a kernel larger than the output), which `_taps_last` does faster."""
    return tuple(stride) == (1, 1) and math.prod(kernel) <= math.prod(out)


def _wide_sizes(x: tuple, w: tuple, out: tuple, padding: tuple) -> tuple[int, int, int]:
    """Elements per image of `_wide`'s padded copy, window buffer and products."""
    _, channels, height, width = x
    out_ch, _, kh, kw = w
    top, left, bottom, right = padding
    padded_width = width + left + right
    length = out[2] * padded_width
    padded = channels * (height + top + bottom + 1) * padded_width  # one spare row
    return padded, channels * kh * kw * length, out_ch * length


def conv2d_kernel(
    x: np.ndarray,
    w: np.ndarray,
    out: np.ndarray | None = None,
    stride: tuple = (1, 1),
    padding: tuple = (0, 0, 0, 0),
    dilation: tuple = (1, 1),
    groups: int = 1,
    epilogue: Epilogue | None = None,
) -> np.ndarray:
    """conv2d into `out`; `epilogue` runs on each chunk of images as it is final (a
    fused node's elementwise work, while the chunk is in cache)."""
    dtype = np.result_type(x.dtype, w.dtype)
    if is_half(dtype):
        conv = partial(conv2d_kernel, stride=stride, padding=padding, dilation=dilation)
        result = _in_float32(partial(conv, groups=groups), x, w, out)
        if epilogue is not None and result.size:
            epilogue(result, slice(None))
        return result
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    n, _, height, width = x.shape
    out_ch, per_group, kh, kw = w.shape
    top, left, bottom, right = padding
    ho = window_out(height, kh, stride[0], top, bottom, dilation[0], "conv2d")
    wo = window_out(width, kw, stride[1], left, right, dilation[1], "conv2d")
    result = contiguous_result(out, (n, out_ch, ho, wo), dtype)
    if result.size and per_group == 1 and out_ch == groups:
        _depthwise(x, w, result, stride, padding, dilation)
        if epilogue is not None:
            epilogue(result, slice(None))
    elif result.size:
        _im2col(x, w, result, stride, padding, dilation, groups, epilogue or no_epilogue)
    return deliver(result, out)


def _in_float32(
    kernel: Callable[..., np.ndarray], x: np.ndarray, w: np.ndarray, out: np.ndarray | None
) -> np.ndarray:
    """`kernel` of float16 (bfloat16) operands computed in float32, rounded once."""
    wide = kernel(x.astype(np.float32), w.astype(np.float32))
    if out is None:
        return wide.astype(np.result_type(x.dtype, w.dtype))
    np.copyto(out, wide, casting="unsafe")
    return out


def no_epilogue(chunk: np.ndarray, images: slice) -> None:
    """The epilogue of a convolution with nothing after it."""


def _depthwise(
    x: np.ndarray, w: np.ndarray, out: np.ndarray, stride: tuple, padding: tuple, dilation: tuple
) -> None:
    out.fill(0)
    scratch = np.empty(out.shape, out.dtype)
    taps = kernel_taps(out.shape[2:], x.shape[2:], w.shape[2:], stride, dilation, padding[:2])
    for i, j, at_out, at_x in taps:
        target = out[at_out]
        target += np.multiply(x[at_x], w[:, 0, i, j, None, None], out=scratch[at_out])


def _im2col(
    x: np.ndarray,
    w: np.ndarray,
    out: np.ndarray,
    stride: tuple,
    padding: tuple,
    dilation: tuple,
    groups: int,
    epilogue: Epilogue,
) -> None:
    if _is_wide(stride, w.shape[2:], out.shape[2:]):
        _wide(x, w, out, padding, dilation, groups, epilogue)
        return
    n, channels, height, width = x.shape
    kh, kw = w.shape[2:]
    top, left, bottom, right = padding
    padded = x
    if any(padding):
        padded = np.zeros((n, channels, height + top + bottom, width + left + right), x.dtype)
        padded[:, :, top : top + height, left : left + width] = x
    sn, sc, sh, sw = padded.strides
    rows, cols = (sh * stride[0], sw * stride[1]), (sh * dilation[0], sw * dilation[1])
    per_image = channels * kh * kw * out.shape[2] * out.shape[3] * x.itemsize
    # the buffer's innermost axis should be the longer run: the output's width for a
    # forward convolution, the kernel's for a weight gradient (a large kernel, the output
    # gradient, over a small output, the weight's taps), whose one matmul per chunk runs
    # faster the more windows it gets (measured: 4x the budget, 1.6x faster)
    if kh * kw <= out.shape[2] * out.shape[3]:
        chunk = _chunk(n, per_image)
        _windows_last(padded, w, out, (sn, sc) + cols + rows, chunk, groups, epilogue)
    else:
        chunk = _chunk(n, per_image, 4 * SCRATCH_BYTES)
        _taps_last(padded, w, out, (sn,) + rows + (sc,) + cols, chunk, groups, epilogue)


def _wide(
    x: np.ndarray,
    w: np.ndarray,
    out: np.ndarray,
    padding: tuple,
    dilation: tuple,
    groups: int,
    epilogue: Epilogue,
) -> None:
    """Stride 1: windows over the padded width, one contiguous run per channel and tap;
    the buffer is (image, C, kH, kW, Ho*Wp), one matmul per image and group (one per
    chunk would be faster, but OpenBLAS's sums then depend on how many images share the
    call, so an image's bits would depend on its batch)."""
    n, channels, height, width = x.shape
    out_ch, per_group, kh, kw = w.shape
    ho, wo = out.shape[2:]
    per_out, depth = out_ch // groups, per_group * kh * kw
    weights = w.reshape(groups, per_out, depth)
    top, left, bottom, right = padding
    padded_width = width + left + right
    length = ho * padded_width
    sizes = _wide_sizes(x.shape, w.shape, out.shape, padding)
    chunk = _chunk(n, sum(sizes) * x.itemsize, WIDE * SCRATCH_BYTES)
    padded = np.zeros((chunk, channels, height + top + bottom + 1, padded_width), x.dtype)
    scratch = np.empty(chunk * sizes[1], x.dtype)
    products = np.empty(chunk * sizes[2], x.dtype)
    sn, sc, sh, sw = padded.strides
    steps = (sn, sc, sh * dilation[0], sw * dilation[1], sw)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        padded[:m, :, top : top + height, left : left + width] = x[start : start + m]
        shape = (m, channels, kh, kw, length)
        cols = scratch[: m * sizes[1]].reshape(shape)
        np.copyto(cols, as_strided(padded, shape, steps, writeable=False))
        part = products[: m * sizes[2]].reshape(m, groups, per_out, length)
        np.matmul(weights, cols.reshape(m, groups, depth, length), out=part)
        wide = part.reshape(m, out_ch, ho, padded_width)
        np.copyto(out[start : start + m], wide[..., :wo])
        epilogue(out[start : start + m], slice(start, start + m))


def _windows_last(
    padded: np.ndarray,
    w: np.ndarray,
    out: np.ndarray,
    steps: tuple,
    chunk: int,
    groups: int,
    epilogue: Epilogue,
) -> None:
    """Buffer (image, C, kH, kW, Ho, Wo); per image and group one matmul writes the output."""
    n, channels = padded.shape[:2]
    out_ch, per_group, kh, kw = w.shape
    ho, wo = out.shape[2:]
    depth, length = per_group * kh * kw, ho * wo
    weights = w.reshape(groups, out_ch // groups, depth)
    result = out.reshape(n, groups, out_ch // groups, length)
    scratch = np.empty(chunk * channels * kh * kw * length, padded.dtype)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        shape = (m, channels, kh, kw, ho, wo)
        cols = scratch[: m * channels * kh * kw * length].reshape(shape)
        np.copyto(cols, as_strided(padded[start:], shape, steps, writeable=False))
        np.matmul(weights, cols.reshape(m, groups, depth, length), out=result[start : start + m])
        epilogue(out[start : start + m], slice(start, start + m))


def _taps_last(
    padded: np.ndarray,
    w: np.ndarray,
    out: np.ndarray,
    steps: tuple,
    chunk: int,
    groups: int,
    epilogue: Epilogue,
) -> None:
    """Buffer (image, Ho, Wo, C, kH, kW); per chunk and group one matmul over all of its
    windows, then a transposed copy into the output."""
    n, channels = padded.shape[:2]
    out_ch, per_group, kh, kw = w.shape
    ho, wo = out.shape[2:]
    depth, length, per_out = per_group * kh * kw, ho * wo, out_ch // groups
    weights = w.reshape(groups, per_out, depth)
    result = out.reshape(n, groups, per_out, length)
    scratch = np.empty(chunk * channels * kh * kw * length, padded.dtype)
    products = np.empty(groups * per_out * chunk * length, padded.dtype)
    pieces = _pieces(depth)
    partial = np.empty(products.size if len(pieces) > 1 else 0, padded.dtype)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        shape = (m, ho, wo, channels, kh, kw)
        cols = scratch[: m * channels * kh * kw * length].reshape(shape)
        np.copyto(cols, as_strided(padded[start:], shape, steps, writeable=False))
        part = products[: groups * per_out * m * length].reshape(groups, per_out, m * length)
        more = partial[: part.size].reshape(part.shape) if partial.size else part
        windows = cols.reshape(m * length, groups, depth).transpose(1, 2, 0)
        for k, (lo, hi) in enumerate(pieces):  # the contraction in pieces, summed in order
            np.matmul(weights[:, :, lo:hi], windows[:, lo:hi], out=more if k else part)
            if k:
                np.add(part, more, out=part)
        np.copyto(
            result[start : start + m],
            part.reshape(groups, per_out, m, length).transpose(2, 0, 1, 3),
        )
        epilogue(out[start : start + m], slice(start, start + m))


def _pieces(depth: int) -> list[tuple[int, int]]:
    """`_taps_last`'s contraction of `depth` terms as ranges of at most `DEPTH_PIECE`,
    of equal sizes but the last."""
    count = max(1, -(-depth // DEPTH_PIECE))
    size = max(1, -(-depth // count))
    return [(lo, min(depth, lo + size)) for lo in range(0, max(depth, 1), size)]


def conv_transpose2d_scratch(
    x: tuple, w: tuple, out: tuple, x_dtype: np.dtype, w_dtype: np.dtype, groups: int
) -> int:
    """The bytes `conv_transpose2d_kernel` allocates besides an `out=` of the result's
    dtype (the weight counts once more, for the copy its reshape makes of a view)."""
    dtype = np.result_type(x_dtype, w_dtype)
    if is_half(dtype):  # _in_float32: wide copies of both operands and the result
        wide = np.dtype(np.float32)
        inner = conv_transpose2d_scratch(x, w, out, wide, wide, groups)
        return inner + (math.prod(x) + math.prod(w) + math.prod(out)) * wide.itemsize
    item = dtype.itemsize
    total = (x_dtype != dtype) * math.prod(x) * item + (w_dtype != dtype) * math.prod(w) * item
    n, in_ch, height, width = x
    _, per_group, kh, kw = w
    if math.prod(out) == 0 or math.prod(x) == 0:
        return total
    if in_ch == groups and per_group == 1:  # the depthwise loop
        return total + math.prod(x) * item
    per_image = groups * per_group * kh * kw * height * width * item  # _col2im
    return total + math.prod(w) * item + _chunk(n, per_image) * per_image


def conv_transpose2d_kernel(
    x: np.ndarray,
    w: np.ndarray,
    out: np.ndarray | None = None,
    stride: tuple = (1, 1),
    padding: tuple = (0, 0, 0, 0),
    output_padding: tuple = (0, 0),
    dilation: tuple = (1, 1),
    groups: int = 1,
) -> np.ndarray:
    dtype = np.result_type(x.dtype, w.dtype)
    if is_half(dtype):
        geometry = {"stride": stride, "padding": padding, "dilation": dilation}
        transposed = partial(conv_transpose2d_kernel, output_padding=output_padding, **geometry)
        return _in_float32(partial(transposed, groups=groups), x, w, out)
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    n, in_ch, height, width = x.shape
    _, per_group, kh, kw = w.shape
    top, left, bottom, right = padding
    op = "conv_transpose2d"
    ho = transposed_out(height, kh, stride[0], top, bottom, dilation[0], output_padding[0], op)
    wo = transposed_out(width, kw, stride[1], left, right, dilation[1], output_padding[1], op)
    result = contiguous_result(out, (n, per_group * groups, ho, wo), dtype)
    result.fill(0)
    # a tap's small axis is the input's, its big axis the output's
    taps = kernel_taps((height, width), (ho, wo), (kh, kw), stride, dilation, (top, left))
    if result.size == 0 or x.size == 0:
        pass
    elif in_ch == groups and per_group == 1:
        scratch = np.empty(x.shape, dtype)
        for i, j, at_x, at_out in taps:
            target = result[at_out]
            target += np.multiply(x[at_x], w[:, 0, i, j, None, None], out=scratch[at_x])
    else:
        _col2im(x, w, result, taps, groups)
    return deliver(result, out)


def _col2im(x: np.ndarray, w: np.ndarray, out: np.ndarray, taps: tuple, groups: int) -> None:
    n, in_ch, height, width = x.shape
    _, per_group, kh, kw = w.shape
    per_in, depth, area = in_ch // groups, per_group * kh * kw, height * width
    weights = w.reshape(groups, per_in, depth).transpose(0, 2, 1)  # (g, O/g * kH * kW, C/g)
    images = x.reshape(n, groups, per_in, area)
    result = out.reshape(n, groups, per_group, *out.shape[2:])
    chunk = _chunk(n, groups * depth * area * x.itemsize)
    scratch = np.empty(chunk * groups * depth * area, x.dtype)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        cols = scratch[: m * groups * depth * area].reshape(m, groups, depth, area)
        np.matmul(weights, images[start : start + m], out=cols)
        parts = cols.reshape(m, groups, per_group, kh, kw, height, width)
        block = result[start : start + m]
        for i, j, at_x, at_out in taps:
            target = block[at_out]
            target += parts[:, :, :, i, j][at_x]
