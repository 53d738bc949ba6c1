/* ---- float32 matmul by a matrix (graphc/backends/native/matmul.py) ---- */
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __AVX512F__
#define MM_MR 12
#else
#define MM_MR 6
#endif
#define MM_NR (2 * GC_W)
/* rows of one task: a panel's chunk of rows (the panel stays in the core's cache while
   its chunks go by) */
#define MM_CHUNK (8 * MM_MR)
/* bytes of b up to which a thread's tasks go chunk by chunk of rows (mm_share) */
#define MM_B_CACHED (256 << 10)
/* values of k a block of mm_pack_rows copies at a time, and a task of it packs */
#define MM_KB 32
#define MM_KPART 128
/* rows of output up to which whole panels of C-ordered rows are read in place (no
   copy), and how many rows of such a panel ahead of its use a tile prefetches (the
   processor's own prefetchers do not follow a panel's stride, a row of b apart: the
   MLP step's 10 x 512 by 512 x 256, 26 -> 18 us inside the step). Reading in place up
   to 512 rows was measured too: 0.6-2 % faster in the MLP step at batch 512, but at
   batch 32 the step took 1.03x the time, and 256 x 32 by 32 x 784 alone 142 against
   87 us after a cache flush (a panel's rows from memory, one tile's worth ahead) */
#ifndef MM_IN_PLACE
#define MM_IN_PLACE 96
#endif
#define MM_AHEAD 16

typedef struct {
    const float *a, *b, *bias; float *c, *packed, *apack;
    int64_t M, K, N, rows1, s0, s1, sk, bk, bj, relu, ready, bias_rows, scaled, subtract;
    float scale;  /* applied when `scaled`: a zeroed mm_args (winograd.c's) is a plain product */
} mm_args;

/* the height of the tile at row r of a chunk r0 .. r1: whole tiles of MM_MR rows, then
   tiles of 8, 4, 2 and 1 (each case unrolled, its accumulators in registers); a rest of
   4 to 7 rows after a whole tile goes as 8 + 8 + ... instead of 12 + 4 + ...: a tile of 4
   rows has too few accumulators to keep the multiply-add pipes busy */
GC_INLINE int mm_height(int64_t r0, int64_t r1, int64_t r) {
    int64_t full = (r1 - r0) / MM_MR;
#if MM_MR > 8
    int64_t rest = (r1 - r0) % MM_MR;
    if (full > 0 && rest >= 4 && rest < 8) full--;
#endif
    if (r < r0 + full * MM_MR) return MM_MR;
#if MM_MR > 8
    if (r1 - r >= 8) return 8;
#endif
    return r1 - r >= 4 ? 4 : r1 - r >= 2 ? 2 : 1;
}

/* where row r of a starts (its elements sk apart) */
GC_INLINE const float *mm_row(const mm_args *m, int64_t r) {
    if (m->rows1 == 1) return m->a + r * m->s0;  /* one row stride: no division */
    return m->a + (r / m->rows1) * m->s0 + (r % m->rows1) * m->s1;
}

/* whether panel p is read where b lies (no packed copy): its columns adjacent and whole,
   and few rows of output to read it for; else it is read from `packed` */
GC_INLINE int mm_in_place(const mm_args *m, int64_t p) {
    return !m->ready && m->bj == 1 && (p + 1) * MM_NR <= m->N && m->M <= MM_IN_PLACE;
}

/* n <= GC_W lanes: a plain load or store for a whole vector, a masked one for fewer (AMD's
   masked moves cost several times a plain one) */
GC_INLINE vf32 mm_load(const float *p, int64_t n) {
    if (n == GC_W) { vf32 v; memcpy(&v, p, GC_VB); return v; }
    return ldm_f32(p, n);
}
GC_INLINE void mm_store(float *p, vf32 v, int64_t n) {
    if (n == GC_W) memcpy(p, &v, GC_VB);
    else if (n > 0) stm_f32(p, v, n);
}

/* the epilogue of one product vector v: times `scale` (when `scaled`), then the bias added,
   or the product subtracted from it (`subtract`: a gemm's c - |alpha| P), then the
   relu; each operation rounded once, as the elementwise ops after a product would */
