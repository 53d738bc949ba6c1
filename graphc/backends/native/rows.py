"""Reductions as C kernels: sum, mean and sum_to, softmax and log_softmax.

numpy sums in one of two orders, and these kernels sum in the same ones, so a sum's bits
are numpy's (tests/backends/test_native_rows.py, on every length to 600 and longer ones):

- over a contiguous run of axes that ends the array (a row of n elements, n being the
  run's product), numpy's pairwise sum: under 8 elements one after the other, up to
  128 in eight interleaved partial sums added as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))
  and the rest one by one, above that the two halves (the first a multiple of 8)
  summed apart; the result is 0.0 + that sum (the identity first, so -0.0 sums to
  +0.0). numpy before 2.3 feeds a reduction to that loop in pieces of its buffer size
  (`np.getbufsize()`, 8192 elements) and adds the pieces' sums in turn, 0.0 + s0 + s1
  + ..., so a row longer than that has other bits there (found by CI's oldest numpy,
  2.0); the kernel takes the piece as an argument (`piece`: 0, the whole row, on numpy
  2.3 and later), so one compiled kernel sums a row of any length as the numpy at
  hand does;
- over a run of axes with axes after it (an (outer, n, inner) view of the array, the
  run being n), one row after the other: 0.0 + x[0] + x[1] + ... for each of the
  inner elements, which is how numpy's iterator walks it.

Axes of length 1 are set aside when looking for the run; a reduction over axes of
length 1 only (a batch of one) is 0.0 + x, which numpy gives too, and takes the kernel
the same reduction takes over a longer axis, so that a batch of one needs no other
kernel. Any other set of axes (not one run), integer dtypes, empty arrays and transposed
views are left to numpy. A mean is the sum divided by the count as numpy's mean divides
it: in float64 (its count is an intp), rounded to the result's dtype.

softmax and log_softmax over the last axis follow graphc's numpy kernels step by step
(max, subtract, exp, the pairwise sum, divide or subtract the log), so they differ from
numpy only through exp (libmvec) and, for log_softmax, the sum's log (glibc's scalar
log): their registrations (native/__init__.py) state by how much, and
test_native_rows.py measures it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import CTYPE_NAME, DeclinedError, Kernel, Operand, ctype_of
from graphc.backends.numpy.chunked import transposed_view
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

# the longest softmax row done here: numpy's default buffer size (np.getbufsize()), the
# piece in which numpy < 2.3 hands a long reduction to its pairwise loop (a softmax's row
# is its last axis, rarely a batch's; a sum's rows take the piece as an argument)
PAIRWISE_MAX = 8192
# numpy from 2.3 sums a contiguous row pairwise whole, before 2.3 in pieces of its buffer
WHOLE_ROWS = np.lib.NumpyVersion(np.__version__) >= "2.3.0"

# elements from which a row kernel runs its rows on the OpenMP pool (sums are a load and
# an add per element: the same threshold as an elementwise add; softmax is an exp)
PARALLEL_SUM = 1 << 21
PARALLEL_SOFTMAX = 1 << 17
# the same while the pool is warm (its workers still spin: calls.POOL_CLOCK); a softmax
# row costs more than its exps (a log_softmax of 512 rows of 10: 30-45 us on one thread)
WARM_SUM = 1 << 16
WARM_SOFTMAX = 1 << 12

PAIRWISE = c_source("pairwise.h")

_ROWSUM = """
/* sum (count 0) or mean (divided by count) of each of `rows` contiguous rows of n: 0.0
   plus the row's pairwise sum, or (a row longer than `piece`, numpy < 2.3) plus the
   pairwise sums of its pieces of `piece` elements in turn, as numpy's buffered
   reduction adds them */
GC_INLINE void NAME_row(int64_t o, int64_t n, char *out, const char *x, int64_t count) {
    scalar_t s = (scalar_t)0 + pw_t((const scalar_t *)x + o * n, n);
    if (count) s = (scalar_t)((double)s / (double)count);
    ((scalar_t *)out)[o] = s;
}
static void NAME_pieces(int64_t o, int64_t n, char *out, const char *x, int64_t count,
                        int64_t piece) {
    const scalar_t *a = (const scalar_t *)x + o * n;
    scalar_t s = (scalar_t)0;
    for (int64_t i = 0; i < n; i += piece) s = s + pw_t(a + i, n - i < piece ? n - i : piece);
    if (count) s = (scalar_t)((double)s / (double)count);
    ((scalar_t *)out)[o] = s;
}
/* the choice is made once per call: a test per row cost 10% on 512 rows of 10 */
GC_EXPORT void NAME(int64_t rows, int64_t n, char *out, const char *x, int64_t count,
                    int64_t piece) {
    int par = gc_parallel(rows * n, PAR, WARM);
    if (piece > 0 && piece < n) {
        #pragma omp parallel for schedule(static) if (par)
        for (int64_t o = 0; o < rows; o++) NAME_pieces(o, n, out, x, count, piece);
        if (par) gc_pool_used();
    } else if (par) {
        #pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < rows; o++) NAME_row(o, n, out, x, count);
        gc_pool_used();
    } else {
        for (int64_t o = 0; o < rows; o++) NAME_row(o, n, out, x, count);
    }
}
"""

_COLSUM = """
/* sum (count 0) or mean over the middle axis of an (outer, n, inner) array, row after
   row, GC_W inner elements at a time: job j is block j % blocks of outer index j / blocks */
