"""Shape ops: reshape, transpose, broadcast_to, sum_to, concat, slicing, take.

Shape attributes may hold symbolic dims ("B"); the runtime binds them per call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.types import (
    Dim,
    Shape,
    TensorType,
    as_dim,
    format_shape,
    is_symbol,
    normalize_axis,
)
from graphc.ops import elementwise as E
from graphc.ops.defop import VARIADIC, defop, into

# -- reshape ---------------------------------------------------------------------


def _known_size(shape: Sequence[Dim]) -> tuple[int, list[str]]:
    size, symbols = 1, []
    for d in shape:
        if isinstance(d, str):
            symbols.append(d)
        else:
            size *= d
    return size, symbols


def _reshape_canon(x: TensorType, shape: Any) -> dict:
    """Resolve -1 (also against symbolic dims when the symbols cancel out)."""
    dims = (shape,) if isinstance(shape, (int, str, np.integer)) else tuple(shape)
    if sum(1 for d in dims if not isinstance(d, str) and d == -1) > 1:
        raise ShapeError(f"reshape: only one -1 allowed in {dims}")
    if all(isinstance(d, str) or d != -1 for d in dims):
        return {"shape": _as_shape(dims, "reshape")}
    x_size, x_syms = _known_size(x.shape)
    rest = [d for d in dims if isinstance(d, str) or d != -1]
    rest_size, rest_syms = _known_size(rest)
    leftover = list(x_syms)
    for s in rest_syms:
        if s not in leftover:
            raise ShapeError(
                f"reshape: cannot infer -1 of {dims} from shape {format_shape(x.shape)}"
            )
        leftover.remove(s)
    if (
        rest_size == 0
        or x_size % rest_size
        or (leftover and x_size // rest_size != 1)
        or len(leftover) > 1
    ):
        raise ShapeError(f"reshape: cannot infer -1 of {dims} from shape {format_shape(x.shape)}")
    missing: Dim = leftover[0] if leftover else x_size // rest_size
    return {"shape": _as_shape([missing if d == -1 else d for d in dims], "reshape")}


def _reshape_infer(x: TensorType, shape: Shape) -> TensorType:
    old_size, old_syms = _known_size(x.shape)
    new_size, new_syms = _known_size(shape)
    if old_size != new_size or sorted(old_syms) != sorted(new_syms):
        raise ShapeError(
            f"reshape: cannot reshape {format_shape(x.shape)} into {format_shape(shape)}"
        )
    return x.with_shape(shape)


# reshape moves no values: its gradient is the cotangent reshaped back
reshape = defop(
    "reshape",
    infer=_reshape_infer,
    kernel=lambda x, out=None, shape=(): into(out, np.reshape(x, shape)),
    attrs={"shape": ()},
    canonicalize=_reshape_canon,
    vjp=lambda ct, out, x, needs, shape: (reshape(ct, x.shape),),
    shape_attrs=("shape",),
    doc="x with a new shape of the same size; one dim may be -1. gc.reshape(x, (2, -1))",
)

# -- transpose ---------------------------------------------------------------------


def _transpose_canon(x: TensorType, axes: Any) -> dict:
    if axes is None:
        return {"axes": tuple(reversed(range(x.rank)))}
    axes = tuple(normalize_axis(int(a), x.rank, "transpose") for a in axes)
    if sorted(axes) != list(range(x.rank)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of range({x.rank})")
    return {"axes": axes}


# transpose permutes values: its gradient applies the inverse permutation
transpose = defop(
    "transpose",
    infer=lambda x, axes: x.with_shape(x.shape[a] for a in axes),
    kernel=lambda x, out=None, axes=None: into(out, np.transpose(x, axes)),
    attrs={"axes": None},
    canonicalize=_transpose_canon,
    vjp=lambda ct, out, x, needs, axes: (transpose(ct, tuple(np.argsort(axes).tolist())),),
    doc="Permute the axes of x (reverse them by default). gc.transpose(x, (0, 2, 1))",
)


def permute(x: Any, *axes: Any) -> Any:
    """PyTorch's name: permute(x, 1, 0) or permute(x, (1, 0))."""
    return transpose(x, axes[0] if len(axes) == 1 else axes)


