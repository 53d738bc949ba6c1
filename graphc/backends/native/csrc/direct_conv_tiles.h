/* ---- direct convolution (graphc/backends/native/direct_conv.py) ----
   The register tile, DC_OB output channels by DC_PB vectors of output columns, per
   vector width: direct_conv.py defines DC_OB512, DC_PB512 (AVX-512) and DC_OB256,
   DC_PB256 (AVX2) from its TILES, and DC_OPS, the epilogue program's operands. */
#ifdef __AVX512F__
#define DC_OB DC_OB512
#define DC_PB DC_PB512
#else
#define DC_OB DC_OB256
#define DC_PB DC_PB256
#endif
/* a loop over a tile's channels or vectors, unrolled */
#define DC_UNROLL _Pragma("GCC unroll 8")
#if DC_OB < 1 || DC_OB > 8 || DC_PB < 1 || DC_PB > 4
#error "the direct convolution's tile is at most 8 output channels by 4 vectors"
#endif