GC_INLINE vf32 mm_epilogue(const mm_args *m, vf32 v, const float *bias, int64_t n) {
    if (m->scaled) v = v * sp_f32(m->scale);
    if (bias) {
        vf32 t = mm_load(bias, n);
        v = m->subtract ? t - v : v + t;
    }
    return m->relu ? max_f32(v, sp_f32(0)) : v;
}

/* the epilogue of row r from column j0 (the bias per column: the same row for every r),
   on the products v0 (columns j0 ..) and v1 (j0 + GC_W ..), of which n0 and n1 count */
GC_INLINE void mm_finish(const mm_args *m, int64_t r, int64_t j0, int64_t n0, int64_t n1,
                         vf32 *v0, vf32 *v1) {
    const float *bias = m->bias ? m->bias + r * m->bias_rows + j0 : 0;
    *v0 = mm_epilogue(m, *v0, bias, n0);
    *v1 = mm_epilogue(m, *v1, bias ? bias + GC_W : 0, n1);
}

/* the k loop of a tile: b's rows ldb apart, prefetched MM_AHEAD ahead while k < ahead;
   a's values from `row`, sk apart, or, when `ap` is not null, from one stream of mr
   values a k. mm_tile calls it once per case with what it can as constants (a packed
   panel's MM_NR, a's sk of 1, one pointer for packed rows), so that the loop's pointers
   fit the registers: with one loop for every case, gcc kept three of them on the stack
   and two in vector registers, whose moves take a multiply-add port (the weight
   gradient 256 x 512 by 512 x 784: 838 -> 764 us, 512 x 784 by 784 x 256: 789 -> 769) */
GC_INLINE void mm_tile_k(const float *b, const int64_t ldb, const int64_t ahead,
                         const float *const *row, const int64_t sk, const float *ap,
                         const int64_t K, const int mr, const int two, vf32 *lo, vf32 *hi) {
    for (int64_t k = 0; k < K; k++) {
        if (k < ahead) {
            __builtin_prefetch(b + (k + MM_AHEAD) * ldb);
            if (two) __builtin_prefetch(b + (k + MM_AHEAD) * ldb + GC_W);
        }
        vf32 b0, b1 = sp_f32(0.0f);
        memcpy(&b0, b + k * ldb, GC_VB);
        if (two) memcpy(&b1, b + k * ldb + GC_W, GC_VB);
        for (int r = 0; r < mr; r++) {
            vf32 s = sp_f32(ap ? ap[k * mr + r] : row[r][k * sk]);
            lo[r] = fma_f32(s, b0, lo[r]);
            if (two) hi[r] = fma_f32(s, b1, hi[r]);
        }
    }
}

/* rows r0 .. r0 + mr - 1 times panel p into c, then the bias (one row for all, or row r
   of a matrix bias_rows apart) and the relu; `two`: the panel has columns past its first
   vector (a product of 10 columns computes one) */
GC_INLINE void mm_tile(const mm_args *m, int64_t r0, int64_t p, const int mr, const int two) {
    const int in_place = mm_in_place(m, p);
    vf32 lo[MM_MR], hi[MM_MR];
    for (int r = 0; r < mr; r++) { lo[r] = sp_f32(0.0f); hi[r] = sp_f32(0.0f); }
    const float *row[MM_MR];
    const float *ap = m->apack ? m->apack + r0 * m->K : 0;
    if (!ap) for (int r = 0; r < mr; r++) row[r] = mm_row(m, r0 + r);
    if (in_place) {
        const float *b = m->b + p * MM_NR;
        if (ap) mm_tile_k(b, m->bk, m->K - MM_AHEAD, row, 0, ap, m->K, mr, two, lo, hi);
        else if (m->sk == 1) mm_tile_k(b, m->bk, m->K - MM_AHEAD, row, 1, 0, m->K, mr, two, lo, hi);
        else mm_tile_k(b, m->bk, m->K - MM_AHEAD, row, m->sk, 0, m->K, mr, two, lo, hi);
    } else {
        const float *b = m->packed + p * m->K * MM_NR;
        if (ap) mm_tile_k(b, MM_NR, 0, row, 0, ap, m->K, mr, two, lo, hi);
        else if (m->sk == 1) mm_tile_k(b, MM_NR, 0, row, 1, 0, m->K, mr, two, lo, hi);
        else mm_tile_k(b, MM_NR, 0, row, m->sk, 0, m->K, mr, two, lo, hi);
    }
    int64_t j0 = p * MM_NR, cols = m->N - j0 < MM_NR ? m->N - j0 : MM_NR;
    const int64_t n0 = cols < GC_W ? cols : GC_W, n1 = cols - n0;
    for (int r = 0; r < mr; r++) mm_finish(m, r0 + r, j0, n0, n1, &lo[r], &hi[r]);
    float *y = m->c + r0 * m->N + j0;
    if (cols == MM_NR) {  /* a whole panel: plain stores */
        for (int r = 0; r < mr; r++) {
            memcpy(y + r * m->N, &lo[r], GC_VB);
            memcpy(y + r * m->N + GC_W, &hi[r], GC_VB);
        }
    } else {
        for (int r = 0; r < mr; r++) {
            stm_f32(y + r * m->N, lo[r], n0);
            if (n1 > 0) stm_f32(y + r * m->N + GC_W, hi[r], n1);
        }
    }
}

