#include <math.h>
#include <stdlib.h>
/* numpy's pairwise sum of n elements (numpy/_core/src/umath/loops_utils.h.src) */
#define GC_PAIRWISE(T, t) \
static T pw_##t(const T *a, int64_t n) { \
    if (n < 8) { T res = -0.0; for (int64_t i = 0; i < n; i++) res += a[i]; return res; } \
    if (n <= 128) { \
        T r[8]; for (int k = 0; k < 8; k++) r[k] = a[k]; \
        int64_t i; \
        for (i = 8; i < n - (n % 8); i += 8) for (int k = 0; k < 8; k++) r[k] += a[i + k]; \
        T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
        for (; i < n; i++) res += a[i]; \
        return res; } \
    int64_t n2 = n / 2; n2 -= n2 % 8; \
    return pw_##t(a, n2) + pw_##t(a + n2, n - n2); }
GC_PAIRWISE(float, f32)
GC_PAIRWISE(double, f64)
/* a > b as the lane mask sel takes */
GC_INLINE vb gt_f32(vf32 a, vf32 b) { return (vb)(a > b); }
GC_INLINE vb gt_f64(vf64 a, vf64 b) { return __builtin_convertvector(a > b, vb); }
