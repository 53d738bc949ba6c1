#define T double
MP_KERNEL(f64, double)
GC_EXPORT void gc_max_pool2d_f64(MP_ARGS) {
    mp_pool_f64(planes, x, o, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, parallel);
}
#undef T
