/* Stacked outer products: out[p, i, j] = 0 + a[p, i] * b[p, j], the matmul of (P, M, 1)
   by (P, 1, N) (vmap's per-example weight gradients). numpy's matmul computes each
   entry as a sum of one product started from zero, so 0 + a * b, one rounding (-0.0
   products become +0.0); so does this, with no contraction, so the bits are numpy's.
   Each row of N is one vector loop; the P * M rows split over the OpenMP pool when
   `parallel`. */
#define GC_OUTER(t, T) \
static inline void outer_row_##t(T x, const T *row, T *o, int64_t N) { \
    for (int64_t j = 0; j < N; j++) o[j] = (T)0 + x * row[j]; } \
GC_EXPORT void gc_outer_##t(int64_t P, const T *a, const T *b, T *out, int64_t M, int64_t N, \
                            int64_t parallel) { \
    const int64_t rows = P * M; \
    if (parallel) { \
        _Pragma("omp parallel for schedule(static)") \
        for (int64_t r = 0; r < rows; r++) outer_row_##t(a[r], b + (r / M) * N, out + r * N, N); \
    } else { \
        for (int64_t r = 0; r < rows; r++) outer_row_##t(a[r], b + (r / M) * N, out + r * N, N); \
    } }
GC_OUTER(f32, float)
GC_OUTER(f64, double)
