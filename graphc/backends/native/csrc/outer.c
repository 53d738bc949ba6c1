/* Stacked outer products: out[p, i, j] = 0 + a[p, i] * b[p, j], the matmul of (P, M, 1)
   by (P, 1, N) (vmap's per-example weight gradients). numpy's matmul computes each
   entry as a sum of one product started from zero, so 0 + a * b, one rounding (-0.0
   products become +0.0); so does this, with no contraction, so the bits are numpy's.

   Each row of N is whole vectors, the last one overlapping the one before where N is
   not a multiple of the vector (the same values written twice), one entry at a time
   only for rows shorter than a vector (but float32 ones with AVX-512: `outer_short`):
   gcc's loop finished a row of 10 float32 one entry at a time. The rows are walked
   with their matrix's index counted, not divided: a 64-bit division per row took most
   of the time of short rows (the digits MLP's (256, 64, 10) gradient on one AVX2 core:
   90 us, 30 us without both). The P * M rows split over the OpenMP pool in one range
   per thread when `gc_parallel_flag` says so */
#include <omp.h>

/* float32 rows shorter than a vector, lo to hi, with AVX-512 (OUTER_SHORT_t): each
   row one whole vector of b's row (loaded once a matrix, lanes past N zero) times its
   entry of a, stored whole where the next row's store writes over the lanes past the
   row and the vector ends within the range, else masked (never past the range: the
   next range is another thread's, or past the result; with N of 1, the last 15 rows).
   One entry at a time, the digits MLP's (256, 64, 10) gradient, rows of 10 against 16
   lanes, took 54 us a call on a Zen 4, a masked store a row 19.5, so 15.8 (its
   per-example gradients: 104 -> 80 us; whole aligned vectors of 8 rows put together by
   permutes took it to 11.7 us alone and left those at 80-82: not kept). AVX2's masked
   stores are slow on AMD's cores (prelude.h): there one entry at a time */
#ifdef __AVX512F__
static void outer_short_f32(const float *a, const float *b, float *out, int64_t M, int64_t N,
                            int64_t lo, int64_t hi) {
    int64_t p = lo / M, i = lo % M;
    vf32 zero = sp_f32(0), row = ldm_f32(b + p * N, N);
    for (int64_t r = lo; r < hi; r++) {
        vf32 v = zero + sp_f32(a[r]) * row;
        if ((r + 1) * N + (GC_W - N) <= hi * N) memcpy(out + r * N, &v, GC_VB);
        else stm_f32(out + r * N, v, N);
        if (++i == M && r + 1 < hi) { i = 0; p++; row = ldm_f32(b + p * N, N); }
    }
}
#define OUTER_SHORT_f32(...) (outer_short_f32(__VA_ARGS__), 1)
#else
#define OUTER_SHORT_f32(...) 0
#endif
#define OUTER_SHORT_f64(...) 0  /* whether a type's short rows were done so */

#define GC_OUTER(t, T) \
static inline void outer_row_##t(T x, const T *row, T *o, int64_t N) { \
    if (N < GC_W) { \
        for (int64_t j = 0; j < N; j++) o[j] = (T)0 + x * row[j]; \
        return; } \
    v##t vx = sp_##t(x), zero = sp_##t(0), r; \
    int64_t j = 0; \
    for (; j + GC_W <= N; j += GC_W) { \
        memcpy(&r, row + j, sizeof r); \
        r = zero + vx * r; \
        memcpy(o + j, &r, sizeof r); } \
    if (j < N) { \
        j = N - GC_W; \
        memcpy(&r, row + j, sizeof r); \
        r = zero + vx * r; \
        memcpy(o + j, &r, sizeof r); } } \
static void outer_rows_##t(const T *a, const T *b, T *out, int64_t M, int64_t N, int64_t lo, \
                           int64_t hi) { \
    if (N < GC_W && OUTER_SHORT_##t(a, b, out, M, N, lo, hi)) return; \
    int64_t p = lo / M, i = lo % M; \
    for (int64_t r = lo; r < hi; r++) { \
        outer_row_##t(a[r], b + p * N, out + r * N, N); \
        if (++i == M) { i = 0; p++; } } } \
GC_EXPORT void gc_outer_##t(int64_t P, const T *a, const T *b, T *out, int64_t M, int64_t N, \
                            int64_t parallel) { \
    const int64_t rows = P * M; \
    if (rows == 0 || N == 0) return; /* outer_short stores whole vectors */ \
    if (!gc_parallel_flag(parallel)) { \
        outer_rows_##t(a, b, out, M, N, 0, rows); \
        return; } \
    _Pragma("omp parallel") { \
        int64_t k = omp_get_thread_num(), n = omp_get_num_threads(); \
        outer_rows_##t(a, b, out, M, N, rows * k / n, rows * (k + 1) / n); } \
    gc_pool_used(); }
GC_OUTER(f32, float)
GC_OUTER(f64, double)