GC_INLINE void NAME_job(int64_t job, int64_t blocks, int64_t n, int64_t inner, char *out,
                        const char *x, int64_t count) {
    int64_t o = job / blocks, i = (job % blocks) * GC_W;
    int64_t m = inner - i < GC_W ? inner - i : GC_W;
    const char *slab = x + (o * n * inner) * sizeof(scalar_t);
    vec_t acc = sp_t(0);
    for (int64_t r = 0; r < n; r++) acc = acc + ld_t(slab + r * inner * sizeof(scalar_t), i, m);
    if (count) acc = __builtin_convertvector(
        __builtin_convertvector(acc, vf64) / sp_f64((double)count), vec_t);
    st_t(out + o * inner * sizeof(scalar_t), i, m, acc);
}
GC_EXPORT void NAME(int64_t outer, int64_t n, int64_t inner, char *out, const char *x,
                    int64_t count) {
    int64_t blocks = (inner + GC_W - 1) / GC_W;
    if (gc_parallel(outer * n * inner, PAR, WARM)) {
        #pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < outer * blocks; j++) NAME_job(j, blocks, n, inner, out, x, count);
        gc_pool_used();
    } else {
        for (int64_t j = 0; j < outer * blocks; j++) NAME_job(j, blocks, n, inner, out, x, count);
    }
}
"""

_SOFTMAX = """
/* softmax (take_log 0) or log_softmax (take_log 1) of row o of n, as graphc's numpy
   kernels compute them: x - max, exp, the pairwise sum, / sum or - log; `e` holds the
   exps of log_softmax (n + GC_W elements). The max is numpy's maximum (a nan wins),
   taken lane by lane over whole vectors, then across the lanes and the tail: the same
   value as numpy's reduction, but for which zero a tie of -0.0 and 0.0 gives, which
   changes no result (x - 0.0 and x - -0.0 differ only for x = -0.0, and exp gives 1 for
   both). Whole vectors load and store as vectors; only the tail takes m lanes */
GC_INLINE scalar_t NAME_max(scalar_t top, scalar_t a) {
    return (top != top) ? top : (a != a || a >= top) ? a : top; }
GC_INLINE void NAME_row(int64_t o, int64_t n, char *out, const char *x, int64_t take_log,
                        scalar_t *e) {
    const scalar_t *a = (const scalar_t *)x + o * n;
    char *y = out + o * n * sizeof(scalar_t);
    int64_t whole = n - n % GC_W, j;
    scalar_t top = a[0];
    if (whole) {
        vec_t t = ld_t((const char *)a, 0, GC_W);
        for (j = GC_W; j < whole; j += GC_W) {
            vec_t b = ld_t((const char *)a, j, GC_W);
            t = sel_t(nan_t(t), t, sel_t(nan_t(b) | gt_t(b, t), b, t));
        }
        for (int k = 0; k < GC_W; k++) top = NAME_max(top, t[k]);
    }
    for (j = whole; j < n; j++) top = NAME_max(top, a[j]);
    vec_t shift = sp_t(top);
    for (j = 0; j < whole; j += GC_W) {
        vec_t s = ld_t((const char *)a, j, GC_W) - shift;
        if (take_log) { st_t(y, j, GC_W, s); st_t((char *)e, j, GC_W, exp_t(s)); }
        else st_t(y, j, GC_W, exp_t(s));
    }
    if (j < n) {
        vec_t s = ld_t((const char *)a, j, n - j) - shift;
        if (take_log) { st_t(y, j, n - j, s); st_t((char *)e, j, n - j, exp_t(s)); }
        else st_t(y, j, n - j, exp_t(s));
    }
    scalar_t sum = (scalar_t)0 + pw_t(take_log ? e : (const scalar_t *)y, n);
    vec_t by = sp_t(take_log ? LOGFN(sum) : sum);
    for (j = 0; j < whole; j += GC_W) {
        vec_t v = ld_t(y, j, GC_W);
        st_t(y, j, GC_W, take_log ? v - by : v / by);
    }
    if (j < n) {
        vec_t v = ld_t(y, j, n - j);
        st_t(y, j, n - j, take_log ? v - by : v / by);
    }
}
/* returns 1 when log_softmax could not allocate a thread's exps (its rows are skipped:
   the caller raises), else 0; softmax allocates nothing */
