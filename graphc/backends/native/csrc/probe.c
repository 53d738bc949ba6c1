#include <stdint.h>
#ifndef __AVX2__
#error "graphc's native kernels need AVX2"
#endif
typedef float vf32 __attribute__((vector_size(32)));
extern vf32 _ZGVdN8v_expf(vf32);
void graphc_probe(int64_t n, float *out) {
    #pragma omp parallel for if (n > 1024)
    for (int64_t i = 0; i < n; i += 8) {
        vf32 x = {0, 1, 2, 3, 4, 5, 6, 7};
        vf32 y = _ZGVdN8v_expf(x);
        for (int k = 0; k < 8 && i + k < n; k++) out[i + k] = y[k];
    }
}