/* rows r0 .. r1 - 1 of panel p, tile by tile as mm_height goes (each height a call of
   its own, so that its loops unroll) */
GC_INLINE void mm_rows_of(const mm_args *m, int64_t r0, int64_t r1, int64_t p, const int two) {
    for (int64_t r = r0; r < r1;) {
        const int mr = mm_height(r0, r1, r);
        if (mr == MM_MR) mm_tile(m, r, p, MM_MR, two);
#if MM_MR > 8
        else if (mr == 8) mm_tile(m, r, p, 8, two);
#endif
        else if (mr == 4) mm_tile(m, r, p, 4, two);
        else if (mr == 2) mm_tile(m, r, p, 2, two);
        else mm_tile(m, r, p, 1, two);
        r += mr;
    }
}

/* rows r0 .. r1 - 1 of a (a chunk), their values of k from k0 to k1 - 1, into apack,
   tile by tile as mm_height goes: the tile of mr rows at row r as K groups of its mr
   values, k by k, at apack + r K. A left
   operand whose elements are not adjacent (a transposed activation: a weight gradient's
   G^T X) is read so once, instead of one cache line per k by every panel's tiles */
static void mm_pack_rows(const mm_args *m, int64_t r0, int64_t r1, int64_t k0, int64_t k1) {
    const int64_t K = m->K, sk = m->sk;
    int64_t at[MM_CHUNK];
    int height[MM_CHUNK], tiles = 0;
    for (int64_t r = r0; r < r1; r += height[tiles++]) {
        at[tiles] = r;
        height[tiles] = mm_height(r0, r1, r);
    }
    if (m->rows1 == 1 && m->s0 == 1) {  /* a transposed matrix: the mr values adjacent */
        /* by blocks of MM_KB values of k: the block's rows of a stay in the core's first
           cache while each tile's part is written, one stream at a time */
        for (int64_t kb = k0; kb < k1; kb += MM_KB) {
            const int64_t ke = kb + MM_KB < k1 ? kb + MM_KB : k1;
            for (int t = 0; t < tiles; t++) {
                float *d = m->apack + at[t] * K;
                const float *src = m->a + at[t];
                if (height[t] == MM_MR)
                    for (int64_t k = kb; k < ke; k++)
                        memcpy(d + k * MM_MR, src + k * sk, MM_MR * sizeof(float));
                else
                    for (int64_t k = kb; k < ke; k++)
                        memcpy(d + k * height[t], src + k * sk, height[t] * sizeof(float));
            }
        }
        return;
    }
    for (int t = 0; t < tiles; t++) {
        float *d = m->apack + at[t] * K;
        for (int i = 0; i < height[t]; i++) {
            const float *row = mm_row(m, at[t] + i);
            for (int64_t k = k0; k < k1; k++) d[k * height[t] + i] = row[k * sk];
        }
    }
}

static void mm_rows(const mm_args *m, int64_t r0, int64_t r1, int64_t p) {
    if (m->N - p * MM_NR > GC_W) mm_rows_of(m, r0, r1, p, 1);
    else mm_rows_of(m, r0, r1, p, 0);
}

/* M = 1 (a step of a recurrence at batch 1): the row times four whole panels at once,
   eight chains in flight, where a tile of one row keeps two and waits a multiply-add's
   latency between its steps. Each chain is the tile's: over k in order from +0.0 */
