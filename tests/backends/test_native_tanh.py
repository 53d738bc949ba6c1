"""The native float32 tanh (cexpr.tanh_f32) computes the same bits as its first form.

`tanh_f32` went from compares and selects (a clamp of x to [-9, 9], x itself below
1e-4, +-1 from 8.7, a clamp to [-1, 1]) to one select and min/max clamps, which took
half the time; that the two agree on every float32 was checked exhaustively when it
changed. Here the first form, written out in C, and the backend's function run on a
dense sample of all bit patterns (every 251st, and the special values) with the
prelude of the kernels, so a later change to either shows up as a bit difference.
"""

from __future__ import annotations

import ctypes

import numpy as np

from graphc.backends.native import cexpr, toolchain
from tests.native_checks import needs_native

pytestmark = needs_native

FIRST_FORM = r"""
GC_INLINE vf32 first_unit(vf32 v) {
    return sel_f32((vb)(v > sp_f32(1)), sp_f32(1), sel_f32((vb)(v < sp_f32(-1)), sp_f32(-1), v)); }
GC_INLINE vf32 first_tanh(vf32 x) {
    vf32 a = abs_f32(x), c = sp_f32(9.0f);
    vf32 xc = sel_f32((vb)(x > c), c, sel_f32((vb)(x < -c), -c, x));
    vf32 u = xc * xc;
    vf32 r = (xc * NUMERATOR) / DENOMINATOR;
    r = sel_f32((vb)(a < sp_f32(THRESHOLD_SMALL)), x, r);
    vf32 one = sel_f32((vb)(x < sp_f32(0)), sp_f32(-1), sp_f32(1));
    return first_unit(sel_f32((vb)(a >= sp_f32(THRESHOLD_ONE)), one, r));
}
GC_EXPORT void both_tanh(int64_t n, const float *x, float *now, float *first) {
    for (int64_t i = 0; i + GC_W <= n; i += GC_W) {
        vf32 v, a, b;
        memcpy(&v, x + i, sizeof v);
        a = tanh_f32(v);
        b = first_tanh(v);
        memcpy(now + i, &a, sizeof a);
        memcpy(first + i, &b, sizeof b);
    }
}
"""


def test_tanh_f32_gives_its_first_forms_bits() -> None:
    source = cexpr.header() + FIRST_FORM.replace(
        "NUMERATOR", cexpr._horner(cexpr.TANH_P, "u")
    ).replace("DENOMINATOR", cexpr._horner(cexpr.TANH_Q, "u")).replace(
        "THRESHOLD_SMALL", cexpr.c_float(1e-4, "f32")
    ).replace("THRESHOLD_ONE", cexpr.c_float(8.7, "f32"))
    library = toolchain.build(source).library
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-4, 8.7, -8.7, 9.0, -9.0],
        np.float32,
    )
    sample = np.arange(0, 2**32, 251, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([special, np.float32([8.7]).view(np.uint32).view(np.float32), sample])
    x = np.concatenate([x, np.zeros(-len(x) % 16, np.float32)])  # whole vectors
    now, first = np.empty_like(x), np.empty_like(x)
    library.both_tanh.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 3
    library.both_tanh(len(x), x.ctypes.data, now.ctypes.data, first.ctypes.data)
    differ = np.flatnonzero(now.view(np.uint32) != first.view(np.uint32))
    assert differ.size == 0, f"{differ.size} differ, first at x = {x[differ[0]]!r}"
    assert np.isnan(now[4]) and now[2] == 1.0 and now[3] == -1.0 and np.signbit(now[1])
