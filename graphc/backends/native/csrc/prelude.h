#include <stdint.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
#ifndef __AVX2__
#error "graphc's native kernels need AVX2"
#endif
/* GC_W lanes: 16 with AVX-512 (one zmm of float32), else 8 (one ymm); VB bytes a vf32 */
#ifdef __AVX512F__
#define GC_W 16
#define GC_VB 64
typedef __m512 gc_ps; typedef __m512d gc_pd;
#define GC_SQRT_PS _mm512_sqrt_ps
#define GC_SQRT_PD _mm512_sqrt_pd
#define GC_ROUND_PS(x, mode) _mm512_roundscale_ps(x, mode | _MM_FROUND_NO_EXC)
#define GC_MIN_PS _mm512_min_ps
#define GC_MAX_PS _mm512_max_ps
#define GC_ROUND_PD(x, mode) _mm512_roundscale_pd(x, mode | _MM_FROUND_NO_EXC)
#else
#define GC_W 8
#define GC_VB 32
typedef __m256 gc_ps; typedef __m256d gc_pd;
#define GC_SQRT_PS _mm256_sqrt_ps
#define GC_SQRT_PD _mm256_sqrt_pd
#define GC_ROUND_PS(x, mode) _mm256_round_ps(x, mode | _MM_FROUND_NO_EXC)
#define GC_MIN_PS _mm256_min_ps
#define GC_MAX_PS _mm256_max_ps
#define GC_ROUND_PD(x, mode) _mm256_round_pd(x, mode | _MM_FROUND_NO_EXC)
#endif
typedef float vf32 __attribute__((vector_size(GC_VB)));
typedef double vf64 __attribute__((vector_size(2 * GC_VB)));
typedef double vf64h __attribute__((vector_size(GC_VB)));
typedef int32_t vb __attribute__((vector_size(GC_VB)));
typedef int32_t vi32 __attribute__((vector_size(GC_VB)));
typedef int64_t vi64 __attribute__((vector_size(2 * GC_VB)));
#define GC_EXPORT __attribute__((visibility("default")))
#define GC_INLINE static inline __attribute__((always_inline))
/* a template file's helper of kernel GC_NAME (c_sources.instance defines it): GC_FN(_row) */
#define GC_CAT_(a, b) a##b
#define GC_CAT(a, b) GC_CAT_(a, b)
#define GC_FN(suffix) GC_CAT(GC_NAME, suffix)

/* the pool's clock, one for the process (calls.POOL_CLOCK, bound into each library as
   it loads): [0] when a parallel region last ended, [1] for how long idle workers spin
   after one, in ns of CLOCK_MONOTONIC (0: they sleep at once). A region while they
   spin costs about a microsecond; waking a sleeping worker, tens to hundreds. So a
   kernel of middling size goes parallel only while the pool is warm (its threads'
   results are the same bits either way) */
static int64_t *gc_pool_clock;
GC_EXPORT void gc_bind_pool_clock(int64_t *clock) { gc_pool_clock = clock; }
GC_INLINE int64_t gc_now_ns(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }
GC_INLINE int gc_pool_warm(void) {
    return gc_pool_clock && gc_now_ns() - __atomic_load_n(gc_pool_clock, __ATOMIC_RELAXED)
                                < __atomic_load_n(gc_pool_clock + 1, __ATOMIC_RELAXED); }
GC_INLINE void gc_pool_used(void) {
    if (gc_pool_clock) __atomic_store_n(gc_pool_clock, gc_now_ns(), __ATOMIC_RELAXED); }
/* whether work of size n runs on the pool: from `cold` always, from `warm` while it is warm */
GC_INLINE int gc_parallel(int64_t n, int64_t cold, int64_t warm) {
    return n >= cold || (n >= warm && gc_pool_warm()); }
/* a kernel's `parallel` argument, chosen by its Python: 1 on the pool, 2 there while it
   is warm, 0 on the calling thread */
GC_INLINE int gc_parallel_flag(int64_t parallel) {
    return parallel == 1 || (parallel == 2 && gc_pool_warm()); }

/* splats: a scalar operand of integer vector arithmetic is broadcast, and adding it to
   zeros is exact, so this is one broadcast of the scalar's bits (gcc 11 compiled a loop
   over the lanes into a masked broadcast per lane, sixteen for one splat) */
GC_INLINE vf32 sp_f32(float s) {
    int32_t b; memcpy(&b, &s, 4); vi32 v = {0}; return (vf32)(v + b); }
GC_INLINE vf64 sp_f64(double s) {
    int64_t b; memcpy(&b, &s, 8); vi64 v = {0}; return (vf64)(v + b); }
GC_INLINE vb sp_b(int s) { vb v = {0}; return v + (s ? -1 : 0); }
GC_INLINE vi64 sp_i64(int64_t s) { vi64 v = {0}; return v + s; }

