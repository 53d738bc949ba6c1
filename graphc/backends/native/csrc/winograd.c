/* ---- Winograd F(2x2, 3x3) float32 convolution (graphc/backends/native/winograd.py) ----
   matmul.c precedes this file in its unit, with MM_IN_PLACE past any row count: the 16
   products of a band are matmul.c's tiles (mm_rows), their panels read where the input
   transform wrote them. WG_OPS (the epilogue program's operands) comes from Python.

   Per task (one image's band of tile rows, on one thread, through the thread's scratch):
   each input channel's rows are split into even and odd columns (so that a tile's four
   columns are four contiguous loads), then B^T d B of GC_W tiles at a time is stored in
   V[16][C][ldv] (tiles contiguous); M[xi] = U[xi] (O x C) times V[xi] (C x N) by the
   matmul tiles, each output a fused multiply-add chain over c in order from +0.0; then
   A^T m A of GC_W tiles at a time is stored into the output, two rows of a channel at a
   time, which are checked for values that are not finite (the image's flag) and run
   through the epilogue program in place while they are in the first cache. */

typedef struct {
    const float *x, *u; float *y;
    int64_t C, H, W, O, top, left, Ho, Wo, th, tw, rows, bands, ldv, rowlen, per_thread;
    int64_t first, steps; const int64_t *codes; const float *ops[WG_OPS]; int64_t *flags;
} wg_conv;

/* floats from one transformed plane (V's or M's, of n rows) to the next: a cache line
   more than its rows, so that the 16 planes' rows at one place fall in 16 sets of the
   first cache (planes a multiple of 4 KB apart, as 64 rows of 208 floats are, share
   one set of its 8 ways: the (32, 64, 28, 28) convolution on one thread took 20.2 ms
   so, 15.7 with the skew) */
GC_INLINE int64_t wg_plane(int64_t n, int64_t ldv) { return n * ldv + 16; }

GC_INLINE vf32 wg_ld(const float *p) { vf32 v; memcpy(&v, p, GC_VB); return v; }
GC_INLINE void wg_st(float *p, vf32 v) { memcpy(p, &v, GC_VB); }

/* U[xi][o][c] = G g G^T for the 3 x 3 kernel g of (o, c), xi = 4 row + column, computed
   in double and rounded once, G = {1, 0, 0; 1/2, 1/2, 1/2; 1/2, -1/2, 1/2; 0, 0, 1}:
   GC_W channels at a time in vectors of doubles, the last vector partial (its other
   lanes zero, not stored). Every product by an entry of G is exact in double, so a
   fused multiply-add gives the same bits as a product and a sum (a fed weight is
   transformed on every call: one channel at a time, at 32 x 32 channels this was 47 us
   of a 14 x 14 image's 84) */
static void wg_weights(const float *w, float *u, int64_t o, int64_t C, int64_t O) {
    static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    for (int64_t c = 0; c < C; c += GC_W) {
        const float *g = w + (o * C + c) * 9;  /* m kernels, 9 floats each */
        int64_t m = C - c < GC_W ? C - c : GC_W;
        vf64 k[9], t[4][3];
        memset(k, 0, sizeof k);
        for (int i = 0; i < 9; i++)
            for (int64_t l = 0; l < m; l++) k[i][l] = g[l * 9 + i];
        for (int a = 0; a < 4; a++)
            for (int j = 0; j < 3; j++)
                t[a][j] = G[a][0] * k[j] + G[a][1] * k[3 + j] + G[a][2] * k[6 + j];
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                vf32 r = __builtin_convertvector(
                    t[a][0] * G[b][0] + t[a][1] * G[b][1] + t[a][2] * G[b][2], vf32);
                float *at = u + ((a * 4 + b) * O + o) * C + c;
                if (m == GC_W) wg_st(at, r);
                else stm_f32(at, r, m);
            }
    }
}

