"""ONNX handlers: array ops (CumSum, Trilu, GatherElements, ScatterElements, TopK, Pad,
Split, Einsum), with graphc's ops."""

from __future__ import annotations

import math

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.handlers_index import COMBINE, scatter_combine
from graphc.onnx.importer import Context, Value, handler, known, needs_known
from graphc.ops import elementwise as E
from graphc.ops import selection
from graphc.ops.along_axis import scatter_add_along_axis, take_along_axis
from graphc.ops.arrays import flip, tril, triu
from graphc.ops.einsum import einsum
from graphc.ops.indexing import getitem, take
from graphc.ops.padding import pad
from graphc.ops.sequences import cumsum
from graphc.ops.shape import concat, reshape
from graphc.ops.sorting import sort, topk

# -- arrays -----------------------------------------------------------------------------


@handler("CumSum", since=11)
def _cumsum(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, axis = inputs
    if not known(axis):
        raise needs_known(ctx, axis, "CumSum's axis")
    axis = int(np.asarray(axis).reshape(()))
    if attrs.get("reverse", 0):
        x = flip(x, axis=(axis,))
    y = cumsum(x, axis=axis)
    if attrs.get("exclusive", 0):  # each position's sum before it: shifted by one
        rank = len(x.shape)
        widths = [(1, 0) if k == axis % rank else (0, 0) for k in range(rank)]
        index = tuple(slice(0, -1) if k == axis % rank else slice(None) for k in range(rank))
        y = pad(y, widths)[index] if x.shape[axis] != 0 else y
    if attrs.get("reverse", 0):
        y = flip(y, axis=(axis,))
    return [selection.cast(y, x.dtype) if y.dtype != x.dtype else y]  # ONNX keeps the type


@handler("Trilu", since=14)
def _trilu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    k = inputs[1] if len(inputs) > 1 and inputs[1] is not None else np.asarray(0, np.int64)
    if not known(k):
        raise needs_known(ctx, k, "Trilu's k")
    k = int(np.asarray(k).reshape(()))
    return [triu(x, k) if attrs.get("upper", 1) else tril(x, k)]


@handler("GatherElements", since=11)
def _gather_elements(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [take_along_axis(inputs[0], inputs[1], axis=attrs.get("axis", 0))]


@handler("ScatterElements", since=11)
def _scatter_elements(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    data, indices, updates = inputs
    reduction = attrs.get("reduction", "none")
    axis = attrs.get("axis", 0) % len(data.shape)
    if reduction == "add":
        added = scatter_add_along_axis(updates, indices, tuple(data.shape), axis=axis)
        return [E.add(data, added)]
    if reduction in COMBINE:
        return [_scatter_elements_combine(ctx, data, indices, updates, axis, reduction)]
    if reduction != "none":
        raise ctx.error(f"ScatterElements with reduction '{reduction}' is not supported")
    # which update lands where (1 + its flat number, 0 for none), then moved by gathering
    count = tuple(updates.shape)
    if any(is_symbol(d) for d in count):
        raise ctx.error("ScatterElements with a symbolic number of updates is not supported")
    n = int(np.prod(count, dtype=np.int64))
    ctx.check_size(math.prod(count), "ScatterElements' numbering of its updates")
    numbers = np.arange(1, n + 1, dtype=np.int64).reshape(count)
    source = scatter_add_along_axis(numbers, indices, tuple(data.shape), axis=axis)
    padded = concat([np.zeros((1,), np.dtype(updates.dtype)), reshape(updates, (n,))], axis=0)
    moved = take(padded, source, axis=0)
    return [selection.where(selection.gt(source, 0), moved, data)]


def _scatter_elements_combine(
    ctx: Context, data: Value, indices: Value, updates: Value, axis: int, reduction: str
) -> Value:
    """Each update's flat position in data (its own index, with indices' value along
    axis), then scatter_combine over the flattened data."""
    shape, count = tuple(data.shape), tuple(indices.shape)
    if any(is_symbol(d) for d in (*shape, *count)):
        raise ctx.error(f"ScatterElements with reduction '{reduction}' over symbolic dims")
    strides = [int(np.prod(shape[k + 1 :], dtype=np.int64)) for k in range(len(shape))]
    ctx.check_size(math.prod(count), "ScatterElements' update positions")
    base = np.zeros(count, np.int64)  # the flat position of each update, but along axis
    for k, n in enumerate(count):
        if k != axis:
            place = [1] * len(count)
            place[k] = n
            base = base + np.arange(n, dtype=np.int64).reshape(place) * strides[k]
    at = selection.cast(indices, np.int64)
    at = selection.where(
        selection.lt(at, 0), E.add(at, np.int64(shape[axis])), at
    )  # negative: from the end
    flat = E.add(base, E.mul(at, np.int64(strides[axis])))
    size, n = int(np.prod(shape, dtype=np.int64)), int(np.prod(count, dtype=np.int64))
    rows = reshape(updates, (n,))
    combined = scatter_combine(ctx, reshape(data, (size,)), reshape(flat, (n,)), rows, reduction)
    return reshape(combined, shape)


@handler("TopK", since=10)
def _topk(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, k = inputs
    if not known(k):
        raise needs_known(ctx, k, "TopK's k")
    k = np.asarray(k).reshape(-1)[0]
    axis, largest = attrs.get("axis", -1), bool(attrs.get("largest", 1))
    if is_symbol(k):  # all of a symbolic dim (graphc's argsort is exported so): a sort
        if k != x.shape[axis]:
            raise ctx.error(f"TopK with the symbolic k {k!r} of another dim than its axis")
        return list(sort(x, axis=axis, descending=largest))
    values, indices = topk(
        x, int(k), axis=axis, largest=largest, sorted=bool(attrs.get("sorted", 1))
    )
    return [values, indices]


@handler("Pad", since=2)
def _pad_attributes(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Pad before opset 11: pads and the constant value as attributes."""
    pads = np.asarray(attrs["pads"], np.int64)
    value = np.asarray(attrs.get("value", 0.0), np.dtype(inputs[0].dtype))
    return _pad(ctx, [inputs[0], pads, value], attrs)


@handler("Pad", since=11)
def _pad(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, pads = inputs[0], inputs[1]
    value = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
    if not known(pads):
        raise needs_known(ctx, pads, "Pad's pads")
    rank = len(x.shape)
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    if axes is None:
        axes_list = list(range(rank))
    elif known(axes):
        axes_list = [int(a) % rank for a in np.asarray(axes).reshape(-1)]
    else:
        raise needs_known(ctx, axes, "Pad's axes")
    half = len(axes_list)
    widths = [[0, 0] for _ in range(rank)]
    for j, a in enumerate(axes_list):
        widths[a] = [pads[j], pads[half + j]]
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.error(f"Pad mode '{mode}' is not supported")
    if value is not None and not known(value):
        raise needs_known(ctx, value, "Pad's constant_value")
    # negative pads crop
    crop = tuple(
        slice(max(-b, 0), (x.shape[k] - max(-e, 0)) if max(-e, 0) else None)
        for k, (b, e) in enumerate(widths)
    )
    if any(b < 0 or e < 0 for b, e in widths):
        x = getitem(x, crop)
    widths = tuple((max(b, 0), max(e, 0)) for b, e in widths)
    fill = 0 if value is None else np.asarray(value).reshape(()).item()
    if mode == "constant":
        return [pad(x, widths, "constant", constant_values=fill)]
    return [pad(x, widths, mode)]


@handler("Einsum", since=12)
def _einsum(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """graphc's einsum (numpy's rules, as ONNX's: implicit output labels sorted); a
    label repeated within one operand (a diagonal) is refused by name."""
    return [einsum(attrs["equation"], *inputs)]


__all__: list[str] = []


@handler("Split")
def _split(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Pieces along axis: sizes from the `split` input (opset 13 on) or attribute, else
    num_outputs pieces of ceil(size / n) (the last smaller, opset 18), else equal ones."""
    x = inputs[0]
    rank = len(x.shape)
    axis = attrs.get("axis", 0) % rank
    size = x.shape[axis]
    pieces = len(ctx.node.output)
    sizes = attrs.get("split")
    if len(inputs) > 1 and inputs[1] is not None:
        if not known(inputs[1]):
            raise needs_known(ctx, inputs[1], "Split's split")
        sizes = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    if sizes is None:
        if is_symbol(size):
            raise ctx.error(f"Split of the symbolic dim {size!r} into equal parts")
        step = -(-size // pieces) if "num_outputs" in attrs else size // pieces
        sizes = [min(step, size - k * step) for k in range(pieces)]
    if len(sizes) != pieces or (not is_symbol(size) and sum(sizes) != size):
        raise ctx.error(f"Split sizes {list(sizes)} do not make {pieces} pieces of {size}")
    outs, start = [], 0
    for n in sizes:
        index = tuple(slice(start, start + n) if k == axis else slice(None) for k in range(rank))
        outs.append(getitem(x, index))
        start += n
    return outs