def swapaxes(x: Any, a: int, b: int) -> Any:
    """Exchange two axes."""
    perm = list(range(len(x.shape)))
    a, b = normalize_axis(a, len(perm)), normalize_axis(b, len(perm))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, tuple(perm))


# -- broadcast_to and its adjoint, sum_to ---------------------------------------------


def _as_shape(shape: Any, op: str) -> Shape:
    dims = (shape,) if isinstance(shape, (int, str, np.integer)) else tuple(shape)
    try:
        return tuple(as_dim(d) for d in dims)
    except ShapeError as exc:
        raise ShapeError(f"{op}: bad shape {dims}: {exc}") from None


def _shape_canon(op: str) -> Any:
    return lambda x, shape: {"shape": _as_shape(shape, op)}


def _check_broadcastable(small: Shape, big: Shape, op: str) -> None:
    ok = len(small) <= len(big) and all(
        s == 1 or s == b for s, b in zip(reversed(small), reversed(big))
    )
    if not ok and op == "sum_to":
        raise ShapeError(
            f"sum_to: cannot sum shape {format_shape(big)} down to {format_shape(small)} "
            f"(the target must broadcast to the input's shape)"
        )
    if not ok:
        raise ShapeError(
            f"{op}: shape {format_shape(small)} does not broadcast to {format_shape(big)}"
        )


def _broadcast_infer(x: TensorType, shape: Shape) -> TensorType:
    _check_broadcastable(x.shape, shape, "broadcast_to")
    return x.with_shape(shape)


# broadcast_to copies values: the gradient sums the copies back (sum_to)
broadcast_to = defop(
    "broadcast_to",
    infer=_broadcast_infer,
    kernel=lambda x, out=None, shape=(): into(out, np.broadcast_to(x, shape)),
    attrs={"shape": ()},
    canonicalize=_shape_canon("broadcast_to"),
    vjp=lambda ct, out, x, needs, shape: (sum_to(ct, x.shape),),
    shape_attrs=("shape",),
    doc="x repeated along broadcast dims to shape (numpy rules). gc.broadcast_to(x, (4, 3))",
)


def _sum_to_infer(x: TensorType, shape: Shape) -> TensorType:
    _check_broadcastable(shape, x.shape, "sum_to")
    return x.with_shape(shape)


def _sum_to_kernel(x: np.ndarray, out: np.ndarray | None = None, shape: Shape = ()) -> np.ndarray:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1
    )
    if not axes:
        return into(out, x)
    summed = np.sum(x, axis=axes, keepdims=True)
    return into(out, summed.reshape(shape))


# sum_to(x, shape) undoes broadcasting; its gradient broadcasts back
sum_to = defop(
    "sum_to",
    infer=_sum_to_infer,
    kernel=_sum_to_kernel,
    attrs={"shape": ()},
    canonicalize=_shape_canon("sum_to"),
    vjp=lambda ct, out, x, needs, shape: (broadcast_to(ct, x.shape),),
    shape_attrs=("shape",),
    cost=lambda out, x, shape: x.size or 0,
    doc="Sum x down to shape, the adjoint of broadcast_to. gc.sum_to(ones((4, 3)), (3,))",
)


def expand(x: Any, *shape: Any) -> Any:
    """PyTorch's expand: broadcast_to where -1 keeps a dim."""
    dims = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
    lead = len(dims) - len(x.shape)
    if lead < 0 or any(d == -1 for d in dims[:lead]):
        raise ShapeError(
            f"expand: cannot expand shape {format_shape(x.shape)} to {dims} "
            "(-1 keeps an existing dim; new leading dims need a size)"
        )
    full = tuple(x.shape[i - lead] if d == -1 else d for i, d in enumerate(dims))
    return broadcast_to(x, full)


def expand_dims(x: Any, axis: int) -> Any:
    """Insert a dim of size 1 at `axis` (numpy's name; PyTorch's unsqueeze)."""
    shape = list(x.shape)
    shape.insert(normalize_axis(axis, len(shape) + 1, "expand_dims"), 1)
    return reshape(x, tuple(shape))


unsqueeze = expand_dims


