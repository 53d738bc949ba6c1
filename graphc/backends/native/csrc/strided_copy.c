/* A strided array copied into a C-contiguous one: out <- the n elements of `item` bytes
   from `offset` bytes into root, walked in C order through desc = [nd, shape[nd], strides[nd]] (strides in
   bytes, any sign; native/copies.py merges the dims first, so nd is small and the last
   dim is the longest run it can be). The elements are copied as bytes, so the bits are
   the source's whatever the dtype.

   The rows (every dim but the last) are walked with their index counted like an
   odometer, divided only once per thread to find where its range starts. A row whose
   elements are adjacent is one memcpy; else a loop of the element's width (1, 2, 4 or 8
   bytes; any other width by memcpy per element). The rows split over the OpenMP pool,
   one range per thread, when `gc_parallel_flag` says so. */
#include <omp.h>

#define GC_COPY_DIMS 32

static void copy_rows(const char *src, const int64_t *shape, const int64_t *strides,
                      int64_t nd, char *out, int64_t item, int64_t lo, int64_t hi) {
    const int64_t len = shape[nd - 1], step = strides[nd - 1], row = len * item;
    int64_t index[GC_COPY_DIMS];
    const char *at = src;
    int64_t rest = lo;
    for (int64_t d = nd - 2; d >= 0; d--) {
        index[d] = rest % shape[d];
        rest /= shape[d];
        at += index[d] * strides[d];
    }
    for (int64_t r = lo; r < hi; r++) {
        char *o = out + r * row;
        if (step == item)
            memcpy(o, at, (size_t)row);
        else if (item == 4)
            for (int64_t j = 0; j < len; j++) memcpy(o + 4 * j, at + j * step, 4);
        else if (item == 8)
            for (int64_t j = 0; j < len; j++) memcpy(o + 8 * j, at + j * step, 8);
        else if (item == 2)
            for (int64_t j = 0; j < len; j++) memcpy(o + 2 * j, at + j * step, 2);
        else if (item == 1)
            for (int64_t j = 0; j < len; j++) o[j] = at[j * step];
        else
            for (int64_t j = 0; j < len; j++) memcpy(o + item * j, at + j * step, (size_t)item);
        for (int64_t d = nd - 2; d >= 0; d--) { /* the next row: carry through the dims */
            at += strides[d];
            if (++index[d] < shape[d]) break;
            at -= shape[d] * strides[d];
            index[d] = 0;
        }
    }
}

GC_EXPORT void gc_strided_copy(int64_t n, const char *root, int64_t offset, const int64_t *desc,
                               char *out, int64_t item, int64_t parallel) {
    const char *src = root + offset;
    const int64_t nd = desc[0];
    const int64_t *shape = desc + 1, *strides = desc + 1 + nd;
    if (n == 0) return;
    const int64_t rows = n / shape[nd - 1];
    if (!gc_parallel_flag(parallel) || rows < 2) {
        copy_rows(src, shape, strides, nd, out, item, 0, rows);
        return;
    }
    _Pragma("omp parallel") {
        int64_t k = omp_get_thread_num(), t = omp_get_num_threads();
        copy_rows(src, shape, strides, nd, out, item, rows * k / t, rows * (k + 1) / t);
    }
    gc_pool_used();
}