/* m <= GC_W float32 lanes by masked loads and stores: no library call for a variable m
   (memcpy's is one), never touching memory past the m lanes; loaded lanes past m are 0.
   With AVX2 a whole vector is a plain load or store: vmaskmovps is slow to store on
   AMD's cores (on a Zen 2, LeNet's first convolution spent most of its time in the
   masked stores of whole vectors) */
GC_INLINE vf32 ldm_f32(const float *p, int64_t m) {
#ifdef __AVX512F__
    return (vf32)_mm512_maskz_loadu_ps((__mmask16)((1u << m) - 1), p);
#else
    if (m == GC_W) { vf32 v; memcpy(&v, p, GC_VB); return v; }
    vi32 lane; for (int k = 0; k < GC_W; k++) lane[k] = k;
    return (vf32)_mm256_maskload_ps(p, (__m256i)(lane < (int32_t)m));
#endif
}
GC_INLINE void stm_f32(float *p, vf32 v, int64_t m) {
#ifdef __AVX512F__
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << m) - 1), (gc_ps)v);
#else
    if (m == GC_W) { memcpy(p, &v, GC_VB); return; }
    vi32 lane; for (int k = 0; k < GC_W; k++) lane[k] = k;
    _mm256_maskstore_ps(p, (__m256i)(lane < (int32_t)m), (gc_ps)v);
#endif
}

/* loads and stores of m <= GC_W lanes at element i; lanes past m are zero */
GC_INLINE vf32 ld_f32(const char *p, int64_t i, int64_t m) {
    if (m == GC_W) { vf32 v; memcpy(&v, p + 4 * i, GC_VB); return v; }
    return ldm_f32((const float *)(p + 4 * i), m); }  /* no library call for a part */
GC_INLINE vf64 ld_f64(const char *p, int64_t i, int64_t m) {
    vf64 v = {0}; memcpy(&v, p + 8 * i, 8 * m); return v; }
GC_INLINE vb ld_b(const char *p, int64_t i, int64_t m) {
    uint8_t t[GC_W] = {0}; memcpy(t, p + i, m); vb v;
    for (int k = 0; k < GC_W; k++) v[k] = t[k] ? -1 : 0;
    return v; }
GC_INLINE void st_f32(char *p, int64_t i, int64_t m, vf32 v) {
    if (m == GC_W) memcpy(p + 4 * i, &v, GC_VB);
    else stm_f32((float *)(p + 4 * i), v, m); }
GC_INLINE void st_f64(char *p, int64_t i, int64_t m, vf64 v) { memcpy(p + 8 * i, &v, 8 * m); }
/* int64 lanes: two registers each, as float64's (arithmetic wraps: -fwrapv, numpy's) */
GC_INLINE vi64 ld_i64(const char *p, int64_t i, int64_t m) {
    vi64 v = {0}; memcpy(&v, p + 8 * i, 8 * m); return v; }
GC_INLINE void st_i64(char *p, int64_t i, int64_t m, vi64 v) { memcpy(p + 8 * i, &v, 8 * m); }
GC_INLINE void st_b(char *p, int64_t i, int64_t m, vb v) {
    uint8_t t[GC_W]; for (int k = 0; k < GC_W; k++) t[k] = (uint8_t)(v[k] & 1);
    memcpy(p + i, t, m); }

/* dst[r][c] = src[c][r] for an 8 x 8 block of floats (rows ld and ldd apart): the usual
   unpack, shuffle and lane-swap sequence, 24 instructions for 64 elements */