static void mm_row4(const mm_args *m, int64_t p0) {
    const int in_place = mm_in_place(m, p0);  /* the same for every whole panel */
    const int64_t ldb = in_place ? m->bk : MM_NR;
    const float *b[4];
    for (int q = 0; q < 4; q++)
        b[q] = in_place ? m->b + (p0 + q) * MM_NR : m->packed + (p0 + q) * m->K * MM_NR;
    vf32 acc[8];
    for (int v = 0; v < 8; v++) acc[v] = sp_f32(0.0f);
    for (int64_t k = 0; k < m->K; k++) {
        vf32 s = sp_f32(m->a[k * m->sk]);
        for (int q = 0; q < 4; q++) {
            vf32 b0, b1;
            memcpy(&b0, b[q] + k * ldb, GC_VB);
            memcpy(&b1, b[q] + k * ldb + GC_W, GC_VB);
            acc[2 * q] = fma_f32(s, b0, acc[2 * q]);
            acc[2 * q + 1] = fma_f32(s, b1, acc[2 * q + 1]);
        }
    }
    for (int q = 0; q < 4; q++) {
        int64_t j0 = (p0 + q) * MM_NR;
        mm_finish(m, 0, j0, GC_W, GC_W, &acc[2 * q], &acc[2 * q + 1]);
        memcpy(m->c + j0, &acc[2 * q], GC_VB);
        memcpy(m->c + j0 + GC_W, &acc[2 * q + 1], GC_VB);
    }
}

/* K = 1 (an outer product: one example's term of a weight gradient), rows r0 .. r1 - 1:
   a[r] times b's one row, read where it lies (or from `packed`, one row too), each
   product a chain of one multiply-add from +0.0 as a tile computes it, then the bias
   and the relu; no packing, no tile bookkeeping. The arguments are read into a local
   copy first: a store through y may alias anything (memcpy), so fields of `m` would be
   read again after every store */
static void mm_outer(const mm_args *args, int64_t r0, int64_t r1) {
    const mm_args local = *args, *m = &local;
    const float *brow = m->ready ? m->packed : m->b, *bias = m->bias, *a = m->a;
    float *c = m->c;
    const int64_t N = m->N, rows1 = m->rows1, s0 = m->s0, s1 = m->s1, bias_rows = m->bias_rows;
    const int64_t whole = N / GC_W * GC_W, tail = N - whole;
    const vf32 zero = sp_f32(0.0f);
    for (int64_t r = r0; r < r1; r++) {
        /* one row stride (the usual case): no division per row */
        const int64_t at = rows1 == 1 ? r * s0 : (r / rows1) * s0 + (r % rows1) * s1;
        const vf32 s = sp_f32(a[at]);
        float *y = c + r * N;
        const float *add = bias ? bias + r * bias_rows : 0;
        for (int64_t j = 0; j < whole; j += GC_W) {
            vf32 v;
            memcpy(&v, brow + j, GC_VB);
            v = mm_epilogue(m, fma_f32(s, v, zero), add ? add + j : 0, GC_W);
            memcpy(y + j, &v, GC_VB);
        }
        if (tail) {
            vf32 v = fma_f32(s, ldm_f32(brow + whole, tail), zero);
            stm_f32(y + whole, mm_epilogue(m, v, add ? add + whole : 0, tail), tail);
        }
    }
}

/* panel p of b (K x N, element (k, j) at b + k bk + j bj) into `packed`: its MM_NR
   columns k by k, zero past column N. Adjacent columns copy row by row; adjacent rows
   (a transposed matrix) go by 8 x 8 blocks transposed in registers, or, in a last panel
   of fewer columns, column by column along its row (a classifier's 10 outputs, the
   product 512 x 256 by 256 x 10: 34.7 -> 32.7 us, 51.8 -> 44.5 us after a cache flush,
   against element by element); anything else element by element */
