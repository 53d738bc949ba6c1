/* the tile and its epilogue with (ob, pb) as constants, so each case is unrolled and
   kept in registers: one case per ob <= DC_OB and pb <= DC_PB */
#define DC_CASE(o, p) \
    case (o) * 16 + (p): \
        dc_tile(x, w, offs, K, src, o, p, y, plane_out, dst, lanes, o0, at, steps, codes, \
                ops); \
        break;
#define DC_P1(o) DC_CASE(o, 1)
#if DC_PB >= 2
#define DC_P2(o) DC_CASE(o, 2)
#else
#define DC_P2(o)
#endif
#if DC_PB >= 3
#define DC_P3(o) DC_CASE(o, 3)
#else
#define DC_P3(o)
#endif
#if DC_PB >= 4
#define DC_P4(o) DC_CASE(o, 4)
#else
#define DC_P4(o)
#endif
#define DC_ROW(o) DC_P1(o) DC_P2(o) DC_P3(o) DC_P4(o)
static void dc_tile_any(const float *x, const float *w, const int64_t *offs, int64_t K,
                        const int64_t *src, int ob, int pb, float *y,
                        int64_t plane_out, const int64_t *dst, const int64_t *lanes,
                        int64_t o0, int64_t at, int64_t steps, const int64_t *codes,
                        const float *const *ops) {
    switch (ob * 16 + pb) {
        DC_ROW(1)
#if DC_OB >= 2
        DC_ROW(2)
#endif
#if DC_OB >= 3
        DC_ROW(3)
#endif
#if DC_OB >= 4
        DC_ROW(4)
#endif
#if DC_OB >= 5
        DC_ROW(5)
#endif
#if DC_OB >= 6
        DC_ROW(6)
#endif
#if DC_OB >= 7
        DC_ROW(7)
#endif
#if DC_OB >= 8
        DC_ROW(8)
#endif
    }
}
#undef DC_ROW
#undef DC_P1
#undef DC_P2
#undef DC_P3
#undef DC_P4
#undef DC_CASE
