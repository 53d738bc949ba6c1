#if GC_W == 16
#define MP_EVEN {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
#define MP_ODD {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}
#else
#define MP_EVEN {0, 2, 4, 6, 8, 10, 12, 14}
#define MP_ODD {1, 3, 5, 7, 9, 11, 13, 15}
#endif
static void mp_rows22(const float *x, float *o, int64_t rows, int64_t H, int64_t W,
                      int64_t Ho, int64_t Wo) {
    const vi32 even = MP_EVEN, odd = MP_ODD;
    for (int64_t q = 0; q < rows; q++) {
        const float *x0 = x + (q / Ho) * H * W + 2 * (q % Ho) * W, *x1 = x0 + W;
        float *out = o + q * Wo;
        for (int64_t k0 = 0; k0 < Wo; k0 += GC_W) {
            /* a row of GC_W outputs or more ends with a whole vector overlapping the
               one before (the same outputs again): no masked load or store, slow on
               AMD's AVX2 (LeNet's first pool, 14 outputs a row) */
            int64_t k = Wo - k0 < GC_W && Wo >= GC_W ? Wo - GC_W : k0;
            int64_t m = Wo - k < GC_W ? Wo - k : GC_W, n0 = 2 * m < GC_W ? 2 * m : GC_W;
            vf32 a0 = ldm_f32(x0 + 2 * k, n0), a1 = ldm_f32(x0 + 2 * k + GC_W, 2 * m - n0);
            vf32 b0 = ldm_f32(x1 + 2 * k, n0), b1 = ldm_f32(x1 + 2 * k + GC_W, 2 * m - n0);
            /* each tap first: max_f32(tap, running), as numpy's kernel */
            vf32 v = max_f32(__builtin_shuffle(a0, a1, odd), __builtin_shuffle(a0, a1, even));
            v = max_f32(__builtin_shuffle(b0, b1, even), v);
            stm_f32(out + k, max_f32(__builtin_shuffle(b0, b1, odd), v), m);
        }
    }
}
#define T float
MP_KERNEL(f32, float)
GC_EXPORT void gc_max_pool2d_f32(MP_ARGS) {
    if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && top == 0 && left == 0 && dh == 1
            && dw == 1 && 2 * Ho <= H && 2 * Wo <= W) {
        if (gc_parallel_flag(parallel)) {
            #pragma omp parallel for schedule(static)
            for (int64_t p = 0; p < planes; p++)
                mp_rows22(x + p * H * W, o + p * Ho * Wo, Ho, H, W, Ho, Wo);
            gc_pool_used();
        } else {
            mp_rows22(x, o, planes * Ho, H, W, Ho, Wo);
        }
        return;
    }
    mp_pool_f32(planes, x, o, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, parallel);
}
#undef T