GC_EXPORT int64_t NAME(int64_t rows, int64_t n, char *out, const char *x, int64_t take_log) {
    int64_t failed = 0;
    if (gc_parallel(rows * n, PAR, WARM)) {
        #pragma omp parallel
        {
            scalar_t *e = take_log ? (scalar_t *)malloc((n + GC_W) * sizeof(scalar_t)) : 0;
            if (take_log && !e) {
                #pragma omp atomic write
                failed = 1;
            }
            #pragma omp for schedule(static)
            for (int64_t o = 0; o < rows; o++)
                if (e || !take_log) NAME_row(o, n, out, x, take_log, e);
            free(e);
        }
        gc_pool_used();
    } else {
        scalar_t *e = take_log ? (scalar_t *)malloc((n + GC_W) * sizeof(scalar_t)) : 0;
        if (take_log && !e) return 1;
        for (int64_t o = 0; o < rows; o++) NAME_row(o, n, out, x, take_log, e);
        free(e);
    }
    return failed;
}
"""


def _instance(template: str, kind: str, ct: str, parallel: int, warm: int) -> Kernel:
    """The C of a row kernel for one dtype (named by kind and dtype: one copy per library)."""
    name = f"gc_{kind}_{ct}"
    text = template.replace("NAME", name).replace("PAR", str(parallel))
    text = text.replace("WARM", str(warm))
    text = text.replace("LOGFN", "logf" if ct == "f32" else "log")
    for generic in ("pw", "exp", "ld", "st", "sp", "sel", "nan", "gt"):
        text = text.replace(f"{generic}_t(", f"{generic}_{ct}(")
    text = text.replace("vec_t", f"v{ct}").replace("scalar_t", CTYPE_NAME[ct])
    params = {"rowsum": "ippii", "colsum": "iippi", "softmax": "ippi"}[kind]
    ops = ["softmax" if kind == "softmax" else "sum"]
    return Kernel(name, text, [Operand("full", ct)], ops, params, kind == "softmax")


def runs(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(outer, n, inner) when the reduced `axes` of `shape`, axes of length 1 set aside,
    are one run (n its product, outer and inner the products before and after), else
    None. Reduced axes all of length 1 are a run of one at the first of them: what the
    same reduction over a batch of more than one finds, when the batch is that axis."""
    kept = [k for k, d in enumerate(shape) if d != 1]
    reduced = [k for k in kept if k in axes]
    if not reduced:
        if not axes:
            return None
        first = min(axes)
        return math.prod(shape[:first]), 1, math.prod(shape[first + 1 :])
    first, last = kept.index(reduced[0]), kept.index(reduced[-1])
    if last - first + 1 != len(reduced):
        return None
    dims = [shape[k] for k in kept]
    return (
        math.prod(dims[:first]),
        math.prod(dims[first : last + 1]),
        math.prod(dims[last + 1 :]),
    )


def _reduced_axes(step: Step, x: TensorType) -> tuple[int, ...]:
    op = step.node.op
    if op == "sum_to":
        shape = tuple(step.attrs["shape"])
        lead = x.rank - len(shape)
        return tuple(range(lead)) + tuple(
            lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1
        )
    axis = step.attrs.get("axis")
    if axis is None:
        return tuple(range(x.rank))
    return tuple(sorted(axis)) if isinstance(axis, (tuple, list)) else (int(axis),)


def lower_reduction(gen: Generator, step: Step, out: str) -> list[str] | None:
    """sum, mean and sum_to over one run of axes of a float32/float64 array."""
    x = gen.plan.values[step.inputs[0]].type
    y = gen.plan.values[step.output].type
    try:
        ct = ctype_of(x)
    except DeclinedError:
        return None
    if ct == "b" or y.dtype != x.dtype or not x.size or transposed_view(gen, step.inputs[0]):
        return None
    shape = tuple(int(d) for d in x.shape)  # type: ignore[arg-type]
    run = runs(shape, _reduced_axes(step, x))
    if run is None:
        return None
    outer, n, inner = run
    count = n if step.node.op == "mean" else 0
    if inner == 1:
        kernel = _instance(_ROWSUM, "rowsum", ct, PARALLEL_SUM, WARM_SUM)
        # numpy < 2.3's piece is its buffer size at the call (np.setbufsize may change it)
        piece = "0" if WHOLE_ROWS else f"{gen.const(np.getbufsize, 'getbufsize')}()"
        return _row_call(gen, step, out, kernel, [outer, n], count, [piece])
    kernel = _instance(_COLSUM, "colsum", ct, PARALLEL_SUM, WARM_SUM)
    return _row_call(gen, step, out, kernel, [outer, n, inner], count)


