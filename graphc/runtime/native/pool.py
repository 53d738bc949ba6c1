"""max_pool2d on the native backend: one C function over every (image, channel) plane.

numpy's kernel (ops/maxpool.py) makes one `maximum` call per kernel tap over the whole
batch, each on strided views: about 8 us for a LeNet image's 2x2 pool, most of it
per-call costs, and 120 us for a batch of 64 of LeNet's first layer. float32 2x2
windows of stride 2 wholly inside the input (LeNet's, most CNNs') are vector code
(`F32` below: 36 us for that batch; a scalar loop took 640 us there, its comparisons
branches that random data mispredicts). Any other geometry is that scalar loop: each
output row takes each tap in turn over the run of columns where it meets the input.
Measured against numpy's kernel on 3x3 pools of random data, it is still faster:
(8, 64, 28, 28) with stride 2 and padding 1, 504 us against 567; (4, 32, 28, 28) with
stride 1, 268 against 349; (1, 16, 14, 14) with stride 2, 9 against 22.

Bits: numpy's. Each output starts at -inf (the padding never wins) and meets the taps in
the same row-major order as numpy's kernel, each through numpy's `maximum` (a nan in
the running maximum wins, then a nan in the tap; of equal values the tap's), so every
output is the same sequence of the same exactly rounded operations. float32 and float64;
integer inputs stay on numpy.
"""

from __future__ import annotations

import numpy as np

from graphc.runtime.codegen import Generator
from graphc.runtime.native import calls
from graphc.runtime.native.kernels import Kernel
from graphc.runtime.plan import Step

# planes, then x, out, then H, W, Ho, Wo, kH, kW, stride (rows, cols), top, left,
# dilation (rows, cols), and whether to run on the OpenMP pool
PARAMS = "pp" + "i" * 13
# output elements x taps of one call from which the planes run on the OpenMP pool: a
# pool is a few loads per output, and waking the pool costs 10-50 us here
PARALLEL_WORK = 1 << 22

SOURCE = r"""
/* ---- max_pool2d (graphc/runtime/native/pool.py) ---- */
#include <math.h>
#define MP_ARGS int64_t planes, const T *x, T *o, int64_t H, int64_t W, int64_t Ho, \
    int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top, int64_t left, \
    int64_t dh, int64_t dw, int64_t parallel
#define MP_KERNEL(t, T) \
GC_INLINE T mp_max_##t(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); } \
static void mp_run_##t(T *o, const T *x, int64_t n, int64_t s) { \
    if (s == 1) { for (int64_t k = 0; k < n; k++) o[k] = mp_max_##t(o[k], x[k]); } \
    else if (s == 2) { for (int64_t k = 0; k < n; k++) o[k] = mp_max_##t(o[k], x[2 * k]); } \
    else { for (int64_t k = 0; k < n; k++) o[k] = mp_max_##t(o[k], x[s * k]); } } \
static void mp_plane_##t(const T *x, T *o, int64_t H, int64_t W, int64_t Ho, int64_t Wo, \
        int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top, int64_t left, \
        int64_t dh, int64_t dw) { \
    for (int64_t k = 0; k < Ho * Wo; k++) o[k] = -(T)INFINITY; \
    for (int64_t r = 0; r < Ho; r++) \
        for (int64_t i = 0; i < kh; i++) { \
            int64_t h = r * sh - top + i * dh; \
            if (h < 0 || h >= H) continue; \
            for (int64_t j = 0; j < kw; j++) { \
                int64_t shift = left - j * dw; /* column c = ow * sw - shift */ \
                int64_t lo = shift > 0 ? (shift + sw - 1) / sw : 0; \
                int64_t hi = (W - 1 + shift) >= 0 ? (W - 1 + shift) / sw + 1 : 0; \
                if (hi > Wo) hi = Wo; \
                if (lo < hi) \
                    mp_run_##t(o + r * Wo + lo, x + h * W + lo * sw - shift, hi - lo, sw); \
            } \
        } } \
static void mp_pool_##t(MP_ARGS) { \
    if (parallel) { \
        _Pragma("omp parallel for schedule(static)") \
        for (int64_t p = 0; p < planes; p++) \
            mp_plane_##t(x + p * H * W, o + p * Ho * Wo, H, W, Ho, Wo, kh, kw, sh, sw, top, \
                         left, dh, dw); \
    } else { \
        for (int64_t p = 0; p < planes; p++) \
            mp_plane_##t(x + p * H * W, o + p * Ho * Wo, H, W, Ho, Wo, kh, kw, sh, sw, top, \
                         left, dh, dw); \
    } }
"""

