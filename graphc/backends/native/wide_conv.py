"""A float32 convolution whose kernel is larger than its output, in C: a weight gradient.

The gradient of conv2d with respect to its weight is a convolution of the input (its
channels as the batch, its batch as the channels) by the output's gradient (the
kernel), whose result is the weight's few taps: LeNet's second layer, (6, 64, 14, 14)
by (16, 64, 10, 10) into (6, 16, 5, 5). numpy's kernel copies every window into an
im2col buffer of taps x windows (ops/conv_kernels.py, `_taps_last`) before one matmul,
and the copy is most of its time: 0.56 ms of a LeNet training step's 0.6 for that layer.

Here output (b, o, i, j) sums w[o, c, r, s] * x[b, c, i + r, j + s] over c, r and s,
the last as vectors of GC_W lanes: a tile of `WG_OT` output channels by `WG_JT` output
columns of one output row (one compiled case per column count: a case per channel count
too made the kernel take 1.3 s to build) keeps its accumulators in registers while the kernel's rows
go by (per row: `WG_JT` loads of the input row at the tile's columns, `WG_OT` loads of
the kernel's row, their products as fused multiply-adds). Each accumulator's lanes are
then summed in lane order, and the sums of the vectors of s in their order. The input
is padded into a buffer of the runner's (its border zeroed once); stride 1, dilation 1,
one group (a strided convolution's weight gradient is dilated: numpy's kernel). conv2d,
conv2d_epilogue and conv2d_fused of one geometry all take it (conv.py runs their
epilogues after it), so the levels agree bit for bit.

Bits: every output sums its terms in one order, whatever the threads; not numpy's
BLAS order, so conv2d is inexact on native (as for the direct kernel), and
tests/backends/test_native_wide_conv.py holds it within the componentwise bound of a sum
of K products, 2 (K + 2) eps sum |w| |x|, of numpy's kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel
from graphc.ir.types import TensorType
from graphc.ops.conv_kernels import contiguous_result, deliver

NAME = "gc_wide_conv2d_f32"
# after the output count B: x, w, out; then C, Hp, Wp, O, R, S, KH, KW, parallel
PARAMS = "ppp" + "i" * 9
# multiply-adds of one call from which it runs on the OpenMP pool (waking it costs
# 10-50 us here; LeNet's smaller weight gradient is 7.5 million)
PARALLEL_WORK = 1 << 20

SOURCE = c_source("wide_conv.c")

KERNEL = Kernel(NAME, SOURCE, [], ["conv2d"], PARAMS)


def wide_reason(x: TensorType, w: TensorType, out: TensorType, attrs: dict) -> str | None:
    """None when this kernel computes the convolution, else why it does not."""
    if x.dtype != np.float32 or w.dtype != np.float32:
        return "float32 only"
    if tuple(attrs["stride"]) != (1, 1) or tuple(attrs["dilation"]) != (1, 1):
        return "stride 1 and dilation 1 only (a strided convolution's weight gradient)"
    if attrs["groups"] != 1:
        return "one group only"
    if not all(isinstance(d, int) and d > 0 for d in (*x.shape, *w.shape, *out.shape)):
        return "static, non-empty shapes only"
    return None


def runner(fn: Callable[..., None]) -> Callable[..., None]:
    """The convolution `run(x, w, out, padding, dilation, groups, epilogue)` calling the C
    function `fn` (made once per thread by a plan's setup): float32, non-empty, stride
    and dilation 1, one group (`wide_reason`). The input is copied into a padded
    buffer of the runner's (its border zeroed once per shape) when there is padding; the
    epilogue (conv2d_epilogue's or conv2d_fused's elementwise work) runs after."""
    now = calls.address_now
    padded: dict[tuple, np.ndarray] = {}

    def run(
        x: np.ndarray,
        w: np.ndarray,
        out: np.ndarray,
        padding: tuple,
        dilation: tuple,
        groups: int,
        epilogue: Callable[[np.ndarray, slice], None],
    ) -> None:
        batch, channels, height, width = x.shape
        out_ch, _, rows, cols = w.shape
        top, left, bottom, right = padding
        shape = (batch, channels, height + top + bottom, width + left + right)
        if any(padding):
            if shape not in padded:
                padded[shape] = np.zeros(shape, np.float32)
            buffer = padded[shape]
            np.copyto(buffer[:, :, top : top + height, left : left + width], x)
            x = buffer
        elif not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if not w.flags.c_contiguous:
            w = np.ascontiguousarray(w)
        target = contiguous_result(out, out.shape, out.dtype)
        kh, kw = out.shape[2:]
        parallel = int(out.size * channels * rows * cols >= PARALLEL_WORK)
        sizes = (channels, *shape[2:], out_ch, rows, cols, kh, kw, parallel)
        fn(batch, now(x), now(w), now(target), *sizes)
        epilogue(target, slice(None))
        deliver(target, out)

    return run
