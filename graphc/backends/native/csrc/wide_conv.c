/* ---- weight-gradient convolution (graphc/backends/native/wide_conv.py) ---- */
#ifdef __AVX512F__
#define WG_OT 4
#define WG_JT 6
#else
#define WG_OT 2
#define WG_JT 5
#endif
typedef struct {
    const float *x, *w; float *y;
    int64_t C, Hp, Wp, O, R, S, KH, KW;
} wg_conv;

/* WG_OT output channels from o0 by jt output columns from j0 of output row i of image b;
   of the channels past the last (o0 + o >= O), the last one's sums are computed again
   and not stored, so only the column count varies between the cases below */
GC_INLINE void wg_tile(const wg_conv *c, int64_t b, int64_t o0, int ot, int64_t i,
                       int64_t j0, const int jt) {
    float sums[WG_OT][WG_JT];
    for (int o = 0; o < WG_OT; o++)
        for (int j = 0; j < WG_JT; j++) sums[o][j] = 0.0f;
    const float *xb = c->x + b * c->C * c->Hp * c->Wp;
    const float *wo[WG_OT];
    for (int o = 0; o < WG_OT; o++)
        wo[o] = c->w + (o0 + (o < ot ? o : ot - 1)) * c->C * c->R * c->S;
    for (int64_t s0 = 0; s0 < c->S; s0 += GC_W) {
        int64_t m = c->S - s0 < GC_W ? c->S - s0 : GC_W;
        vf32 acc[WG_OT][WG_JT];
        for (int o = 0; o < WG_OT; o++)
            for (int j = 0; j < WG_JT; j++) acc[o][j] = sp_f32(0.0f);
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t r = 0; r < c->R; r++) {
                const float *xr = xb + (ch * c->Hp + i + r) * c->Wp + j0 + s0;
                int64_t at = (ch * c->R + r) * c->S + s0;
                vf32 xv[WG_JT];
                for (int j = 0; j < jt; j++) xv[j] = ldm_f32(xr + j, m);
                for (int o = 0; o < WG_OT; o++) {
                    vf32 wv = ldm_f32(wo[o] + at, m);
                    for (int j = 0; j < jt; j++) acc[o][j] = fma_f32(wv, xv[j], acc[o][j]);
                }
            }
        for (int o = 0; o < WG_OT; o++)
            for (int j = 0; j < jt; j++) {
                float t = 0.0f;
                for (int k = 0; k < GC_W; k++) t += acc[o][j][k];
                sums[o][j] += t;
            }
    }
    float *y = c->y + ((b * c->O + o0) * c->KH + i) * c->KW + j0;
    for (int o = 0; o < ot; o++)
        for (int j = 0; j < jt; j++) y[o * c->KH * c->KW + j] = sums[o][j];
}

/* the tile with jt as a constant, so each case is unrolled and kept in registers */
static void wg_tile_any(const wg_conv *c, int64_t b, int64_t o0, int ot, int64_t i,
                        int64_t j0, int jt) {
    switch (jt) {
#define WG_CASE(j) case j: wg_tile(c, b, o0, ot, i, j0, j); break;
    WG_CASE(1) WG_CASE(2) WG_CASE(3) WG_CASE(4) WG_CASE(5)
#if WG_JT > 5
    WG_CASE(6)
#endif
#undef WG_CASE
    }
}

GC_EXPORT void gc_wide_conv2d_f32(int64_t B, const float *x, const float *w, float *y,
                                  int64_t C, int64_t Hp, int64_t Wp, int64_t O, int64_t R,
                                  int64_t S, int64_t KH, int64_t KW, int64_t parallel) {
    wg_conv c = {x, w, y, C, Hp, Wp, O, R, S, KH, KW};
    int64_t tiles_o = (O + WG_OT - 1) / WG_OT, tiles_j = (KW + WG_JT - 1) / WG_JT;
    int64_t tasks = B * tiles_o * KH * tiles_j;
    #pragma omp parallel for schedule(static) if (parallel)
    for (int64_t task = 0; task < tasks; task++) {
        int64_t jt_at = task % tiles_j, i = (task / tiles_j) % KH;
        int64_t ot_at = (task / (tiles_j * KH)) % tiles_o, b = task / (tiles_j * KH * tiles_o);
        int64_t o0 = ot_at * WG_OT, j0 = jt_at * WG_JT;
        int ot = (int)(O - o0 < WG_OT ? O - o0 : WG_OT);
        int jt = (int)(KW - j0 < WG_JT ? KW - j0 : WG_JT);
        wg_tile_any(&c, b, o0, ot, i, j0, jt);
    }
}