F64 = r"""
#define T double
MP_KERNEL(f64, double)
GC_EXPORT void gc_max_pool2d_f64(MP_ARGS) {
    mp_pool_f64(planes, x, o, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, parallel);
}
#undef T
"""

# float32 2x2 windows of stride 2 wholly inside the input: each row of outputs from a
# pair of input rows, GC_W outputs at a time, the even and odd columns of 2 GC_W inputs
# split by shuffles, numpy's maximum (max_f32) as vector code, loads and stores of a
# row's last partial vector masked: branch-free, where a scalar loop mispredicted the
# comparisons of random data and memcpy'd tails cost a call each (140 us for LeNet's
# first pool over a batch of 64). The first tap is the running maximum of -inf and
# it, so it starts the chain.
F32 = r"""
#if GC_W == 16
#define MP_EVEN {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
#define MP_ODD {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}
#else
#define MP_EVEN {0, 2, 4, 6, 8, 10, 12, 14}
#define MP_ODD {1, 3, 5, 7, 9, 11, 13, 15}
#endif
static void mp_rows22(const float *x, float *o, int64_t rows, int64_t H, int64_t W,
                      int64_t Ho, int64_t Wo) {
    const vi32 even = MP_EVEN, odd = MP_ODD;
    for (int64_t q = 0; q < rows; q++) {
        const float *x0 = x + (q / Ho) * H * W + 2 * (q % Ho) * W, *x1 = x0 + W;
        float *out = o + q * Wo;
        for (int64_t k = 0; k < Wo; k += GC_W) {
            int64_t m = Wo - k < GC_W ? Wo - k : GC_W, n0 = 2 * m < GC_W ? 2 * m : GC_W;
            vf32 a0 = ldm_f32(x0 + 2 * k, n0), a1 = ldm_f32(x0 + 2 * k + GC_W, 2 * m - n0);
            vf32 b0 = ldm_f32(x1 + 2 * k, n0), b1 = ldm_f32(x1 + 2 * k + GC_W, 2 * m - n0);
            vf32 v = max_f32(__builtin_shuffle(a0, a1, even), __builtin_shuffle(a0, a1, odd));
            v = max_f32(v, __builtin_shuffle(b0, b1, even));
            stm_f32(out + k, max_f32(v, __builtin_shuffle(b0, b1, odd)), m);
        }
    }
}
#define T float
MP_KERNEL(f32, float)
GC_EXPORT void gc_max_pool2d_f32(MP_ARGS) {
    if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && top == 0 && left == 0 && dh == 1
            && dw == 1 && 2 * Ho <= H && 2 * Wo <= W) {
        if (parallel) {
            #pragma omp parallel for schedule(static)
            for (int64_t p = 0; p < planes; p++)
                mp_rows22(x + p * H * W, o + p * Ho * Wo, Ho, H, W, Ho, Wo);
        } else {
            mp_rows22(x, o, planes * Ho, H, W, Ho, Wo);
        }
        return;
    }
    mp_pool_f32(planes, x, o, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, parallel);
}
#undef T
"""

# one kernel per dtype, each with the macros (an identical redefinition is valid C)
KERNELS = {
    np.dtype(np.float32): Kernel("gc_max_pool2d_f32", SOURCE + F32, [], ["max_pool2d"], PARAMS),
    np.dtype(np.float64): Kernel("gc_max_pool2d_f64", SOURCE + F64, [], ["max_pool2d"], PARAMS),
}


def lower_max_pool2d(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the C pooling over every plane, or None (numpy's kernel) for an
    integer input or a symbolic shape."""
    x_t = gen.plan.values[step.inputs[0]].type
    out_t = gen.plan.values[step.output].type
    kernel = KERNELS.get(x_t.dtype)
    if kernel is None or not all(isinstance(d, int) for d in (*x_t.shape, *out_t.shape)):
        why = "integer values" if kernel is None else "a symbolic shape"
        calls.plan_state(gen)["declined"][step.index] = f"max_pool2d in C: not for {why}"
        return None
    calls.record(gen, kernel)
    a = step.attrs
    n, c, h, w = x_t.shape
    ho, wo = out_t.shape[2:]
    taps = a["kernel_size"][0] * a["kernel_size"][1]
    parallel = int(n * c * ho * wo * taps >= PARALLEL_WORK)
    lines: list[str] = []
    x_at = calls.value_address(gen, step.inputs[0], lines)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    sizes = [h, w, ho, wo, *a["kernel_size"], *a["stride"], *a["padding"][:2], *a["dilation"]]
    args = ", ".join(str(v) for v in [n * c, x_at, out_at, *sizes, parallel])
    return [*lines, f"{kernel.name}({args})"]
