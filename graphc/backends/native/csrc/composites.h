GC_INLINE vf32 sign_f32(vf32 x) {
    vf32 s = sel_f32((vb)(x > sp_f32(0)), sp_f32(1), sel_f32((vb)(x < sp_f32(0)), sp_f32(-1), sp_f32(0)));
    return sel_f32(nan_f32(x), x, s); }
GC_INLINE vf64 sign_f64(vf64 x) {
    vf64 s = sel_f64(__builtin_convertvector(x > sp_f64(0), vb), sp_f64(1),
                     sel_f64(__builtin_convertvector(x < sp_f64(0), vb), sp_f64(-1), sp_f64(0)));
    return sel_f64(nan_f64(x), x, s); }
#define GC_SIGMOID(t) \
    GC_INLINE v##t sigmoid_##t(v##t x, v##t e, vb ge) { \
        v##t numerator = max_##t(e, sel_##t(ge, sp_##t(1), sp_##t(0))); \
        return numerator / (e + sp_##t(1)); }
GC_SIGMOID(f32)
GC_SIGMOID(f64)
#define GC_GELU(t, A, C) \
    GC_INLINE v##t gelu_##t(v##t x) { \
        v##t inner = x * x; inner = inner * sp_##t(A); inner = inner + sp_##t(1); \
        inner = inner * x; inner = inner * sp_##t(C); \
        v##t t1 = tanh_##t(inner) + sp_##t(1); \
        return (x * sp_##t(0.5)) * t1; }
