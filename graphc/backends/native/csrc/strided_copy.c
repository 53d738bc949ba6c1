/* A strided array copied into a C-contiguous one: out <- the n elements of `item` bytes
   from `offset` bytes into root, walked in C order through desc = [nd, shape[nd],
   strides[nd]] (strides in bytes, any sign; native/copies.py merges the dims first).
   The walk is strided_walk.h's, its destination strides out's own (C order); a row
   whose elements are adjacent is one memcpy. The elements split over the OpenMP pool,
   one range per thread, when `gc_parallel_flag` says so. */
#include <omp.h>

GC_EXPORT void gc_strided_copy(int64_t n, const char *root, int64_t offset, const int64_t *desc,
                               char *out, int64_t item, int64_t parallel) {
    const char *src = root + offset;
    const int64_t nd = desc[0];
    const int64_t *shape = desc + 1, *strides = desc + 1 + nd;
    if (n == 0) return;
    int64_t to[GC_WALK_DIMS];
    to[nd - 1] = item;
    for (int64_t d = nd - 2; d >= 0; d--) to[d] = to[d + 1] * shape[d + 1];
    if (!gc_parallel_flag(parallel) || n < 2) {
        gc_walk(src, out, shape, strides, to, nd, item, 0, n);
        return;
    }
    _Pragma("omp parallel") {
        const int64_t k = omp_get_thread_num(), t = omp_get_num_threads();
        gc_walk(src, out, shape, strides, to, nd, item, n * k / t, n * (k + 1) / t);
    }
    gc_pool_used();
}
