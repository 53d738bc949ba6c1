"""A direct float32 convolution in C for the native backend's stride-1 conv2d.

numpy's conv2d (ops/conv_kernels.py) copies every window into an im2col buffer and
multiplies it by the weights with one BLAS call per image. For the small channel counts
of LeNet-style layers the copy and the skinny products cost more than the arithmetic
(LeNet's first layer, 6 output channels from 1: 255 us for a batch of 64, 25 times
the multiply-adds' time), and a batch of one pays numpy's per-call costs many times.

Here each image is padded once into a scratch buffer with one spare row (as `_wide`
does), and the output is computed over the padded width Wp: output position p of
channel o sums w[o, c, i, j] * padded[c, p + i*dh*Wp + j*dw] over the group's input
channels and the kernel's taps, so every tap reads a contiguous run of the padded image.
A tile of `DC_OB` output channels by `DC_PB` vectors of positions stays in registers
while the taps go by (per tap: `DC_PB` loads, `DC_OB` broadcasts of a weight, their
products as fused multiply-adds); the tile's columns past the output width are dropped
as it is stored. Padding and tiles run on the OpenMP pool when the work is large enough
to pay for waking it.

Bits: every output sums its terms in one order (input channel, then kernel row, then
column), each term by a fused multiply-add from +0.0, whatever the batch, the chunking
or the threads. That is not the order of numpy's BLAS call, so conv2d, conv2d_epilogue
and conv2d_fused are declared inexact on native when this kernel computes them, and
tests/runtime/test_native_direct_conv.py holds them within the componentwise bound of a
sum of K products, 2 (K + 2) eps sum |w| |x|, of numpy's kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphc.runtime.native import calls

NAME = "gc_direct_conv2d_f32"
# the C function's parameters after the image count: x, w, out, scratch; then C, H, W,
# O, groups, kH, kW, top, left, bottom, right, dilation (rows, cols), PARALLEL_WORK; a
# bias per output channel (or NULL) and whether relu follows, applied in registers
PARAMS = "pppp" + "i" * 14 + "pi"
# elements of slack after the last padded image: a tile's last vector may read past it
SLACK = 64
# padded images and outputs of one call: measured on LeNet's and the ResNet block's
# layers, a chunk that fits in L2 beside its weights (1 MB here) lets the epilogue run
# on a warm output
CHUNK_BYTES = 1 << 20
# below this many vector multiply-adds a call runs on the calling thread: waking the
# OpenMP pool costs 10-20 us
PARALLEL_WORK = 400_000  # vector multiply-adds of one call

SOURCE = r"""
/* ---- direct convolution (graphc/runtime/native/direct_conv.py) ---- */
#define DC_OB 4
#define DC_PB 4
/* n <= GC_W lanes of v to p */
GC_INLINE void dc_put(float *p, vf32 v, int64_t n) {
    if (n == GC_W) { memcpy(p, &v, GC_VB); return; }
#ifdef __AVX512F__
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (gc_ps)v);
#else
    vi32 lane;
    for (int k = 0; k < GC_W; k++) lane[k] = k;
    _mm256_maskstore_ps(p, (__m256i)(lane < (int32_t)n), (gc_ps)v);
#endif
}

/* ob output channels (weights w, outputs y, Ho*Wo apart) by pb vectors of positions: the
   vector k reads the padded channel at src[k] (plus each tap's offset) and is stored at
   dst[k], lanes[k] lanes of it */
GC_INLINE void dc_tile(const float *x, const float *w, const int64_t *offs, int64_t K,
                       const int64_t *src, float *y, int64_t plane_out, const int64_t *dst,
                       const int64_t *lanes, const float *bias, int64_t relu, const int ob,
                       const int pb) {
    vf32 acc[DC_OB][DC_PB];
    for (int o = 0; o < DC_OB; o++)
        for (int k = 0; k < DC_PB; k++) acc[o][k] = sp_f32(0.0f);
    for (int64_t t = 0; t < K; t++) {
        const float *at = x + offs[t];
        vf32 v[DC_PB];
        for (int k = 0; k < pb; k++) memcpy(&v[k], at + src[k], GC_VB);
        for (int o = 0; o < ob; o++) {
            vf32 s = sp_f32(w[o * K + t]);
            for (int k = 0; k < pb; k++) acc[o][k] = fma_f32(s, v[k], acc[o][k]);
        }
    }
    for (int o = 0; o < ob; o++) {
        if (bias) {
            vf32 b = sp_f32(bias[o]);
            for (int k = 0; k < pb; k++) acc[o][k] = acc[o][k] + b;
        }
        if (relu)
            for (int k = 0; k < pb; k++) acc[o][k] = max_f32(acc[o][k], sp_f32(0));
        for (int k = 0; k < pb; k++) dc_put(y + o * plane_out + dst[k], acc[o][k], lanes[k]);
    }
}

