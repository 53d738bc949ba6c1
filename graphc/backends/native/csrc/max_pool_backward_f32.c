#if GC_W == 16
#define MPB_EVEN {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
#define MPB_ODD {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}
#define MPB_LO {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23}
#define MPB_HI {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}
#else
#define MPB_EVEN {0, 2, 4, 6, 8, 10, 12, 14}
#define MPB_ODD {1, 3, 5, 7, 9, 11, 13, 15}
#define MPB_LO {0, 8, 1, 9, 2, 10, 3, 11}
#define MPB_HI {4, 12, 5, 13, 6, 14, 7, 15}
#endif
/* lanes where the window's winner is not yet found and this tap's input is the pooled
   value (never true where that is nan) */
GC_INLINE vb mpb_hit(vf32 a, vf32 v, vb found) { return ~found & (vb)(a == v); }
/* the 2x2, stride-2 pass on float32, GC_W windows at a time: a row pair's even and odd
   columns split by shuffles (as mp_rows22), the winners' masks, 0.0f + ct or +0.0 by
   selects, interleaved back; a row's last partial vectors loaded and stored masked */
static void mpb_rows22_v(const float *ct, const float *x, const float *p, float *g,
                         int64_t rows, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
    const vi32 even = MPB_EVEN, odd = MPB_ODD, lo = MPB_LO, hi = MPB_HI;
    const vf32 zero = sp_f32(0.0f);
    for (int64_t q = 0; q < rows; q++) {
        int64_t at = (q / Ho) * H * W + 2 * (q % Ho) * W;
        const float *x0 = x + at, *x1 = x0 + W, *pq = p + q * Wo, *cq = ct + q * Wo;
        float *g0 = g + at, *g1 = g0 + W;
        for (int64_t k = 0; k < Wo; k += GC_W) {
            int64_t m = Wo - k < GC_W ? Wo - k : GC_W, n0 = 2 * m < GC_W ? 2 * m : GC_W;
            vf32 a0 = ldm_f32(x0 + 2 * k, n0), a1 = ldm_f32(x0 + 2 * k + GC_W, 2 * m - n0);
            vf32 b0 = ldm_f32(x1 + 2 * k, n0), b1 = ldm_f32(x1 + 2 * k + GC_W, 2 * m - n0);
            vf32 v = ldm_f32(pq + k, m), one = zero + ldm_f32(cq + k, m);
            vf32 ta = __builtin_shuffle(a0, a1, even), tb = __builtin_shuffle(a0, a1, odd);
            vf32 tc = __builtin_shuffle(b0, b1, even), td = __builtin_shuffle(b0, b1, odd);
            vb none = sp_b(0);
            vb ha = mpb_hit(ta, v, none), hb = mpb_hit(tb, v, ha);
            vb hc = mpb_hit(tc, v, ha | hb), hd = mpb_hit(td, v, ha | hb | hc);
            /* where v is nan, its last nan instead (no tap equals nan) */
            vb pn = nan_f32(v), nb = nan_f32(tb), nc = nan_f32(tc), nd = nan_f32(td);
            hd |= pn & nd;
            hc |= pn & nc & ~nd;
            hb |= pn & nb & ~nc & ~nd;
            ha |= pn & nan_f32(ta) & ~nb & ~nc & ~nd;
            vf32 ga = sel_f32(ha, one, zero), gb = sel_f32(hb, one, zero);
            vf32 gc = sel_f32(hc, one, zero), gd = sel_f32(hd, one, zero);
            stm_f32(g0 + 2 * k, __builtin_shuffle(ga, gb, lo), n0);
            stm_f32(g0 + 2 * k + GC_W, __builtin_shuffle(ga, gb, hi), 2 * m - n0);
            stm_f32(g1 + 2 * k, __builtin_shuffle(gc, gd, lo), n0);
            stm_f32(g1 + 2 * k + GC_W, __builtin_shuffle(gc, gd, hi), 2 * m - n0);
        }
        if (W > 2 * Wo) /* an odd last column: no window */
            for (int64_t k = 2 * Wo; k < W; k++) { g0[k] = 0.0f; g1[k] = 0.0f; }
        if (q % Ho == Ho - 1) /* rows past the last window's */
            for (int64_t k = 2 * W; k < (H - 2 * (Ho - 1)) * W; k++) g0[k] = 0.0f;
    }
}
#define T float
MPB_KERNEL(f32, float, mpb_rows22_v)
#undef T
