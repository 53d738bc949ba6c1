"""layer_norm and layer_norm_grad as C row kernels on the native backend (float32).

numpy's kernels (ops/norm.py) make ten to fourteen passes over the rows, each a ufunc
call with its temporaries: 124 us for a layer norm over (16, 64, 128) and 182 us for its
gradient, where the data is 0.5 MB. Here each row stays in cache for its three passes:
the mean (numpy's pairwise sum, so numpy's bits), the centered row and its sum of
squares, then the scaled (and weighted, and shifted) row; the gradient adds g's sum and
the dot product of g with the centered row.

Every step is numpy's kernel's, operation for operation, but one: numpy computes the sum
of squared deviations (and the gradient's dot product of g with them) with `vecdot`,
which is BLAS's sdot (its results equal `np.dot`'s, checked), while this kernel adds the products in lanes of GC_W and the lanes
in a tree. So the two are declared inexact on native: `tests/runtime/test_native_norm.py`
holds them within a bound of numpy's that it states (the sums' roundings carried
through), and every level gives the same bits. Like numpy's, the kernel skips the multiplication by a weight of one element equal to 1 and
the addition of a bias of one element equal to 0 (a -0.0 then stays -0.0), so
`layer_norm(x, 1, 0) * g` and `layer_norm(x, g, 0)` agree bit for bit, as the passes
that absorb the affine step assume.
"""

from __future__ import annotations

import math

import numpy as np

from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.native import calls
from graphc.runtime.native.kernels import Kernel
from graphc.runtime.plan import Step

# elements from which the rows run on the OpenMP pool (waking a cold pool costs 10-50 us
# here; after a product's parallel region it is awake): the ONNX transformer layer at
# batch 64 normalizes 2048 rows of 128 twice, 2603 -> 2479 us with 2**16 against 2**21
PARALLEL_WORK = 1 << 16
SKIP, ONE, ROW = 0, 1, 2  # an affine operand: skipped, one value, one per row element

SHARED = r"""
/* ---- layer_norm, layer_norm_grad (graphc/runtime/native/norm.py) ---- */
#ifndef GC_LAYER_NORM
#define GC_LAYER_NORM
GC_INLINE vb ln_lanes(int64_t k) {
    vi32 lane; for (int i = 0; i < GC_W; i++) lane[i] = i;
    return (vb)(lane < (int32_t)k);
}
/* the lanes of v added in a tree */
GC_INLINE float ln_hsum(vf32 v) {
    float t[GC_W]; memcpy(t, &v, GC_VB);
    for (int w = GC_W / 2; w > 0; w /= 2)
        for (int i = 0; i < w; i++) t[i] = t[i] + t[i + w];
    return t[0];
}
GC_INLINE float ln_eps(int64_t bits) { int32_t b = (int32_t)bits; float e; memcpy(&e, &b, 4); return e; }
/* row x of n into c (centered); returns rstd = 1 / sqrt(var + eps) as numpy's kernel:
   the mean by numpy's pairwise sum over n, the variance by lanes (numpy: sdot) */
GC_INLINE float ln_center(const float *x, float *c, int64_t n, float eps) {
    float mean = (0.0f + pw_f32(x, n)) / (float)n;
    vf32 m = sp_f32(mean), acc = sp_f32(0.0f);
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        vf32 v = ldm_f32(x + j, k) - m;
        if (k < GC_W) v = sel_f32(ln_lanes(k), v, sp_f32(0.0f));
        stm_f32(c + j, v, k);
        acc = acc + v * v;
    }
    return 1.0f / sqrtf(ln_hsum(acc) / (float)n + eps);
}
GC_INLINE vf32 ln_affine(const float *p, int64_t mode, int64_t j, int64_t k) {
    return mode == 1 ? sp_f32(p[0]) : ldm_f32(p + j, k);
}
#endif
"""

FORWARD = r"""
static void ln_row(const float *x, float *y, const float *w, const float *b, int64_t n,
                   float eps, int64_t wmode, int64_t bmode) {
    vf32 rs = sp_f32(ln_center(x, y, n, eps));
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        vf32 v = ldm_f32(y + j, k) * rs;
        if (wmode) v = v * ln_affine(w, wmode, j, k);
        if (bmode) v = v + ln_affine(b, bmode, j, k);
        stm_f32(y + j, v, k);
    }
}
GC_EXPORT void gc_layer_norm_f32(int64_t rows, int64_t n, float *y, const float *x,
                                 const float *w, const float *b, int64_t wmode, int64_t bmode,
                                 int64_t eps_bits, int64_t parallel) {
    float eps = ln_eps(eps_bits);
    if (parallel) {
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            ln_row(x + r * n, y + r * n, w, b, n, eps, wmode, bmode);
    } else {
        for (int64_t r = 0; r < rows; r++)
            ln_row(x + r * n, y + r * n, w, b, n, eps, wmode, bmode);
    }
}
"""

