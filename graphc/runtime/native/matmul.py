"""A float32 matmul in C: a product by a matrix, its weight packed into panels.

numpy's BLAS call copies ("packs") panels of both operands on every call before its
kernel runs. At a batch of 64 rows that copy and OpenBLAS's small-matrix paths cost as
much as the arithmetic (an LSTM's recurrent product, 64 x 128 by 128 x 512: 30-38 us
there, 24 here), and at 512 rows its two threads still spend a tenth of their time
packing and waiting (an MLP's training step: docs/backends.md, "Products").

Here only the right operand is in panels of `MM_NR` columns (two vectors) stored k by k,
zero past the last column, so a kernel reads each panel front to back. A tile of `MM_MR`
rows by one panel keeps its 2 MM_MR accumulators in registers while k goes by (per k:
two vector loads of the panel, a broadcast of each row's a[r, k], their products as
fused multiply-adds). The left operand is read in place through up to two row strides
and an element stride (a batch-first sequence seen time first, a transposed
activation), so no copy is made of it. The bias of a matmul_epilogue (one value per
column) and a relu are applied to the tile before it is stored; its other activations
run as the elementwise kernel after, as before. Tiles go to the OpenMP pool by panel,
then by chunk of rows, when the product is big enough to pay for waking it.

Which products: float32 operands whose right one is a matrix (rank 2). Where the panels
come from:
- a constant, or a transpose of one (an imported model's initializers, a traced
  model's parameters, an LSTM's recurrent weight in a scan body): packed once per
  thread, by the plan's setup (`gc_matmul_pack_f32`);
- any other matrix (a training step's weights, which change every call; an activation
  in a weight gradient; a caller's array in any layout): the product's own call packs
  it, the same threads first packing the panels and then running the tiles, into a
  buffer the plan's products share; a panel of whole rows in order (C order) is read
  where it lies instead when the output has few rows (up to MM_IN_PLACE), where the
  packing would cost more than the strided reads. A transposed matrix (a torch-layout
  weight seen as W.T) packs by 8 x 8 blocks transposed in registers.

Bits: every output is a fused multiply-add chain over k in order, from +0.0, whatever the
batch, the tile, the chunking, the threads, or where the panel was read from; that is
not the order of numpy's BLAS call, so these products are declared inexact on native
(`inexact_product`). tests/runtime/test_native_matmul.py checks the chain bit for bit
(computed with exact rationals) and holds the results within the componentwise bound of
a sum of K products, 2 (K + 2) eps sum |a| |b|, of numpy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.graph import OP, Node
from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.native import calls
from graphc.runtime.native.kernels import Kernel
from graphc.runtime.plan import Step

PRODUCTS = frozenset({"matmul", "matmul_epilogue"})
# multiply-adds of one product from which its tiles run on the OpenMP pool: waking it
# costs 5-50 us here, and 2**20 of them take about 9 us on one core
PARALLEL_WORK = 1 << 20
# the same while the pool is warm (its workers still spin: calls.POOL_CLOCK), where a
# region costs a microsecond or two
WARM_WORK = 1 << 19
ALIGN = 64  # bytes: a packed panel's rows are whole vectors

SOURCE = r"""
/* ---- float32 matmul by a matrix (graphc/runtime/native/matmul.py) ---- */
#ifdef __AVX512F__
#define MM_MR 12
#else
#define MM_MR 6
#endif
#define MM_NR (2 * GC_W)
/* rows of one task: a panel's chunk of rows (the panel stays in the core's cache while
   its chunks go by) */
#define MM_CHUNK (8 * MM_MR)
#ifndef MM_IN_PLACE
#define MM_IN_PLACE 96
#endif

typedef struct {
    const float *a, *b, *bias; float *c, *packed;
    int64_t M, K, N, rows1, s0, s1, sk, bk, bj, relu, ready;
} mm_args;

/* whether panel p is read where b lies (no packed copy): its columns adjacent and whole,
   and few rows of output to read it for; else it is read from `packed` */
GC_INLINE int mm_in_place(const mm_args *m, int64_t p) {
    return !m->ready && m->bj == 1 && (p + 1) * MM_NR <= m->N && m->M <= MM_IN_PLACE;
}

