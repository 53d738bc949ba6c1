/* Instantiated by rows.py per dtype (c_sources.instance): GC_NAME names the kernel,
   scalar_t and vec_t its element and vector types, pw_t, ld_t, st_t, sp_t, exp_t, sel_t,
   nan_t, gt_t the prelude's helpers for that dtype, GC_PAR and GC_WARM its threading
   thresholds (elements, cold and warm pool), GC_LOG its log. */
/* softmax (take_log 0) or log_softmax (take_log 1) of row o of n, as graphc's numpy
   kernels compute them: x - max, exp, the pairwise sum, / sum or - log; `e` holds the
   exps of log_softmax (n + GC_W elements). The max is numpy's maximum (a nan wins),
   taken lane by lane over whole vectors, then across the lanes and the tail: the same
   value as numpy's reduction, but for which zero a tie of -0.0 and 0.0 gives, which
   changes no result (x - 0.0 and x - -0.0 differ only for x = -0.0, and exp gives 1 for
   both). Whole vectors load and store as vectors; only the tail takes m lanes */
GC_INLINE scalar_t GC_FN(_max)(scalar_t top, scalar_t a) {
    return (top != top) ? top : (a != a || a >= top) ? a : top; }
GC_INLINE void GC_FN(_row)(int64_t o, int64_t n, char *out, const char *x, int64_t take_log,
                        scalar_t *e) {
    const scalar_t *a = (const scalar_t *)x + o * n;
    char *y = out + o * n * sizeof(scalar_t);
    int64_t whole = n - n % GC_W, j;
    scalar_t top = a[0];
    if (whole) {
        vec_t t = ld_t((const char *)a, 0, GC_W);
        for (j = GC_W; j < whole; j += GC_W) {
            vec_t b = ld_t((const char *)a, j, GC_W);
            t = sel_t(nan_t(t), t, sel_t(nan_t(b) | gt_t(b, t), b, t));
        }
        for (int k = 0; k < GC_W; k++) top = GC_FN(_max)(top, t[k]);
    }
    for (j = whole; j < n; j++) top = GC_FN(_max)(top, a[j]);
    vec_t shift = sp_t(top);
    for (j = 0; j < whole; j += GC_W) {
        vec_t s = ld_t((const char *)a, j, GC_W) - shift;
        if (take_log) { st_t(y, j, GC_W, s); st_t((char *)e, j, GC_W, exp_t(s)); }
        else st_t(y, j, GC_W, exp_t(s));
    }
    if (j < n) {
        vec_t s = ld_t((const char *)a, j, n - j) - shift;
        if (take_log) { st_t(y, j, n - j, s); st_t((char *)e, j, n - j, exp_t(s)); }
        else st_t(y, j, n - j, exp_t(s));
    }
    scalar_t sum = (scalar_t)0 + pw_t(take_log ? e : (const scalar_t *)y, n);
    vec_t by = sp_t(take_log ? GC_LOG(sum) : sum);
    for (j = 0; j < whole; j += GC_W) {
        vec_t v = ld_t(y, j, GC_W);
        st_t(y, j, GC_W, take_log ? v - by : v / by);
    }
    if (j < n) {
        vec_t v = ld_t(y, j, n - j);
        st_t(y, j, n - j, take_log ? v - by : v / by);
    }
}
/* returns 1 when log_softmax could not allocate a thread's exps (its rows are skipped:
   the caller raises), else 0; softmax allocates nothing */
GC_EXPORT int64_t GC_NAME(int64_t rows, int64_t n, char *out, const char *x, int64_t take_log) {
    int64_t failed = 0;
    if (gc_parallel(rows * n, GC_PAR, GC_WARM)) {
        #pragma omp parallel
        {
            scalar_t *e = take_log ? (scalar_t *)malloc((n + GC_W) * sizeof(scalar_t)) : 0;
            if (take_log && !e) {
                #pragma omp atomic write
                failed = 1;
            }
            #pragma omp for schedule(static)
            for (int64_t o = 0; o < rows; o++)
                if (e || !take_log) GC_FN(_row)(o, n, out, x, take_log, e);
            free(e);
        }
        gc_pool_used();
    } else {
        scalar_t *e = take_log ? (scalar_t *)malloc((n + GC_W) * sizeof(scalar_t)) : 0;
        if (take_log && !e) return 1;
        for (int64_t o = 0; o < rows; o++) GC_FN(_row)(o, n, out, x, take_log, e);
        free(e);
    }
    return failed;
}