/* GC_W floats of row (W of them) from column a on, zero outside the row */
GC_INLINE vf32 wg_row(const float *row, int64_t a, int64_t W) {
    if (a >= 0 && a + GC_W <= W) return wg_ld(row + a);
    vi32 lane;  /* a constant plus a broadcast: set lane by lane from a, gcc inserted
                   each (every row of a padded 14 x 14 image is partial: wg_task fell
                   from 29 to 21 % of the ONNX ResNet block's samples at batch 64) */
    for (int k = 0; k < GC_W; k++) lane[k] = k;
    lane += (int32_t)a;
    vi32 in = (lane >= 0) & (lane < (int32_t)W);
#ifdef __AVX512F__
    return (vf32)_mm512_maskz_loadu_ps(_mm512_movepi32_mask((__m512i)in), row + a);
#else
    return (vf32)_mm256_maskload_ps(row + a, (__m256i)in);
#endif
}

/* padded row `pr` of a channel (x: its plane) as even and odd columns of the padded
   image, rowlen each (a multiple of GC_W): even[q] is padded column 2q, odd[q] 2q + 1;
   zero outside x */
static void wg_split(const wg_conv *c, const float *x, int64_t pr, float *even, float *odd) {
    int64_t h = pr - c->top;
    if (h < 0 || h >= c->H) {
        memset(even, 0, sizeof(float) * c->rowlen);
        memset(odd, 0, sizeof(float) * c->rowlen);
        return;
    }
    const float *row = x + h * c->W;
    for (int64_t q = 0; q < c->rowlen; q += GC_W) {
        int64_t a = 2 * q - c->left;
        vf32 lo = wg_row(row, a, c->W), hi = wg_row(row, a + GC_W, c->W);
#if GC_W == 8
        wg_st(even + q, __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14));
        wg_st(odd + q, __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15));
#else
        wg_st(even + q, __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                                22, 24, 26, 28, 30));
        wg_st(odd + q, __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                               23, 25, 27, 29, 31));
#endif
    }
}

/* B^T d B of the band's tiles of channel ch into V, B^T = {1, 0, -1, 0; 0, 1, 1, 0;
   0, -1, 1, 0; 0, 1, 0, -1}; a row's last vector is stored whole, its lanes past the
   row overwritten by the next row's first (or left in V's slack past the band) */
static void wg_input(const wg_conv *c, const float *x, int64_t ch, int64_t i0, int64_t nb,
                     float *split, float *V) {
    int64_t len = c->rowlen;
    for (int64_t r = 0; r < 2 * nb + 2; r++)
        wg_split(c, x, 2 * i0 + r, split + 2 * r * len, split + (2 * r + 1) * len);
    for (int64_t r = 0; r < nb; r++)
        for (int64_t j0 = 0; j0 < c->tw; j0 += GC_W) {
            vf32 z[4][4];
            for (int a = 0; a < 4; a++) {
                const float *e = split + 2 * (2 * r + a) * len + j0, *o = e + len;
                vf32 d0 = wg_ld(e), d1 = wg_ld(o), d2 = wg_ld(e + 1), d3 = wg_ld(o + 1);
                z[a][0] = d0 - d2;
                z[a][1] = d1 + d2;
                z[a][2] = d2 - d1;
                z[a][3] = d1 - d3;
            }
            float *v = V + ch * c->ldv + r * c->tw + j0;
            int64_t xi = wg_plane(c->C, c->ldv);
            for (int k = 0; k < 4; k++) {
                wg_st(v + (0 * 4 + k) * xi, z[0][k] - z[2][k]);
                wg_st(v + (1 * 4 + k) * xi, z[1][k] + z[2][k]);
                wg_st(v + (2 * 4 + k) * xi, z[2][k] - z[1][k]);
                wg_st(v + (3 * 4 + k) * xi, z[1][k] - z[3][k]);
            }
        }
}