def squeeze(x: Any, axis: Any = None) -> Any:
    """Remove dims of size 1 (all of them, or those in `axis`)."""
    rank = len(x.shape)
    if axis is None:
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        axes = {
            normalize_axis(a, rank, "squeeze")
            for a in (axis if isinstance(axis, (tuple, list)) else (axis,))
        }
        for a in axes:
            if x.shape[a] != 1:
                raise ShapeError(f"squeeze: axis {a} has size {x.shape[a]!r}, not 1")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


# -- concat and stack ----------------------------------------------------------------


def _concat_canon(*types: TensorType, axis: int) -> dict:
    if not types:
        raise GraphcError("concat: needs at least one input")
    return {"axis": normalize_axis(axis, types[0].rank, "concat")}


def _concat_infer(*types: TensorType, axis: int) -> TensorType:
    first = types[0]
    total: Dim = 0
    for t in types:
        if t.rank != first.rank or any(
            a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis
        ):
            shown = ", ".join(format_shape(t.shape) for t in types)
            raise ShapeError(f"concat: shapes {shown} differ outside axis {axis}")
        d = t.shape[axis]
        if is_symbol(d) or is_symbol(total):
            if total != 0:
                raise ShapeError(f"concat: cannot add symbolic dims along axis {axis}")
            total = d
        else:
            total = total + d  # type: ignore[operator]
    dtype = np.result_type(*(t.dtype for t in types))
    return TensorType(first.shape[:axis] + (total,) + first.shape[axis + 1 :], dtype)


def _concat_vjp(ct: Any, out: Any, *inputs: Any, needs: tuple, axis: int) -> tuple:
    # each input's gradient is its own slab of the cotangent
    grads, start = [], 0
    for x, need in zip(inputs, needs):
        size = x.shape[axis]
        if need:
            index = (slice(None),) * axis + (slice(start, start + size),)
            grads.append(E.unbroadcast(getitem(ct, index), x))
        else:
            grads.append(None)
        start += size
    return tuple(grads)


concat = defop(
    "concat",
    inputs=VARIADIC,
    infer=_concat_infer,
    kernel=lambda *xs, out=None, axis=0: np.concatenate(xs, axis=axis, out=out),
    attrs={"axis": 0},
    canonicalize=_concat_canon,
    vjp=_concat_vjp,
    doc="Join arrays along an existing axis. gc.concat([x, y], axis=1)",
)
concatenate = cat = concat


def stack(values: Sequence[Any], axis: int = 0) -> Any:
    """Join arrays along a new axis: concat of expand_dims."""
    if not values:
        raise GraphcError("stack: needs at least one input")
    shapes = [tuple(v.shape) for v in values]
    if any(s != shapes[0] for s in shapes):
        shown = ", ".join(format_shape(s) for s in shapes)
        raise ShapeError(f"stack: all inputs must have the same shape, got {shown}")
    rank = len(shapes[0]) + 1
    axis = normalize_axis(axis, rank, "stack")
    return concat([expand_dims(v, axis) for v in values], axis=axis)


# -- basic indexing: slice and its adjoint, unslice ------------------------------------

_PART = re.compile(r"^(-?\d+)?(?::(-?\d+)?)?(?::(-?\d+)?)?$")


def format_index(index: Any) -> str:
    """The canonical text of a basic index: ints, slices, None and ... ."""
    if not isinstance(index, tuple):
        index = (index,)
    parts = []
    for item in index:
        if item is None:
            parts.append("None")
        elif item is Ellipsis:
            parts.append("...")
        elif isinstance(item, slice):
            if item.step is not None and int(item.step) == 0:
                raise ShapeError("getitem: slice step cannot be zero")
            start = "" if item.start is None else str(int(item.start))
            stop = "" if item.stop is None else str(int(item.stop))
            step = "" if item.step is None else f":{int(item.step)}"
            parts.append(f"{start}:{stop}{step}")
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            parts.append(str(int(item)))
        elif isinstance(item, (float, np.floating)):
            raise DTypeError(f"getitem: indices must be integers, got {item!r}")
        else:
            raise GraphcError(f"getitem: unsupported index item {item!r}")
    return ",".join(parts)


