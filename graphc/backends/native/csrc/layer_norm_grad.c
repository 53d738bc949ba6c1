/* numpy's gradient: ((g rstd) + shift) - c slope, shift = (sum(g) rstd) / -n,
   slope = ((g . c) (rstd rstd rstd)) / n */
static void ln_grad_row(const float *x, const float *g, float *y, float *c, int64_t n,
                        float eps) {
    float rstd = ln_center(x, c, n, eps);
    float shift = ((0.0f + pw_f32(g, n)) * rstd) / -(float)n;
    vf32 acc = sp_f32(0.0f);
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        acc = acc + ldm_f32(g + j, k) * ldm_f32(c + j, k);
    }
    float slope = (ln_hsum(acc) * (rstd * rstd * rstd)) / (float)n;
    vf32 rs = sp_f32(rstd), sh = sp_f32(shift), sl = sp_f32(slope);
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        stm_f32(y + j, (ldm_f32(g + j, k) * rs + sh) - ldm_f32(c + j, k) * sl, k);
    }
}
/* returns 1 when a thread could not allocate its centered row (its rows are skipped:
   the caller raises), else 0 */
GC_EXPORT int64_t gc_layer_norm_grad_f32(int64_t rows, int64_t n, float *y, const float *x,
                                         const float *g, int64_t eps_bits, int64_t parallel) {
    float eps = ln_eps(eps_bits);
    int64_t failed = 0;
    if (parallel) {
        #pragma omp parallel
        {
            float *c = (float *)malloc(sizeof(float) * (n + GC_W));
            if (!c) {
                #pragma omp atomic write
                failed = 1;
            }
            #pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++)
                if (c) ln_grad_row(x + r * n, g + r * n, y + r * n, c, n, eps);
            free(c);
        }
    } else {
        float *c = (float *)malloc(sizeof(float) * (n + GC_W));
        if (!c) return 1;
        for (int64_t r = 0; r < rows; r++)
            ln_grad_row(x + r * n, g + r * n, y + r * n, c, n, eps);
        free(c);
    }
    return failed;
}