/* lanes of a and b interleaved: a0 b0 a1 b1 ... (lo), then the upper halves (hi) */
GC_INLINE void wg_zip(vf32 a, vf32 b, vf32 *lo, vf32 *hi) {
#if GC_W == 8
    *lo = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
#else
    *lo = __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *hi = __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                  15, 31);
#endif
}

/* the first n (> 0) of 2 GC_W outputs at p: plain stores where whole */
GC_INLINE void wg_put(float *p, vf32 lo, vf32 hi, int64_t n) {
    if (n >= 2 * GC_W) { wg_st(p, lo); wg_st(p + GC_W, hi); return; }
    if (n >= GC_W) { wg_st(p, lo); if (n > GC_W) stm_f32(p + GC_W, hi, n - GC_W); return; }
    stm_f32(p, lo, n);
}

/* whether the n floats at y are all finite */
GC_INLINE int wg_finite(const float *y, int64_t n) {
    vb bad = {0};
    for (int64_t k = 0; k < n; k += GC_W) {
        vf32 v = n - k >= GC_W ? wg_ld(y + k) : ldm_f32(y + k, n - k), t = v - v;
        bad |= (vb)(t != t);
    }
    for (int k = 0; k < GC_W; k++)
        if (bad[k]) return 0;
    return 1;
}

/* the epilogue program of dc_tile (direct_conv_tile.h; direct_conv.chain and CODES) on the
   n outputs of channel o at y, in place, each step along the whole run: their operands
   of the output's shape are read from element `at` of the full operand on */
static void wg_program(float *y, int64_t n, int64_t o, int64_t at, int64_t steps,
                       const int64_t *codes, const float *const *ops) {
    for (int64_t s = 0; s < steps; s++) {
        int64_t code = codes[s], op = code & 15, kind = (code >> 4) & 3, swap = (code >> 6) & 1;
        const float *p = ops[s];
        vf32 one = sp_f32(kind == 1 ? p[o] : kind == 3 ? p[0] : 0.0f);
#define WG_APPLY(expr) \
        for (int64_t k = 0; k < n; k += GC_W) { \
            int64_t m = n - k < GC_W ? n - k : GC_W; \
            vf32 v = m == GC_W ? wg_ld(y + k) : ldm_f32(y + k, m); \
            vf32 u = kind == 2 ? (m == GC_W ? wg_ld(p + at + k) : ldm_f32(p + at + k, m)) : one; \
            vf32 a = swap ? u : v, b = swap ? v : u; \
            v = expr; \
            if (m == GC_W) wg_st(y + k, v); else stm_f32(y + k, v, m); \
        }
        GC_PROGRAM_OP(op, WG_APPLY)
#undef WG_APPLY
    }
}

/* A^T m A of the band's tiles of channel o (A^T = {1, 1, 1, 0; 0, 1, -1, -1}) into its
   output rows 2 i0 .. 2 (i0 + nb) - 1, a pair of rows at a time; then those rows (one
   run in memory, still in the first cache) checked and run through the program at once:
   a pair at a time, the program's dispatch and its partial vectors came with every 28
   floats of a 14 x 14 image (the ResNet block at batch 64: 17 % of its time). The image's
   flag is set if a value is not finite */