GRADIENT = r"""
/* numpy's gradient: ((g rstd) + shift) - c slope, shift = (sum(g) rstd) / -n,
   slope = ((g . c) (rstd rstd rstd)) / n */
static void ln_grad_row(const float *x, const float *g, float *y, float *c, int64_t n,
                        float eps) {
    float rstd = ln_center(x, c, n, eps);
    float shift = ((0.0f + pw_f32(g, n)) * rstd) / -(float)n;
    vf32 acc = sp_f32(0.0f);
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        acc = acc + ldm_f32(g + j, k) * ldm_f32(c + j, k);
    }
    float slope = (ln_hsum(acc) * (rstd * rstd * rstd)) / (float)n;
    vf32 rs = sp_f32(rstd), sh = sp_f32(shift), sl = sp_f32(slope);
    for (int64_t j = 0; j < n; j += GC_W) {
        int64_t k = n - j < GC_W ? n - j : GC_W;
        stm_f32(y + j, (ldm_f32(g + j, k) * rs + sh) - ldm_f32(c + j, k) * sl, k);
    }
}
/* returns 1 when a thread could not allocate its centered row (its rows are skipped:
   the caller raises), else 0 */
GC_EXPORT int64_t gc_layer_norm_grad_f32(int64_t rows, int64_t n, float *y, const float *x,
                                         const float *g, int64_t eps_bits, int64_t parallel) {
    float eps = ln_eps(eps_bits);
    int64_t failed = 0;
    if (parallel) {
        #pragma omp parallel
        {
            float *c = (float *)malloc(sizeof(float) * (n + GC_W));
            if (!c) {
                #pragma omp atomic write
                failed = 1;
            }
            #pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++)
                if (c) ln_grad_row(x + r * n, g + r * n, y + r * n, c, n, eps);
            free(c);
        }
    } else {
        float *c = (float *)malloc(sizeof(float) * (n + GC_W));
        if (!c) return 1;
        for (int64_t r = 0; r < rows; r++)
            ln_grad_row(x + r * n, g + r * n, y + r * n, c, n, eps);
        free(c);
    }
    return failed;
}
"""

LAYER_NORM = Kernel("gc_layer_norm_f32", SHARED + FORWARD, [], ["layer_norm"], "ipppp" + "i" * 4)
LAYER_NORM_GRAD = Kernel(
    "gc_layer_norm_grad_f32", SHARED + GRADIENT, [], ["layer_norm_grad"], "ippp" + "ii", True
)


def affine_mode(a: np.ndarray, identity: float) -> int:
    """How the kernel takes a weight (identity 1) or bias (identity 0): skipped when it
    is one element equal to the identity (as numpy's kernel skips it), else one value or
    a row."""
    if a.size == 1:
        return SKIP if a.reshape(()) == identity else ONE
    return ROW


def lower_layer_norm(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the row kernel, or None (numpy's kernel) when a value is not float32,
    a shape is symbolic or empty, or a weight or bias is not one value or one per row
    element."""
    plan = gen.plan
    types = [plan.values[v].type for v in (*step.inputs, step.output)]
    rows_n = _rows(types, step.attrs["axis"])
    if rows_n is None:
        return _declined(gen, step, "float32 values of static, non-empty shapes")
    rows, n = rows_n
    lines: list[str] = []
    args = [str(rows), str(n), calls.value_address(gen, step.output, lines, out)]
    args.append(calls.value_address(gen, step.inputs[0], lines))
    if step.node.op == "layer_norm_grad":
        kernel = LAYER_NORM_GRAD
        args.append(calls.value_address(gen, step.inputs[1], lines))
    else:
        kernel = LAYER_NORM
        modes = []
        for value, t, identity in zip(step.inputs[1:], types[1:3], (1.0, 0.0)):
            if t.size not in (1, n):
                return _declined(gen, step, "a weight or bias of one value or one per element")
            args.append(calls.value_address(gen, value, lines))
            if value in plan.constants:
                modes.append(str(affine_mode(np.asarray(plan.nodes[value].value), identity)))
            else:
                modes.append(
                    f"{gen.const(affine_mode, 'affine_mode')}({gen.array(value)}, {identity!r})"
                )
        args += modes
    eps = int(np.float32(step.attrs["eps"]).view(np.int32))
    args += [str(eps), str(int(rows * n >= PARALLEL_WORK))]
    calls.record(gen, kernel)
    call = f"{kernel.name}({', '.join(args)})"
    return [*lines, *(calls.checked(gen, call, step.node.op) if kernel.status else [call])]


def _rows(types: list[TensorType], axis: int) -> tuple[int, int] | None:
    """(rows, row length) of a float32 layer norm over dims `axis` on, or None."""
    if any(t.dtype != np.float32 for t in types):
        return None
    shape = types[0].shape
    if not all(isinstance(d, int) for d in shape) or not math.prod(shape):  # type: ignore[arg-type]
        return None
    return math.prod(shape[:axis]), math.prod(shape[axis:])  # type: ignore[arg-type]


def _declined(gen: Generator, step: Step, needs: str) -> None:
    calls.plan_state(gen)["declined"][step.index] = f"{step.node.op} in C: needs {needs}"
    return None
