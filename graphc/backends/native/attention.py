"""The attention node in C: numpy's BLAS calls, one item after another on the pool.

The node computes, per item of its batch axes, softmax(q @ kt * scale) @ v. Its numpy
kernel (nodes/attention.py) runs numpy's matmul over blocks of items, with this backend's
softmax row kernel (rows.lower_attention): a transformer layer at batch 1 spent a
quarter of its time there, mostly in numpy's per-call costs, and at batch 64 a third,
on one thread. Here one C call does every item, the items split between the threads:
for each, the two products are the very cblas calls numpy's matmul makes for that item
(numpy/_core/src/umath/matmul.c.src: an operand whose rows are contiguous is passed as
is, one whose columns are as its transpose, with its leading dimension; alpha 1, beta 0;
the scores into a C-contiguous buffer), the scale is one multiply per element, and the
softmax is the row kernel itself. So the bits are those of the node's numpy kernel, and
of the unfused ops at O0, on this backend: tests/backends/test_native_attention.py holds
O0, O1 and O2 to the same bits.

The C path is taken where numpy's matmul would call BLAS in that form for every item:
a float32 or float64 node (native's fusion makes float64 ones only: float32 stacked
products are matmul.py's, whose bits the node would not give) with no mask and no dropout, a scale of the scores' dtype
given as one element, no broadcast between the batch axes, every matrix dim above 1 (a
vector takes numpy's gemv or dot), operands whose every matrix has contiguous rows or
columns, an output whose matrices have contiguous rows, and not the case where numpy
would call syrk (a matrix times its own transpose). The arrays must exist before the
call (arena values, constants), so that the layout is checked once per thread at setup;
elsewhere, and wherever a check fails, the node's numpy kernel runs as before. Products
that OpenBLAS would split between threads (m n k above 2**18) are made one item after
another from the calling thread, so that OpenBLAS splits them on the pool as numpy's
would; smaller ones run an item per thread at a time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.backends.native import calls, rows
from graphc.backends.native.c_sources import instance
from graphc.backends.native.kernels import CTYPE_NAME, Kernel, Operand

THREADED = 1 << 18  # OpenBLAS threads a product above m n k of this (interface/gemm.c)
PARALLEL_WORK = 1 << 16  # items x m n p from which the items are split between threads
NO_TRANS, TRANS = 111, 112


def attention_kernel(ct: str, gemm_bits: int, softmax: Kernel) -> Kernel:
    """The C of the attention call for dtype `ct` on a cblas of `gemm_bits` integers,
    calling the row kernel `softmax`, whose C it carries: each source is a library of
    its own (toolchain.py), so one may not call into another's."""
    name = f"gc_attention_{ct}_{gemm_bits}"
    defines = {
        "GC_NAME": name,
        "GC_SOFTMAX": softmax.name,
        "GC_GEMM_INT": "int64_t" if gemm_bits == 64 else "int",
        "scalar_t": CTYPE_NAME[ct],
        "GC_NO_TRANS": str(NO_TRANS),
    }
    text = softmax.source + instance("attention.c", defines)
    return Kernel(name, text, [Operand("full", ct)], ["attention"], "ppppppii", True)


def _blasable(s1: int, s2: int, d2: int, size: int) -> bool:
    """numpy's is_blasable2d: rows of unit stride, a row stride whole and >= d2."""
    return s2 == size and s1 % size == 0 and s1 // size >= d2


def _operand(strides: tuple[int, int], d1: int, d2: int, size: int) -> tuple[int, int] | None:
    """(flag, leading dim) that numpy's matmul passes for a (d1, d2) matrix of these
    byte strides, or None where it would not call BLAS with it."""
    if _blasable(strides[0], strides[1], d2, size):
        return NO_TRANS, strides[0] // size
    if _blasable(strides[1], strides[0], d1, size):
        return TRANS, strides[1] // size
    return None


