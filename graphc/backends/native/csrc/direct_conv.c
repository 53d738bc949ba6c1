/* n floats zeroed, or copied: rows are short (a ResNet block's 14 floats, LeNet's 28),
   and a memset and a memcpy call per row took 5% of its time. Whole vectors by plain
   stores, the copy's tail by one more vector overlapping the last (the same values
   again), what is shorter than a vector one float at a time: a masked store per row
   (vmaskmovps) was 11% of LeNet's first layer on an AVX2 machine */
GC_INLINE void dc_zero(float *p, int64_t n) {
    vf32 zero = sp_f32(0.0f);
    int64_t k = 0;
    for (; k + GC_W <= n; k += GC_W) memcpy(p + k, &zero, GC_VB);
    for (; k < n; k++) p[k] = 0.0f;
}
GC_INLINE void dc_copy(float *d, const float *s, int64_t n) {
    if (n < GC_W) {
        for (int64_t k = 0; k < n; k++) d[k] = s[k];
        return;
    }
    int64_t k = 0;
    for (; k + GC_W <= n; k += GC_W) memcpy(d + k, s + k, GC_VB);
    if (k < n) memcpy(d + n - GC_W, s + n - GC_W, GC_VB);
}

static void dc_pad(const float *x, float *pad, int64_t H, int64_t W, int64_t top,
                   int64_t left, int64_t right, int64_t Wp, int64_t plane) {
    dc_zero(pad, top * Wp);
#ifdef __AVX512F__
    if (Wp <= GC_W) {  /* a padded row in one vector: the row loaded, moved right by
                          `left` lanes with zeros around it, stored once */
        vi32 lane;
        for (int k = 0; k < GC_W; k++) lane[k] = k;
        __m512i at = (__m512i)(lane - (int32_t)left);
        __mmask16 keep = (__mmask16)(((1u << W) - 1) << left);
        for (int64_t h = 0; h < H; h++) {
            vf32 row = ldm_f32(x + h * W, W);
            stm_f32(pad + (top + h) * Wp, (vf32)_mm512_maskz_permutexvar_ps(keep, at, (gc_ps)row), Wp);
        }
        dc_zero(pad + (top + H) * Wp, plane - (top + H) * Wp);
        return;
    }
#endif
    for (int64_t h = 0; h < H; h++) {
        float *row = pad + (top + h) * Wp;
        dc_zero(row, left);
        dc_copy(row + left, x + h * W, W);
        dc_zero(row + left + W, right);
    }
    dc_zero(pad + (top + H) * Wp, plane - (top + H) * Wp);
}

typedef struct {
    float *pad; const float *w; float *y; const int64_t *offs;
    int64_t C, O, groups, K, plane, Wp, Ho, Wo, ntiles_o, first, steps, flat;
    const int64_t *codes; const float *ops[DC_OPS];
} dc_conv;

/* one task: ob <= DC_OB output channels of one image and group, DC_PB vectors a tile.
   By rows: every output row in vectors of GC_W columns, the last one of a row partial.
   Flat (c->flat, the vectors of the flat run of output rows at the padded width, Wp
   apart, where that is at least a tenth fewer: LeNet's second layer, 10 of 14 columns,
   17 vectors a channel instead of 20): whole vectors into `run`, the columns past Wo
   computed and dropped, then each row copied out. Every output is the same sum by
   the same code either way, so the same bits. */
