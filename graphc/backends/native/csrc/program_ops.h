/* ---- the epilogue program's ops (direct_conv.CODES), for the direct convolution and
   Winograd: code `op` 0-5 applies add, sub, mul, div, maximum or minimum to (a, b), the
   value and its operand in the step's order, 6 relu to the value v. `APPLY(expr)` is
   the caller's macro computing expr over its lanes (the same IEEE operations as numpy's
   ufuncs; max_f32 is numpy's maximum) ---- */
#define GC_PROGRAM_OP(op, APPLY) \
    switch (op) { \
        case 0: APPLY(a + b) break; \
        case 1: APPLY(a - b) break; \
        case 2: APPLY(a * b) break; \
        case 3: APPLY(a / b) break; \
        case 4: APPLY(max_f32(a, b)) break; \
        case 5: APPLY(min_f32(a, b)) break; \
        default: APPLY(max_f32(v, sp_f32(0.0f))) break; \
    }
