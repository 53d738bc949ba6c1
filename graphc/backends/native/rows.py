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
  inner elements, which is how numpy's iterator walks it;
- over a leading and a trailing run around kept axes (an (a, k, b) view, a and b
  reduced: a conv's bias gradient, axes (0, 2, 3) of NCHW), numpy 2.3 and later adds
  the pairwise sums of the rows in turn, 0.0 + p[0] + p[1] + ..., p[i] the sum of row
  (i, k), each row whole: the row kernel's sums of the a k rows into a buffer of the
  thread's, then the run kernel's over them (the same bits, held against numpy on 646
  random shapes of both dtypes, with a, k, b above 1, before this was written). Before
  2.3 numpy's pieces run across rows there, so that numpy sums such a reduction itself.

Axes of length 1 are set aside when looking for the run; a reduction over axes of
length 1 only (a batch of one) is 0.0 + x, which numpy gives too, and takes the kernel
the same reduction takes over a longer axis, so that a batch of one needs no other
kernel. Any other set of axes, integer dtypes, empty arrays and transposed views are
left to numpy. A mean is the sum divided by the count as numpy's mean divides
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
from graphc.backends.native.c_sources import c_source, instance
from graphc.backends.native.cexpr import header
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
FLOATS = ("f32", "f64")  # the C types the row kernels sum (pairwise.h)


def prelude() -> str:
    """The C every unit of the backend is compiled after: the header, then the pairwise
    sum the row kernels share."""
    return header() + PAIRWISE


# each kind's template in csrc/ (c_sources.instance fills it per dtype) and its C
# function's parameters after the count (calls.py's letters)
TEMPLATES = {
    "rowsum": ("row_sum.c", "ippii"),
    "colsum": ("col_sum.c", "iippi"),
    "softmax": ("softmax_rows.c", "ippi"),
}
# the prelude's helpers a template calls by a generic name (pw_t: pw_f32 or pw_f64, ...)
HELPERS = ("pw", "exp", "ld", "st", "sp", "sel", "nan", "gt")


def row_kernel(kind: str, ct: str, parallel: int, warm: int) -> Kernel:
    """The C of a row kernel for one dtype (named by kind and dtype: one copy per library)."""
    name = f"gc_{kind}_{ct}"
    defines = {
        "GC_NAME": name,
        "scalar_t": CTYPE_NAME[ct],
        "vec_t": f"v{ct}",
        **{f"{helper}_t": f"{helper}_{ct}" for helper in HELPERS},
        "GC_PAR": str(parallel),
        "GC_WARM": str(warm),
        "GC_LOG": "logf" if ct == "f32" else "log",
    }
    template, params = TEMPLATES[kind]
    text = instance(template, defines)
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


def two_runs(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(a, k, b) when the reduced `axes` of `shape`, axes of length 1 set aside, are a
    leading run (a its product) and a trailing run (b) around the kept axes (k), each of
    the three at least one axis, else None."""
    reduced = [k in axes for k, d in enumerate(shape) if d != 1]
    if not reduced or not reduced[0] or not reduced[-1] or all(reduced):
        return None
    first = reduced.index(False)
    last = len(reduced) - reduced[::-1].index(False)
    if any(reduced[first:last]):
        return None
    dims = [d for d in shape if d != 1]
    return math.prod(dims[:first]), math.prod(dims[first:last]), math.prod(dims[last:])


def _two_runs_call(
    gen: Generator, step: Step, out: str, ct: str, a: int, k: int, b: int
) -> list[str]:
    """The row kernel's sums of the a k rows of b into a buffer of the thread's, then
    the run kernel's sum of those a rows of k (`two_runs`); a caller's array that is not
    C-contiguous goes to numpy's kernel (`_unless_strided`)."""
    rowsum = row_kernel("rowsum", ct, PARALLEL_SUM, WARM_SUM)
    colsum = row_kernel("colsum", ct, PARALLEL_SUM, WARM_SUM)
    calls.record(gen, rowsum)
    calls.record(gen, colsum)
    count = a * b if step.node.op == "mean" else 0
    sums = gen.fresh(f"{step.output}_rows")
    dtype = gen.literal(np.dtype(gen.plan.values[step.output].type.dtype), "dtype")
    gen.setup_lines.append(f"{sums} = {gen.const(np.empty, 'empty')}(({a * k},), {dtype})")
    lines = [f"# native kernels {rowsum.name}, {colsum.name}: {step.node.op} over two runs"]
    source = step.inputs[0]
    static = source in gen.static
    x = gen.array(source)
    sums_at = calls.address(gen, sums, True, lines)
    x_at = calls.address(gen, x, static, lines)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    made = [
        f"{rowsum.name}({a * k}, {b}, {sums_at}, {x_at}, 0, 0)",
        f"{colsum.name}(1, {a}, {k}, {out_at}, {sums_at}, {count})",
    ]
    return [*lines, *_unless_strided(gen, step, out, made)]


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
    if ct not in FLOATS or y.dtype != x.dtype or not x.size or transposed_view(gen, step.inputs[0]):
        return None
    shape = tuple(int(d) for d in x.shape)  # type: ignore[arg-type]
    axes = _reduced_axes(step, x)
    run = runs(shape, axes)
    if run is None:
        around = two_runs(shape, axes)
        if around is None or not WHOLE_ROWS:
            return None
        return _two_runs_call(gen, step, out, ct, *around)
    outer, n, inner = run
    count = n if step.node.op == "mean" else 0
    if inner == 1:
        kernel = row_kernel("rowsum", ct, PARALLEL_SUM, WARM_SUM)
        # numpy < 2.3's piece is its buffer size at the call (np.setbufsize may change it)
        piece = "0" if WHOLE_ROWS else f"{gen.const(np.getbufsize, 'getbufsize')}()"
        return _row_call(gen, step, out, kernel, [outer, n], count, [piece])
    kernel = row_kernel("colsum", ct, PARALLEL_SUM, WARM_SUM)
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
    if ct not in FLOATS or not isinstance(n, int) or not 0 < n <= PAIRWISE_MAX:
        return None
    return row_kernel("softmax", ct, PARALLEL_SOFTMAX, WARM_SOFTMAX)


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
    return [*lines, *_unless_strided(gen, step, out, made)]


def _unless_strided(gen: Generator, step: Step, out: str, made: list[str]) -> list[str]:
    """`made` (the kernels' calls), where the step's input is a caller's array only
    when it is C-contiguous, numpy's kernel otherwise (numpy would sum a strided array
    in its own memory order)."""
    source = step.inputs[0]
    if source in gen.static:
        return made
    x = gen.array(source)
    fn, fargs, _ = gen.callee(step.node, step.attrs, [x])
    return [
        f"if {x}.flags.c_contiguous:",
        *(f"    {line}" for line in made),
        "else:",
        f"    {fn}({', '.join([*fargs, f'out={out}'])})",
    ]
