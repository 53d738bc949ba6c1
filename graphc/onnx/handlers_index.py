"""ONNX handlers: OneHot, GatherND, ScatterND (and the reductions mul, max and min
ScatterElements shares) and ReduceProd."""

from __future__ import annotations

import math

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.handlers_math import identity_of, reduction_handler
from graphc.onnx.importer import (
    Context,
    Value,
    handler,
    is_dims,
    known,
    needs_known,
    symbolic_hint,
)
from graphc.ops import elementwise as E
from graphc.ops import reduce as R
from graphc.ops import selection
from graphc.ops.indexing import getitem, scatter_add, take
from graphc.ops.reduce import count
from graphc.ops.shape import concat, reshape


@handler("OneHot", since=9)
def _one_hot(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """ONNX's OneHot: a negative index counts from the end, one out of range gives a row
    of off values (graphc's one_hot refuses both, as torch does, so it is not used)."""
    indices, depth, values = inputs
    if not known(depth):
        raise needs_known(ctx, depth, "OneHot's depth")
    depth = int(np.asarray(depth).reshape(-1)[0])
    ctx.check_size(depth, "OneHot's depth")
    rank = len(indices.shape) + 1
    axis = attrs.get("axis", -1) % rank
    shape = [1] * rank
    shape[axis] = depth
    classes = np.arange(depth, dtype=np.int64).reshape(shape)
    idx = indices if np.dtype(indices.dtype).kind in "iu" else selection.cast(indices, np.int64)
    idx = selection.where(selection.lt(idx, 0), E.add(idx, np.asarray(depth, idx.dtype)), idx)
    idx = reshape(idx, (*indices.shape[:axis], 1, *indices.shape[axis:]))
    off, on = (getitem(values, k) for k in (0, 1))
    return [selection.where(selection.eq(idx, classes), on, off)]


@handler("GatherND", since=11)
def _gather_nd(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Slices of data at index tuples: indices (..., m) pick data[i1, ..., im] (after
    `batch_dims` leading dims both share). Each tuple becomes one flat position in data
    reshaped to (positions, rest...), the sum of a lookup per component in a table of
    its strides, so a component out of range (past -d..d-1) is take's error, as ONNX's."""
    data, indices = inputs
    b = int(attrs.get("batch_dims", 0))
    dshape, ishape = list(data.shape), list(indices.shape)
    m = ishape[-1] if ishape else None
    if not ishape or is_symbol(m) or not 0 <= b < len(ishape) or b + m > len(dshape):
        raise ctx.error(f"indices {ishape} (batch_dims {b}) do not index data of shape {dshape}")
    picked = dshape[: b + m]
    if any(is_symbol(d) for d in picked):
        raise ctx.error(
            f"the dims {picked} indexed must be known when the model is imported"
            f"{symbolic_hint([data])}"
        )
    strides = [math.prod(picked[k + 1 :]) for k in range(b, b + m)]
    flat = None
    for k, stride in enumerate(strides):
        table = np.arange(picked[b + k], dtype=np.int64) * stride
        term = take(table, getitem(indices, (..., k)), axis=0)
        flat = term if flat is None else E.add(flat, term)
    if flat is None:  # m = 0: every index tuple picks all of data past the batch dims
        if any(is_symbol(d) for d in ishape[:-1]):
            raise ctx.error(f"empty index tuples over the symbolic dims of {ishape}")
        flat = np.zeros(ishape[:-1], np.int64)
    if b:  # each batch example's positions start past the examples before it
        inner = math.prod(picked[b:])
        offsets = np.arange(math.prod(picked[:b]), dtype=np.int64) * inner
        flat = E.add(flat, offsets.reshape(picked[:b] + [1] * (len(ishape) - 1 - b)))
    rows = reshape(data, (math.prod(picked), *dshape[b + m :]))
    return [take(rows, flat, axis=0)]


@handler("ScatterND", since=11)
def _scatter_nd(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """data with updates written (or added) at the index tuples of `indices` (..., k):
    the first k dims of data are flattened to one and the tuples to flat positions, so
    it is graphc's scatter_add along axis 0. Reduction 'none' needs distinct indices,
    as ONNX says; it writes where a position is hit and keeps data elsewhere. Reductions
    mul, max and min are scatter_combine's."""
    data, indices, updates = inputs
    reduction = attrs.get("reduction", "none")
    if reduction not in ("none", "add", *COMBINE):
        raise ctx.error(f"ScatterND with reduction '{reduction}' is not supported")
    k = indices.shape[-1]
    if is_symbol(k):
        raise ctx.error("ScatterND's index tuples must have a known length")
    lead, rest = list(data.shape[:k]), list(data.shape[k:])
    if any(is_symbol(d) for d in lead[1:]):
        raise ctx.error("ScatterND into a symbolic dim other than the first is not supported")
    count = indices.shape[:-1]
    positions = selection.cast(indices, np.int64)
    flat = None
    for j in range(k):
        # each coordinate checked against its dim, negative ones counted from the end
        # (an out-of-range coordinate must not land in another row of the flattening)
        at = reshape(_column(positions, j, k), tuple(count))
        dim = lead[j]
        if not is_symbol(dim):
            at = take(np.arange(dim, dtype=np.int64), at, axis=0)
        stride = int(np.prod(lead[j + 1 :], dtype=np.int64))
        term = E.mul(at, np.int64(stride)) if stride != 1 else at
        flat = term if flat is None else E.add(flat, term)
    size = lead[0] if k == 1 else int(np.prod(lead, dtype=np.int64))
    rows = reshape(updates, (*count, *rest))
    if reduction == "add":
        added = scatter_add(rows, flat, shape=(size, *rest), axis=0)
        return [E.add(data, reshape(added, tuple(data.shape)))]
    if reduction in COMBINE:
        if any(is_symbol(d) for d in count):
            raise ctx.error(f"ScatterND with reduction '{reduction}' of a symbolic number of rows")
        flat_rows = reshape(rows, (int(np.prod(count, dtype=np.int64)), *rest))
        at = reshape(flat, (flat_rows.shape[0],))
        combined = scatter_combine(ctx, reshape(data, (size, *rest)), at, flat_rows, reduction)
        return [reshape(combined, tuple(data.shape))]
    # 'none': which update lands where (1 + its number, 0 for none), then the updates
    # gathered by it, so values are moved, never computed (-0.0 and nan payloads kept)
    if any(is_symbol(d) for d in count):
        raise ctx.error("ScatterND (reduction 'none') with a symbolic number of updates")
    n = int(np.prod(count, dtype=np.int64))
    ctx.check_size(math.prod(count), "ScatterND's numbering of its updates")
    ctx.check_size(math.prod(rest), "ScatterND's row of zeros")
    numbers = np.arange(1, n + 1, dtype=np.int64).reshape(tuple(count))
    source = scatter_add(numbers, flat, shape=(size,), axis=0)
    flat_rows = reshape(rows, (n, *rest))
    padded = concat([np.zeros((1, *rest), updates.dtype), flat_rows], axis=0)
    moved = reshape(take(padded, source, axis=0), tuple(data.shape))
    hit = reshape(selection.gt(source, 0), (*lead, *[1] * len(rest)))
    return [selection.where(hit, moved, data)]


COMBINE = {"mul": R.prod, "max": R.max, "min": R.min}
_LARGEST_COMPARISON = 2**24  # elements of the (positions, updates, ...) where below


def scatter_combine(ctx: Context, data: Value, at: Value, rows: Value, reduction: str) -> Value:
    """data (P, ...) with each of the n `rows` (n, ...) combined into its row at[j] by
    reduction mul, max or min, all the updates of a repeated position included. Every
    position is compared with every update: a (P, n, ...) where holding the update where
    it lands and the reduction's identity elsewhere, reduced over the updates and then
    combined with data once. An index outside [-P, P) is an error at run time, as for
    reduction add. max and min are exact; mul multiplies a repeated position's updates
    together before data, so there it may differ from ONNX's one-by-one order in the
    last bits. Quadratic: larger cases are refused by name."""
    op = ctx.node.op_type
    positions, n, rest = data.shape[0], rows.shape[0], tuple(rows.shape[1:])
    if any(is_symbol(d) for d in (positions, n, *rest)):
        raise ctx.error(f"{op} with reduction '{reduction}' over symbolic dims is not supported")
    if n == 0:
        return data
    size = positions * n * int(np.prod(rest, dtype=np.int64))
    if size > _LARGEST_COMPARISON:
        raise ctx.error(
            f"{op} with reduction '{reduction}' of {n} updates into {positions} positions is "
            f"not supported (graphc compares every update with every position: {size} pairs)"
        )
    dtype = np.dtype(data.dtype)
    rows_of = np.arange(positions, dtype=np.int64)
    at = take(rows_of, at, axis=0)  # negative indices counted from the end; others raise
    hit = selection.eq(reshape(at, (1, n)), rows_of.reshape(positions, 1))
    hit = reshape(hit, (positions, n, *[1] * len(rest)))
    if reduction == "mul":
        identity = np.ones((), dtype)
    else:
        identity = np.asarray(identity_of(dtype, "low" if reduction == "max" else "high"), dtype)
    spread = selection.where(hit, reshape(rows, (1, n, *rest)), identity)
    combined = COMBINE[reduction](spread, axis=1)
    if reduction == "mul":
        result = E.mul(data, combined)
    else:
        result = E.maximum(data, combined) if reduction == "max" else E.minimum(data, combined)
    return selection.cast(result, dtype) if np.dtype(result.dtype) != dtype else result


def _column(positions: Value, j: int, k: int) -> Value:
    return getitem(positions, (Ellipsis, slice(j, j + 1)))


# ReduceProd of data, like the other reductions: axes an attribute before opset 18
_PROD_READERS = {as_input: reduction_handler(R.prod, 18)(as_input) for as_input in (False, True)}


@handler("ReduceProd")
def _reduce_prod(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """graphc's prod, in the input's type; the size of a symbolic shape (exporters write
    ReduceProd on shapes) is a `count` node."""
    x = inputs[0]
    if is_dims(x) and len(inputs) == 1 and "axes" not in attrs:  # a symbolic shape's size
        dims = tuple(d if isinstance(d, int) else str(d) for d in x)
        with ctx.recording():
            size = count(shape=dims, dtype=np.int64)
        return [reshape(size, (1,)) if attrs.get("keepdims", 1) else size]
    if is_dims(x):
        raise ctx.error("ReduceProd of a symbolic shape along axes is not supported")
    return _PROD_READERS[ctx.opset >= 18](ctx, inputs, attrs)


__all__: list[str] = []