/* the tile with (ob, pb) as constants, so each case is unrolled and kept in registers */
static void dc_tile_any(const float *x, const float *w, const int64_t *offs, int64_t K,
                        const int64_t *src, float *y, int64_t plane_out, const int64_t *dst,
                        const int64_t *lanes, const float *bias, int64_t relu, int ob, int pb) {
    switch ((ob - 1) * DC_PB + (pb - 1)) {
#define DC_CASE(o, p) case (o - 1) * DC_PB + (p - 1): \
        dc_tile(x, w, offs, K, src, y, plane_out, dst, lanes, bias, relu, o, p); break;
    DC_CASE(1, 1) DC_CASE(1, 2) DC_CASE(1, 3) DC_CASE(1, 4)
    DC_CASE(2, 1) DC_CASE(2, 2) DC_CASE(2, 3) DC_CASE(2, 4)
    DC_CASE(3, 1) DC_CASE(3, 2) DC_CASE(3, 3) DC_CASE(3, 4)
    DC_CASE(4, 1) DC_CASE(4, 2) DC_CASE(4, 3) DC_CASE(4, 4)
#undef DC_CASE
    }
}

static void dc_pad(const float *x, float *pad, int64_t H, int64_t W, int64_t top,
                   int64_t left, int64_t right, int64_t Wp, int64_t plane) {
    memset(pad, 0, sizeof(float) * top * Wp);
    for (int64_t h = 0; h < H; h++) {
        float *row = pad + (top + h) * Wp;
        memset(row, 0, sizeof(float) * left);
        memcpy(row + left, x + h * W, sizeof(float) * W);
        memset(row + left + W, 0, sizeof(float) * right);
    }
    memset(pad + (top + H) * Wp, 0, sizeof(float) * (plane - (top + H) * Wp));
}

/* one task: ob <= DC_OB output channels of one image and group, every output row in
   vectors of GC_W columns (the last one of a row partial), DC_PB vectors a tile */
static void dc_task(int64_t task, int64_t ntiles_o, const float *pad, const float *w, float *y,
                    const int64_t *offs, int64_t C, int64_t O, int64_t groups, int64_t K,
                    int64_t plane, int64_t Wp, int64_t Ho, int64_t Wo, const float *bias,
                    int64_t relu) {
    int64_t Og = O / groups, Cg = C / groups;
    int64_t image = task / (groups * ntiles_o), rest = task % (groups * ntiles_o);
    int64_t g = rest / ntiles_o, o0 = g * Og + (rest % ntiles_o) * DC_OB;
    int ob = (int)(g * Og + Og - o0 < DC_OB ? g * Og + Og - o0 : DC_OB);
    const float *x = pad + (image * C + g * Cg) * plane;
    float *out = y + (image * O + o0) * Ho * Wo;
    int64_t per_row = (Wo + GC_W - 1) / GC_W, count = Ho * per_row;
    for (int64_t v0 = 0; v0 < count; v0 += DC_PB) {
        int pb = (int)(count - v0 < DC_PB ? count - v0 : DC_PB);
        int64_t src[DC_PB], dst[DC_PB], lanes[DC_PB];
        for (int k = 0; k < pb; k++) {
            int64_t r = (v0 + k) / per_row, c = ((v0 + k) % per_row) * GC_W;
            src[k] = r * Wp + c;
            dst[k] = r * Wo + c;
            lanes[k] = Wo - c < GC_W ? Wo - c : GC_W;
        }
        dc_tile_any(x, w + o0 * K, offs, K, src, out, Ho * Wo, dst, lanes,
                    bias ? bias + o0 : bias, relu, ob, pb);
    }
}