def lower_softmax(gen: Generator, step: Step, out: str) -> list[str] | None:
    """softmax and log_softmax over the last axis of a float32/float64 array."""
    x = gen.plan.values[step.inputs[0]].type
    y = gen.plan.values[step.output].type
    if x.rank == 0 or step.attrs.get("axis") != x.rank - 1 or x.dtype != y.dtype:
        return None
    if not x.size or transposed_view(gen, step.inputs[0]):
        return None
    n = int(x.shape[-1])  # type: ignore[arg-type]
    kernel = _softmax_kernel(x.dtype, n)
    if kernel is None:
        return None
    kernel.ops = [step.node.op]
    return _row_call(gen, step, out, kernel, [x.size // n, n], int(step.node.op == "log_softmax"))


def _softmax_kernel(dtype: np.dtype, n: Any) -> Kernel | None:
    """The row kernel of softmax over rows of `n` elements of `dtype`, or None where
    numpy's runs: not a float, or a row longer than PAIRWISE_MAX (its sum would be
    numpy's version's). One rule for a softmax step and an attention node's softmax, so
    that the levels agree."""
    try:
        ct = ctype_of(TensorType((), dtype))
    except DeclinedError:
        return None
    if ct == "b" or not isinstance(n, int) or not 0 < n <= PAIRWISE_MAX:
        return None
    return _instance(_SOFTMAX, "softmax", ct, PARALLEL_SOFTMAX, WARM_SOFTMAX)


def softmax_rows(fn: Any, n: int) -> Callable[[np.ndarray], None]:
    """The attention kernel's `softmax_rows` hook: the row kernel `fn` on a C-contiguous
    block of scores, rows of `n`, in place."""
    now = calls.address_now

    def rows(s: np.ndarray) -> None:
        address = now(s)
        fn(s.size // n, n, address, address, 0)

    return rows


def lower_attention(gen: Generator, step: Step, out: str) -> list[str] | None:
    """The attention node as numpy's kernel with this backend's softmax row kernel, so
    that it computes what its unfused ops compute here (softmax runs natively at every
    level: the levels agree) and its softmax is one C call per block."""
    q_t, kt_t = (gen.plan.values[v].type for v in step.inputs[:2])
    n = kt_t.shape[-1]
    kernel = _softmax_kernel(np.result_type(q_t.dtype, kt_t.dtype), n)
    if kernel is None:  # as for a softmax step: numpy's softmax
        return None
    calls.record(gen, kernel)
    hook = gen.fresh("softmax_rows")
    gen.setup_lines.append(
        f"{hook} = {gen.const(softmax_rows, 'softmax_rows')}({kernel.name}, {n})"
    )
    fn = gen.const(get_op("attention").kernel, "kernel_attention")
    inputs = ", ".join(gen.array(v) for v in step.inputs)
    attrs = gen.const(dict(step.attrs), "attrs")
    return [
        f"# attention: numpy's kernel, the softmax of its scores by {kernel.name}",
        f"{fn}({inputs}, out={out}, softmax_rows={hook}, **{attrs})",
    ]


def _row_call(
    gen: Generator,
    step: Step,
    out: str,
    kernel: Kernel,
    sizes: list[int],
    flag: int,
    extra: Sequence[str] = (),
) -> list[str]:
    """The call of a row kernel (`extra`: the source of its arguments after the flag); a
    caller's array that is not C-contiguous goes to numpy's kernel instead (numpy would
    sum it in its own memory order)."""
    calls.record(gen, kernel)
    lines = [f"# native kernel {kernel.name}: {step.node.op}"]
    source = step.inputs[0]
    static = source in gen.static
    x = gen.array(source)
    args = [*map(str, sizes), calls.address(gen, out, step.output in gen.static, lines)]
    args += [calls.address(gen, x, static, lines), str(flag), *extra]
    call = f"{kernel.name}({', '.join(args)})"
    made = calls.checked(gen, call, step.node.op) if kernel.status else [call]
    if static:
        return [*lines, *made]
    fn, fargs, _ = gen.callee(step.node, step.attrs, [x])
    return [
        *lines,
        f"if {x}.flags.c_contiguous:",
        *(f"    {line}" for line in made),
        "else:",
        f"    {fn}({', '.join([*fargs, f'out={out}'])})",
    ]
