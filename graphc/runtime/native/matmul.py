"""A float32 matmul in C for products by a constant matrix: the weight packed once.

A model's linear layers multiply activations by constant weights (an imported ONNX model's
initializers, a traced model's parameters). numpy's BLAS call copies ("packs") panels of
the weight on every call before its kernel runs, and at a batch of 64 rows that copy and
OpenBLAS's small-matrix paths cost as much as the arithmetic: an LSTM's recurrent
product, 64 x 128 by 128 x 512, took 30-38 us there and 24 here.

Here the right operand is packed once, by the plan's setup, into panels of `MM_NR`
columns (two vectors) stored k by k, zero past the last column, so a kernel reads each
panel front to back. A tile of `MM_MR` rows by one panel keeps its 2 MM_MR accumulators in
registers while k goes by (per k: two vector loads of the panel, a broadcast of each
row's a[r, k], their products as fused multiply-adds). The left operand is read in place
through up to two row strides and an element stride (a batch-first sequence seen time
first, a transposed activation), so no copy is made of it. The bias of a
matmul_epilogue (one value per column) and a relu are applied to the tile before it is
stored; its other activations run as the elementwise kernel after, as before. Tiles go
to the OpenMP pool by panel, then by chunk of rows, when the product is big enough to
pay for waking it.

Which products: float32 operands whose right one is a matrix (rank 2) derived from
constants alone (a constant, its transpose, or ops on constants: that property is the
same at every optimization level, since folding and loop-invariant motion never turn a
computed value into a constant's view or back, see passes/control.py). A constant, or a
transpose of one, is packed at setup; anything else derived from constants (an O0 plan
computing w * 2, say) is packed on every call by `gc_matmul_pack_f32`. Every other product stays numpy's (training graphs multiply by
state, which changes between calls).

Bits: every output is a fused multiply-add chain over k in order, from +0.0, whatever the
batch, the tile, the chunking or the threads; that is not the order of numpy's BLAS
call, so these products are declared inexact on native (`inexact_product`).
tests/runtime/test_native_matmul.py checks the chain bit for bit (computed with exact
rationals) and holds the results within the componentwise bound of a sum of K
products, 2 (K + 2) eps sum |a| |b|, of numpy's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from graphc.ir.graph import OP, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.native import calls
from graphc.runtime.native.kernels import Kernel
from graphc.runtime.plan import Step

PRODUCTS = frozenset({"matmul", "matmul_epilogue"})
# multiply-adds of one product from which its tiles run on the OpenMP pool: waking it
# costs 5-50 us here, and 2**20 of them take about 9 us on one core
PARALLEL_WORK = 1 << 20
ALIGN = 64  # bytes: a packed panel's rows are whole vectors

SOURCE = r"""
/* ---- packed float32 matmul (graphc/runtime/native/matmul.py) ---- */
#ifdef __AVX512F__
#define MM_MR 12
#else
#define MM_MR 6
#endif
#define MM_NR (2 * GC_W)
/* rows of one task: a panel's chunk of rows (the panel stays in the core's cache while
   its chunks go by) */
#define MM_CHUNK (8 * MM_MR)

typedef struct {
    const float *a, *packed, *bias; float *c;
    int64_t K, N, rows1, s0, s1, sk, relu;
} mm_args;

/* rows r0 .. r0 + mr - 1 times panel p into c, then the bias and the relu; `two`: the
   panel has columns past its first vector (a product of 10 columns computes one) */