static void wg_output(const wg_conv *c, int64_t image, int64_t o, int64_t i0, int64_t nb,
                      const float *M, int64_t ldm) {
    int64_t plane = c->Ho * c->Wo, base = (image * c->O + o) * plane;
    for (int64_t r = 0; r < nb; r++) {
        int64_t row = 2 * (i0 + r), pair = row + 1 < c->Ho ? 2 : 1;
        float *y = c->y + base + row * c->Wo;
        for (int64_t j0 = 0; j0 < c->tw; j0 += GC_W) {
            const float *m = M + o * ldm + r * c->tw + j0;
            int64_t xi = wg_plane(c->O, c->ldv);
            vf32 s[4][2];
            for (int a = 0; a < 4; a++) {
                vf32 m0 = wg_ld(m + (a * 4) * xi), m1 = wg_ld(m + (a * 4 + 1) * xi);
                vf32 m2 = wg_ld(m + (a * 4 + 2) * xi), m3 = wg_ld(m + (a * 4 + 3) * xi);
                s[a][0] = m0 + m1 + m2;
                s[a][1] = m1 - m2 - m3;
            }
            vf32 lo, hi;
            int64_t n = c->Wo - 2 * j0;
            wg_zip(s[0][0] + s[1][0] + s[2][0], s[0][1] + s[1][1] + s[2][1], &lo, &hi);
            wg_put(y + 2 * j0, lo, hi, n);
            if (pair == 2) {
                wg_zip(s[1][0] - s[2][0] - s[3][0], s[1][1] - s[2][1] - s[3][1], &lo, &hi);
                wg_put(y + c->Wo + 2 * j0, lo, hi, n);
            }
        }
    }
    int64_t first = 2 * i0, rows = 2 * nb < c->Ho - first ? 2 * nb : c->Ho - first;
    float *y = c->y + base + first * c->Wo;
    if (!wg_finite(y, rows * c->Wo)) __atomic_store_n(&c->flags[image], 1, __ATOMIC_RELAXED);
    int64_t at = ((c->first + image) * c->O + o) * plane + first * c->Wo;
    wg_program(y, rows * c->Wo, o, at, c->steps, c->codes, c->ops);
}

/* one task: band `band` of `count` images from `image` (several images only where each
   is one band: their tiles side by side in one product, the product's columns padded
   to whole panels once rather than per image), through this thread's scratch */
static void wg_task(const wg_conv *c, float *scratch, int64_t image, int64_t count,
                    int64_t band) {
    int64_t i0 = band * c->rows, nb = c->th - i0 < c->rows ? c->th - i0 : c->rows;
    int64_t tiles = nb * c->tw, N = (count * tiles + MM_NR - 1) / MM_NR * MM_NR;
    float *split = scratch, *V = split + 2 * (2 * c->rows + 2) * c->rowlen;
    float *M = V + 16 * wg_plane(c->C, c->ldv);
    for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t k = 0; k < count; k++) {  /* in order: a row's spill is overwritten */
            const float *x = c->x + ((image + k) * c->C + ch) * c->H * c->W;
            wg_input(c, x, ch, i0, nb, split, V + k * tiles);
        }
    int64_t panels = N / MM_NR;
    for (int xi = 0; xi < 16; xi++) {
        mm_args m = {.a = c->u + xi * c->O * c->C, .b = V + xi * wg_plane(c->C, c->ldv),
                     .c = M + xi * wg_plane(c->O, c->ldv), .M = c->O, .K = c->C, .N = N,
                     .rows1 = 1, .s0 = c->C, .sk = 1, .bk = c->ldv, .bj = 1};
        for (int64_t p = 0; p < panels; p++)
            for (int64_t r0 = 0; r0 < c->O; r0 += MM_CHUNK)
                mm_rows(&m, r0, r0 + MM_CHUNK < c->O ? r0 + MM_CHUNK : c->O, p);
    }
    for (int64_t k = 0; k < count; k++)
        for (int64_t o = 0; o < c->O; o++) wg_output(c, image + k, o, i0, nb, M + k * tiles, N);
}

/* m images (x: N, C, H, W; y: N, O, Ho, Wo) convolved with the 3 x 3 kernels whose
   transforms are in u (made from w first when `transform`), padding (top, left,
   bottom, right), each band of `rows` tile rows (or up to `group` whole images, as
   many tasks for every thread) a task on the OpenMP pool from
   `parallel_work` multiply-adds (counted as a direct convolution's), or `warm_work`
   while the pool is warm, in the scratch of up to `slots` threads (per_thread floats each);
   flags[k] is 1 after the call if image k's convolution has a value that is not
   finite (winograd.py computes those images again), and the call returns 1 when one is
   (0 otherwise); `first`: the index of image 0 in the program's full operands. With
   m = 0 it only transforms the weights (when `transform`) */
