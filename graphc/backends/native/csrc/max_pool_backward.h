/* ---- max_pool2d_backward (graphc/backends/native/pool.py) ---- */
#define MPB_ARGS int64_t planes, const T *ct, const T *x, const T *pooled, T *g, \
    int32_t *wins, int64_t H, \
    int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, \
    int64_t top, int64_t left, int64_t dh, int64_t dw, int64_t parallel
#define MPB_KERNEL(t, T, ROWS22) \
static void mpb_plane_##t(const T *ct, const T *x, const T *p, T *g, int32_t *win, \
        int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, \
        int64_t sw, int64_t top, int64_t left, int64_t dh, int64_t dw) { \
    for (int64_t k = 0; k < H * W; k++) g[k] = (T)0; \
    for (int64_t q = 0; q < Ho * Wo; q++) { \
        int64_t r = q / Wo, c = q % Wo; \
        T v = p[q]; \
        int pn = v != v; /* a window holding a nan: its last nan wins */ \
        win[q] = -1; \
        for (int64_t t = 0; t < kh * kw && (pn || win[q] < 0); t++) { \
            int64_t h = r * sh - top + (t / kw) * dh, w = c * sw - left + (t % kw) * dw; \
            if (h < 0 || h >= H || w < 0 || w >= W) continue; \
            T a = x[h * W + w]; \
            if (pn ? a != a : a == v) win[q] = (int32_t)t; \
        } \
    } \
    for (int64_t t = 0; t < kh * kw; t++) \
        for (int64_t q = 0; q < Ho * Wo; q++) { \
            if (win[q] != t) continue; \
            int64_t r = q / Wo, c = q % Wo; \
            int64_t h = r * sh - top + (t / kw) * dh, w = c * sw - left + (t % kw) * dw; \
            g[h * W + w] += ct[q]; \
        } } \
GC_EXPORT void gc_max_pool2d_backward_##t(MPB_ARGS) { \
    if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && top == 0 && left == 0 && dh == 1 \
            && dw == 1 && 2 * Ho <= H && 2 * Wo <= W && Ho > 0) { \
        if (gc_parallel_flag(parallel)) { \
            _Pragma("omp parallel for schedule(static)") \
            for (int64_t n = 0; n < planes; n++) \
                ROWS22(ct + n * Ho * Wo, x + n * H * W, pooled + n * Ho * Wo, \
                               g + n * H * W, Ho, H, W, Ho, Wo); \
            gc_pool_used(); \
        } else { \
            ROWS22(ct, x, pooled, g, planes * Ho, H, W, Ho, Wo); \
        } \
        return; \
    } \
    _Pragma("omp parallel for schedule(static) if (gc_parallel_flag(parallel))") \
    for (int64_t n = 0; n < planes; n++) { \
        mpb_plane_##t(ct + n * Ho * Wo, x + n * H * W, pooled + n * Ho * Wo, g + n * H * W, \
                      wins + n * Ho * Wo, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw); \
    } }
/* the 2x2, stride-2 pass, one window at a time (float64) */
#define MPB_ROWS22(t, T) \
static void mpb_rows22_##t(const T *ct, const T *x, const T *p, T *g, int64_t rows, \
        int64_t H, int64_t W, int64_t Ho, int64_t Wo) { \
    for (int64_t q = 0; q < rows; q++) { \
        int64_t at = (q / Ho) * H * W + 2 * (q % Ho) * W; \
        const T *x0 = x + at, *x1 = x0 + W, *pq = p + q * Wo, *cq = ct + q * Wo; \
        T *g0 = g + at, *g1 = g0 + W; \
        for (int64_t k = 0; k < Wo; k++) { \
            T v = pq[k], one = (T)0 + cq[k], a = x0[2 * k], b = x0[2 * k + 1]; \
            T c = x1[2 * k], d = x1[2 * k + 1]; \
            /* the first equal to v, or where v is nan the last nan (no tap equals nan) */ \
            int pn = v != v, na = a != a, nb = b != b, nc = c != c, nd = d != d; \
            int ea = a == v, eb = !ea & (b == v), ec = !ea & !eb & (c == v); \
            int ha = ea | (pn & na & !nb & !nc & !nd); \
            int hb = eb | (pn & nb & !nc & !nd); \
            int hc = ec | (pn & nc & !nd); \
            int hd = (!ea & !eb & !ec & (d == v)) | (pn & nd); \
            g0[2 * k] = ha ? one : (T)0; g0[2 * k + 1] = hb ? one : (T)0; \
            g1[2 * k] = hc ? one : (T)0; g1[2 * k + 1] = hd ? one : (T)0; \
        } \
        if (W > 2 * Wo) /* an odd last column: no window */ \
            for (int64_t k = 2 * Wo; k < W; k++) { g0[k] = (T)0; g1[k] = (T)0; } \
        if (q % Ho == Ho - 1) /* rows past the last window's */ \
            for (int64_t k = 2 * W; k < (H - 2 * (Ho - 1)) * W; k++) g0[k] = (T)0; \
    } }