/* rows r0 .. r0 + mr - 1 times panel p into c, then the bias and the relu; `two`: the
   panel has columns past its first vector (a product of 10 columns computes one) */
GC_INLINE void mm_tile(const mm_args *m, int64_t r0, int64_t p, const int mr, const int two) {
    const int in_place = mm_in_place(m, p);
    const float *b = in_place ? m->b + p * MM_NR : m->packed + p * m->K * MM_NR;
    const int64_t ldb = in_place ? m->bk : MM_NR;
    vf32 lo[MM_MR], hi[MM_MR];
    for (int r = 0; r < mr; r++) { lo[r] = sp_f32(0.0f); hi[r] = sp_f32(0.0f); }
    const float *row[MM_MR];
    if (m->rows1 == 1)  /* one row stride: no division */
        for (int r = 0; r < mr; r++) row[r] = m->a + (r0 + r) * m->s0;
    else
        for (int r = 0; r < mr; r++)
            row[r] = m->a + ((r0 + r) / m->rows1) * m->s0 + ((r0 + r) % m->rows1) * m->s1;
    const int64_t sk = m->sk;
    for (int64_t k = 0; k < m->K; k++) {
        vf32 b0, b1 = sp_f32(0.0f);
        memcpy(&b0, b + k * ldb, GC_VB);
        if (two) memcpy(&b1, b + k * ldb + GC_W, GC_VB);
        for (int r = 0; r < mr; r++) {
            vf32 s = sp_f32(row[r][k * sk]);
            lo[r] = fma_f32(s, b0, lo[r]);
            if (two) hi[r] = fma_f32(s, b1, hi[r]);
        }
    }
    int64_t j0 = p * MM_NR, cols = m->N - j0 < MM_NR ? m->N - j0 : MM_NR;
    vf32 bias0 = sp_f32(0.0f), bias1 = sp_f32(0.0f);
    if (m->bias) {
        bias0 = ldm_f32(m->bias + j0, cols < GC_W ? cols : GC_W);
        bias1 = ldm_f32(m->bias + j0 + GC_W, cols > GC_W ? cols - GC_W : 0);
    }
    for (int r = 0; r < mr; r++) {
        if (m->bias) { lo[r] = lo[r] + bias0; hi[r] = hi[r] + bias1; }
        if (m->relu) { lo[r] = max_f32(lo[r], sp_f32(0)); hi[r] = max_f32(hi[r], sp_f32(0)); }
    }
    float *y = m->c + r0 * m->N + j0;
    if (cols == MM_NR) {  /* a whole panel: plain stores */
        for (int r = 0; r < mr; r++) {
            memcpy(y + r * m->N, &lo[r], GC_VB);
            memcpy(y + r * m->N + GC_W, &hi[r], GC_VB);
        }
    } else {
        int64_t n0 = cols < GC_W ? cols : GC_W, n1 = cols - n0;
        for (int r = 0; r < mr; r++) {
            stm_f32(y + r * m->N, lo[r], n0);
            if (n1 > 0) stm_f32(y + r * m->N + GC_W, hi[r], n1);
        }
    }
}

/* rows r0 .. r1 - 1 of panel p: whole tiles, then the rest by tiles of 8, 4, 2 and 1
   rows (each case unrolled, its accumulators in registers); a rest of 4 to 7 rows
   after a whole tile goes as 8 + 8 + ... instead of 12 + 4 + ...: a tile of 4 rows has
   too few accumulators to keep the multiply-add pipes busy */
GC_INLINE void mm_rows_of(const mm_args *m, int64_t r0, int64_t r1, int64_t p, const int two) {
    int64_t full = (r1 - r0) / MM_MR, rest = (r1 - r0) % MM_MR, r = r0;
#if MM_MR > 8
    if (full > 0 && rest >= 4 && rest < 8) full--;
#endif
    for (int64_t t = 0; t < full; t++, r += MM_MR) mm_tile(m, r, p, MM_MR, two);
#if MM_MR > 8
    for (; r + 8 <= r1; r += 8) mm_tile(m, r, p, 8, two);
#endif
    for (; r + 4 <= r1; r += 4) mm_tile(m, r, p, 4, two);
    for (; r + 2 <= r1; r += 2) mm_tile(m, r, p, 2, two);
    for (; r < r1; r++) mm_tile(m, r, p, 1, two);
}
static void mm_rows(const mm_args *m, int64_t r0, int64_t r1, int64_t p) {
    if (m->N - p * MM_NR > GC_W) mm_rows_of(m, r0, r1, p, 1);
    else mm_rows_of(m, r0, r1, p, 0);
}

