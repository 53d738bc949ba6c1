/* Instantiated by rows.py per dtype (c_sources.instance): GC_NAME names the kernel,
   scalar_t and vec_t its element and vector types, pw_t, ld_t, st_t, sp_t, exp_t, sel_t,
   nan_t, gt_t the prelude's helpers for that dtype, GC_PAR and GC_WARM its threading
   thresholds (elements, cold and warm pool), GC_LOG its log. */
/* sum (count 0) or mean over the middle axis of an (outer, n, inner) array, row after
   row, GC_W inner elements at a time: job j is block j % blocks of outer index j / blocks */
GC_INLINE void GC_FN(_job)(int64_t job, int64_t blocks, int64_t n, int64_t inner, char *out,
                        const char *x, int64_t count) {
    int64_t o = job / blocks, i = (job % blocks) * GC_W;
    int64_t m = inner - i < GC_W ? inner - i : GC_W;
    const char *slab = x + (o * n * inner) * sizeof(scalar_t);
    vec_t acc = sp_t(0);
    for (int64_t r = 0; r < n; r++) acc = acc + ld_t(slab + r * inner * sizeof(scalar_t), i, m);
    if (count) acc = __builtin_convertvector(
        __builtin_convertvector(acc, vf64) / sp_f64((double)count), vec_t);
    st_t(out + o * inner * sizeof(scalar_t), i, m, acc);
}
GC_EXPORT void GC_NAME(int64_t outer, int64_t n, int64_t inner, char *out, const char *x,
                    int64_t count) {
    int64_t blocks = (inner + GC_W - 1) / GC_W;
    if (gc_parallel(outer * n * inner, GC_PAR, GC_WARM)) {
        #pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < outer * blocks; j++) GC_FN(_job)(j, blocks, n, inner, out, x, count);
        gc_pool_used();
    } else {
        for (int64_t j = 0; j < outer * blocks; j++) GC_FN(_job)(j, blocks, n, inner, out, x, count);
    }
}