@functools.lru_cache(maxsize=1024)
def parse_index(text: str) -> tuple:
    items: list[Any] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part == "None":
            items.append(None)
        elif part == "...":
            items.append(Ellipsis)
        elif ":" not in part:
            items.append(int(part))
        else:
            match = _PART.match(part)
            if match is None:
                raise GraphcError(f"getitem: malformed index part {part!r}")
            start, stop, step = (None if g is None else int(g) for g in match.groups())
            if step == 0:
                raise ShapeError(f"getitem: slice step cannot be zero in {part!r}")
            items.append(slice(start, stop, step))
    return tuple(items)


def _expand_ellipsis(index: tuple, rank: int) -> tuple:
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeError(
            f"getitem: an index can only have a single ellipsis, got {format_index(index)}"
        )
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > rank:
        raise ShapeError(f"getitem: too many indices ({used}) for rank {rank}")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        return index[:at] + (slice(None),) * (rank - used) + index[at + 1 :]
    return index + (slice(None),) * (rank - used)


def _slice_infer(x: TensorType, index: str) -> TensorType:
    items = _expand_ellipsis(parse_index(index), x.rank)
    shape: list[Dim] = []
    axis = 0
    for item in items:
        if item is None:
            shape.append(1)
            continue
        dim = x.shape[axis]
        axis += 1
        if isinstance(item, int):
            if not is_symbol(dim) and not -dim <= item < dim:  # type: ignore[operator]
                raise ShapeError(f"getitem: index {item} is out of range for dim {dim}")
            continue
        if is_symbol(dim):
            if item == slice(None):
                shape.append(dim)
                continue
            if (item.start or 0) >= 0 and item.stop is not None and item.stop >= 0:
                shape.append(len(range(item.start or 0, item.stop, item.step or 1)))
                continue
            raise ShapeError(f"getitem: cannot slice symbolic dim {dim!r} with {item}")
        shape.append(len(range(*item.indices(dim))))
    return x.with_shape(shape)


# slice reads a window: its gradient writes the cotangent into that window of zeros
slice_ = defop(
    "slice",
    infer=_slice_infer,
    kernel=lambda x, out=None, index="": into(out, x[parse_index(index)]),
    attrs={"index": ""},
    canonicalize=lambda x, index: {
        "index": format_index(parse_index(index) if isinstance(index, str) else index)
    },
    vjp=lambda ct, out, x, needs, index: (unslice(ct, shape=x.shape, index=index),),
    doc='x[index] for basic indices (ints, slices, None, ...): gc.slice(x, "1:3,None")',
)


def _unslice_kernel(
    ct: np.ndarray, out: np.ndarray | None = None, shape: Shape = (), index: str = ""
) -> np.ndarray:
    if out is None:
        out = np.zeros(shape, ct.dtype)
    else:
        out.fill(0)
    out[parse_index(index)] = ct
    return out


def _unslice_infer(ct: TensorType, shape: Shape, index: str) -> TensorType:
    window = _slice_infer(ct.with_shape(shape), index).shape
    if window != ct.shape:
        raise ShapeError(
            f"unslice: the window [{index}] of shape {format_shape(shape)} has shape "
            f"{format_shape(window)}, but the input has shape {format_shape(ct.shape)}"
        )
    return ct.with_shape(shape)


unslice = defop(
    "unslice",
    infer=_unslice_infer,
    kernel=_unslice_kernel,
    attrs={"shape": (), "index": ""},
    canonicalize=lambda ct, shape, index: {
        "shape": _as_shape(shape, "unslice"),
        "index": format_index(parse_index(index) if isinstance(index, str) else index),
    },
    vjp=lambda ct, out, x, needs, shape, index: (slice_(ct, index=index),),
    shape_attrs=("shape",),
    doc="Zeros of shape with ct written at [index]: the adjoint of slice.",
)

# -- take (gather) and its adjoint, scatter_add ----------------------------------------


def _take_canon(x: TensorType, indices: TensorType, axis: int) -> dict:
    if not np.issubdtype(indices.dtype, np.integer):
        raise DTypeError(f"take: indices must be integers, got {indices.dtype}")
    return {"axis": normalize_axis(axis, x.rank, "take")}