/* panel p of b (K x N, element (k, j) at b + k bk + j bj) into `packed`: its MM_NR
   columns k by k, zero past column N. Adjacent columns copy row by row; adjacent rows
   (a transposed matrix) go by 8 x 8 blocks transposed in registers; anything else
   element by element */
static void mm_pack_panel(const float *b, float *packed, int64_t K, int64_t N, int64_t bk,
                          int64_t bj, int64_t p) {
    int64_t j0 = p * MM_NR, cols = N - j0 < MM_NR ? N - j0 : MM_NR, k = 0;
    float *d = packed + p * K * MM_NR;
    const float *s = b + j0 * bj;
    if (bj == 1 && cols == MM_NR) {  /* two vectors a row (memcpy of a fixed size) */
        for (; k < K; k++) memcpy(d + k * MM_NR, s + k * bk, MM_NR * sizeof(float));
        return;
    }
    if (bk == 1 && cols == MM_NR)
        for (; k + 8 <= K; k += 8)
            for (int64_t j = 0; j < MM_NR; j += 8) tr8_f32(s + j * bj + k, bj, d + k * MM_NR + j, MM_NR);
    for (; k < K; k++)
        for (int64_t j = 0; j < MM_NR; j++) d[k * MM_NR + j] = j < cols ? s[k * bk + j * bj] : 0.0f;
}

/* this thread's share of the product: the panels to pack, then the tiles (the loops
   are a team's when called in a parallel region, all of them on one thread otherwise) */
static void mm_share(const mm_args *m) {
    int64_t panels = (m->N + MM_NR - 1) / MM_NR, chunks = (m->M + MM_CHUNK - 1) / MM_CHUNK;
    if (!m->ready && m->M > 0) {
        #pragma omp for schedule(static)
        for (int64_t p = 0; p < panels; p++)
            if (!mm_in_place(m, p)) mm_pack_panel(m->b, m->packed, m->K, m->N, m->bk, m->bj, p);
    }
    #pragma omp for schedule(static)
    for (int64_t task = 0; task < panels * chunks; task++) {
        int64_t p = task / chunks, r0 = (task % chunks) * MM_CHUNK;
        mm_rows(m, r0, r0 + MM_CHUNK < m->M ? r0 + MM_CHUNK : m->M, p);
    }
}

/* c (M x N, C order) = a (M x K: row r at a + (r / rows1) s0 + (r % rows1) s1, its
   elements sk apart) times b (K x N: element (k, j) at b + k bk + j bj, or, when
   `ready`, already in `packed` as gc_matmul_pack_f32 leaves it), plus bias[j] when bias
   is not null, then max(., 0) when relu. Without `ready`, the panels the tiles cannot
   read in place are packed first, by the same team, into `packed` (room for every
   panel). On the pool when `parallel` is 1, or 2 and the pool is warm */
GC_EXPORT void gc_matmul_f32(int64_t M, const float *a, const float *b, float *packed,
                             float *c, const float *bias, int64_t K, int64_t N,
                             int64_t rows1, int64_t s0, int64_t s1, int64_t sk, int64_t bk,
                             int64_t bj, int64_t ready, int64_t relu, int64_t parallel) {
    mm_args m = {a, b, bias, c, packed, M, K, N, rows1, s0, s1, sk, bk, bj, relu, ready};
    if (parallel == 1 || (parallel == 2 && gc_pool_warm())) {
        #pragma omp parallel
        mm_share(&m);
        gc_pool_used();
    } else {
        mm_share(&m);
    }
}

