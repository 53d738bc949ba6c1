/* ---- layer_norm, layer_norm_grad (graphc/backends/native/norm.py) ---- */
#ifndef GC_LAYER_NORM
#define GC_LAYER_NORM
GC_INLINE vb ln_lanes(int64_t k) {
    vi32 lane; for (int i = 0; i < GC_W; i++) lane[i] = i;
    return (vb)(lane < (int32_t)k);
}
/* the lanes of v added in a tree */
GC_INLINE float ln_hsum(vf32 v) {
    float t[GC_W]; memcpy(t, &v, GC_VB);
    for (int w = GC_W / 2; w > 0; w /= 2)
        for (int i = 0; i < w; i++) t[i] = t[i] + t[i + w];
    return t[0];
}
GC_INLINE float ln_eps(int64_t bits) { int32_t b = (int32_t)bits; float e; memcpy(&e, &b, 4); return e; }
/* row x of n into c (centered); returns rstd = 1 / sqrt(var + eps) as numpy's kernel:
   the mean by numpy's pairwise sum over n, the variance by lanes (numpy: sdot) */
GC_INLINE float ln_center(const float *x, float *c, int64_t n, float eps) {
    float mean = (0.0f + pw_f32(x, n)) / (float)n;
    vf32 m = sp_f32(mean), acc = sp_f32(0.0f);
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        vf32 v = ldm_f32(x + j, k) - m;
        if (k < GC_W) v = sel_f32(ln_lanes(k), v, sp_f32(0.0f));
        stm_f32(c + j, v, k);
        acc = acc + v * v;
    }
    return 1.0f / sqrtf(ln_hsum(acc) / (float)n + eps);
}
GC_INLINE vf32 ln_affine(const float *p, int64_t mode, int64_t j, int64_t k) {
    return mode == 1 ? sp_f32(p[0]) : ldm_f32(p + j, k);
}
#endif
