/* the accumulators of ob output channels by pb vectors of positions into tmp: the
   vector k reads the padded channel at src[k] plus each tap's offset */
GC_INLINE void dc_tile(const float *x, const float *w, const int64_t *offs, int64_t K,
                       const int64_t *src, float *tmp, const int ob, const int pb) {
    vf32 acc[DC_OB][DC_PB];
    for (int o = 0; o < DC_OB; o++)
        for (int k = 0; k < DC_PB; k++) acc[o][k] = sp_f32(0.0f);
    for (int64_t t = 0; t < K; t++) {
        const float *at = x + offs[t];
        vf32 v[DC_PB];
        for (int k = 0; k < pb; k++) memcpy(&v[k], at + src[k], GC_VB);
        for (int o = 0; o < ob; o++) {
            vf32 s = sp_f32(w[o * K + t]);
            for (int k = 0; k < pb; k++) acc[o][k] = fma_f32(s, v[k], acc[o][k]);
        }
    }
    for (int o = 0; o < ob; o++)
        for (int k = 0; k < pb; k++) memcpy(tmp + (o * DC_PB + k) * GC_W, &acc[o][k], GC_VB);
}