GC_EXPORT void gc_direct_conv2d_f32(int64_t m, const float *x, const float *w, float *y,
        float *pad, int64_t C, int64_t H, int64_t W, int64_t O, int64_t groups, int64_t kh,
        int64_t kw, int64_t top, int64_t left, int64_t bottom, int64_t right, int64_t dh,
        int64_t dw, int64_t parallel_work, const float *bias, int64_t relu) {
    int64_t Hp = H + top + bottom, Wp = W + left + right;
    int64_t Ho = Hp - (kh - 1) * dh, Wo = Wp - (kw - 1) * dw, plane = (Hp + 1) * Wp;
    int64_t Cg = C / groups, Og = O / groups, K = Cg * kh * kw;
    int64_t ntiles_o = (Og + DC_OB - 1) / DC_OB, tasks = m * groups * ntiles_o;
    int64_t offs_stack[512];
    int64_t *offs = K <= 512 ? offs_stack : (int64_t *)malloc(sizeof(int64_t) * K);
    for (int64_t c = 0, t = 0; c < Cg; c++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++) offs[t++] = c * plane + i * dh * Wp + j * dw;
    memset(pad + m * C * plane, 0, sizeof(float) * SLACK_ELEMENTS);
    int64_t work = m * O * Ho * ((Wo + GC_W - 1) / GC_W) * K;
    if (work >= parallel_work && tasks > 1) {
        #pragma omp parallel
        {
            #pragma omp for schedule(static)
            for (int64_t r = 0; r < m * C; r++)
                dc_pad(x + r * H * W, pad + r * plane, H, W, top, left, right, Wp, plane);
            #pragma omp for schedule(static)
            for (int64_t task = 0; task < tasks; task++)
                dc_task(task, ntiles_o, pad, w, y, offs, C, O, groups, K, plane, Wp, Ho, Wo,
                        bias, relu);
        }
    } else {
        for (int64_t r = 0; r < m * C; r++)
            dc_pad(x + r * H * W, pad + r * plane, H, W, top, left, right, Wp, plane);
        for (int64_t task = 0; task < tasks; task++)
            dc_task(task, ntiles_o, pad, w, y, offs, C, O, groups, K, plane, Wp, Ho, Wo, bias,
                    relu);
    }
    if (offs != offs_stack) free(offs);
}
"""


def source() -> str:
    """The kernel's C (after the native header), with this module's constants."""
    return f"#include <stdlib.h>\n#define SLACK_ELEMENTS {SLACK}\n" + SOURCE


def runner(fn: Callable[..., None]) -> Callable[..., None]:
    """conv2d_kernel's `direct` hook calling the C function `fn` on chunks of images:
    (x, w, out, padding, dilation, groups, epilogue), float32, out C-contiguous; with
    `bias` (one float32 per output channel) and `relu`, the kernel adds the bias and
    applies relu to each tile in registers, before `epilogue` runs."""
    now = calls.address_now

    def run(
        x: np.ndarray,
        w: np.ndarray,
        out: np.ndarray,
        padding: tuple,
        dilation: tuple,
        groups: int,
        epilogue: Callable[[np.ndarray, slice], None] | None = None,
        bias: np.ndarray | None = None,
        relu: bool = False,
    ) -> None:
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if not w.flags.c_contiguous:
            w = np.ascontiguousarray(w)
        n, channels, height, width = x.shape
        out_ch, _, kh, kw = w.shape
        if n == 0:
            return
        top, left, bottom, right = padding
        plane = (height + top + bottom + 1) * (width + left + right)
        per_image = (channels * plane + out_ch * out.shape[2] * out.shape[3]) * 4
        chunk = max(1, min(n, CHUNK_BYTES // per_image))
        pad = np.empty(chunk * channels * plane + SLACK, np.float32)
        sizes = (channels, height, width, out_ch, groups, kh, kw, *padding, *dilation,
                 PARALLEL_WORK)  # fmt: skip
        after = (calls.NULL if bias is None else now(per_channel(bias, out_ch)), int(relu))
        w_at, pad_at = now(w), now(pad)
        for start in range(0, n, chunk):
            images = slice(start, min(n, start + chunk))
            part = out[images] if chunk < n else out
            fn(part.shape[0], now(x[images] if chunk < n else x), w_at, now(part), pad_at,
               *sizes, *after)  # fmt: skip
            if epilogue is not None:
                epilogue(part, images)

    return run


def per_channel(bias: np.ndarray, channels: int) -> np.ndarray:
    """A conv2d_epilogue's float32 bias (one value per channel, or one for all, in any
    shape of ones and that count) as a C-contiguous (channels,) array."""
    flat = bias.reshape(-1)
    if flat.size == channels and flat.dtype == np.float32 and flat.flags.c_contiguous:
        return flat
    return np.ascontiguousarray(np.broadcast_to(flat, (channels,)))
