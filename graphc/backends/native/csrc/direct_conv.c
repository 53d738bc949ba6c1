/* The epilogue program: step s is codes[s] = op | kind << 4 | swap << 6 with operand
   ops[s]; op 0-5 are add, sub, mul, div, maximum, minimum of (value, operand), or of
   (operand, value) when swap, 6 is relu; the operand has one value per output channel
   (kind 1), the output's shape (2, `at` elements in for this tile), or one value (3).
   The same IEEE operations as numpy's ufuncs (max_f32 is numpy's maximum), in the same
   order, so the same bits. Applied to the tile in tmp, one step at a time, then stored. */
static void dc_finish(float *tmp, float *y, int64_t plane_out, const int64_t *dst,
                      const int64_t *lanes, int ob, int pb, int64_t o0, int64_t at,
                      int64_t steps, const int64_t *codes, const float *const *ops) {
    /* each step's operand and op chosen once per tile, not per vector: dispatching
       per vector was 14% of a ResNet block's time */
    for (int64_t s = 0; s < steps; s++) {
        int64_t code = codes[s], op = code & 15, kind = (code >> 4) & 3, swap = (code >> 6) & 1;
        const float *p = ops[s];
        vf32 u[DC_OB][DC_PB];
        if (kind == 2) {
            for (int o = 0; o < ob; o++)
                for (int k = 0; k < pb; k++)
                    u[o][k] = ldm_f32(p + at + o * plane_out + dst[k], lanes[k]);
        } else {
            for (int o = 0; o < ob; o++) {
                vf32 c = sp_f32(kind == 1 ? p[o0 + o] : kind == 3 ? p[0] : 0.0f);
                for (int k = 0; k < pb; k++) u[o][k] = c;
            }
        }
#define DC_APPLY(expr) \
        for (int o = 0; o < ob; o++) \
            for (int k = 0; k < pb; k++) { \
                float *t = tmp + (o * DC_PB + k) * GC_W; \
                vf32 v; \
                memcpy(&v, t, GC_VB); \
                vf32 a = swap ? u[o][k] : v, b = swap ? v : u[o][k]; \
                v = expr; \
                memcpy(t, &v, GC_VB); \
            }
        switch (op) {
            case 0: DC_APPLY(a + b) break;
            case 1: DC_APPLY(a - b) break;
            case 2: DC_APPLY(a * b) break;
            case 3: DC_APPLY(a / b) break;
            case 4: DC_APPLY(max_f32(a, b)) break;
            case 5: DC_APPLY(min_f32(a, b)) break;
            default: DC_APPLY(max_f32(v, sp_f32(0.0f))) break;
        }
#undef DC_APPLY
    }
    for (int o = 0; o < ob; o++)
        for (int k = 0; k < pb; k++) {
            vf32 v;
            memcpy(&v, tmp + (o * DC_PB + k) * GC_W, GC_VB);
            stm_f32(y + o * plane_out + dst[k], v, lanes[k]);
        }
}

/* n floats zeroed, or copied, by masked vector stores: rows are short (a ResNet block's
   14 floats), and a memset and a memcpy call per row took 5% of its time */
GC_INLINE void dc_zero(float *p, int64_t n) {
    for (int64_t k = 0; k < n; k += GC_W) stm_f32(p + k, sp_f32(0.0f), n - k < GC_W ? n - k : GC_W);
}
GC_INLINE void dc_copy(float *d, const float *s, int64_t n) {
    for (int64_t k = 0; k < n; k += GC_W) {
        int64_t m = n - k < GC_W ? n - k : GC_W;
        stm_f32(d + k, ldm_f32(s + k, m), m);
    }
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
    int64_t C, O, groups, K, plane, Wp, Ho, Wo, ntiles_o, first, steps;
    const int64_t *codes; const float *ops[DC_OPS];
} dc_conv;

/* one task: ob <= DC_OB output channels of one image and group, every output row in
   vectors of GC_W columns (the last one of a row partial), DC_PB vectors a tile */
static void dc_task(const dc_conv *c, int64_t task) {
    int64_t Og = c->O / c->groups, Cg = c->C / c->groups, per = c->groups * c->ntiles_o;
    int64_t image = task / per, g = (task % per) / c->ntiles_o;
    int64_t o0 = g * Og + (task % c->ntiles_o) * DC_OB;
    int ob = (int)(g * Og + Og - o0 < DC_OB ? g * Og + Og - o0 : DC_OB);
    const float *x = c->pad + (image * c->C + g * Cg) * c->plane;
    int64_t plane_out = c->Ho * c->Wo, at = (image * c->O + o0) * plane_out;
    int64_t at_ops = ((c->first + image) * c->O + o0) * plane_out;
    int64_t per_row = (c->Wo + GC_W - 1) / GC_W, count = c->Ho * per_row;
    float tmp[DC_OB * DC_PB * GC_W];
    for (int64_t v0 = 0; v0 < count; v0 += DC_PB) {
        int pb = (int)(count - v0 < DC_PB ? count - v0 : DC_PB);
        int64_t src[DC_PB], dst[DC_PB], lanes[DC_PB];
        for (int k = 0; k < pb; k++) {
            int64_t r = (v0 + k) / per_row, col = ((v0 + k) % per_row) * GC_W;
            src[k] = r * c->Wp + col;
            dst[k] = r * c->Wo + col;
            lanes[k] = c->Wo - col < GC_W ? c->Wo - col : GC_W;
        }
        dc_tile_any(x, c->w + o0 * c->K, c->offs, c->K, src, tmp, ob, pb);
        dc_finish(tmp, c->y + at, plane_out, dst, lanes, ob, pb, o0, at_ops, c->steps,
                  c->codes, c->ops);
    }
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
    dc_conv conv = {pad, w, y, offs, C, O, groups, K, plane, Wp, Ho, Wo, ntiles_o, first, steps,
                    codes, {op0, op1, op2, op3, op4, op5}};
    int64_t work = m * O * Ho * ((Wo + GC_W - 1) / GC_W) * K;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t slots = chunk / threads;
    if (work >= parallel_work && m >= 2 * threads && slots >= 1 && threads <= DC_MAX_THREADS) {
        #pragma omp parallel num_threads(threads)
        dc_images(&conv, x, m, slots, H, W, top, left, right);
    } else if (work >= parallel_work && m * groups * ntiles_o > 1) {
        #pragma omp parallel
        dc_chunks(&conv, x, m, chunk, H, W, top, left, right);
    } else {
        dc_chunks(&conv, x, m, chunk, H, W, top, left, right);  /* the loops run serially */
    }
}
