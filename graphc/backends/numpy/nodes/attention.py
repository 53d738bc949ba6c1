"""`attention`: softmax(mask(q @ kt * scale)) @ v as one node, block by block.

Made by `fuse_attention` (graphc.backends.numpy.fusion.attention) from the chain that
`F.scaled_dot_product_attention` and `nn.MultiheadAttention` trace to: matmul(q, kt), a
scale (mul), mask steps, softmax over the last axis, dropout's mul(w, c) and
where(keep, w, 0), and matmul(w, v). The scale and the dropout are optional (attrs
`scale`, `dropout`); `mask` is a tuple of steps, each "where" (where(mask, s, fill)),
"where_not" (where(mask, fill, s), nn.MultiheadAttention's) or "add" (add(s, mask)).
Inputs, in order: q, kt, v, the scale operand, each mask step's operands (mask and fill,
or the added mask), then dropout's factor, keep mask and zero.

The kernel never holds the (..., Lq, Lk) scores whole. It takes the matrices of the
leading (batch, head) axes a block at a time, at most `BLOCK_BYTES` of scores: the
scores of a block go into one scratch array, then the member ops' own kernels run on
it in place in the unfused order (mul, where or add, softmax, mul, where), and the
block's product with v goes straight into the output. The blocks are whole (Lq, Lk)
matrices, never rows: numpy's batched matmul calls BLAS once per matrix, so a block
of matrices gets the same bits as the whole batch, but OpenBLAS rounds a block of
rows of one product differently (other kernels for other row counts: OpenBLAS
0.3.31's Haswell kernels, float32 and float64, blocks of 1 to 100 rows). Each row's
softmax and every elementwise step give the same bits on a block as on the whole. The
scale and an added mask are applied as mul(s, c) and add(s, mask) whatever side the
graph had them on: IEEE products and sums are commutative. So the node computes its members' results bit for
bit; a (Lq, Lk) matrix bigger than the budget is one block on its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.ops.defop import VARIADIC, defop

# mask steps and their operands: where(mask, s, fill), where(mask, fill, s), add(s, mask)
MASK_OPERANDS = {"where": 2, "where_not": 2, "add": 1}
BLOCK_BYTES = 1 << 19  # scores per block: 512 KiB, about one core's L2


def operand_count(scale: bool, mask: tuple, dropout: bool) -> int:
    """How many inputs a node with these attrs takes."""
    return 3 + bool(scale) + sum(MASK_OPERANDS[m] for m in mask) + 3 * bool(dropout)


def _canon(*types: TensorType, scale: Any, mask: Any, dropout: Any) -> dict:
    steps = (mask,) if isinstance(mask, str) else mask
    if not isinstance(steps, (tuple, list)) or any(m not in MASK_OPERANDS for m in steps):
        raise GraphcError(
            f"attention: mask must be a tuple of steps from {tuple(MASK_OPERANDS)}, got {mask!r}"
        )
    mask = tuple(steps)
    wanted = operand_count(bool(scale), mask, bool(dropout))
    if len(types) != wanted:
        raise GraphcError(
            f"attention: scale={bool(scale)}, mask={mask!r}, dropout={bool(dropout)} need "
            f"{wanted} inputs, got {len(types)}"
        )
    return {"scale": bool(scale), "mask": mask, "dropout": bool(dropout)}


def steps(scale: bool, mask: tuple, dropout: bool) -> list[tuple[str, tuple[int, ...], dict]]:
    """The member ops as (op, indices of its operands among the node's inputs and the
    earlier members' results, attrs): what the type rule checks the node by."""
    result: list[tuple[str, tuple[int, ...], dict]] = [("matmul", (0, 1), {})]
    n_inputs = operand_count(scale, mask, dropout)
    last, arg = n_inputs, 3  # index of the latest value; of the next operand input
    if scale:
        result.append(("mul", (last, arg), {}))
        last, arg = last + 1, arg + 1
    for step in mask:
        if step == "where":
            result.append(("where", (arg, last, arg + 1), {}))
        elif step == "where_not":
            result.append(("where", (arg, arg + 1, last), {}))
        else:
            result.append(("add", (last, arg), {}))
        last, arg = last + 1, arg + MASK_OPERANDS[step]
    result.append(("softmax", (last,), {"axis": -1}))
    last += 1
    if dropout:
        result.append(("mul", (last, arg), {}))
        result.append(("where", (arg + 1, last + 1, arg + 2), {}))
        last += 2
    result.append(("matmul", (last, 2), {}))
    return result


def _infer(*types: TensorType, scale: bool, mask: Any, dropout: bool) -> TensorType:
    mask = _canon(*types, scale=scale, mask=mask, dropout=dropout)["mask"]
    q, kt, v = types[:3]
    if q.rank < 2 or kt.rank < 2 or v.rank < 2:
        raise ShapeError(f"attention: q, kt and v need two dims or more, got {q}, {kt}, {v}")
    values = list(types)
    member_steps = steps(scale, mask, dropout)
    for op, operands, attrs in member_steps[:-1]:
        result = get_op(op).infer(*(values[i] for i in operands), **attrs)
        if op != "matmul" and result != values[-1]:
            raise ShapeError(f"attention: {op} would change the scores' type {values[-1]}")
        values.append(result)
    scores = values[len(types)]
    if scores.dtype.kind != "f":
        raise ShapeError(f"attention: the scores must be floats, got {scores}")
    result = get_op("matmul").infer(values[-1], v)
    if result.shape[:-2] != scores.shape[:-2]:
        raise ShapeError(
            f"attention: v {v} would widen the batch axes of the scores {scores} (the "
            "kernel takes the product's blocks along the scores' batch axes)"
        )
    return result


def blocks(batch: tuple[int, ...], matrix_bytes: int) -> Iterator[tuple]:
    """Index tuples over the leading `batch` axes, each picking whole (Lq, Lk) matrices
    whose scores take at most BLOCK_BYTES (or one matrix), in order."""
    depth = len(batch)  # the axes from `depth` on are taken whole
    while depth > 0 and math.prod(batch[depth - 1 :]) * matrix_bytes <= BLOCK_BYTES:
        depth -= 1
    if depth == 0:
        yield ()
        return
    inner = math.prod(batch[depth:]) * max(matrix_bytes, 1)
    count = max(1, BLOCK_BYTES // inner)  # of the axis depth - 1, per block
    for index in np.ndindex(*batch[: depth - 1]):
        for start in range(0, batch[depth - 1], count):
            yield (*index, slice(start, start + count))


def _along(x: Any, batch: tuple[int, ...]) -> Any:
    """`x` as a view with the scores' batch axes (elementwise operands of rank <= 2
    broadcast in every block as they are)."""
    if np.ndim(x) <= 2:
        return x
    return np.broadcast_to(x, batch + np.shape(x)[-2:])


@functools.cache
def _kernels() -> tuple:
    """The kernels of matmul, mul, where, add and softmax (looked up once)."""
    return tuple(get_op(op).kernel for op in ("matmul", "mul", "where", "add", "softmax"))


def _kernel(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    *operands: np.ndarray,
    out: np.ndarray | None = None,
    scale: bool = False,
    mask: tuple = (),
    dropout: bool = False,
    softmax_rows: Callable[[np.ndarray], Any] | None = None,
) -> np.ndarray:
    """The node's numpy kernel; a backend may pass `softmax_rows`, which computes the
    softmax of every row of a C-contiguous block of scores in place (the native
    backend's row kernel: then this node's bits are those of its unfused ops there)."""
    matmul, mul, where, add, softmax = _kernels()
    rows, cols = q.shape[-2], kt.shape[-1]
    batch = np.broadcast_shapes(q.shape[:-2], kt.shape[:-2])
    scores_dtype = np.result_type(q.dtype, kt.dtype)
    if out is None:
        shape = batch + (rows, v.shape[-1])
        out = np.empty(shape, np.result_type(scores_dtype, v.dtype))
    q, kt, v = (x if x.shape[:-2] == batch else np.broadcast_to(x, batch + x.shape[-2:])
                for x in (q, kt, v))  # fmt: skip
    extra = [_along(x, batch) for x in operands]
    scratch: np.ndarray | None = None  # one block of scores, reused block after block
    for index in blocks(batch, rows * cols * scores_dtype.itemsize):
        q_block = q[index]
        shape = q_block.shape[:-2] + (rows, cols)
        if scratch is None:  # the first block is the largest
            scratch = np.empty(math.prod(shape), scores_dtype)
        s = matmul(q_block, kt[index], out=scratch[: math.prod(shape)].reshape(shape))
        arg = 0
        if scale:
            mul(s, _block(extra[0], index), out=s)
            arg = 1
        for step in mask:
            if step == "where":
                where(_block(extra[arg], index), s, _block(extra[arg + 1], index), out=s)
            elif step == "where_not":
                where(_block(extra[arg], index), _block(extra[arg + 1], index), s, out=s)
            else:
                add(s, _block(extra[arg], index), out=s)
            arg += MASK_OPERANDS[step]
        if softmax_rows is None:
            softmax(s, out=s, axis=-1)
        else:
            softmax_rows(s)
        if dropout:
            mul(s, _block(extra[arg], index), out=s)
            where(_block(extra[arg + 1], index), s, _block(extra[arg + 2], index), out=s)
        matmul(s, v[index], out=out[index])
    return out


def _block(x: Any, index: tuple) -> Any:
    return x[index] if np.ndim(x) > 2 else x


def _cost(out: TensorType, *inputs: TensorType, scale: bool, mask: Any, dropout: bool) -> int:
    q, kt, v = inputs[:3]
    scores = get_op("matmul").infer(q, kt)
    elementwise = (scores.size or 0) * (bool(scale) + len(mask) + 2 * bool(dropout))
    softmax = get_op("softmax").flops(scores, scores, axis=-1)
    products = get_op("matmul").flops(scores, q, kt) + get_op("matmul").flops(out, scores, v)
    return products + softmax + elementwise


def _scratch(out: TensorType, *inputs: TensorType, mask: Any, dropout: bool, **attrs: Any) -> int:
    """One block of scores, np.where's block-sized result (or the where kernel's block
    of bit masks), and softmax's per-row max or sum."""
    q, kt = inputs[:2]
    dims = (*q.shape, *kt.shape)
    if not all(isinstance(d, int) for d in dims):
        return 0
    rows, cols = q.shape[-2], kt.shape[-1]
    batch = np.broadcast_shapes(q.shape[:-2], kt.shape[:-2])
    itemsize = np.result_type(q.dtype, kt.dtype).itemsize
    first = next(blocks(batch, rows * cols * itemsize), None)  # the first is the largest
    if first is None:
        return 0
    picked = [
        len(range(*k.indices(n))) if isinstance(k, slice) else 1 for k, n in zip(first, batch)
    ]
    largest = math.prod(picked) * math.prod(batch[len(first) :])
    block = largest * rows * cols * itemsize
    where_result = block if dropout or any(m != "add" for m in mask) else 0
    return block + where_result + largest * rows * itemsize


attention = defop(
    "attention",
    inputs=VARIADIC,
    infer=_infer,
    kernel=_kernel,
    attrs={"scale": False, "mask": (), "dropout": False},
    canonicalize=_canon,
    cost=_cost,
    scratch=_scratch,
    props=("fusion",),
    doc="softmax(mask(q @ kt * scale)) @ v as one node, in blocks of the batch axes; made "
    "by gc.backends.numpy.fusion.fuse_attention.",
)
