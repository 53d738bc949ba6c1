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
column, or a matrix of the output's shape: a gradient's accumulator in a backward
scan) and a relu are applied to the tile before it is stored; its other activations
run as the elementwise kernel after, as before. Two shapes of a recurrent step get
paths of their own: one row (batch 1) goes by four panels at once, eight chains in
flight where a tile of one row keeps two and waits out each multiply-add's latency;
K = 1 (one example's term of a weight gradient) goes row by row over the right
operand's one row, with no packing and no tiles. Tiles go to the OpenMP pool, when the
product is big enough to pay for waking it, as runs of (panel, chunk of rows) tasks of
even weight: by rows when the output has more rows than columns (each thread then reads
the rows of a it wrote as the previous product's or kernel's output) or when the
whole right operand fits a core's cache, else by panels.

Which products: float32 operands whose right one is a matrix (rank 2), or a stack of
them (below); and contract_rows(x, y), x^T y over every row, as the product of x seen as
(rows, k), transposed, by y seen as (rows, n) (`_matrix_views`). Where the panels of a
matrix come from:
- a constant, or a transpose of one (an imported model's initializers, a traced
  model's parameters, an LSTM's recurrent weight in a scan body): packed once per
  thread, by the plan's setup (`gc_matmul_pack_f32`);
- any other matrix (a training step's weights, which change every call; an activation
  in a weight gradient; a caller's array in any layout): the product's own call packs
  it, the same threads first packing the panels and then running the tiles, into a
  buffer the plan's products share; a panel of whole rows in order (C order) is read
  where it lies instead when the output has few rows (up to MM_IN_PLACE, 96), where the
  packing would cost more than the strided reads (each tile prefetching the panel's
  rows ahead of its use). A transposed matrix (a torch-layout
  weight seen as W.T) packs by 8 x 8 blocks transposed in registers.

Stacks, (..., M, K) @ (..., K, N) (attention's products and their gradients, vmap of a
product), are one call of gc_matmul_stack_f32: each item is the product above of that
item alone, its operands found through up to three levels of batch strides
(stack_layout: numpy's broadcasting, a shared operand's stride 0). On the pool each
thread takes its share of the items, packing their panels into its own buffer (the
product's phases on one thread, mm_alone, no barrier between items, an item's rows
packed as a matrix's are when large); items of SPLIT_WORK multiply-adds or more left
over by that share go to the whole team each.

Bits: every output is a fused multiply-add chain over k in order, from +0.0, whatever the
batch, the tile, the chunking, the threads, the item of a stack, or where the panel was
read from; that is not the order of numpy's BLAS call, so these products are declared
inexact on native (native/__init__.py registers matmul and matmul_epilogue with
`inexact_product`, which says which of their nodes this kernel computes: not a stack of
outer products, outer.py's). tests/backends/test_native_matmul.py checks the chain bit
for bit (computed with exact rationals) and holds the results within the componentwise
bound of a sum of K products, 2 (K + 2) eps sum |a| |b|, of numpy's;
tests/backends/test_native_stacked_matmul.py holds each item of a stack to the rank-2
product's bits.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.backends.native import calls, outer, toolchain
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel
from graphc.backends.numpy.chunked import transposed_view
from graphc.ir.graph import OP, Node
from graphc.ir.types import TensorType
from graphc.runtime.backend import aligned_bytes, get_backend
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

# multiply-adds of one product from which its tiles run on the OpenMP pool: waking it
# costs 5-50 us here, and 2**20 of them take about 9 us on one core
PARALLEL_WORK = 1 << 20
# the same while the pool is warm (its workers still spin: calls.POOL_CLOCK), where a
# region costs a microsecond or two
WARM_WORK = 1 << 19
ALIGN = 64  # bytes: a packed panel's rows are whole vectors

SOURCE = c_source("matmul.c")

# after M: a, b, packed, c, bias, apack, scale; bias_rows, K, N, rows1, s0, s1, sk, bk, bj,
# ready, relu, subtract, parallel
PRODUCT = Kernel("gc_matmul_f32", SOURCE, [], ["matmul"], "ppppppp" + "i" * 13)
# after K: b, packed; N, bk, bj, parallel. It writes only `packed`
PACK = Kernel("gc_matmul_pack_f32", SOURCE, [], ["matmul"], "pp" + "iiii", writes_only=2)
# after the item count: a, b, packed, c, bias, apack; apack_slot, bias_rows, M, K, N, s0, sk,
# bk, bj, n1, n2, as0, as1, as2, bs0, bs1, bs2, relu, slots, per_slot, split, parallel
STACK = Kernel("gc_matmul_stack_f32", SOURCE, [], ["matmul"], "pppppp" + "i" * 22)
# levels of items the stacked kernel walks (mm_item_at): batch dims merge into as few as
# their strides allow, and a layout needing more is copied to C order first
BATCH_LEVELS = 3
# multiply-adds of one item of a stack from which the items left over when each thread
# has had its share (fewer than the threads) are computed by the whole team each
SPLIT_WORK = 1 << 20
# threads' panel buffers a stacked product holds at most (the team has at most as many)
MAX_SLOTS = 16


def aligned(count: int) -> np.ndarray:
    """A float32 array of `count` zeros (at least one) starting on an ALIGN boundary."""
    array = aligned_bytes(4 * max(count, 1), ALIGN).view(np.float32)
    array.fill(0.0)
    return array


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
    if node.op == "contract_rows":  # x^T y over all rows: one product of two matrices
        return None
    if b.rank < 2:
        return "a matrix or a stack of matrices on the right only (a vector there is numpy's)"
    if b.rank > 2 and batch_runs(a, b) > BATCH_LEVELS:
        return (
            f"batch dims that broadcast in more than {BATCH_LEVELS} runs (the stacked kernel "
            f"walks {BATCH_LEVELS} levels of items)"
        )
    return None


def batch_runs(a: TensorType, b: TensorType) -> int:
    """Levels of items a stacked product of types `a` @ `b` needs when both operands are
    C-ordered: its batch dims (numpy's broadcast of theirs, a dim of length 1 left out) in
    runs along which each operand either has its own dims or is shared (its dim of length
    1, or none), for within a run the items of each are one stride apart."""
    a_batch = a.shape[:-2] if a.rank > 2 else ()
    b_batch = b.shape[:-2]
    rank = max(len(a_batch), len(b_batch))
    a_batch = (1,) * (rank - len(a_batch)) + tuple(a_batch)
    b_batch = (1,) * (rank - len(b_batch)) + tuple(b_batch)
    runs, last = 0, None
    for x, y in zip(a_batch, b_batch):
        if x == 1 and y == 1:
            continue
        pattern = (x != 1, y != 1)
        runs += pattern != last
        last = pattern
    return runs


def inexact_product(node: Node) -> bool:
    """Whether native computes `node`, a node of an op whose native lowering is this
    kernel's (`product_ops`), with this kernel, so with other bits than numpy (a stack of
    outer products is outer.py's, numpy's bits)."""
    if node.kind != OP or reason(node) is not None:
        return False
    a, b = node.inputs[0].type, node.inputs[1].type
    return not (node.op == "matmul" and outer.takes(a, b, node.type))


def product_ops() -> frozenset[str]:
    """The ops whose native lowering hands their steps to this kernel (where `reason`
    allows): those native/__init__.py registers with `inexact_when=inexact_product`."""
    declared = get_backend("native").inexact_lowerings
    return frozenset(op for op, d in declared.items() if d.when is inexact_product)


def rows_layout(a: np.ndarray) -> tuple[Any, int, int, int, int, np.ndarray]:
    """The left operand `a` (float32) as gc_matmul_f32 reads it: (address, rows1, s0,
    s1, sk, the array read). Its leading dims are merged where their strides allow;
    more than two left over, or strides that are not whole elements, and a C-ordered
    copy is read instead (kept alive by the tuple's last entry)."""
    if a.flags.c_contiguous and a.ndim:  # most calls: rows of the last dim, one stride
        return calls.address_now(a), 1, a.shape[-1] if a.ndim > 1 else 0, 0, 1, a
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


def _of_loop_constant(gen: Generator, value: str) -> bool:
    """Whether plan value `value` is one of the constants of a loop whose body runs in C
    (calls.loop_constants), or transposes of one."""
    positions = calls.loop_constants(gen)
    if not positions:
        return False
    node = gen.plan.nodes[value]
    if node.kind == OP and node.op == "transpose":
        return _of_loop_constant(gen, node.inputs[0].name)
    return any(gen.plan.inputs[k] == value for k in positions if k < len(gen.plan.inputs))


def _right(gen: Generator, step: Step, k: int, n: int, lines: list[str]) -> tuple[str, str, int]:
    """Source for the right operand: (its rows_layout's name, the packed buffer's address,
    1 when that buffer already holds every panel). A constant, or a transpose of one, is
    packed once per thread, at setup; a loop's constant, in a body that runs in C, by a
    call of its own before the product, which the loop makes once before its steps
    (PACK.writes_only: even where the product could read it in place, packed panels
    measured faster, an RNN's step at batch 1 and 32); any other matrix is read in place
    where its columns are adjacent and packed by the product's own call where not, into
    a buffer the plan's products share."""
    b = step.inputs[1]
    once = _view_of_constant(gen, b) is not None
    hoisted = not once and _of_loop_constant(gen, b)
    src = _layout(gen, b, gen.setup_lines if once else lines, once, _matrix_views(gen, step)[1])
    if not (once or hoisted):
        return src, _work_buffer(gen), 0
    buffer = gen.fresh("packed")
    gen.setup_lines.append(f"{buffer} = {gen.const(aligned, 'aligned')}({packed_size(k, n)})")
    at = calls.address(gen, buffer, True, lines)
    calls.record(gen, PACK)
    parallel = int(k * n >= PARALLEL_WORK // 16)
    # a matrix's rows_layout: (address, 1, s0 = its row stride, 0, sk = its column stride)
    pack = f"{PACK.name}({k}, {src}[0], {at}, {n}, {src}[2], {src}[4], {parallel})"
    (lines if hoisted else gen.setup_lines).append(pack)
    return src, at, 1


def _products(gen: Generator) -> list[Step]:
    """The plan's steps this kernel may compute (their buffers are sized for all of them)."""
    products = product_ops()
    return [
        step
        for step in gen.plan.steps
        if (step.node.op in products and reason(step.node) is None)
        or (step.node.op == "gemm" and gemm_reason(step.node) is None)
    ]


def _work_buffer(gen: Generator) -> str:
    """The address of the buffer in which this plan's products pack the panels they cannot
    read in place: one per thread, room for the largest right operand that is not a
    constant's."""
    state = calls.plan_state(gen)
    if "matmul_work" not in state:
        size = 1
        for step in _products(gen):
            if _stacked(gen, step):
                size = max(size, _stack_buffer(gen, step)[0])
            elif _view_of_constant(gen, step.inputs[1]) is None:
                k, n = _right_shape(gen, step)
                size = max(size, packed_size(k, n))
        buffer = gen.fresh("matmul_work")
        gen.setup_lines.append(f"{buffer} = {gen.const(aligned, 'aligned')}({size})")
        state["matmul_work"] = calls.address(gen, buffer, True, [])
    return state["matmul_work"]


# a left operand read across its rows is packed by the call (mm_pack_rows) from this many
# elements (1 MiB of float32: more than a core's cache keeps while the panels go by), or when its
# product has this many columns (panels that read it again): measured, with A transposed,
# 512 x 784 x 256 0.81x the time of the strided reads, 784 x 512 x 256 0.86x,
# 256 x 512 x 784 0.96x, but 256 x 512 x 256 1.06x (8 panels, A in cache: the pass
# costs more than it saves)
PACK_ROWS_FROM = 1 << 18
PACK_ROWS_COLUMNS = 512


def _strided_left(gen: Generator, step: Step) -> bool:
    """Whether the left operand of `step` is a transpose that moves its last axis (a
    weight gradient's G^T: its elements along k are not adjacent) and large enough, or
    read by enough panels, to be packed (PACK_ROWS_FROM, PACK_ROWS_COLUMNS; of a stack,
    an item)."""
    node = gen.plan.nodes[step.inputs[0]]
    axes = node.attrs.get("axes") if node.kind == OP and node.op == "transpose" else None
    rows_across = step.node.op == "contract_rows"  # x^T: x's columns are its rows
    if not rows_across and (axes is None or len(axes) < 2 or axes[-1] == len(axes) - 1):
        return False
    a = gen.plan.values[step.inputs[0]].type
    # (of a stack: one item's rows, each item's packed in turn)
    size = math.prod(_stack_shape(gen, step)[1:3]) if _stacked(gen, step) else a.size
    n = gen.plan.values[step.inputs[1]].type.shape[-1]
    return size >= PACK_ROWS_FROM or n >= PACK_ROWS_COLUMNS  # type: ignore[operator]


def _rows_buffer(gen: Generator) -> str:
    """The address of the buffer into which this plan's products pack a left operand
    read across its rows (`_strided_left`; the kernel's mm_pack_rows): one per thread,
    room for the largest such operand."""
    state = calls.plan_state(gen)
    if "matmul_rows" not in state:
        size = 1
        for step in _products(gen):
            if _stacked(gen, step) and _strided_left(gen, step):
                _, slots, _ = _stack_buffer(gen, step)
                _, m, k, _ = _stack_shape(gen, step)
                size = max(size, slots * m * k)  # a part for each thread
            elif _strided_left(gen, step):
                a = gen.plan.values[step.inputs[0]].type
                size = max(size, a.size)  # type: ignore[arg-type]  (bound: ints)
        buffer = gen.fresh("matmul_rows")
        gen.setup_lines.append(f"{buffer} = {gen.const(aligned, 'aligned')}({size})")
        state["matmul_rows"] = calls.address(gen, buffer, True, [])
    return state["matmul_rows"]


def _layout(
    gen: Generator, value: str, lines: list[str], once: bool = False, view: str = ""
) -> str:
    """The name of plan value `value`'s rows_layout (of its `view`, a numpy expression's
    tail such as a reshape: `_matrix_views`): made once per thread (at setup) for an
    array that exists before the call, else on every call (into `lines`)."""
    name = gen.fresh("layout")
    line = f"{name} = {gen.const(rows_layout, 'rows_layout')}({gen.array(value)}{view})"
    (gen.setup_lines if once or value in gen.static else lines).append(line)
    return name


def lower(
    gen: Generator, step: Step, out: str, bias: str | None, relu: bool, alpha: float = 1.0
) -> list[str] | None:
    """The product of `step` (its inputs a and b first) into `out` as one C call, scaled
    by `alpha` (a gemm's), with the plan value `bias` (where `tiles_add` allows it, or
    None) added and a relu applied when asked (the output may overwrite a matrix bias:
    `calls.alias_safe`); or None (numpy's kernel) where `reason`
    says so. A stack of outer products (one contracted term) is outer.py's kernel,
    numpy's bits. The epilogue's operations are gemm's numpy kernel's (ops/gemm.py): the
    product times |alpha|, then taken from the bias when alpha is negative, else the
    product times alpha plus the bias."""
    if step.node.op == "matmul":  # (an epilogue's product has its bias and activation)
        stacked = outer.lower(gen, step, out)
        if stacked is not None:
            return stacked
    why = reason(step.node)
    if why is not None:
        calls.plan_state(gen)["declined"][step.index] = f"matmul in C: {why}"
        return None
    if _stacked(gen, step):
        return _lower_stack(gen, step, out, bias, relu)
    out_t = gen.plan.values[step.output].type
    k, n = _right_shape(gen, step)
    assert isinstance(out_t.size, int)  # a plan's shapes are bound: ints at every level
    m = out_t.size // n if n else 0
    lines: list[str] = []
    b, packed, ready = _right(gen, step, k, n, lines)
    a = _layout(gen, step.inputs[0], lines, view=_matrix_views(gen, step)[0])
    c = calls.address(gen, out, step.output in gen.static, lines)
    null = gen.const(calls.NULL, "null") if calls.FFI is not None else "None"
    bias_at = calls.value_address(gen, bias, lines) if bias is not None else null
    rows = 0 if bias is None else bias_rows(gen.plan.values[bias].type, out_t)
    apack = _rows_buffer(gen) if _strided_left(gen, step) else null
    if rows:  # a matrix bias: each tile reads its elements just before it writes them
        calls.alias_safe(gen, step, {step.inputs.index(bias)})  # type: ignore[arg-type]
    subtract = int(bias is not None and alpha < 0)
    scale_at = null
    if alpha != 1.0:
        factor = np.array([-alpha if subtract else alpha], np.float32)
        scale_at = calls.address(gen, gen.const(factor, "scale"), True, lines)
    calls.record(gen, PRODUCT)
    parallel = 1 if m * n * k >= PARALLEL_WORK else 2 if m * n * k >= WARM_WORK else 0
    args = [m, f"{a}[0]", f"{b}[0]", packed, c, bias_at, apack, scale_at, rows, k, n,
            f"{a}[1]", f"{a}[2]", f"{a}[3]", f"{a}[4]", f"{b}[2]", f"{b}[4]", ready, int(relu),
            subtract, parallel]  # fmt: skip
    return [*lines, f"{PRODUCT.name}({', '.join(str(x) for x in args)})"]


def _stacked(gen: Generator, step: Step) -> bool:
    """Whether the product of `step` is a stack: its right operand has batch dims."""
    return step.node.op != "contract_rows" and gen.plan.values[step.inputs[1]].type.rank > 2


def _matrix_views(gen: Generator, step: Step) -> tuple[str, str]:
    """The numpy expression tails that make a product's operands the matrices a @ b it
    multiplies: none for a matmul; for contract_rows(x, y) = x^T y over every row, x
    seen as (rows, k) and transposed, y as (rows, n) (views of C-ordered arrays, with no
    copy)."""
    if step.node.op != "contract_rows":
        return "", ""
    x, y = (gen.plan.values[v].type.shape for v in step.inputs[:2])
    rows = math.prod(x[:-1])
    return f".reshape({rows}, {x[-1]}).T", f".reshape({rows}, {y[-1]})"


def _right_shape(gen: Generator, step: Step) -> tuple[int, int]:
    """(k, n) of the right operand of a product that is no stack (bound: ints)."""
    shape = gen.plan.values[step.inputs[1]].type.shape
    k = math.prod(shape[:-1]) if step.node.op == "contract_rows" else shape[0]
    n = shape[-1]
    assert isinstance(k, int) and isinstance(n, int)
    return k, n


def _stack_shape(gen: Generator, step: Step) -> tuple[int, int, int, int]:
    """(items, M, K, N) of the stacked product of `step` (a plan's shapes are ints)."""
    a_t = gen.plan.values[step.inputs[0]].type
    k, n = gen.plan.values[step.inputs[1]].type.shape[-2:]
    m = a_t.shape[-2] if a_t.rank > 1 else 1
    out_t = gen.plan.values[step.output].type
    items = math.prod(out_t.shape[:-2] if a_t.rank > 1 else out_t.shape[:-1])
    return items, m, k, n  # type: ignore[return-value]


def _stack_buffer(gen: Generator, step: Step) -> tuple[int, int, int]:
    """(floats of the panel buffer, slots, floats a slot) of the stacked product of
    `step`: a slot for each thread that may compute items of its own (no more than
    there are items)."""
    items, _, k, n = _stack_shape(gen, step)
    slots = max(1, min(MAX_SLOTS, toolchain.workers(), items))
    return slots * packed_size(k, n), slots, packed_size(k, n)


def stack_layout(a: np.ndarray, b: np.ndarray) -> tuple[Any, ...]:
    """The operands of a stacked product (float32: `a` of rank 1 or more, `b` of rank 3 or
    more) as gc_matmul_stack_f32 reads them: (a's address, b's, s0, sk, bk, bj, n1, n2,
    as0, as1, as2, bs0, bs1, bs2, the arrays read). Strides count elements; the batch
    dims (numpy's broadcast) are merged where both operands' strides allow, into
    BATCH_LEVELS levels n0 x n1 x n2, each with a stride per operand (0 where it is
    shared). A layout needing more levels (or with strides that are not whole elements)
    has its operands copied to C order, which `reason` made sure is enough; the copies are
    kept alive by the tuple's last entry. What a layout gives is remembered by shapes and
    strides: a plan's feeds come in a few layouts, and working it out costs more than
    the call of a small product (10-20 us)."""
    key = (a.shape, a.strides, b.shape, b.strides)
    known = _STACK_LAYOUTS.get(key)
    if known is None:
        known = _stack_ints(a, b)
        if len(_STACK_LAYOUTS) >= 256:
            _STACK_LAYOUTS.clear()
        _STACK_LAYOUTS[key] = known
    copy_a, copy_b, ints = known
    if copy_a is None:  # (None: both broadcast to the whole batch)
        a, b = _broadcast_copies(a, b)
    if copy_a:
        a = np.ascontiguousarray(a)
    if copy_b:
        b = np.ascontiguousarray(b)
    return (_address(a), _address(b), *ints, (a, b))


def _broadcast_copies(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C-ordered copies of a and b broadcast to the whole batch of a @ b."""
    a_batch = a.shape[:-2] if a.ndim > 2 else ()
    batch = np.broadcast_shapes(a_batch, b.shape[:-2])
    if a.ndim > 1:
        a = np.ascontiguousarray(np.broadcast_to(a, (*batch, *a.shape[-2:])))
    return a, np.ascontiguousarray(np.broadcast_to(b, (*batch, *b.shape[-2:])))


# stack_layout's answers: (shapes, strides) -> (copy a, copy b, the ints); None for both
# copies: both broadcast to the whole batch
_STACK_LAYOUTS: dict[tuple, tuple[bool | None, bool | None, tuple[int, ...]]] = {}


def _stack_ints(a: np.ndarray, b: np.ndarray) -> tuple[bool | None, bool | None, tuple[int, ...]]:
    """Whether stack_layout copies a, whether b (None for both: broadcast copies), and the
    ints of its answer."""
    copy_a: bool | None = False
    copy_b: bool | None = False
    levels = _batch_levels(a, b)
    if levels is None:
        a, copy_a = np.ascontiguousarray(a), True
        levels = _batch_levels(a, b)
    if levels is None:
        b, copy_b = np.ascontiguousarray(b), True
        levels = _batch_levels(a, b)
    if levels is None:  # symbolic dims bound to 1 that broadcast in more runs than `reason` saw
        a, b = _broadcast_copies(a, b)
        copy_a = copy_b = None
        levels = _batch_levels(a, b)
    assert levels is not None, "operands broadcast to the whole batch merge into one level"
    levels = [(1, 0, 0)] * (BATCH_LEVELS - len(levels)) + levels
    (_, as0, bs0), (n1, as1, bs1), (n2, as2, bs2) = levels
    s0 = a.strides[-2] // 4 if a.ndim > 1 else 0
    bk, bj = b.strides[-2] // 4, b.strides[-1] // 4
    ints = (s0, a.strides[-1] // 4, bk, bj, n1, n2, as0, as1, as2, bs0, bs1, bs2)
    return copy_a, copy_b, ints


def _batch_levels(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int, int]] | None:
    """The batch of a @ b as levels (count, a's stride, b's stride), outermost first, as
    few as the strides allow; None when more than BATCH_LEVELS (or a stride that is not
    a whole number of elements)."""
    if any(x % 4 for x in (*a.strides, *b.strides)):
        return None
    a_batch = a.shape[:-2] if a.ndim > 2 else ()
    rank = max(len(a_batch), b.ndim - 2)
    dims = []
    for axis in range(-rank, 0):
        sizes, strides = [], []
        for x, batch in ((a, a_batch), (b, b.shape[:-2])):
            size = batch[axis] if -axis <= len(batch) else 1
            sizes.append(size)
            strides.append(x.strides[axis - 2] // 4 if size != 1 else 0)
        count = 0 if 0 in sizes else max(sizes)
        if count != 1:
            dims.append((count, *strides))
    merged: list[tuple[int, int, int]] = []
    for count, sa, sb in reversed(dims):  # innermost first
        if merged and sa == merged[-1][0] * merged[-1][1] and sb == merged[-1][0] * merged[-1][2]:
            merged[-1] = (merged[-1][0] * count, merged[-1][1], merged[-1][2])
        else:
            merged.append((count, sa, sb))
    return None if len(merged) > BATCH_LEVELS else merged[::-1]


def _lower_stack(gen: Generator, step: Step, out: str, bias: str | None, relu: bool) -> list[str]:
    """The stacked product of `step` into `out` as one call of gc_matmul_stack_f32: each
    item's product as the rank-2 kernel computes it, then the bias (per column, or of the
    output's shape) and the relu; every operand read through its strides (stack_layout),
    the panels of b packed by the call."""
    items, m, k, n = _stack_shape(gen, step)
    out_t = gen.plan.values[step.output].type
    lines: list[str] = []
    layout = gen.fresh("stack")
    x, w = step.inputs[:2]
    make = f"{gen.const(stack_layout, 'stack_layout')}({gen.array(x)}, {gen.array(w)})"
    static = x in gen.static and w in gen.static
    (gen.setup_lines if static else lines).append(f"{layout} = {make}")
    c = calls.address(gen, out, step.output in gen.static, lines)
    null = gen.const(calls.NULL, "null") if calls.FFI is not None else "None"
    bias_at = calls.value_address(gen, bias, lines) if bias is not None else null
    rows = 0 if bias is None else bias_rows(gen.plan.values[bias].type, out_t)
    if rows:  # a bias of the output's shape: each tile reads its elements before writing them
        calls.alias_safe(gen, step, {step.inputs.index(bias)})
    _, slots, per_slot = _stack_buffer(gen, step)
    apack = _rows_buffer(gen) if _strided_left(gen, step) else null
    calls.record(gen, STACK)
    work = items * m * n * k
    parallel = 1 if work >= PARALLEL_WORK else 2 if work >= WARM_WORK else 0
    args = [items, f"{layout}[0]", f"{layout}[1]", _work_buffer(gen), c, bias_at, apack, m * k,
            rows, m, k, n,
            *(f"{layout}[{i}]" for i in range(2, 14)), int(relu), slots, per_slot, SPLIT_WORK,
            parallel]  # fmt: skip
    return [*lines, f"{STACK.name}({', '.join(str(v) for v in args)})"]


def gemm_reason(node: Node) -> str | None:
    """None when this kernel computes the gemm `node` (its c, if read, added by the
    tiles), else why not."""
    attrs = node.attrs
    if attrs["trans_a"] or attrs["trans_b"]:
        return "operands transposed by flags"
    why = reason(node)
    if why is not None or len(node.inputs) == 2 or attrs["beta"] == 0.0:
        return why
    if attrs["beta"] != 1.0:
        return "beta other than 0 or 1"
    if bias_rows(node.inputs[2].type, node.type) is None:
        return "a c the tiles cannot add (a matrix of the result's shape, or a row)"
    return None


def tiles_add(gen: Generator, bias: str, out: TensorType) -> bool:
    """Whether the tiles of a product of type `out` can add plan value `bias`: a shape
    `bias_rows` takes, read in C order (not through a transpose that reorders it)."""
    return bias_rows(gen.plan.values[bias].type, out) is not None and not transposed_view(gen, bias)


def bias_rows(bias: TensorType, out: TensorType) -> int | None:
    """How the kernel adds a bias of type `bias` (in out's dtype) to its tiles of a product
    of type `out`: 0 for one value per column (shape (N,) or ones then N), N for a matrix
    of out's own shape (an accumulator: a weight gradient summed over a scan's steps);
    None where it cannot. The kernel adds it to the finished product, one rounding, as
    the elementwise add after it would."""
    if bias.dtype != out.dtype or bias.rank < 1 or bias.rank > out.rank:
        return None
    n = out.shape[-1]
    if bias.shape[-1] == n and all(d == 1 for d in bias.shape[:-1]):
        return 0
    if bias.shape == out.shape:
        return n  # type: ignore[return-value]
    return None
