static void ln_row(const float *x, float *y, const float *w, const float *b, int64_t n,
                   float eps, int64_t wmode, int64_t bmode) {
    vf32 rs = sp_f32(ln_center(x, y, n, eps));
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        vf32 v = ldm_f32(y + j, k) * rs;
        if (wmode) v = v * ln_affine(w, wmode, j, k);
        if (bmode) v = v + ln_affine(b, bmode, j, k);
        stm_f32(y + j, v, k);
    }
}
GC_EXPORT void gc_layer_norm_f32(int64_t rows, int64_t n, float *y, const float *x,
                                 const float *w, const float *b, int64_t wmode, int64_t bmode,
                                 int64_t eps_bits, int64_t parallel) {
    float eps = ln_eps(eps_bits);
    if (parallel) {
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            ln_row(x + r * n, y + r * n, w, b, n, eps, wmode, bmode);
    } else {
        for (int64_t r = 0; r < rows; r++)
            ln_row(x + r * n, y + r * n, w, b, n, eps, wmode, bmode);
    }
}