static void dc_task(const dc_conv *c, int64_t task) {
    int64_t Og = c->O / c->groups, Cg = c->C / c->groups, per = c->groups * c->ntiles_o;
    int64_t image = task / per, g = (task % per) / c->ntiles_o;
    int64_t o0 = g * Og + (task % c->ntiles_o) * DC_OB;
    int ob = (int)(g * Og + Og - o0 < DC_OB ? g * Og + Og - o0 : DC_OB);
    const float *x = c->pad + (image * c->C + g * Cg) * c->plane;
    int64_t plane_out = c->Ho * c->Wo, at = (image * c->O + o0) * plane_out;
    int64_t at_ops = ((c->first + image) * c->O + o0) * plane_out;
    int64_t per_row = (c->Wo + GC_W - 1) / GC_W, count = c->Ho * per_row;
    float run[c->flat ? DC_OB * c->flat : 1];
    if (c->flat) count = c->flat / GC_W;
    for (int64_t v0 = 0; v0 < count; v0 += DC_PB) {
        int pb = (int)(count - v0 < DC_PB ? count - v0 : DC_PB);
        int64_t src[DC_PB], dst[DC_PB], lanes[DC_PB];
        for (int k = 0; k < pb; k++) {
            if (c->flat) {
                src[k] = dst[k] = (v0 + k) * GC_W;
                lanes[k] = GC_W;
            } else {
                int64_t r = (v0 + k) / per_row, col = ((v0 + k) % per_row) * GC_W;
                src[k] = r * c->Wp + col;
                dst[k] = r * c->Wo + col;
                lanes[k] = c->Wo - col < GC_W ? c->Wo - col : GC_W;
            }
        }
        if (c->flat)
            dc_tile_any(x, c->w + o0 * c->K, c->offs, c->K, src, ob, pb, run, c->flat, dst,
                        lanes, o0, at_ops, c->steps, c->codes, c->ops);
        else
            dc_tile_any(x, c->w + o0 * c->K, c->offs, c->K, src, ob, pb, c->y + at,
                        plane_out, dst, lanes, o0, at_ops, c->steps, c->codes, c->ops);
    }
    if (c->flat)
        for (int o = 0; o < ob; o++)
            for (int64_t r = 0; r < c->Ho; r++)
                dc_copy(c->y + at + o * plane_out + r * c->Wo, run + o * c->flat + r * c->Wp, c->Wo);
}

/* c's output and first image for the images from s0 on */
GC_INLINE void dc_at(dc_conv *c, const dc_conv *conv, int64_t s0) {
    c->y = conv->y + s0 * c->O * c->Ho * c->Wo;
    c->first = conv->first + s0;
}

/* plane r (image and channel) of the images from s0 on, padded into c's buffer */
GC_INLINE void dc_pad_plane(const dc_conv *c, const float *x, int64_t s0, int64_t r, int64_t H,
                            int64_t W, int64_t top, int64_t left, int64_t right) {
    dc_pad(x + (s0 * c->C + r) * H * W, c->pad + r * c->plane, H, W, top, left, right, c->Wp,
           c->plane);
}

/* the images `chunk` at a time: each thread of a team takes its share of each loop (or
   the calling thread all of them, outside a parallel region) */
static void dc_chunks(const dc_conv *conv, const float *x, int64_t m, int64_t chunk, int64_t H,
                      int64_t W, int64_t top, int64_t left, int64_t right) {
    dc_conv c = *conv;  /* this thread's: the chunk's output and first image */
    int64_t per = c.groups * c.ntiles_o;
    for (int64_t s0 = 0; s0 < m; s0 += chunk) {
        int64_t mm = m - s0 < chunk ? m - s0 : chunk;
        dc_at(&c, conv, s0);
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < mm * c.C; r++) dc_pad_plane(&c, x, s0, r, H, W, top, left, right);
        #pragma omp for schedule(static)
        for (int64_t task = 0; task < mm * per; task++) dc_task(&c, task);
    }
}

/* the images split between the threads of a team, each padding and convolving its own
   share, `slots` images at a time, through its own part of the padded buffer (its
   slots and a zeroed slack): no barrier until the region ends, where sharing each
   chunk's two loops cost two per chunk, and a passive OpenMP worker sleeps and is woken
   at each (the ResNet block's two 3x3s over 64 images: 2.1 ms with the loops shared,
   about 1.5 with the images split) */
static void dc_images(const dc_conv *conv, const float *x, int64_t m, int64_t slots, int64_t H,
                      int64_t W, int64_t top, int64_t left, int64_t right) {
    int t = 0, T = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    T = omp_get_num_threads();
#endif
    dc_conv c = *conv;
    int64_t per = c.groups * c.ntiles_o, lo = m * t / T, hi = m * (t + 1) / T;
    c.pad = conv->pad + t * (slots * c.C * c.plane + SLACK_ELEMENTS);
    memset(c.pad + slots * c.C * c.plane, 0, sizeof(float) * SLACK_ELEMENTS);
    for (int64_t s0 = lo; s0 < hi; s0 += slots) {
        int64_t mm = hi - s0 < slots ? hi - s0 : slots;
        dc_at(&c, conv, s0);
        for (int64_t r = 0; r < mm * c.C; r++) dc_pad_plane(&c, x, s0, r, H, W, top, left, right);
        for (int64_t task = 0; task < mm * per; task++) dc_task(&c, task);
    }
}

