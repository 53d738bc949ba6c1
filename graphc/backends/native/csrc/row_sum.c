/* Instantiated by rows.py per dtype (c_sources.instance): GC_NAME names the kernel,
   scalar_t and vec_t its element and vector types, pw_t, ld_t, st_t, sp_t, exp_t, sel_t,
   nan_t, gt_t the prelude's helpers for that dtype, GC_PAR and GC_WARM its threading
   thresholds (elements, cold and warm pool), GC_LOG its log. */
/* sum (count 0) or mean (divided by count) of each of `rows` contiguous rows of n: 0.0
   plus the row's pairwise sum, or (a row longer than `piece`, numpy < 2.3) plus the
   pairwise sums of its pieces of `piece` elements in turn, as numpy's buffered
   reduction adds them */
GC_INLINE void GC_FN(_row)(int64_t o, int64_t n, char *out, const char *x, int64_t count) {
    scalar_t s = (scalar_t)0 + pw_t((const scalar_t *)x + o * n, n);
    if (count) s = (scalar_t)((double)s / (double)count);
    ((scalar_t *)out)[o] = s;
}
static void GC_FN(_pieces)(int64_t o, int64_t n, char *out, const char *x, int64_t count,
                        int64_t piece) {
    const scalar_t *a = (const scalar_t *)x + o * n;
    scalar_t s = (scalar_t)0;
    for (int64_t i = 0; i < n; i += piece) s = s + pw_t(a + i, n - i < piece ? n - i : piece);
    if (count) s = (scalar_t)((double)s / (double)count);
    ((scalar_t *)out)[o] = s;
}
/* the choice is made once per call: a test per row cost 10% on 512 rows of 10 */
GC_EXPORT void GC_NAME(int64_t rows, int64_t n, char *out, const char *x, int64_t count,
                    int64_t piece) {
    int par = gc_parallel(rows * n, GC_PAR, GC_WARM);
    if (piece > 0 && piece < n) {
        #pragma omp parallel for schedule(static) if (par)
        for (int64_t o = 0; o < rows; o++) GC_FN(_pieces)(o, n, out, x, count, piece);
        if (par) gc_pool_used();
    } else if (par) {
        #pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < rows; o++) GC_FN(_row)(o, n, out, x, count);
        gc_pool_used();
    } else {
        for (int64_t o = 0; o < rows; o++) GC_FN(_row)(o, n, out, x, count);
    }
}
