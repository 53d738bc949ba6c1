/* Instantiated by attention.py per dtype and BLAS integer width (c_sources.instance):
   GC_NAME names the kernel, scalar_t its element type, GC_GEMM_INT cblas's integer,
   GC_SOFTMAX the softmax row kernel (whose C comes first in the same source),
   GC_NO_TRANS cblas's CblasNoTrans. */
typedef void (*GC_FN(_gemm))(int, int, int, GC_GEMM_INT, GC_GEMM_INT, GC_GEMM_INT, scalar_t, const scalar_t *,
                          GC_GEMM_INT, const scalar_t *, GC_GEMM_INT, scalar_t, scalar_t *, GC_GEMM_INT);
/* d: nd, m, n, p, pv, then the batch shape (nd), then per operand (q, kt, v, out) its
   byte strides along the batch axes (nd each), then per product the flags and leading
   dims numpy passes: tq, ldq, tk, ldk (scores), tv, ldv, ldo (output) */
GC_INLINE int64_t GC_FN(_at)(int64_t item, const int64_t *shape, const int64_t *strides, int nd) {
    int64_t off = 0;
    for (int j = nd - 1; j >= 0; j--) { off += (item % shape[j]) * strides[j]; item /= shape[j]; }
    return off; }
GC_INLINE void GC_FN(_item)(int64_t item, const int64_t *d, char *out, const char *q, const char *k,
                         const char *v, const scalar_t *scale, GC_FN(_gemm) gemm, scalar_t *s) {
    int nd = (int)d[0];
    int64_t m = d[1], n = d[2], p = d[3], pv = d[4];
    const int64_t *shape = d + 5, *st = d + 5 + nd, *f = d + 5 + 5 * nd;
    const scalar_t *qi = (const scalar_t *)(q + GC_FN(_at)(item, shape, st, nd));
    const scalar_t *ki = (const scalar_t *)(k + GC_FN(_at)(item, shape, st + nd, nd));
    const scalar_t *vi = (const scalar_t *)(v + GC_FN(_at)(item, shape, st + 2 * nd, nd));
    scalar_t *oi = (scalar_t *)(out + GC_FN(_at)(item, shape, st + 3 * nd, nd));
    gemm(101, (int)f[0], (int)f[2], m, p, n, 1, qi, f[1], ki, f[3], 0, s, p);
    if (scale) {
        scalar_t c = scale[0];
        for (int64_t j = 0; j < m * p; j++) s[j] = s[j] * c;
    }
    GC_SOFTMAX(m, p, (char *)s, (const char *)s, 0);
    gemm(101, GC_NO_TRANS, (int)f[4], m, pv, p, 1, s, p, vi, f[5], 0, oi, f[6]);
}
/* returns 1 when a thread could not allocate its block of scores (its items are
   skipped: the caller raises), else 0 */
GC_EXPORT int64_t GC_NAME(int64_t items, const int64_t *d, char *out, const char *q,
                       const char *k, const char *v, const char *scale, int64_t gemm,
                       int64_t parallel) {
    int64_t m = d[1], p = d[3], failed = 0;
    GC_FN(_gemm) fn = (GC_FN(_gemm))(intptr_t)gemm; /* numpy's cblas gemm, by its address */
    if (parallel) {
        #pragma omp parallel
        {
            scalar_t *s = (scalar_t *)malloc(m * p * sizeof(scalar_t));
            if (!s) {
                #pragma omp atomic write
                failed = 1;
            }
            #pragma omp for schedule(static)
            for (int64_t i = 0; i < items; i++)
                if (s) GC_FN(_item)(i, d, out, q, k, v, (const scalar_t *)scale, fn, s);
            free(s);
        }
    } else {
        scalar_t *s = (scalar_t *)malloc(m * p * sizeof(scalar_t));
        if (!s) return 1;
        for (int64_t i = 0; i < items; i++)
            GC_FN(_item)(i, d, out, q, k, v, (const scalar_t *)scale, fn, s);
        free(s);
    }
    return failed;
}