static void mm_pack_panel(const float *b, float *packed, int64_t K, int64_t N, int64_t bk,
                          int64_t bj, int64_t p) {
    int64_t j0 = p * MM_NR, cols = N - j0 < MM_NR ? N - j0 : MM_NR, k = 0;
    float *d = packed + p * K * MM_NR;
    const float *s = b + j0 * bj;
    if (bj == 1 && cols == MM_NR) {  /* two vectors a row (memcpy of a fixed size) */
        for (; k < K; k++) memcpy(d + k * MM_NR, s + k * bk, MM_NR * sizeof(float));
        return;
    }
    if (bk == 1 && cols < MM_NR) {
        memset(d, 0, (size_t)K * MM_NR * sizeof(float));
        for (int64_t j = 0; j < cols; j++)
            for (k = 0; k < K; k++) d[k * MM_NR + j] = s[j * bj + k];
        return;
    }
    if (bk == 1)
        for (; k + 8 <= K; k += 8)
            for (int64_t j = 0; j < MM_NR; j += 8) tr8_f32(s + j * bj + k, bj, d + k * MM_NR + j, MM_NR);
    for (; k < K; k++)
        for (int64_t j = 0; j < MM_NR; j++) d[k * MM_NR + j] = j < cols ? s[k * bk + j * bj] : 0.0f;
}

/* the phases of one product's call, in order, each a loop of independent tasks: the
   outer products of K = 1 (then nothing else), the panels to pack, the chunks of rows to
   pack, the groups of four panels of one row (mm_row4), then the tiles. mm_share runs
   them on a team, mm_alone on one thread: the same tasks, so the same sums */
typedef struct {
    int64_t chunks, panels, groups, first, across;
    int outer, pack, rows_first;
} mm_phases;

/* a team of `team` threads' phases of product m.
   A thread's tasks: its panels, each down every chunk of rows (a panel of b stays in
   the first cache while a streams past); but when the whole of b fits the second
   cache, its chunks of rows, each across every panel (a chunk of a stays in the first
   cache, and a large a is read once, not once per panel: (2048, 128) x (128, 128)
   422 -> 390 us, (2048, 128) x (128, 512) 1.71 -> 1.56 ms; with b of 784 x 256 the
   panels' order stayed faster, 156 against 211 us at 64 rows). The tiles and their
   sums are the same either way: only which thread makes which, in which order.
   Only with at least 4 chunks a thread there: (64, 128) x (128, 512) went as one
   thread's 48 rows against the other's 16, 84 us against 54 by panels.
   A team also goes by rows when the output has more rows than columns: each thread
   then reads its own rows of a, which in a chain of products (a layer's output, the
   next layer's input, the gradients going back) the same thread wrote, since the
   elementwise kernels between them split rows the same way. By panels, each thread
   read every row of a, half of them from the other core's cache: in an MLP step at
   batch 512, h1 W2^T 249 -> 209 us, and the step 2133 -> 2072 us, interleaved in one
   process */
static mm_phases mm_phases_of(const mm_args *m, int64_t team) {
    mm_phases s;
    s.panels = (m->N + MM_NR - 1) / MM_NR;
    s.chunks = (m->M + MM_CHUNK - 1) / MM_CHUNK;
    s.outer = m->K == 1 && (m->ready || m->bj == 1);
    s.pack = !m->ready && m->M > 0;
    s.groups = m->M == 1 ? m->N / MM_NR / 4 : 0;
    s.first = 4 * s.groups;  /* the first panel the tiles compute */
    s.across = s.panels - s.first;
    s.rows_first = (m->K * m->N * (int64_t)sizeof(float) <= MM_B_CACHED && s.chunks >= 4 * team)
                   || (team > 1 && m->M > m->N && s.chunks >= team);
    return s;
}

/* the weight of task `i` of a phase: what it costs, in any unit, against its phase's
   other tasks */
typedef int64_t (*mm_weight)(const mm_args *m, const mm_phases *s, int64_t i);

/* thread `me`'s tasks, from .. to - 1, of a phase of n tasks shared by a team of `team`:
   each thread one run of tasks, a task going to the thread in whose share of the total
   weight its middle lies. A static schedule's equal counts of tasks left one thread a
   third more work where chunks of rows or panels differ in size (a last chunk of 64
   rows, a last panel of one vector) */
GC_INLINE void mm_split(const mm_args *m, const mm_phases *s, mm_weight weight, int64_t n,
                        int64_t team, int64_t me, int64_t *from, int64_t *to) {
    int64_t total = 0, before = 0;
    for (int64_t i = 0; i < n; i++) total += weight(m, s, i);
    *from = *to = n;
    for (int64_t i = 0; i < n; i++) {
        const int64_t w = weight(m, s, i), owner = (2 * before + w) * team / (2 * total + 1);
        if (owner == me && *from == n) *from = i;
        if (owner > me) {
            *to = i;
            break;
        }
        before += w;
    }
    if (*from > *to) *from = *to;
}

