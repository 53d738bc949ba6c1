"""max_pool2d and max_pool2d_backward on the native backend: one C function over every
(image, channel) plane.

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

max_pool2d_backward (a CNN's training step runs one per pool): numpy's kernel takes a
few whole-batch passes per tap (equality, nan tests, masks, an add): 0.35 ms for the
gradient of LeNet's first pool over a batch of 64. Here it is one pass; see BACKWARD
for why the bits are numpy's.
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

# max_pool2d_backward: planes, then ct, x, pooled, grad, the winners' buffer (an int32
# per window, the plan's), then the sizes as above
BACKWARD_PARAMS = "ppppp" + "i" * 13

# Each window's cotangent goes to its winner, the first tap (row-major) whose input
# equals the pooled value (nan equal to nan), as numpy's kernel (ops/maxpool.py) finds
# it; numpy then adds, tap by tap, each window's kept cotangent into the gradient
# (+0.0 first). Here the winners are found first, then each tap in turn adds the
# cotangents of the windows it won: the same additions in the same order, so the same
# bits (the +0.0 numpy adds for the windows a tap did not win changes nothing: the
# gradient never holds -0.0). 2x2 windows of stride 2 inside the input touch each
# input once: one pass, branch-free, 0.0f + ct at the winner and +0.0 elsewhere.
BACKWARD = r"""
/* ---- max_pool2d_backward (graphc/runtime/native/pool.py) ---- */
#define MPB_ARGS int64_t planes, const T *ct, const T *x, const T *pooled, T *g, \
    int32_t *wins, int64_t H, \
    int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, \
    int64_t top, int64_t left, int64_t dh, int64_t dw, int64_t parallel
#define MPB_KERNEL(t, T, ROWS22) \
static void mpb_plane_##t(const T *ct, const T *x, const T *p, T *g, int32_t *win, \
        int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, \
        int64_t sw, int64_t top, int64_t left, int64_t dh, int64_t dw) { \
    for (int64_t k = 0; k < H * W; k++) g[k] = (T)0; \
    for (int64_t q = 0; q < Ho * Wo; q++) { \
        int64_t r = q / Wo, c = q % Wo; \
        T v = p[q]; \
        int pn = v != v; \
        win[q] = -1; \
        for (int64_t t = 0; t < kh * kw && win[q] < 0; t++) { \
            int64_t h = r * sh - top + (t / kw) * dh, w = c * sw - left + (t % kw) * dw; \
            if (h < 0 || h >= H || w < 0 || w >= W) continue; \
            T a = x[h * W + w]; \
            if (a == v || (pn && a != a)) win[q] = (int32_t)t; \
        } \
    } \
    for (int64_t t = 0; t < kh * kw; t++) \
        for (int64_t q = 0; q < Ho * Wo; q++) { \
            if (win[q] != t) continue; \
            int64_t r = q / Wo, c = q % Wo; \
            int64_t h = r * sh - top + (t / kw) * dh, w = c * sw - left + (t % kw) * dw; \
            g[h * W + w] += ct[q]; \
        } } \
GC_EXPORT void gc_max_pool2d_backward_##t(MPB_ARGS) { \
    if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && top == 0 && left == 0 && dh == 1 \
            && dw == 1 && 2 * Ho <= H && 2 * Wo <= W && Ho > 0) { \
        if (parallel) { \
            _Pragma("omp parallel for schedule(static)") \
            for (int64_t n = 0; n < planes; n++) \
                ROWS22(ct + n * Ho * Wo, x + n * H * W, pooled + n * Ho * Wo, \
                               g + n * H * W, Ho, H, W, Ho, Wo); \
        } else { \
            ROWS22(ct, x, pooled, g, planes * Ho, H, W, Ho, Wo); \
        } \
        return; \
    } \
    _Pragma("omp parallel for schedule(static) if (parallel)") \
    for (int64_t n = 0; n < planes; n++) { \
        mpb_plane_##t(ct + n * Ho * Wo, x + n * H * W, pooled + n * Ho * Wo, g + n * H * W, \
                      wins + n * Ho * Wo, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw); \
    } }
