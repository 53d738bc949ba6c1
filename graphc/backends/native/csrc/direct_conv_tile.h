/* One tile: ob output channels by pb vectors of positions, each vector k reading the
   padded channel at src[k] plus each tap's offset, summed in registers; then the
   epilogue program on the registers, and the stores. Every loop over ob and pb is
   unrolled (each case of dc_tile_any has them as constants), so the accumulators stay
   in registers from the first tap to the store: left as loops, gcc kept the loaded
   vectors and the accumulators on the stack (LeNet's layers on AVX2 3.3-5x slower).

   The epilogue program: step s is codes[s] = op | kind << 4 | swap << 6 with operand
   ops[s]; the op is program_ops.h's, on (value, operand), or (operand, value) when
   swap; the operand has one value per output channel (kind 1), the output's shape (2,
   `at` elements in for this tile), or one value (3). numpy's operations in numpy's
   order, so numpy's bits. Each step's operand and op are chosen once per tile, not per
   vector (dispatching per vector was 14% of a ResNet block's time). */
GC_INLINE void dc_tile(const float *x, const float *w, const int64_t *offs, int64_t K,
                       const int64_t *src, const int ob, const int pb, float *y,
                       int64_t plane_out, const int64_t *dst, const int64_t *lanes,
                       int64_t o0, int64_t at, int64_t steps, const int64_t *codes,
                       const float *const *ops) {
    vf32 acc[DC_OB][DC_PB];
    DC_UNROLL for (int o = 0; o < ob; o++)
        DC_UNROLL for (int k = 0; k < pb; k++) acc[o][k] = sp_f32(0.0f);
    for (int64_t t = 0; t < K; t++) {
        const float *from = x + offs[t];
        vf32 v[DC_PB];
        DC_UNROLL for (int k = 0; k < pb; k++) memcpy(&v[k], from + src[k], GC_VB);
        DC_UNROLL for (int o = 0; o < ob; o++) {
            vf32 s = sp_f32(w[o * K + t]);
            DC_UNROLL for (int k = 0; k < pb; k++) acc[o][k] = fma_f32(s, v[k], acc[o][k]);
        }
    }
    for (int64_t s = 0; s < steps; s++) {
        int64_t code = codes[s], op = code & 15, kind = (code >> 4) & 3, swap = (code >> 6) & 1;
        const float *p = ops[s];
        vf32 u[DC_OB][DC_PB];
        DC_UNROLL for (int o = 0; o < ob; o++) {
            vf32 c = sp_f32(kind == 1 ? p[o0 + o] : kind == 3 ? p[0] : 0.0f);
            DC_UNROLL for (int k = 0; k < pb; k++)
                u[o][k] = kind == 2 ? ldm_f32(p + at + o * plane_out + dst[k], lanes[k]) : c;
        }
#define DC_APPLY(expr) \
        DC_UNROLL for (int o = 0; o < ob; o++) \
            DC_UNROLL for (int k = 0; k < pb; k++) { \
                vf32 v = acc[o][k], a = swap ? u[o][k] : v, b = swap ? v : u[o][k]; \
                acc[o][k] = expr; \
            }
        GC_PROGRAM_OP(op, DC_APPLY)
#undef DC_APPLY
    }
    DC_UNROLL for (int o = 0; o < ob; o++)
        DC_UNROLL for (int k = 0; k < pb; k++) stm_f32(y + o * plane_out + dst[k], acc[o][k], lanes[k]);
}