GC_INLINE int64_t mm_chunk_end(const mm_args *m, int64_t c) {
    return (c + 1) * MM_CHUNK < m->M ? (c + 1) * MM_CHUNK : m->M;
}

GC_INLINE void mm_pack_task(const mm_args *m, int64_t p) {
    if (!mm_in_place(m, p)) mm_pack_panel(m->b, m->packed, m->K, m->N, m->bk, m->bj, p);
}

/* task `task` of the tiles: its panel and its chunk of rows */
GC_INLINE int64_t mm_task_panel(const mm_phases *s, int64_t task) {
    return s->rows_first ? s->first + task % s->across : s->first + task / s->chunks;
}
GC_INLINE int64_t mm_task_chunk(const mm_phases *s, int64_t task) {
    return s->rows_first ? task / s->across : task % s->chunks;
}

GC_INLINE void mm_tile_task(const mm_args *m, const mm_phases *s, int64_t task) {
    const int64_t c = mm_task_chunk(s, task);
    mm_rows(m, c * MM_CHUNK, mm_chunk_end(m, c), mm_task_panel(s, task));
}

/* a task of the tiles: its rows, twice for a panel of two vectors */
static int64_t mm_tile_weight(const mm_args *m, const mm_phases *s, int64_t task) {
    const int64_t c = mm_task_chunk(s, task), p = mm_task_panel(s, task);
    return (mm_chunk_end(m, c) - c * MM_CHUNK) * (m->N - p * MM_NR > GC_W ? 2 : 1);
}

/* the row packing's task i: part i / chunks of k (MM_KPART values), of chunk i % chunks.
   Parts of k first: a thread packs the values of k that are its rows of the activation
   (the chunks, rows of a^T, are its columns) */
GC_INLINE int64_t mm_part_k0(const mm_phases *s, int64_t i) { return i / s->chunks * MM_KPART; }
GC_INLINE int64_t mm_part_k1(const mm_args *m, const mm_phases *s, int64_t i) {
    return mm_part_k0(s, i) + MM_KPART < m->K ? mm_part_k0(s, i) + MM_KPART : m->K;
}
static int64_t mm_part_weight(const mm_args *m, const mm_phases *s, int64_t i) {
    const int64_t c = i % s->chunks;
    return (mm_chunk_end(m, c) - c * MM_CHUNK) * (mm_part_k1(m, s, i) - mm_part_k0(s, i));
}

/* this thread's share of the product: its tasks of every phase (the loops are a team's
   when called in a parallel region, all of them on one thread otherwise; never from
   inside a team's own loop: mm_alone is for that) */
static void mm_share(const mm_args *m) {
    int64_t team = 1, me = 0, from, to;
#ifdef _OPENMP
    team = omp_get_num_threads();
    me = omp_get_thread_num();
#endif
    const mm_phases s = mm_phases_of(m, team);
    if (s.outer) {
        #pragma omp for schedule(static)
        for (int64_t c = 0; c < s.chunks; c++) mm_outer(m, c * MM_CHUNK, mm_chunk_end(m, c));
        return;
    }
    if (s.pack) {
        #pragma omp for schedule(static)
        for (int64_t p = 0; p < s.panels; p++) mm_pack_task(m, p);
    }
    if (m->apack) {
        const int64_t parts = (m->K + MM_KPART - 1) / MM_KPART;
        mm_split(m, &s, mm_part_weight, parts * s.chunks, team, me, &from, &to);
        for (int64_t i = from; i < to; i++) {
            const int64_t c = i % s.chunks;
            mm_pack_rows(m, c * MM_CHUNK, mm_chunk_end(m, c), mm_part_k0(&s, i), mm_part_k1(m, &s, i));
        }
        #pragma omp barrier
    }
    if (m->M == 1) {
        #pragma omp for schedule(static)
        for (int64_t g = 0; g < s.groups; g++) mm_row4(m, 4 * g);
    }
    mm_split(m, &s, mm_tile_weight, s.across * s.chunks, team, me, &from, &to);
    for (int64_t task = from; task < to; task++) mm_tile_task(m, &s, task);
    #pragma omp barrier
}

/* the whole product on the calling thread, in no worksharing loop: mm_share's phases
   one after the other (a team's thread computing an item of a stack of its own) */