GC_EXPORT int64_t gc_winograd_f32(int64_t m, const float *x, const float *w, float *u, float *y,
        float *scratch, int64_t *flags, int64_t C, int64_t H, int64_t W, int64_t O,
        int64_t top, int64_t left, int64_t bottom, int64_t right, int64_t rows, int64_t group,
        int64_t ldv, int64_t rowlen, int64_t per_thread, int64_t slots, int64_t transform,
        int64_t parallel_work, int64_t warm_work, int64_t first, int64_t steps,
        const int64_t *codes, const float *op0, const float *op1, const float *op2,
        const float *op3, const float *op4, const float *op5) {
    int64_t Ho = H + top + bottom - 2, Wo = W + left + right - 2;
    int64_t th = (Ho + 1) / 2, tw = (Wo + 1) / 2, work = m * O * C * Ho * Wo * 9;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (threads > slots) threads = (int)slots;
    int parallel = threads > 1 && gc_parallel(work, parallel_work, warm_work);
    int64_t bands = (th + rows - 1) / rows;
    if (bands > 1) group = 1;
    if (parallel) {  /* as many tasks for every thread, of at most `group` images */
        int64_t each = (m + threads * group - 1) / (threads * group);
        group = (m + threads * each - 1) / (threads * each);
        if (m * bands < threads) {  /* fewer images than threads: smaller bands */
            int64_t per_image = (threads + m - 1) / m;
            rows = (th + per_image - 1) / per_image;
            bands = (th + rows - 1) / rows;
        }
    }
    /* rows of V and M as long as this call's tasks need (the scratch has room for the
       longest): a batch of one in a layout for ten images spread its planes 10x wider */
    int64_t need = (group * rows * tw + GC_W + MM_NR - 1) / MM_NR * MM_NR;
    if (need < ldv) ldv = need;
    wg_conv c = {x, u, y, C, H, W, O, top, left, Ho, Wo, th, tw, rows, bands, ldv, rowlen,
                 per_thread, first, steps, codes, {op0, op1, op2, op3, op4, op5}, flags};
    if (m > 0) memset(flags, 0, sizeof(int64_t) * m);
    int64_t tasks = (m + group - 1) / group * bands;
    #pragma omp parallel num_threads(threads) if (parallel)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        if (transform) {
            #pragma omp for schedule(static)
            for (int64_t o = 0; o < O; o++) wg_weights(w, u, o, C, O);
        }
        #pragma omp for schedule(static)
        for (int64_t task = 0; task < tasks; task++)
        {
            int64_t first_image = task / bands * group;
            int64_t count = m - first_image < group ? m - first_image : group;
            wg_task(&c, scratch + t * per_thread, first_image, count, task % bands);
        }
    }
    if (parallel) gc_pool_used();
    for (int64_t k = 0; k < m; k++)
        if (flags[k]) return 1;
    return 0;
}

/* the epilogue program on the m images at y (O planes of `plane` outputs each), their
   operands from image `first` on: for the images whose convolution winograd.py
   computed again */
GC_EXPORT void gc_winograd_program_f32(int64_t m, float *y, int64_t O, int64_t plane,
        int64_t first, int64_t steps, const int64_t *codes, const float *op0,
        const float *op1, const float *op2, const float *op3, const float *op4,
        const float *op5) {
    const float *ops[WG_OPS] = {op0, op1, op2, op3, op4, op5};
    for (int64_t k = 0; k < m; k++)
        for (int64_t o = 0; o < O; o++)
            wg_program(y + (k * O + o) * plane, plane, o, ((first + k) * O + o) * plane, steps,
                       codes, ops);
}