def layout(q: np.ndarray, kt: np.ndarray, v: np.ndarray, out: np.ndarray) -> np.ndarray | None:
    """The C call's int64 descriptor for these arrays (see the template), or None where
    numpy's matmul would not make the C path's BLAS calls for them."""
    size = q.itemsize
    batch = q.shape[:-2]
    m, n = q.shape[-2:]
    p, pv = kt.shape[-1], v.shape[-1]
    if kt.shape[:-2] != batch or v.shape[:-2] != batch or out.shape[:-2] != batch:
        return None
    if min(m, n, p, pv) < 2 or max(m, n, p, pv) >= 2**31:
        return None
    found = [
        _operand(q.strides[-2:], m, n, size),
        _operand(kt.strides[-2:], n, p, size),
        _operand(v.strides[-2:], p, pv, size),
    ]
    if any(f is None for f in found) or not _blasable(*out.strides[-2:], pv, size):
        return None
    (tq, ldq), (tk, ldk), (tv, ldv) = found  # type: ignore[misc]
    if m == p and q.strides[-2:] == kt.strides[-1:-3:-1] and tq != tk and _meet(q, kt):
        return None  # an item of q is its kt's transpose in memory: numpy calls syrk
    strides = [x.strides[:-2] for x in (q, kt, v, out)]
    return np.array(
        [len(batch), m, n, p, pv, *batch, *(s for st in strides for s in st)]
        + [tq, ldq, tk, ldk, tv, ldv, out.strides[-2] // size],
        np.int64,
    )


def _meet(q: np.ndarray, kt: np.ndarray) -> bool:
    """Whether some item of q starts where the same item of kt does."""
    index = np.indices(q.shape[:-2]).reshape(len(q.shape) - 2, -1)
    start = [x.__array_interface__["data"][0] + np.dot(x.strides[:-2], index) for x in (q, kt)]
    return bool(np.any(start[0] == start[1]))


def prepare(
    gemm: int, q: np.ndarray, kt: np.ndarray, v: np.ndarray, scale: np.ndarray | None,
    out: np.ndarray,
) -> tuple[tuple, tuple, tuple] | None:  # fmt: skip
    """At setup, per thread: the C call's arguments before the output's address and
    after it, and the arrays they point into (kept alive with them); or None (the numpy
    kernel runs the node). `out` is the output's buffer, or an array of its layout when
    the output is made per call (a returned value: C-contiguous). The generated code
    makes the call itself, so that a tape can record it (entry.py)."""
    d = layout(q, kt, v, out)
    if d is None:
        return None
    items = math.prod(q.shape[:-2])
    m, n, p, pv = (int(x) for x in d[1:5])
    big = max(m * n * p, m * p * pv) > THREADED
    parallel = int(items > 1 and not big and items * m * p * max(n, pv) >= PARALLEL_WORK)
    address = calls.static_address
    head = (items, address(d))
    tail = (address(q), address(kt), address(v))
    tail += (address(scale) if scale is not None else calls.NULL, gemm, parallel)
    return head, tail, (d, q, kt, v, scale)


def like(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A C-contiguous array's layout of `shape` without its memory (for `layout`)."""
    dtype = np.dtype(dtype)
    strides = tuple(dtype.itemsize * math.prod(shape[k + 1 :]) for k in range(len(shape)))
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, strides)


def gemm_address(dtype: np.dtype) -> tuple[int, int] | None:
    """The address of numpy's cblas gemm for `dtype` and its integer bits, or None."""
    import ctypes

    from graphc.backends.native import blas  # registers a lowering: imported after the backend

    found = blas.library()
    if isinstance(found, str):
        return None
    function = blas.symbol(found, found.symbols[dtype == np.float64])
    return ctypes.cast(function, ctypes.c_void_p).value, found.bits


def lower(gen: Any, step: Any, out: str) -> list[str] | None:
    """The C call where its conditions can hold (checked again on the arrays at setup),
    else the numpy kernel with the row kernel's softmax (rows.lower_attention)."""
    attrs = step.attrs
    values = [gen.plan.values[x] for x in step.inputs]
    dtype = np.dtype(values[0].type.dtype)
    simple = not attrs.get("mask") and not attrs.get("dropout")
    scale_ok = not attrs.get("scale") or (
        len(values) == 4 and values[3].type.size == 1 and np.dtype(values[3].type.dtype) == dtype
    )
    static = all(x in gen.static for x in step.inputs)
    same = all(np.dtype(v.type.dtype) == dtype for v in values[:3])
    gemm = gemm_address(dtype) if dtype in (np.float32, np.float64) else None
    fallback = rows.lower_attention(gen, step, out)
    softmax = rows._softmax_kernel(dtype, values[1].type.shape[-1])
    if not (simple and scale_ok and static and same and gemm and fallback and softmax):
        return fallback
    kernel = attention_kernel("f32" if dtype == np.float32 else "f64", gemm[1], softmax)
    calls.record(gen, kernel)
    prepared = gen.fresh("attention")
    arrays = [gen.array(x) for x in step.inputs[:3]]
    scale = gen.array(step.inputs[3]) if attrs.get("scale") else "None"
    prep = gen.const(prepare, "prepare_attention")
    if step.output in gen.static:
        target, check = out, ""
    else:  # made per call, C-contiguous (the planner's layout rule; checked all the same)
        out_t = gen.plan.values[step.output].type
        target = f"{gen.const(like, 'like')}({tuple(out_t.shape)!r}, {gen.const(dtype, 'dtype')})"
        check = f" and {out}.flags.c_contiguous"
    gen.setup_lines.append(
        f"{prepared} = {prep}({gemm[0]}, {', '.join(arrays)}, {scale}, {target})"
    )
    lines: list[str] = []
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    call = f"{kernel.name}(*{prepared}[0], {out_at}, *{prepared}[1])"
    return [
        f"if {prepared} is not None{check}:  # {kernel.name}: numpy's BLAS calls, the row kernel's softmax",
        *("    " + line for line in lines),
        *("    " + line for line in calls.checked(gen, call, "attention")),
        "else:",
        *("    " + line for line in fallback),
    ]