/* every panel of b (as above) into `packed`: a constant matrix, once per plan */
GC_EXPORT void gc_matmul_pack_f32(int64_t K, const float *b, float *packed, int64_t N,
                                  int64_t bk, int64_t bj, int64_t parallel) {
    int64_t panels = (N + MM_NR - 1) / MM_NR;
    #pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < panels; p++) mm_pack_panel(b, packed, K, N, bk, bj, p);
}
"""

# after M: a, b, packed, c, bias; K, N, rows1, s0, s1, sk, bk, bj, ready, relu, parallel
PRODUCT = Kernel("gc_matmul_f32", SOURCE, [], ["matmul"], "ppppp" + "i" * 11)
# after K: b, packed; N, bk, bj, parallel
PACK = Kernel("gc_matmul_pack_f32", SOURCE, [], ["matmul"], "pp" + "iiii")


def aligned(count: int) -> np.ndarray:
    """A float32 array of `count` elements (at least one) starting on an ALIGN boundary."""
    spare = ALIGN // 4
    raw = np.zeros(max(count, 1) + spare, np.float32)
    start = (-raw.ctypes.data % ALIGN) // 4
    return raw[start : start + max(count, 1)]


def packed_size(k: int, n: int) -> int:
    """Elements of a packed k x n matrix for panels of 16 or 32 columns (AVX2, AVX-512)."""
    return -(-n // 32) * 32 * k


def reason(node: Node) -> str | None:
    """None when this kernel computes the product `node` (matmul or matmul_epilogue) on
    native, else why not."""
    a, b = node.inputs[0].type, node.inputs[1].type
    out: TensorType = node.type
    if not a.dtype == b.dtype == out.dtype == np.float32:
        return "float32 only"
    if b.rank != 2:
        return "a matrix (rank 2) on the right only"
    return None


def inexact_product(node: Node) -> bool:
    """Whether native computes `node` with this kernel, so with other bits than numpy."""
    return node.kind == OP and node.op in PRODUCTS and reason(node) is None


def rows_layout(a: np.ndarray) -> tuple[Any, int, int, int, int, np.ndarray]:
    """The left operand `a` (float32) as gc_matmul_f32 reads it: (address, rows1, s0,
    s1, sk, the array read). Its leading dims are merged where their strides allow;
    more than two left over, or strides that are not whole elements, and a C-ordered
    copy is read instead (kept alive by the tuple's last entry)."""
    if a.ndim == 1:
        return _address(a), 1, 0, 0, a.strides[0] // 4, a
    dims = [(n, s) for n, s in zip(a.shape[:-1], a.strides[:-1]) if n != 1]
    merged: list[tuple[int, int]] = []
    for n, s in reversed(dims):
        if merged and s == merged[-1][0] * merged[-1][1]:
            merged[-1] = (merged[-1][0] * n, merged[-1][1])
        else:
            merged.append((n, s))
    if len(merged) > 2 or any(s % 4 for s in a.strides):
        a = np.ascontiguousarray(a)
        merged = [(a.size // a.shape[-1], a.strides[-2] if a.ndim > 1 else 0)]
    sk = a.strides[-1] // 4
    if not merged:
        return _address(a), 1, 0, 0, sk, a
    if len(merged) == 1:
        return _address(a), 1, merged[0][1] // 4, 0, sk, a
    (inner, s1), (_, s0) = merged
    return _address(a), inner, s0 // 4, s1 // 4, sk, a


def _address(a: np.ndarray) -> Any:
    """The address of `a`'s first element (from_buffer needs a contiguous array)."""
    return calls.address_now(a) if a.flags.c_contiguous else calls.static_address(a)


def _view_of_constant(gen: Generator, value: str) -> np.ndarray | None:
    """The array of plan value `value` when it is a constant or transposes of one."""
    node = gen.plan.nodes[value]
    if node.is_constant:
        return np.asarray(node.value)
    if node.kind == OP and node.op == "transpose":
        inner = _view_of_constant(gen, node.inputs[0].name)
        return None if inner is None else np.transpose(inner, node.attrs["axes"])
    return None


def _right(gen: Generator, step: Step, k: int, n: int, lines: list[str]) -> tuple[str, str, int]:
    """Source for the right operand: (its rows_layout's name, the packed buffer's address,
    1 when that buffer already holds every panel). A constant, or a transpose of one, is
    packed once per thread, at setup; any other matrix is read in place where its
    columns are adjacent and packed by the product's own call where not, into a buffer
    the plan's products share."""
    b = step.inputs[1]
    once = _view_of_constant(gen, b) is not None
    src = _layout(gen, b, gen.setup_lines if once else lines, once)
    if not once:
        return src, _work_buffer(gen), 0
    buffer = gen.fresh("packed")
    gen.setup_lines.append(f"{buffer} = {gen.const(aligned, 'aligned')}({packed_size(k, n)})")
    at = calls.address(gen, buffer, True, lines)
    calls.record(gen, PACK)
    parallel = int(k * n >= PARALLEL_WORK // 16)
    # a matrix's rows_layout: (address, 1, s0 = its row stride, 0, sk = its column stride)
    pack = f"{PACK.name}({k}, {src}[0], {at}, {n}, {src}[2], {src}[4], {parallel})"
    gen.setup_lines.append(pack)
    return src, at, 1


def _work_buffer(gen: Generator) -> str:
    """The address of the buffer in which this plan's products pack the panels they cannot
    read in place: one per thread, room for the largest right operand that is not a
    constant's."""
    state = calls.plan_state(gen)
    if "matmul_work" not in state:
        size = 1
        for step in gen.plan.steps:
            if step.node.op not in PRODUCTS or reason(step.node) is not None:
                continue
            if _view_of_constant(gen, step.inputs[1]) is None:
                k, n = gen.plan.values[step.inputs[1]].type.shape
                size = max(size, packed_size(k, n))  # type: ignore[arg-type]
        buffer = gen.fresh("matmul_work")
        gen.setup_lines.append(f"{buffer} = {gen.const(aligned, 'aligned')}({size})")
        state["matmul_work"] = calls.address(gen, buffer, True, [])
    return state["matmul_work"]


def _layout(gen: Generator, value: str, lines: list[str], once: bool = False) -> str:
    """The name of plan value `value`'s rows_layout: made once per thread (at setup) for
    an array that exists before the call, else on every call (into `lines`)."""
    name = gen.fresh("layout")
    line = f"{name} = {gen.const(rows_layout, 'rows_layout')}({gen.array(value)})"
    (gen.setup_lines if once or value in gen.static else lines).append(line)
    return name


def lower(gen: Generator, step: Step, out: str, bias: str | None, relu: bool) -> list[str] | None:
    """The product of `step` (its inputs a and b first) into `out` as one C call, with the
    plan value `bias` (one value per column, or None) added and a relu applied when
    asked; or None (numpy's kernel) where `reason` says so."""
    why = reason(step.node)
    if why is not None:
        calls.plan_state(gen)["declined"][step.index] = f"matmul in C: {why}"
        return None
    out_t = gen.plan.values[step.output].type
    k, n = gen.plan.values[step.inputs[1]].type.shape
    # a plan's shapes are bound (its sizes are the call's): ints here at every level
    assert isinstance(k, int) and isinstance(n, int) and isinstance(out_t.size, int)
    m = out_t.size // n if n else 0
    lines: list[str] = []
    b, packed, ready = _right(gen, step, k, n, lines)
    a = _layout(gen, step.inputs[0], lines)
    c = calls.address(gen, out, step.output in gen.static, lines)
    null = gen.const(calls.NULL, "null") if calls.FFI is not None else "None"
    bias_at = calls.value_address(gen, bias, lines) if bias is not None else null
    calls.record(gen, PRODUCT)
    parallel = 1 if m * n * k >= PARALLEL_WORK else 2 if m * n * k >= WARM_WORK else 0
    args = [m, f"{a}[0]", f"{b}[0]", packed, c, bias_at, k, n, f"{a}[1]", f"{a}[2]",
            f"{a}[3]", f"{a}[4]", f"{b}[2]", f"{b}[4]", ready, int(relu), parallel]  # fmt: skip
    return [*lines, f"{PRODUCT.name}({', '.join(str(x) for x in args)})"]


def per_column(bias: TensorType, out: TensorType) -> bool:
    """Whether a bias of type `bias` adds one value per column of `out` (shape (N,) or
    ones then N) in out's dtype, so the kernel can add it to its tiles."""
    n = out.shape[-1]
    return (
        bias.dtype == out.dtype
        and bias.rank >= 1
        and bias.shape[-1] == n
        and all(d == 1 for d in bias.shape[:-1])
        and bias.rank <= out.rank
    )