static void mm_alone(const mm_args *m) {
    const mm_phases s = mm_phases_of(m, 1);
    if (s.outer) {
        for (int64_t c = 0; c < s.chunks; c++) mm_outer(m, c * MM_CHUNK, mm_chunk_end(m, c));
        return;
    }
    if (s.pack)
        for (int64_t p = 0; p < s.panels; p++) mm_pack_task(m, p);
    if (m->apack)
        for (int64_t c = 0; c < s.chunks; c++) mm_pack_rows(m, c * MM_CHUNK, mm_chunk_end(m, c), 0, m->K);
    for (int64_t g = 0; g < s.groups; g++) mm_row4(m, 4 * g);
    for (int64_t task = 0; task < s.across * s.chunks; task++) mm_tile_task(m, &s, task);
}

/* c (M x N, C order) = a (M x K: row r at a + (r / rows1) s0 + (r % rows1) s1, its
   elements sk apart) times b (K x N: element (k, j) at b + k bk + j bj, or, when
   `ready`, already in `packed` as gc_matmul_pack_f32 leaves it), plus bias[j] when bias
   is not null (bias[r bias_rows + j] when bias_rows is not 0: a matrix added, such as
   a gradient's accumulator), then max(., 0) when relu. When `scale` is not null the
   product is first multiplied by *scale, and with `subtract` taken from the bias
   instead of added to it (a gemm's c - |alpha| a b: an SGD update written over its
   weight, which each tile reads only where it writes). Without `ready`, the panels the tiles cannot
   read in place are packed first, by the same team, into `packed` (room for every
   panel). When `apack` is not null (room for M x K values; matmul.py passes it for a
   large left operand) and a's elements are not adjacent (sk != 1), the rows of a are
   packed there first too, for the tiles of every panel to read (mm_pack_rows). On the pool
   when `parallel` is 1, or 2 and the pool is warm */
GC_EXPORT void gc_matmul_f32(int64_t M, const float *a, const float *b, float *packed,
                             float *c, const float *bias, float *apack, const float *scale,
                             int64_t bias_rows, int64_t K, int64_t N,
                             int64_t rows1, int64_t s0, int64_t s1, int64_t sk, int64_t bk,
                             int64_t bj, int64_t ready, int64_t relu, int64_t subtract,
                             int64_t parallel) {
    const int pack_rows = apack && sk != 1 && M > 1 && K > 1;
    mm_args m = {a, b, bias, c, packed, pack_rows ? apack : 0, M, K, N, rows1, s0, s1, sk,
                 bk, bj, relu, ready, bias_rows, scale != 0, subtract, scale ? *scale : 1.0f};
    if (parallel == 1 || (parallel == 2 && gc_pool_warm())) {
        #pragma omp parallel
        mm_share(&m);
        gc_pool_used();
    } else {
        mm_share(&m);
    }
}

/* every panel of b (as above) into `packed`: a constant matrix, once per plan */
GC_EXPORT void gc_matmul_pack_f32(int64_t K, const float *b, float *packed, int64_t N,
                                  int64_t bk, int64_t bj, int64_t parallel) {
    int64_t panels = (N + MM_NR - 1) / MM_NR;
    #pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < panels; p++) mm_pack_panel(b, packed, K, N, bk, bj, p);
}

/* ---- a stack of products: (..., M, K) @ (..., K, N) ---- */

/* an item's place in one operand: its index split over the batch's three levels
   (n0 x n1 x n2, outermost first), each level with the operand's stride (0 where the
   operand is shared along it: a batch dim it has of size 1, or lacks) */
GC_INLINE int64_t mm_item_at(int64_t i, int64_t n1, int64_t n2, const int64_t *stride) {
    return (i / (n1 * n2)) * stride[0] + (i / n2 % n1) * stride[1] + (i % n2) * stride[2];
}

typedef struct {
    mm_args m;  /* item 0's product, but for its operands' places */
    int64_t n1, n2, as[3], bs[3];
} mm_stack;

/* item i's product as one matrix product (rank 2), its panels packed into `packed`, or
   already there when `ready` (a b shared by every item, packed once), its rows into
   `apack` when the stack's are packed */