def _take_infer(x: TensorType, indices: TensorType, axis: int) -> TensorType:
    return x.with_shape(x.shape[:axis] + indices.shape + x.shape[axis + 1 :])


def _take_kernel(
    x: np.ndarray, i: np.ndarray, out: np.ndarray | None = None, axis: int = 0
) -> np.ndarray:
    size = x.shape[axis]
    if i.size and not (-size <= i.min() and i.max() < size):
        bad = i[(i < -size) | (i >= size)].flat[0]
        raise ShapeError(f"take: index {bad} is out of range for axis {axis} of size {size}")
    return np.take(x, i, axis=axis, out=out)


take = defop(
    "take",
    inputs=("x", "indices"),
    infer=_take_infer,
    kernel=_take_kernel,
    attrs={"axis": 0},
    canonicalize=_take_canon,
    vjp=lambda ct, out, x, i, needs, axis: (
        scatter_add(ct, i, shape=x.shape, axis=axis),
        None,
    ),
    doc="Pick entries of x along axis by integer indices (np.take). gc.take(emb, ids, axis=0)",
)
gather = index_select = take


def _scatter_add_kernel(
    ct: np.ndarray, i: np.ndarray, out: np.ndarray | None = None, shape: Shape = (), axis: int = 0
) -> np.ndarray:
    if out is None:
        out = np.zeros(shape, ct.dtype)
    else:
        out.fill(0)
    moved = np.moveaxis(out, axis, 0)
    values = np.moveaxis(ct.reshape(ct.shape[:axis] + (-1,) + ct.shape[axis + i.ndim :]), axis, 0)
    np.add.at(moved, i.reshape(-1), values)
    return out


def _scatter_add_infer(ct: TensorType, i: TensorType, shape: Shape, axis: int) -> TensorType:
    if not np.issubdtype(i.dtype, np.integer):
        raise DTypeError(f"scatter_add: indices must be integers, got {i.dtype}")
    expected = shape[:axis] + i.shape + shape[axis + 1 :]
    if expected != ct.shape:
        raise ShapeError(
            f"scatter_add: into shape {format_shape(shape)} along axis {axis} with indices of "
            f"shape {format_shape(i.shape)}, the input must have shape {format_shape(expected)}, "
            f"got {format_shape(ct.shape)}"
        )
    return ct.with_shape(shape)


scatter_add = defop(
    "scatter_add",
    inputs=("ct", "indices"),
    infer=_scatter_add_infer,
    kernel=_scatter_add_kernel,
    attrs={"shape": (), "axis": 0},
    canonicalize=lambda ct, i, shape, axis: {
        "shape": _as_shape(shape, "scatter_add"),
        "axis": normalize_axis(axis, len(_as_shape(shape, "scatter_add")), "scatter_add"),
    },
    vjp=lambda ct, out, x, i, needs, shape, axis: (take(ct, i, axis=axis), None),
    shape_attrs=("shape",),
    doc="Zeros of shape with ct added at indices along axis: the adjoint of take.",
)


def _is_full_slice(item: Any) -> bool:
    return isinstance(item, slice) and item == slice(None)


def getitem(x: Any, index: Any) -> Any:
    """x[index]: basic indices become `slice`; one integer array index becomes `take`."""
    items = index if isinstance(index, tuple) else (index,)
    advanced = [
        k
        for k, item in enumerate(items)
        if not (
            item is None
            or item is Ellipsis
            or isinstance(item, (slice, int, np.integer, float, np.floating))
        )
    ]
    if not advanced:
        return slice_(x, index=format_index(items))
    # identity tests only: `==` on an array (or graph value) index would be elementwise
    if len(advanced) > 1 or any(i is None or i is Ellipsis for i in items):
        raise GraphcError("getitem: only one integer-array index (with plain slices) is supported")
    k = advanced[0]
    if any(not _is_full_slice(items[j]) for j in range(len(items)) if j != k):
        raise GraphcError("getitem: an integer-array index may only be combined with ':'")
    if getattr(items[k], "dtype", None) == np.bool_:
        raise GraphcError("getitem: boolean masks give data-dependent shapes; use gc.where")
    return take(x, items[k], axis=k)