GC_INLINE void mm_tile(const mm_args *m, int64_t r0, int64_t p, const int mr, const int two) {
    const float *row[MM_MR];
    for (int r = 0; r < mr; r++)
        row[r] = m->a + ((r0 + r) / m->rows1) * m->s0 + ((r0 + r) % m->rows1) * m->s1;
    const float *b = m->packed + p * m->K * MM_NR;
    vf32 lo[MM_MR], hi[MM_MR];
    for (int r = 0; r < mr; r++) { lo[r] = sp_f32(0.0f); hi[r] = sp_f32(0.0f); }
    const int64_t sk = m->sk;
    for (int64_t k = 0; k < m->K; k++) {
        vf32 b0, b1 = sp_f32(0.0f);
        memcpy(&b0, b + k * MM_NR, GC_VB);
        if (two) memcpy(&b1, b + k * MM_NR + GC_W, GC_VB);
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

/* c (M x N, C order) = a (M x K: row r at a + (r / rows1) s0 + (r % rows1) s1, its
   elements sk apart) times the packed matrix, plus bias[j] when bias is not null, then
   max(., 0) when relu */
GC_EXPORT void gc_matmul_f32(int64_t M, const float *a, const float *packed, float *c,
                             const float *bias, int64_t K, int64_t N, int64_t rows1,
                             int64_t s0, int64_t s1, int64_t sk, int64_t relu,
                             int64_t parallel) {
    mm_args m = {a, packed, bias, c, K, N, rows1, s0, s1, sk, relu};
    int64_t panels = (N + MM_NR - 1) / MM_NR, chunks = (M + MM_CHUNK - 1) / MM_CHUNK;
    #pragma omp parallel for schedule(static) if (parallel)
    for (int64_t task = 0; task < panels * chunks; task++) {
        int64_t p = task / chunks, r0 = (task % chunks) * MM_CHUNK;
        mm_rows(&m, r0, r0 + MM_CHUNK < M ? r0 + MM_CHUNK : M, p);
    }
}

/* b (K x N, element (k, j) at b + k sk + j sj) into panels of MM_NR columns, k by k,
   zero past column N */
GC_EXPORT void gc_matmul_pack_f32(int64_t K, const float *b, float *packed, int64_t N,
                                  int64_t sk, int64_t sj, int64_t parallel) {
    int64_t panels = (N + MM_NR - 1) / MM_NR;
    #pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < panels; p++) {
        int64_t j0 = p * MM_NR, cols = N - j0 < MM_NR ? N - j0 : MM_NR;
        float *d = packed + p * K * MM_NR;
        for (int64_t k = 0; k < K; k++) {
            const float *s = b + k * sk + j0 * sj;
            for (int64_t j = 0; j < MM_NR; j++) d[k * MM_NR + j] = j < cols ? s[j * sj] : 0.0f;
        }
    }
}
"""

# after M: a, packed, c, bias; K, N, rows1, s0, s1, sk, relu, parallel
PRODUCT = Kernel("gc_matmul_f32", SOURCE, [], ["matmul"], "pppp" + "i" * 8)
# after K: b, packed; N, sk, sj, parallel
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


def constant_derived(node: Node) -> bool:
    """Whether `node`'s value is computed from constants alone (no placeholder, state or
    impure op among its ancestors): the same value at every call. A walk over its
    ancestors; `derived_from_constants` answers for a whole graph at once."""
    return node in derived_from_constants(ancestors(node))


def ancestors(node: Node) -> list[Node]:
    """`node` and the nodes it reads, directly or not, inputs before readers."""
    order: list[Node] = []
    seen: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
        elif n not in seen:
            seen.add(n)
            stack.append((n, True))
            stack.extend((x, False) for x in n.inputs if x not in seen)
    return order


def derived_from_constants(nodes: Iterable[Node]) -> set[Node]:
    """The nodes among `nodes` (inputs before readers) whose values are computed from
    constants alone; one pass."""
    derived: set[Node] = set()
    for n in nodes:
        if n.kind == OP and (
            n.is_constant
            or (get_op(n.op).pure and n.inputs and all(x in derived for x in n.inputs))
        ):
            derived.add(n)
    return derived


def reason(node: Node, derived: set[Node] | None = None) -> str | None:
    """None when this kernel computes the product `node` (matmul or matmul_epilogue) on
    native, else why not; `derived`: the graph's `derived_from_constants`, when known."""
    a, b = node.inputs[0].type, node.inputs[1].type
    out: TensorType = node.type
    if not a.dtype == b.dtype == out.dtype == np.float32:
        return "float32 only"
    if b.rank != 2:
        return "a matrix (rank 2) on the right only"
    weight = node.inputs[1]
    if not (weight in derived if derived is not None else constant_derived(weight)):
        return "a right operand derived from constants only (it is packed once)"
    return None


def plan_reason(gen: Generator, step: Step) -> str | None:
    """`reason` for a step of the plan `gen` generates (its graph's values derived from
    constants found once per plan, not once per product: an unrolled RNN's 600
    products each walked the whole graph, 1.7 s of a 3.2 s compile)."""
    state = calls.plan_state(gen)
    if "derived" not in state:
        state["derived"] = derived_from_constants(gen.plan.nodes.values())
    return reason(step.node, state["derived"])


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


def _packed(gen: Generator, step: Step, k: int, n: int, lines: list[str]) -> str:
    """Source for the packed right operand's address: a buffer of the thread's, which
    the packing kernel fills once (at setup) for a constant or a transpose of one, else
    on every call."""
    b = step.inputs[1]
    once = _view_of_constant(gen, b) is not None
    buffer = gen.fresh("packed")
    gen.setup_lines.append(f"{buffer} = {gen.const(aligned, 'aligned')}({packed_size(k, n)})")
    at = calls.address(gen, buffer, True, lines)
    where = gen.setup_lines if once else lines
    src = _layout(gen, b, where, once)
    calls.record(gen, PACK)
    parallel = int(k * n >= PARALLEL_WORK // 16)
    # a matrix's rows_layout: (address, 1, s0 = its row stride, 0, sk = its column stride)
    where.append(f"{PACK.name}({k}, {src}[0], {at}, {n}, {src}[2], {src}[4], {parallel})")
    return at


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
    why = plan_reason(gen, step)
    if why is not None:
        calls.plan_state(gen)["declined"][step.index] = f"matmul in C: {why}"
        return None
    out_t = gen.plan.values[step.output].type
    k, n = gen.plan.values[step.inputs[1]].type.shape
    # a plan's shapes are bound (its sizes are the call's): ints here at every level
    assert isinstance(k, int) and isinstance(n, int) and isinstance(out_t.size, int)
    m = out_t.size // n if n else 0
    lines: list[str] = []
    packed = _packed(gen, step, k, n, lines)
    a = _layout(gen, step.inputs[0], lines)
    c = calls.address(gen, out, step.output in gen.static, lines)
    bias_at = calls.value_address(gen, bias, lines) if bias is not None else "None"
    if bias is None and calls.FFI is not None:
        bias_at = gen.const(calls.NULL, "null")
    calls.record(gen, PRODUCT)
    parallel = int(m * n * k >= PARALLEL_WORK)
    args = [m, f"{a}[0]", packed, c, bias_at, k, n, f"{a}[1]", f"{a}[2]", f"{a}[3]",
            f"{a}[4]", int(relu), parallel]  # fmt: skip
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