/* the 2x2, stride-2 pass, one window at a time (float64) */
#define MPB_ROWS22(t, T) \
static void mpb_rows22_##t(const T *ct, const T *x, const T *p, T *g, int64_t rows, \
        int64_t H, int64_t W, int64_t Ho, int64_t Wo) { \
    for (int64_t q = 0; q < rows; q++) { \
        int64_t at = (q / Ho) * H * W + 2 * (q % Ho) * W; \
        const T *x0 = x + at, *x1 = x0 + W, *pq = p + q * Wo, *cq = ct + q * Wo; \
        T *g0 = g + at, *g1 = g0 + W; \
        for (int64_t k = 0; k < Wo; k++) { \
            T v = pq[k], one = (T)0 + cq[k], a = x0[2 * k], b = x0[2 * k + 1]; \
            T c = x1[2 * k], d = x1[2 * k + 1]; \
            int pn = v != v; \
            int ha = (a == v) | (pn & (a != a)); \
            int hb = !ha & ((b == v) | (pn & (b != b))); \
            int hc = !ha & !hb & ((c == v) | (pn & (c != c))); \
            int hd = !ha & !hb & !hc & ((d == v) | (pn & (d != d))); \
            g0[2 * k] = ha ? one : (T)0; g0[2 * k + 1] = hb ? one : (T)0; \
            g1[2 * k] = hc ? one : (T)0; g1[2 * k + 1] = hd ? one : (T)0; \
        } \
        if (W > 2 * Wo) /* an odd last column: no window */ \
            for (int64_t k = 2 * Wo; k < W; k++) { g0[k] = (T)0; g1[k] = (T)0; } \
        if (q % Ho == Ho - 1) /* rows past the last window's */ \
            for (int64_t k = 2 * W; k < (H - 2 * (Ho - 1)) * W; k++) g0[k] = (T)0; \
    } }
"""

# float32: the vector pass; float64: the scalar one (each dtype its own functions, so
# that a plan with both compiles them once)
BACKWARD_F32 = r"""
#if GC_W == 16
#define MPB_EVEN {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
#define MPB_ODD {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}
#define MPB_LO {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23}
#define MPB_HI {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}
#else
#define MPB_EVEN {0, 2, 4, 6, 8, 10, 12, 14}
#define MPB_ODD {1, 3, 5, 7, 9, 11, 13, 15}
#define MPB_LO {0, 8, 1, 9, 2, 10, 3, 11}
#define MPB_HI {4, 12, 5, 13, 6, 14, 7, 15}
#endif
/* lanes where the window's winner is not yet found and this tap's input is the pooled
   value (nan equal to nan) */
GC_INLINE vb mpb_hit(vf32 a, vf32 v, vb pn, vb found) {
    return ~found & ((vb)(a == v) | (pn & (vb)(a != a))); }
/* the 2x2, stride-2 pass on float32, GC_W windows at a time: a row pair's even and odd
   columns split by shuffles (as mp_rows22), the winners' masks, 0.0f + ct or +0.0 by
   selects, interleaved back; a row's last partial vectors loaded and stored masked */