GC_INLINE void tr8_f32(const float *src, int64_t ld, float *dst, int64_t ldd) {
    __m256 r[8], t[8], u[8];
    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(src + k * ld);
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(dst + k * ldd, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps(dst + (k + 4) * ldd, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
}

/* an element of a broadcast or strided operand: d = {shape[nd], element strides[nd]} */
GC_INLINE int64_t off_nd(int64_t idx, const int64_t *d, int nd) {
    int64_t off = 0;
    for (int j = nd - 1; j >= 0; j--) { off += (idx % d[j]) * d[nd + j]; idx /= d[j]; }
    return off; }
/* STRIDED: the lanes of a block that lies in one row of the output (its last dim), along
   which the operand is contiguous (stride 1) or constant (stride 0), are one load or one
   splat, their offset found once (an attention mask (B, 1, T, T) over (B, H, T, T), an
   outer product's (N, 1, K) over (N, M, K)); any other block steps its lanes through the
   index like an odometer, no division per lane. Finding each lane's offset by nd
   divisions made those broadcasts 18-36x slower than numpy's loops. Each lane reads the
   element it read before: the bits are the same */
#define GC_GATHER(t, T, one) \
    static __attribute__((noinline)) v##t gd_lanes_##t(const char *p, const int64_t *d, \
                                                      int nd, int64_t i, int64_t m) { \
        int64_t idx[nd > 0 ? nd : 1], off = 0, rest = i; \
        for (int j = nd - 1; j >= 0; j--) { \
            idx[j] = rest % d[j]; rest /= d[j]; off += idx[j] * d[nd + j]; } \
        v##t v = {0}; \
        for (int k = 0; k < m; k++) { \
            v[k] = one(((const T *)p)[off]); \
            for (int j = nd - 1; j >= 0; j--) { /* the next element's index and offset */ \
                off += d[nd + j]; \
                if (++idx[j] < d[j]) break; \
                off -= d[j] * d[nd + j]; idx[j] = 0; } \
        } \
        return v; } \
    GC_INLINE v##t gd_##t(const char *p, const int64_t *d, int nd, int64_t i, int64_t m) { \
        int64_t row = nd > 0 ? d[nd - 1] : 1, step = nd > 0 ? d[2 * nd - 1] : 0; \
        if (step <= 1 && i % row + m <= row) { \
            int64_t off = off_nd(i, d, nd); \
            return step ? ld_##t(p, off, m) : sp_##t(one(((const T *)p)[off])); } \
        return gd_lanes_##t(p, d, nd, i, m); }

/* BLOCK: element (idx / z) % y. The kernel finds a block's place in the runs once for
   all the BLOCK operands of one shape (r = i % z, qy = (i / z) % y: bk_at, one integer
   division, and a second only where the block's run index q = i / z wraps (q >= y: a
   per-channel operand over a batch), never for a (B, 1) operand over (B, N): that
   division cost cross-entropy's 4096x1000 gradient 5.87 -> 4.90 ms a call), then each
   loads with bk: a contiguous load when z == 1 and the block does
   not wrap, a splat when the block stays in one z-run, else lane by lane. That last path
   is a function of its own: inlined, its unrolled loop took the registers of every
   operand, and the spills, with two divisions per operand, made a kernel with four
   (C, 1, 1) operands 5x slower than with four full-size ones */
GC_INLINE void bk_at(int64_t z, int64_t y, int64_t i, int64_t *r, int64_t *qy) {
    int64_t q = i / z; *r = i - q * z; *qy = q < y ? q : q % y; }
#define GC_BLOCK(t, T, one) \
    static __attribute__((noinline)) v##t bk_lanes_##t(const char *p, int64_t z, int64_t y, \
                                                      int64_t r, int64_t qy, int64_t m) { \
        v##t v = {0}; \
        for (int k = 0; k < m; k++) { /* step through the runs: no division per lane */ \
            v[k] = one(((const T *)p)[qy]); \
            if (++r == z) { r = 0; if (++qy == y) qy = 0; } \
        } \
        return v; } \
    GC_INLINE v##t bk_##t(const char *p, int64_t z, int64_t y, int64_t r, int64_t qy, \
                          int64_t m) { \
        if (z == 1) { if (qy + m <= y) return ld_##t(p, qy, m); } \
        else if (r + m <= z) return sp_##t(one(((const T *)p)[qy])); \
        return bk_lanes_##t(p, z, y, r, qy, m); }
#define GC_SAME(x) (x)
#define GC_TRUE(x) ((x) ? -1 : 0)
GC_BLOCK(f32, float, GC_SAME)
GC_BLOCK(f64, double, GC_SAME)
GC_BLOCK(b, uint8_t, GC_TRUE)
GC_GATHER(f32, float, GC_SAME)
GC_GATHER(f64, double, GC_SAME)
GC_GATHER(b, uint8_t, GC_TRUE)
GC_BLOCK(i64, int64_t, GC_SAME)
GC_GATHER(i64, int64_t, GC_SAME)

GC_INLINE vf32 sel_f32(vb m, vf32 a, vf32 b) { return (vf32)(((vi32)a & m) | ((vi32)b & ~m)); }
GC_INLINE vf64 sel_f64(vb m, vf64 a, vf64 b) {
    vi64 w = __builtin_convertvector(m, vi64);
    return (vf64)(((vi64)a & w) | ((vi64)b & ~w)); }
GC_INLINE vb sel_b(vb m, vb a, vb b) { return (a & m) | (b & ~m); }
GC_INLINE vi64 sel_i64(vb m, vi64 a, vi64 b) {
    vi64 w = __builtin_convertvector(m, vi64);
    return (a & w) | (b & ~w); }
GC_INLINE vb nan_f32(vf32 x) { return (vb)(x != x); }
/* x kept in [lo, hi], nan passing through: the instructions' min and max return their
   second operand when either is nan (and of two equal values), here x. Not numpy's
   minimum or maximum (below): for graphc's own clamps only */
GC_INLINE vf32 clamp_f32(float lo, float hi, vf32 x) {
    return (vf32)GC_MAX_PS((gc_ps)sp_f32(lo), GC_MIN_PS((gc_ps)sp_f32(hi), (gc_ps)x)); }
/* a result known to lie in [-1, 1] (sin, cos, tanh) kept there: libmvec's and graphc's
   approximations may round one ulp past 1, numpy's do not (nan passes through) */
GC_INLINE vf32 unit_f32(vf32 v) { return clamp_f32(-1, 1, v); }
GC_INLINE vb nan_f64(vf64 x) { return __builtin_convertvector(x != x, vb); }
GC_INLINE vf64 unit_f64(vf64 v) {
    return sel_f64(__builtin_convertvector(v > sp_f64(1), vb), sp_f64(1),
                   sel_f64(__builtin_convertvector(v < sp_f64(-1), vb), sp_f64(-1), v)); }

/* numpy's maximum and minimum: a nan in a wins, then a nan in b; equal values give b */
GC_INLINE vf32 max_f32(vf32 a, vf32 b) {
    return sel_f32(nan_f32(a), a, sel_f32(nan_f32(b), b, sel_f32((vb)(a > b), a, b))); }
GC_INLINE vf64 max_f64(vf64 a, vf64 b) {
    vb gt = __builtin_convertvector(a > b, vb);
    return sel_f64(nan_f64(a), a, sel_f64(nan_f64(b), b, sel_f64(gt, a, b))); }
GC_INLINE vf32 min_f32(vf32 a, vf32 b) {
    return sel_f32(nan_f32(a), a, sel_f32(nan_f32(b), b, sel_f32((vb)(a < b), a, b))); }
GC_INLINE vf64 min_f64(vf64 a, vf64 b) {
    vb lt = __builtin_convertvector(a < b, vb);
    return sel_f64(nan_f64(a), a, sel_f64(nan_f64(b), b, sel_f64(lt, a, b))); }

GC_INLINE vf32 abs_f32(vf32 x) { vi32 k = {0}; k = k + 0x7fffffff; return (vf32)((vi32)x & k); }
GC_INLINE vf64 abs_f64(vf64 x) {
    vi64 k = {0}; k = k + 0x7fffffffffffffffLL; return (vf64)((vi64)x & k); }
/* numpy's integer abs, maximum and minimum: abs of INT64_MIN wraps to itself */
GC_INLINE vi64 abs_i64(vi64 x) { vi64 s = x >> 63; return (x ^ s) - s; }
GC_INLINE vi64 max_i64(vi64 a, vi64 b) { vi64 m = a > b; return (a & m) | (b & ~m); }
GC_INLINE vi64 min_i64(vi64 a, vi64 b) { vi64 m = a < b; return (a & m) | (b & ~m); }
GC_INLINE vf32 sqrt_f32(vf32 x) { return (vf32)GC_SQRT_PS((gc_ps)x); }
/* a * b + c rounded once, for graphc's own polynomials only (never for numpy's ops) */
GC_INLINE vf32 fma_f32(vf32 a, vf32 b, vf32 c) {
#if defined(__AVX512F__)
    return (vf32)_mm512_fmadd_ps((gc_ps)a, (gc_ps)b, (gc_ps)c);
#elif defined(__FMA__)
    return (vf32)_mm256_fmadd_ps((gc_ps)a, (gc_ps)b, (gc_ps)c);
#else
    return a * b + c;
#endif
}
/* float64 lanes are two registers: a function of one register applied to each half */
#define GC_HALVES(name, expr_lo, expr_hi) \
    GC_INLINE vf64 name(vf64 x) { vf64h lo, hi; memcpy(&lo, &x, GC_VB); memcpy(&hi, (char *)&x + GC_VB, GC_VB); \
        lo = expr_lo; hi = expr_hi; vf64 r; memcpy(&r, &lo, GC_VB); memcpy((char *)&r + GC_VB, &hi, GC_VB); return r; }
GC_HALVES(sqrt_f64, (vf64h)GC_SQRT_PD((gc_pd)lo), (vf64h)GC_SQRT_PD((gc_pd)hi))
#define GC_ROUND(name, mode) \
    GC_INLINE vf32 name##_f32(vf32 x) { return (vf32)GC_ROUND_PS((gc_ps)x, mode); } \
    GC_HALVES(name##_f64, (vf64h)GC_ROUND_PD((gc_pd)lo, mode), (vf64h)GC_ROUND_PD((gc_pd)hi, mode))
GC_ROUND(floor, _MM_FROUND_TO_NEG_INF)
GC_ROUND(ceil, _MM_FROUND_TO_POS_INF)
GC_ROUND(trunc, _MM_FROUND_TO_ZERO)
GC_ROUND(rint, _MM_FROUND_TO_NEAREST_INT)  /* half to even, as np.rint */
