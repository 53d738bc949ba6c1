/* Instantiated by rows.py per dtype (c_sources.instance): GC_NAME names the kernel,
   scalar_t and vec_t its element and vector types, pw_t, ld_t, st_t, sp_t, exp_t, sel_t,
   nan_t, gt_t the prelude's helpers for that dtype, GC_PAR and GC_WARM its threading
   thresholds (elements, cold and warm pool), GC_LOG its log. */
/* sum (count 0) or mean over the middle axis of an (outer, n, inner) array, row after
   row (numpy's order: each output's own chain of adds over r), GC_CHAINS vectors of
   GC_W inner elements at a time, whose chains run side by side: one chain waits out an
   add's latency at every row. Job j is group j % groups of outer index j / groups */
#define GC_CHAINS 4
GC_INLINE void GC_FN(_job)(int64_t job, int64_t groups, int64_t n, int64_t inner, char *out,
                        const char *x, int64_t count) {
    int64_t o = job / groups, i0 = (job % groups) * GC_CHAINS * GC_W;
    const char *slab = x + (o * n * inner) * sizeof(scalar_t);
    int64_t m[GC_CHAINS];
    vec_t acc[GC_CHAINS];
    int chains = 0;
    for (int c = 0; c < GC_CHAINS && i0 + c * GC_W < inner; c++, chains++) {
        int64_t left = inner - i0 - c * GC_W;
        m[c] = left < GC_W ? left : GC_W;
        acc[c] = sp_t(0);
    }
    if (chains == GC_CHAINS && m[GC_CHAINS - 1] == GC_W) {  /* whole vectors: unrolled */
        for (int64_t r = 0; r < n; r++) {
            const char *row = slab + r * inner * sizeof(scalar_t);
            for (int c = 0; c < GC_CHAINS; c++) acc[c] = acc[c] + ld_t(row, i0 + c * GC_W, GC_W);
        }
    } else {
        for (int64_t r = 0; r < n; r++) {
            const char *row = slab + r * inner * sizeof(scalar_t);
            for (int c = 0; c < chains; c++) acc[c] = acc[c] + ld_t(row, i0 + c * GC_W, m[c]);
        }
    }
    for (int c = 0; c < chains; c++) {
        vec_t v = acc[c];
        if (count) v = __builtin_convertvector(
            __builtin_convertvector(v, vf64) / sp_f64((double)count), vec_t);
        st_t(out + o * inner * sizeof(scalar_t), i0 + c * GC_W, m[c], v);
    }
}
GC_EXPORT void GC_NAME(int64_t outer, int64_t n, int64_t inner, char *out, const char *x,
                    int64_t count) {
    int64_t groups = (inner + GC_CHAINS * GC_W - 1) / (GC_CHAINS * GC_W);
    if (gc_parallel(outer * n * inner, GC_PAR, GC_WARM)) {
        #pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < outer * groups; j++) GC_FN(_job)(j, groups, n, inner, out, x, count);
        gc_pool_used();
    } else {
        for (int64_t j = 0; j < outer * groups; j++) GC_FN(_job)(j, groups, n, inner, out, x, count);
    }
}
