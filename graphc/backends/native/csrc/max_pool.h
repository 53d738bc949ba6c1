/* ---- max_pool2d (graphc/backends/native/pool.py) ---- */
#include <math.h>
#define MP_ARGS int64_t planes, const T *x, T *o, int64_t H, int64_t W, int64_t Ho, \
    int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top, int64_t left, \
    int64_t dh, int64_t dw, int64_t parallel
#define MP_KERNEL(t, T) \
GC_INLINE T mp_max_##t(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); } \
/* numpy's maximum(tap, running): PyTorch's step, the tap if greater or nan */ \
static void mp_run_##t(T *o, const T *x, int64_t n, int64_t s) { \
    if (s == 1) { for (int64_t k = 0; k < n; k++) o[k] = mp_max_##t(x[k], o[k]); } \
    else if (s == 2) { for (int64_t k = 0; k < n; k++) o[k] = mp_max_##t(x[2 * k], o[k]); } \
    else { for (int64_t k = 0; k < n; k++) o[k] = mp_max_##t(x[s * k], o[k]); } } \
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
    if (gc_parallel_flag(parallel)) { \
        _Pragma("omp parallel for schedule(static)") \
        for (int64_t p = 0; p < planes; p++) \
            mp_plane_##t(x + p * H * W, o + p * Ho * Wo, H, W, Ho, Wo, kh, kw, sh, sw, top, \
                         left, dh, dw); \
        gc_pool_used(); \
    } else { \
        for (int64_t p = 0; p < planes; p++) \
            mp_plane_##t(x + p * H * W, o + p * Ho * Wo, H, W, Ho, Wo, kh, kw, sh, sw, top, \
                         left, dh, dw); \
    } }
