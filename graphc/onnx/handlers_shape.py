"""ONNX handlers: constants, casts, and the ops that move data or compute shapes.

These also run on known values (numpy arrays) and on `Dims` (shapes with symbolic dims,
object arrays), so the shape computations exporters write fold at import.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.importer import (
    Context,
    Value,
    handler,
    ints,
    is_dims,
    known,
    needs_known,
    numpy_dtype,
    symbolic_hint,
)
from graphc.ops import arange, cast, concat, flip, reshape, take, transpose, where
from graphc.ops.arrays import tile
from graphc.ops.indexing import getitem
from graphc.ops.shape import broadcast_to


def _dims_or_array(values: list[Any]) -> np.ndarray:
    if any(isinstance(v, str) for v in values):
        return np.array(values, dtype=object)
    return np.array(values, dtype=np.int64)


@handler("Identity")
def _identity(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [inputs[0]]


@handler("Constant")
def _constant(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    if "value" in attrs:
        return [attrs["value"]]
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if key in attrs:
            return [np.array(attrs[key], dtype)]
    for key, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in attrs:
            return [np.array(list(attrs[key]), dtype)]
    raise ctx.error(
        f"Constant with attributes {sorted(attrs)} is not supported (no sparse or string values)"
    )


@handler("Cast")
def _cast(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, dtype = inputs[0], numpy_dtype(attrs["to"], ctx.where())
    if is_dims(x):
        if dtype.kind not in "iu":
            raise ctx.error("a shape with symbolic dims cannot be cast to a non-integer type")
        return [x]
    if attrs.get("saturate", 1) != 1 and dtype.kind == "f":
        raise ctx.error("Cast with saturate=0 concerns float8 types, which graphc does not have")
    return [cast(x, dtype)]


@handler("CastLike")
def _cast_like(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, like = inputs
    dtype = np.dtype(like.dtype)
    return [x if is_dims(x) else cast(x, dtype)]


@handler("Shape")
def _shape(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    dims = list(inputs[0].shape)
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return [_dims_or_array(dims[slice(start, end)])]


@handler("Size")
def _size(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    dims = list(inputs[0].shape)
    if any(is_symbol(d) for d in dims):
        raise ctx.error("Size of a value with symbolic dims: its element count is not known")
    return [np.array(int(np.prod(dims, dtype=np.int64)), np.int64)]


def _shape_argument(ctx: Context, x: Value, shape: list[Any], allowzero: bool) -> tuple:
    """ONNX Reshape's shape (0 copies the input's dim unless allowzero, -1 infers)."""
    dims = list(x.shape)
    result = []
    for k, d in enumerate(shape):
        if d == 0 and not allowzero:
            if k >= len(dims):
                raise ctx.error(f"shape entry {k} is 0 (copy) but the input has rank {len(dims)}")
            result.append(dims[k])
        else:
            result.append(d)
    return tuple(result)


@handler("Reshape", since=5)
def _reshape(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, shape = inputs[0], ints(ctx, inputs[1], "Reshape's shape")
    target = _shape_argument(ctx, x, shape, bool(attrs.get("allowzero", 0)))
    if is_dims(x):
        return [np.array(x, dtype=object).reshape([int(d) for d in target])]
    return [reshape(x, target)]


@handler("Flatten")
def _flatten(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    dims = list(x.shape)
    axis = attrs.get("axis", 1)
    axis = axis + len(dims) if axis < 0 else axis
    outer, inner = dims[:axis], dims[axis:]
    if any(is_symbol(d) for d in inner) or sum(is_symbol(d) for d in outer) > 1:
        raise ctx.error(
            f"Flatten of shape {tuple(dims)} at axis {axis} needs a product of symbolic dims"
        )
    sizes = [int(np.prod([d for d in inner], dtype=np.int64))]
    first = next((d for d in outer if is_symbol(d)), None)
    head = (
        first
        if first is not None and len(outer) == 1
        else -1
        if first is not None
        else int(np.prod(outer, dtype=np.int64))
    )
    return [reshape(x, (head, *sizes))]


def _axes(ctx: Context, inputs: list[Value], attrs: dict, position: int) -> list[int] | None:
    """Axes given as an attribute (old opsets) or as an input (new ones)."""
    if len(inputs) > position and inputs[position] is not None:
        return [int(a) for a in ints(ctx, inputs[position], "axes")]
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    return None


@handler("Squeeze")
def _squeeze(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    rank = len(x.shape)
    axes = _axes(ctx, inputs, attrs, 1)
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if d == 1]
    axes = sorted(a % rank for a in axes)
    shape = tuple(d for k, d in enumerate(x.shape) if k not in axes)
    if any(x.shape[a] != 1 for a in axes):
        raise ctx.error(f"Squeeze of axes {axes} of shape {tuple(x.shape)}: those dims are not 1")
    if is_dims(x):
        return [np.array(x, dtype=object).reshape(shape)]
    return [reshape(x, shape)]


@handler("Unsqueeze")
def _unsqueeze(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    axes = _axes(ctx, inputs, attrs, 1) or []
    rank = len(x.shape) + len(axes)
    shape = list(x.shape)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    if is_dims(x):
        return [np.array(x, dtype=object).reshape(shape)]
    return [reshape(x, tuple(shape))]


@handler("Concat", since=4)
def _concat(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    axis = attrs["axis"]
    parts = [v for v in inputs if v is not None]
    if all(known(v) for v in parts) and any(is_dims(v) for v in parts):
        return [np.concatenate([np.asarray(v, dtype=object) for v in parts], axis=axis)]
    return [concat([ctx.symbol(v) if not known(v) else v for v in parts], axis=axis)]


@handler("Gather")
def _gather(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, indices = inputs
    axis = attrs.get("axis", 0)
    if is_dims(x) and known(indices):  # dims picked: still dims if a symbol is among them
        picked = np.asarray(np.take(x, np.asarray(indices, np.int64), axis=axis), dtype=object)
        return [_dims_or_array(list(picked.reshape(-1))).reshape(picked.shape)]
    if known(indices):
        size = x.shape[axis % len(x.shape)]
        if not is_symbol(size):  # ONNX allows negative indices; graphc's take does not
            indices = np.where(np.asarray(indices) < 0, np.asarray(indices) + size, indices)
    return [take(x, indices, axis=axis)]


@handler("Transpose")
def _transpose(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    perm = attrs.get("perm")
    axes = tuple(perm) if perm is not None else tuple(reversed(range(len(x.shape))))
    if is_dims(x):
        return [np.transpose(x, axes)]
    if known(x) and np.asarray(x).ndim >= 2 and np.issubdtype(np.asarray(x).dtype, np.floating):
        # a transposed weight stays a transpose of the constant, as graphc's own graphs
        # keep it (fold.py): folded into a C-ordered copy, a product reading it rounded
        # otherwise than graphc's, so a graph read back was 1 ulp off its export
        with ctx.recording():
            return [transpose(x, axes)]
    return [transpose(x, axes)]


@handler("Slice", since=10)
def _slice(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    starts = ints(ctx, inputs[1], "Slice's starts")
    ends = ints(ctx, inputs[2], "Slice's ends")
    axes = (
        ints(ctx, inputs[3], "Slice's axes")
        if len(inputs) > 3 and inputs[3] is not None
        else list(range(len(starts)))
    )
    steps = (
        ints(ctx, inputs[4], "Slice's steps")
        if len(inputs) > 4 and inputs[4] is not None
        else [1] * len(starts)
    )
    return [_sliced(ctx, x, starts, ends, axes, steps)]


@handler("Slice")
def _slice_old(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    starts, ends = list(attrs["starts"]), list(attrs["ends"])
    axes = list(attrs.get("axes", range(len(starts))))
    return [_sliced(ctx, inputs[0], starts, ends, axes, [1] * len(starts))]


def _clamp(v: int) -> int | None:
    # ONNX writes "to the end" as INT64_MAX (or INT_MIN for reversed): Python slices clamp
    return None if abs(v) >= 2**62 else v


def _sliced(ctx: Context, x: Value, starts: list, ends: list, axes: list, steps: list) -> Value:
    index: list[Any] = [slice(None)] * len(x.shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise ctx.error("Slice with step 0")
        index[axis % len(x.shape)] = slice(_clamp(start), _clamp(end), step)
    if is_dims(x) or known(x):
        return np.asarray(x)[tuple(index)]
    # a whole symbolic dim reversed (graphc's flip is exported so) is a flip: getitem
    # slices a symbolic dim only forwards
    reversed_ = tuple(
        k
        for k, item in enumerate(index)
        if is_symbol(x.shape[k]) and (item.start, item.stop, item.step) in _REVERSED
    )
    if reversed_:
        x = flip(x, reversed_)
        index = [slice(None) if k in reversed_ else item for k, item in enumerate(index)]
    return getitem(x, tuple(index))


_REVERSED = {(None, None, -1), (-1, None, -1)}


@handler("Expand", since=8)
def _expand(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, shape = inputs[0], ints(ctx, inputs[1], "Expand's shape")
    dims = list(x.shape)
    rank = max(len(dims), len(shape))
    dims = [1] * (rank - len(dims)) + dims
    shape = [1] * (rank - len(shape)) + shape
    # ONNX's Expand broadcasts both ways (a 1 in the shape keeps the input's dim)
    target = tuple(d if s == 1 else s for d, s in zip(dims, shape))
    if tuple(dims) == target:
        return [reshape(x, target) if len(dims) != len(x.shape) else x]
    with ctx.recording():  # sized by symbolic dims: a node, not a folded array
        return [broadcast_to(x, target)]


@handler("Tile", since=6)
def _tile(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """x repeated along each dim (torch's Tensor.repeat): graphc's tile."""
    x, reps = inputs[0], ints(ctx, inputs[1], "Tile's repeats")
    if len(reps) != len(x.shape) or any(isinstance(r, str) or r < 0 for r in reps):
        raise ctx.error(
            f"Tile's repeats {reps} must be one count >= 0 per dim of its input (rank "
            f"{len(x.shape)}){symbolic_hint([inputs[1]])}"
        )
    if is_dims(x):  # a shape repeated: still a shape
        return [np.tile(x, reps)]
    return [tile(x, tuple(reps))]


@handler("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Blocks of channels moved into space (torch's PixelShuffle) or back: a reshape to
    (N, C, H, W) split into blocks, a transpose, a reshape (ONNX's own definition)."""
    x, bs = inputs[0], int(attrs["blocksize"])
    if len(x.shape) != 4 or bs < 1:
        raise ctx.error(f"needs an (N, C, H, W) input and a blocksize >= 1, got {x.shape}, {bs}")
    n, c, h, w = x.shape
    dims = (c, h, w)
    if any(is_symbol(d) for d in dims):
        raise ctx.error(f"moves blocks of the dims (C, H, W) = {dims}, which must be known"
                        f"{symbolic_hint([x])}")  # fmt: skip
    if ctx.node.op_type == "SpaceToDepth":
        if h % bs or w % bs:
            raise ctx.error(f"the blocksize {bs} does not divide H, W = {h}, {w}")
        blocks = reshape(x, (n, c, h // bs, bs, w // bs, bs))
        # DCR: the blocks' offsets before the channels; CRD (opset 28): after them
        crd = attrs.get("mode", "DCR") == "CRD"
        order = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        return [reshape(transpose(blocks, order), (n, c * bs * bs, h // bs, w // bs))]
    if c % (bs * bs):
        raise ctx.error(f"the blocksize {bs} squared does not divide C = {c}")
    depth = c // (bs * bs)
    if attrs.get("mode", "DCR") == "DCR":
        blocks, order = reshape(x, (n, bs, bs, depth, h, w)), (0, 3, 4, 1, 5, 2)
    else:  # CRD
        blocks, order = reshape(x, (n, depth, bs, bs, h, w)), (0, 1, 4, 2, 5, 3)
    return [reshape(transpose(blocks, order), (n, depth, h * bs, w * bs))]


@handler("ConstantOfShape", since=9)
def _constant_of_shape(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    shape = ints(ctx, inputs[0], "ConstantOfShape's shape")
    fill = attrs.get("value", np.zeros(1, np.float32)).reshape(-1)
    if fill.size != 1:
        raise ctx.error(f"ConstantOfShape's value holds {fill.size} elements, expected 1")
    value = np.full((), fill[0], fill.dtype)
    if any(is_symbol(d) for d in shape):  # a size known at run time: the fill broadcast
        with ctx.recording():
            return [broadcast_to(value, tuple(shape))]
    # a node past ctx.room() elements (run_node's fold_limit), else an array
    filled = broadcast_to(value, tuple(shape))
    return [np.array(filled) if known(filled) else filled]


@handler("Range", since=11)
def _range(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    counted = _symbolic_count(inputs)
    if counted is not None:  # 0, 1, ... up to a symbolic dim: graphc's arange of it
        dim, dtype = counted
        with ctx.recording():
            return [arange(dim, dtype=dtype)]
    for v in inputs:
        if not known(v) or is_dims(v):
            raise needs_known(ctx, v, "Range's start, limit and delta")
    start, limit, delta = (np.asarray(v) for v in inputs)
    if any(v.size != 1 for v in (start, limit, delta)):
        raise ctx.error("Range's start, limit and delta must be scalars")
    dtype = np.result_type(start, limit, delta)
    first, last, step = (v.reshape(()).item() for v in (start, limit, delta))
    if step == 0 or not all(math.isfinite(v) for v in (first, last, step)):
        raise ctx.error(f"Range({first}, {last}, {step}) has no finite length")
    ctx.check_size(max(0, math.ceil((last - first) / step)), "Range's result")
    return [np.arange(*(v.reshape(()) for v in (start, limit, delta)), dtype=dtype)]


def _symbolic_count(inputs: list[Value]) -> tuple[str, np.dtype] | None:
    """(dim, dtype) when Range counts 0, 1, ... up to one symbolic dim (what export writes
    for an arange over a symbolic length, read from Shape): start 0, delta 1, the limit
    a dim. Other starts and steps over a symbolic limit have no length graphc's symbolic
    dims (names, not expressions) can state: refused as unknown below."""
    start, limit, delta = inputs
    if not (known(start) and known(delta) and is_dims(limit)) or is_dims(start) or is_dims(delta):
        return None
    dims = np.asarray(limit).reshape(-1)
    if dims.size != 1 or not is_symbol(dims[0]):
        return None
    first, step = np.asarray(start), np.asarray(delta)
    if first.size != 1 or step.size != 1 or first.item() != 0 or step.item() != 1:
        return None
    return dims[0], np.result_type(first, step)


@handler("Where", since=9)
def _where(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [where(*inputs)]


__all__: list[str] = []
