/* unslice, the adjoint of a slice: out, `total` bytes, made zeros (memset: +0.0, False,
   0) but for a window where the n elements of `item` bytes of a source are put. Both
   the source (from `offset` bytes into root) and the window (from `at` bytes into out)
   are walked in C order (strided_walk.h) through desc = [nd, shape[nd], from[nd],
   to[nd]]: the shape the two share, the source's strides and the window's, in bytes and
   of any sign. The elements are copied as bytes: the bits are the source's (nan
   payloads, -0.0) whatever the dtype.

   A window that is one run of out's bytes (nd 1, its stride `item`) is not zeroed
   first: the bytes around it are. Any other window is zeroed with the rest of out, then
   written. With `gc_parallel_flag`, each thread of the OpenMP pool zeroes a range of
   out's bytes and writes a range of the elements (a barrier between the two when the
   ranges may overlap). */
#include <omp.h>

/* bytes [lo, hi) of out zeroed, but for those in [keep_lo, keep_hi) */
static void zero_around(char *out, int64_t lo, int64_t hi, int64_t keep_lo, int64_t keep_hi) {
    const int64_t a = keep_lo > lo ? (keep_lo < hi ? keep_lo : hi) : lo;
    const int64_t b = keep_hi < hi ? (keep_hi > lo ? keep_hi : lo) : hi;
    if (a > lo) memset(out + lo, 0, (size_t)(a - lo));
    if (hi > b) memset(out + b, 0, (size_t)(hi - b));
}

GC_EXPORT void gc_unslice(int64_t n, const char *root, int64_t offset, const int64_t *desc,
                          char *out, int64_t at, int64_t total, int64_t item,
                          int64_t parallel) {
    const int64_t nd = desc[0];
    const int64_t *shape = desc + 1, *from = desc + 1 + nd, *to = desc + 1 + 2 * nd;
    const char *src = root + offset;
    char *dst = out + at;
    /* the window one run of bytes: they are written, not zeroed first */
    const int dense = n > 0 && nd == 1 && to[0] == item;
    const int64_t keep_lo = dense ? at : 0, keep_hi = dense ? at + n * item : 0;
    if (!gc_parallel_flag(parallel)) {
        zero_around(out, 0, total, keep_lo, keep_hi);
        if (n > 0) gc_walk(src, dst, shape, from, to, nd, item, 0, n);
        return;
    }
    _Pragma("omp parallel") {
        const int64_t k = omp_get_thread_num(), t = omp_get_num_threads();
        zero_around(out, total * k / t, total * (k + 1) / t, keep_lo, keep_hi);
        if (!dense) {
            _Pragma("omp barrier");
        }
        if (n > 0) gc_walk(src, dst, shape, from, to, nd, item, n * k / t, n * (k + 1) / t);
    }
    gc_pool_used();
}
