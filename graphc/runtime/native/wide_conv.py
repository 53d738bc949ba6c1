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
is padded into a buffer of the hook's (its border zeroed once); stride 1, dilation 1,
one group (a strided convolution's weight gradient is dilated: numpy's kernel). It runs
as conv2d_kernel's `direct` hook, so conv2d, conv2d_epilogue and conv2d_fused of one
geometry all take it, and the levels agree bit for bit.

Bits: every output sums its terms in one order, whatever the threads; not numpy's
BLAS order, so conv2d is inexact on native (as for the direct kernel), and
tests/runtime/test_native_wide_conv.py holds it within the componentwise bound of a sum
of K products, 2 (K + 2) eps sum |w| |x|, of numpy's kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphc.ir.types import TensorType
from graphc.runtime.native import calls
from graphc.runtime.native.kernels import Kernel

NAME = "gc_wide_conv2d_f32"
# after the output count B: x, w, out; then C, Hp, Wp, O, R, S, KH, KW, parallel
PARAMS = "ppp" + "i" * 9
# multiply-adds of one call from which it runs on the OpenMP pool (waking it costs
# 10-50 us here; LeNet's smaller weight gradient is 7.5 million)
PARALLEL_WORK = 1 << 20

SOURCE = r"""
/* ---- weight-gradient convolution (graphc/runtime/native/wide_conv.py) ---- */
#ifdef __AVX512F__
#define WG_OT 4
#define WG_JT 6
#else
#define WG_OT 2
#define WG_JT 5
#endif
typedef struct {
    const float *x, *w; float *y;
    int64_t C, Hp, Wp, O, R, S, KH, KW;
} wg_conv;

/* WG_OT output channels from o0 by jt output columns from j0 of output row i of image b;
   of the channels past the last (o0 + o >= O), the last one's sums are computed again
   and not stored, so only the column count varies between the cases below */
GC_INLINE void wg_tile(const wg_conv *c, int64_t b, int64_t o0, int ot, int64_t i,
                       int64_t j0, const int jt) {
    float sums[WG_OT][WG_JT];
    for (int o = 0; o < WG_OT; o++)
        for (int j = 0; j < WG_JT; j++) sums[o][j] = 0.0f;
    const float *xb = c->x + b * c->C * c->Hp * c->Wp;
    const float *wo[WG_OT];
    for (int o = 0; o < WG_OT; o++)
        wo[o] = c->w + (o0 + (o < ot ? o : ot - 1)) * c->C * c->R * c->S;
    for (int64_t s0 = 0; s0 < c->S; s0 += GC_W) {
        int64_t m = c->S - s0 < GC_W ? c->S - s0 : GC_W;
        vf32 acc[WG_OT][WG_JT];
        for (int o = 0; o < WG_OT; o++)
            for (int j = 0; j < WG_JT; j++) acc[o][j] = sp_f32(0.0f);
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t r = 0; r < c->R; r++) {
                const float *xr = xb + (ch * c->Hp + i + r) * c->Wp + j0 + s0;
                int64_t at = (ch * c->R + r) * c->S + s0;
                vf32 xv[WG_JT];
                for (int j = 0; j < jt; j++) xv[j] = ldm_f32(xr + j, m);
                for (int o = 0; o < WG_OT; o++) {
                    vf32 wv = ldm_f32(wo[o] + at, m);
                    for (int j = 0; j < jt; j++) acc[o][j] = fma_f32(wv, xv[j], acc[o][j]);
                }
            }
        for (int o = 0; o < WG_OT; o++)
            for (int j = 0; j < jt; j++) {
                float t = 0.0f;
                for (int k = 0; k < GC_W; k++) t += acc[o][j][k];
                sums[o][j] += t;
            }
    }
    float *y = c->y + ((b * c->O + o0) * c->KH + i) * c->KW + j0;
    for (int o = 0; o < ot; o++)
        for (int j = 0; j < jt; j++) y[o * c->KH * c->KW + j] = sums[o][j];
}

/* the tile with jt as a constant, so each case is unrolled and kept in registers */
static void wg_tile_any(const wg_conv *c, int64_t b, int64_t o0, int ot, int64_t i,
                        int64_t j0, int jt) {
    switch (jt) {
#define WG_CASE(j) case j: wg_tile(c, b, o0, ot, i, j0, j); break;
    WG_CASE(1) WG_CASE(2) WG_CASE(3) WG_CASE(4) WG_CASE(5)
#if WG_JT > 5
    WG_CASE(6)
#endif
#undef WG_CASE
    }
}

GC_EXPORT void gc_wide_conv2d_f32(int64_t B, const float *x, const float *w, float *y,
                                  int64_t C, int64_t Hp, int64_t Wp, int64_t O, int64_t R,
                                  int64_t S, int64_t KH, int64_t KW, int64_t parallel) {
    wg_conv c = {x, w, y, C, Hp, Wp, O, R, S, KH, KW};
    int64_t tiles_o = (O + WG_OT - 1) / WG_OT, tiles_j = (KW + WG_JT - 1) / WG_JT;
    int64_t tasks = B * tiles_o * KH * tiles_j;
    #pragma omp parallel for schedule(static) if (parallel)
    for (int64_t task = 0; task < tasks; task++) {
        int64_t jt_at = task % tiles_j, i = (task / tiles_j) % KH;
        int64_t ot_at = (task / (tiles_j * KH)) % tiles_o, b = task / (tiles_j * KH * tiles_o);
        int64_t o0 = ot_at * WG_OT, j0 = jt_at * WG_JT;
        int ot = (int)(O - o0 < WG_OT ? O - o0 : WG_OT);
        int jt = (int)(KW - j0 < WG_JT ? KW - j0 : WG_JT);
        wg_tile_any(&c, b, o0, ot, i, j0, jt);
    }
}
"""

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
    """conv2d_kernel's `direct` hook calling the C function `fn` (made once per thread by a
    plan's setup): (x, w, out, padding, dilation, groups, epilogue), float32, out
    C-contiguous, stride and dilation 1, one group. The input is copied into a padded
    buffer of the hook's (its border zeroed once per shape) when there is padding; the
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
        kh, kw = out.shape[2:]
        parallel = int(out.size * channels * rows * cols >= PARALLEL_WORK)
        sizes = (channels, *shape[2:], out_ch, rows, cols, kh, kw, parallel)
        fn(batch, now(x), now(w), now(out), *sizes)
        epilogue(out, slice(None))

    return run