static void mpb_rows22_v(const float *ct, const float *x, const float *p, float *g,
                         int64_t rows, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
    const vi32 even = MPB_EVEN, odd = MPB_ODD, lo = MPB_LO, hi = MPB_HI;
    const vf32 zero = sp_f32(0.0f);
    for (int64_t q = 0; q < rows; q++) {
        int64_t at = (q / Ho) * H * W + 2 * (q % Ho) * W;
        const float *x0 = x + at, *x1 = x0 + W, *pq = p + q * Wo, *cq = ct + q * Wo;
        float *g0 = g + at, *g1 = g0 + W;
        for (int64_t k = 0; k < Wo; k += GC_W) {
            int64_t m = Wo - k < GC_W ? Wo - k : GC_W, n0 = 2 * m < GC_W ? 2 * m : GC_W;
            vf32 a0 = ldm_f32(x0 + 2 * k, n0), a1 = ldm_f32(x0 + 2 * k + GC_W, 2 * m - n0);
            vf32 b0 = ldm_f32(x1 + 2 * k, n0), b1 = ldm_f32(x1 + 2 * k + GC_W, 2 * m - n0);
            vf32 v = ldm_f32(pq + k, m), one = zero + ldm_f32(cq + k, m);
            vb pn = (vb)(v != v), none = sp_b(0);
            vb ha = mpb_hit(__builtin_shuffle(a0, a1, even), v, pn, none);
            vb hb = mpb_hit(__builtin_shuffle(a0, a1, odd), v, pn, ha);
            vb hc = mpb_hit(__builtin_shuffle(b0, b1, even), v, pn, ha | hb);
            vb hd = mpb_hit(__builtin_shuffle(b0, b1, odd), v, pn, ha | hb | hc);
            vf32 ga = sel_f32(ha, one, zero), gb = sel_f32(hb, one, zero);
            vf32 gc = sel_f32(hc, one, zero), gd = sel_f32(hd, one, zero);
            stm_f32(g0 + 2 * k, __builtin_shuffle(ga, gb, lo), n0);
            stm_f32(g0 + 2 * k + GC_W, __builtin_shuffle(ga, gb, hi), 2 * m - n0);
            stm_f32(g1 + 2 * k, __builtin_shuffle(gc, gd, lo), n0);
            stm_f32(g1 + 2 * k + GC_W, __builtin_shuffle(gc, gd, hi), 2 * m - n0);
        }
        if (W > 2 * Wo) /* an odd last column: no window */
            for (int64_t k = 2 * Wo; k < W; k++) { g0[k] = 0.0f; g1[k] = 0.0f; }
        if (q % Ho == Ho - 1) /* rows past the last window's */
            for (int64_t k = 2 * W; k < (H - 2 * (Ho - 1)) * W; k++) g0[k] = 0.0f;
    }
}
#define T float
MPB_KERNEL(f32, float, mpb_rows22_v)
#undef T
"""

BACKWARD_F64 = r"""
#define T double
MPB_ROWS22(f64, double)
MPB_KERNEL(f64, double, mpb_rows22_f64)
#undef T
"""
BACKWARD_KERNELS = {
    np.dtype(dtype): Kernel(
        f"gc_max_pool2d_backward_{t}", BACKWARD + part, [], ["max_pool2d_backward"], BACKWARD_PARAMS
    )
    for dtype, t, part in ((np.float32, "f32", BACKWARD_F32), (np.float64, "f64", BACKWARD_F64))
}


def _taps(attrs: dict) -> int:
    return attrs["kernel_size"][0] * attrs["kernel_size"][1]


def _sizes(x_shape: tuple, pooled_shape: tuple, attrs: dict) -> list[int]:
    """The C functions' geometry after their addresses: H, W, Ho, Wo, kH, kW, stride,
    top, left, dilation (PARAMS)."""
    a = attrs
    return [*x_shape[2:], *pooled_shape[2:], *a["kernel_size"], *a["stride"],
            *a["padding"][:2], *a["dilation"]]  # fmt: skip


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
    n, c, h, w = x_t.shape
    ho, wo = out_t.shape[2:]
    parallel = int(n * c * ho * wo * _taps(step.attrs) >= PARALLEL_WORK)
    lines: list[str] = []
    x_at = calls.value_address(gen, step.inputs[0], lines)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    sizes = _sizes(x_t.shape, out_t.shape, step.attrs)
    args = ", ".join(str(v) for v in [n * c, x_at, out_at, *sizes, parallel])
    return [*lines, f"{kernel.name}({args})"]


def lower_max_pool2d_backward(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the C routing over every plane (numpy's bits), or None (numpy's
    kernel) for other dtypes (the cotangent, input and pooled of one float dtype) or a
    symbolic shape."""
    ct_t, x_t, pooled_t = (gen.plan.values[v].type for v in step.inputs)
    kernel = BACKWARD_KERNELS.get(x_t.dtype)
    if kernel is None or ct_t.dtype != x_t.dtype or pooled_t.dtype != x_t.dtype:
        why = "values of one float dtype only"
    elif not all(isinstance(d, int) for d in (*x_t.shape, *ct_t.shape)):
        why = "static shapes only"
    else:
        why = None
    if why is not None:
        calls.plan_state(gen)["declined"][step.index] = f"max_pool2d_backward in C: {why}"
        return None
    calls.record(gen, kernel)
    a = step.attrs
    n, c, h, w = x_t.shape
    ho, wo = ct_t.shape[2:]
    parallel = int(n * c * max(ho * wo * _taps(a), h * w) >= PARALLEL_WORK)
    lines: list[str] = []
    ct_at, x_at, pooled_at = (calls.value_address(gen, v, lines) for v in step.inputs)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    geometry = (a["kernel_size"], a["stride"], tuple(a["padding"][:2]), a["dilation"])
    one_pass = geometry == ((2, 2), (2, 2), (0, 0), (1, 1)) and 2 * ho <= h and 2 * wo <= w
    count = 1 if one_pass else max(1, n * c * ho * wo)  # the general path's winners
    wins = gen.fresh("winners")  # made once per thread
    empty = gen.const(np.empty, "empty")
    gen.setup_lines.append(f"{wins} = {empty}({count}, {gen.const(np.int32, 'i32')})")
    wins_at = calls.address(gen, wins, True, lines)
    sizes = _sizes(x_t.shape, ct_t.shape, a)
    args = [n * c, ct_at, x_at, pooled_at, out_at, wins_at, *sizes, parallel]
    args = ", ".join(str(v) for v in args)
    return [*lines, f"{kernel.name}({args})"]