/* m images, `chunk` at a time through the padded buffer (which holds `chunk` images
   and DC_MAX_THREADS slacks), all chunks in one OpenMP region when the work pays for
   waking the pool (waking it once per chunk cost about 50 us each): the images split
   between the threads when each gets two or more and a slot of the buffer, else each
   chunk's padding and tiles shared; `first`: the index of image 0 in the program's
   full operands */
GC_EXPORT void gc_direct_conv2d_f32(int64_t m, const float *x, const float *w, float *y,
        float *pad, int64_t C, int64_t H, int64_t W, int64_t O, int64_t groups, int64_t kh,
        int64_t kw, int64_t top, int64_t left, int64_t bottom, int64_t right, int64_t dh,
        int64_t dw, int64_t parallel_work, int64_t chunk, int64_t first, int64_t steps,
        const int64_t *codes, const float *op0, const float *op1, const float *op2,
        const float *op3, const float *op4, const float *op5) {
    int64_t Hp = H + top + bottom, Wp = W + left + right;
    int64_t Ho = Hp - (kh - 1) * dh, Wo = Wp - (kw - 1) * dw, plane = (Hp + 1) * Wp;
    int64_t Cg = C / groups, Og = O / groups, K = Cg * kh * kw;
    int64_t ntiles_o = (Og + DC_OB - 1) / DC_OB;
    /* the taps' offsets: on the stack, or past every thread's slack in the padded
       buffer (`_chunks` makes room for them; no allocation that could fail here) */
    int64_t offs_stack[512], *offs = offs_stack;
    if (K > 512) {
        float *tail = pad + chunk * C * plane + SLACK_ELEMENTS * DC_MAX_THREADS;
        offs = (int64_t *)(tail + ((uintptr_t)tail % sizeof(int64_t) ? 1 : 0));
    }
    for (int64_t c = 0, t = 0; c < Cg; c++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++) offs[t++] = c * plane + i * dh * Wp + j * dw;
    memset(pad + chunk * C * plane, 0, sizeof(float) * SLACK_ELEMENTS);
    /* the flat run's length in whole vectors, when it is a tenth shorter than the rows'
       vectors, fits DC_FLAT floats a channel and no operand of the epilogue has the
       output's shape (its elements are read at the output's places) */
    int64_t vectors = Ho * ((Wo + GC_W - 1) / GC_W), run = (Ho - 1) * Wp + Wo;
    int64_t flat = (run + GC_W - 1) / GC_W * GC_W;
    for (int64_t s = 0; s < steps; s++)
        if (((codes[s] >> 4) & 3) == 2) flat = 0;
    if (10 * flat > 9 * GC_W * vectors || flat > DC_FLAT || Ho < 1 || Wo < 1) flat = 0;
    dc_conv conv = {pad, w, y, offs, C, O, groups, K, plane, Wp, Ho, Wo, ntiles_o, first, steps,
                    flat, codes, {op0, op1, op2, op3, op4, op5}};
    int64_t work = m * O * Ho * ((Wo + GC_W - 1) / GC_W) * K;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t slots = chunk / threads;
    if (work >= parallel_work && m >= 2 * threads && slots >= 1 && threads <= DC_MAX_THREADS) {
        #pragma omp parallel num_threads(threads)
        dc_images(&conv, x, m, slots, H, W, top, left, right);
        gc_pool_used();
    } else if (work >= parallel_work && m * groups * ntiles_o > 1) {
        #pragma omp parallel
        dc_chunks(&conv, x, m, chunk, H, W, top, left, right);
        gc_pool_used();
    } else {
        dc_chunks(&conv, x, m, chunk, H, W, top, left, right);  /* the loops run serially */
    }
}