GC_INLINE mm_args mm_item(const mm_stack *s, int64_t i, float *packed, int64_t ready,
                          float *apack) {
    mm_args m = s->m;
    m.a += mm_item_at(i, s->n1, s->n2, s->as);
    m.b += mm_item_at(i, s->n1, s->n2, s->bs);
    m.c += i * m.M * m.N;
    if (m.bias && m.bias_rows) m.bias += i * m.M * m.N;  /* a bias of the output's shape */
    m.packed = packed;
    m.ready = ready;
    if (m.apack) m.apack = apack;
    return m;
}

/* c (items x M x N, C order) = item by item a (M x K: row r at a + r s0, its elements
   sk apart) times b (K x N: element (k, j) at b + k bk + j bj), item i's operands moved
   by mm_item_at, plus the bias (per column, or of c's shape when bias_rows is N) and the
   relu. Each item's product is gc_matmul_f32's for that item alone (the same tiles, the
   same chains), wherever its panels were packed and whichever thread computed it. On
   the pool (when `parallel` says so: gc_parallel_flag) each thread computes its own
   items, their panels packed into its own part of `packed` (`per_slot` floats each,
   `slots` parts: the team then has at most as many threads); items of `split`
   multiply-adds or more left over by that share (fewer than the team's threads) are
   computed by the whole team each, as gc_matmul_f32 computes one product, their panels
   in the first part. A b shared by every item (its three strides 0) is packed once, by
   the team, and read by every item from there. When `apack` is not null (room for
   `slots` parts of `apack_slot` floats) and a's elements are not adjacent, each item's
   rows are packed first into the thread's part, as gc_matmul_f32 packs them */
GC_EXPORT void gc_matmul_stack_f32(int64_t items, const float *a, const float *b, float *packed,
                                   float *c, const float *bias, float *apack,
                                   int64_t apack_slot, int64_t bias_rows, int64_t M,
                                   int64_t K, int64_t N, int64_t s0, int64_t sk, int64_t bk,
                                   int64_t bj, int64_t n1, int64_t n2, int64_t as0, int64_t as1,
                                   int64_t as2, int64_t bs0, int64_t bs1, int64_t bs2,
                                   int64_t relu, int64_t slots, int64_t per_slot, int64_t split,
                                   int64_t parallel) {
    if (items <= 0 || M <= 0 || N <= 0) return;
    const int pack_rows = apack && sk != 1 && M > 1 && K > 1;
    mm_stack s = {{a, b, bias, c, packed, pack_rows ? apack : 0, M, K, N, 1, s0, 0, sk, bk, bj,
                   relu, 0, bias_rows, 0, 0, 1.0f},
                  n1, n2, {as0, as1, as2}, {bs0, bs1, bs2}};
    const int64_t shared = bs0 == 0 && bs1 == 0 && bs2 == 0;
    const int64_t panels = (N + MM_NR - 1) / MM_NR;
    int team = 1;
#ifdef _OPENMP
    team = omp_get_max_threads();
#endif
    /* items of `split` multiply-adds or more: the whole team on each of the last
       items % team (each thread's own items would leave threads idle there) */
    const int big = M * N * K >= split;
    if (!big && team > slots) team = (int)slots;
    int64_t own = big ? items - items % team : items;
    if (own > 0 && team > slots) {  /* more threads than panel buffers */
        team = (int)slots;
        own = big ? items - items % team : items;
    }
    if (team < 2 || !gc_parallel_flag(parallel)) {
        for (int64_t p = 0; shared && p < panels; p++) mm_pack_panel(b, packed, K, N, bk, bj, p);
        for (int64_t i = 0; i < items; i++) {
            const mm_args m = mm_item(&s, i, packed, shared, apack);
            mm_alone(&m);
        }
        return;
    }
    #pragma omp parallel num_threads(team)
    {
        if (shared) {
            #pragma omp for schedule(static)
            for (int64_t p = 0; p < panels; p++) mm_pack_panel(b, packed, K, N, bk, bj, p);
        }
        float *mine = packed, *rows = apack;  /* this thread's parts (it has some when own > 0) */
#ifdef _OPENMP
        if (!shared && own > 0) mine += omp_get_thread_num() * per_slot;
        if (pack_rows && own > 0) rows += omp_get_thread_num() * apack_slot;
#endif
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < own; i++) {
            const mm_args m = mm_item(&s, i, mine, shared, rows);
            mm_alone(&m);
        }
        for (int64_t i = own; i < items; i++) {
            const mm_args m = mm_item(&s, i, packed, shared, apack);
            mm_share(&m);
        }
    }
    gc_pool_used();
}
