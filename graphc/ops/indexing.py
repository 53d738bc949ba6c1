"""Indexing ops: basic slicing (`slice`, adjoint `unslice`), `take` (adjoint
`scatter_add`), and `getitem`, which maps Python's `x[...]` onto them.

A basic index is kept in one canonical text form (`"1:3,None"`) so that it prints,
parses and hashes as a plain string attribute.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import (
    Dim,
    Shape,
    TensorType,
    as_shape,
    broadcast_shapes,
    format_shape,
    is_symbol,
    normalize_axis,
)
from graphc.ops.defop import defop, into
from graphc.ops.dispatch import bind

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
            if item.stop is None and item.start in (None, 0) and item.step in (None, 1):
                parts.append(":")  # 0: and ::1 are the whole dim, symbolic ones too
                continue
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
                raise IndexRangeError(f"getitem: index {item} is out of range for dim {dim}")
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


def _slice_kernel(x: np.ndarray, out: np.ndarray | None = None, index: str = "") -> np.ndarray:
    try:
        return into(out, x[parse_index(index)])
    except IndexError as exc:  # an int index past a symbolic dim's fed size
        raise IndexRangeError(f"getitem: {exc} (index [{index}])") from None


# slice reads a window: its gradient writes the cotangent into that window of zeros.
# On a symbolic dim B only ':' and windows with non-negative bounds are allowed: a
# window start:stop:step is typed len(range(start, stop, step)) whatever B, so it is
# valid only for sizes B that hold all of it; compiling for a B that does not (x[0:5]
# with B = 3) is a ShapeError naming the node, never a silently shorter result.
slice_ = defop(
    "slice",
    infer=_slice_infer,
    kernel=_slice_kernel,
    attrs={"index": ""},
    canonicalize=lambda x, index: {
        "index": format_index(parse_index(index) if isinstance(index, str) else index)
    },
    vjp=lambda ct, out, x, needs, index: (unslice(ct, shape=x.shape, index=index),),
    doc='x[index] for basic indices (ints, slices, None, ...): gc.slice(x, "1:3,None"). '
    "On a symbolic dim B a window a:b:s is typed len(range(a, b, s)) and needs a B that "
    "holds all of it (B >= b for step 1); compile checks it per fed size.",
)


def _unslice_kernel(
    ct: np.ndarray, out: np.ndarray | None = None, shape: Shape = (), index: str = ""
) -> np.ndarray:
    if out is None:
        out = np.zeros(shape, ct.dtype)
    else:
        out.fill(0)
    items = parse_index(index)
    window = np.shape(out[items])  # (all-int indices give a scalar, not a view)
    if window != ct.shape:  # a symbolic window that does not fit the fed size
        raise ShapeError(
            f"unslice: the window [{index}] of shape {out.shape} has shape {window}, "
            f"but the input has shape {ct.shape}"
        )
    out[items] = ct
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
        "shape": as_shape(shape, "unslice"),
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


def check_indices(op: str, i: np.ndarray, size: int, axis: int) -> None:
    """Every index in [-size, size), or an IndexRangeError (an IndexError, as in torch)."""
    if i.ndim == 0:  # a scan's step index: min() and max() would cost 3 us of a 6 us take
        if not -size <= int(i) < size:
            raise IndexRangeError(
                f"{op}: index {int(i)} is out of range for axis {axis} of size {size}"
            )
        return
    if i.size and not (-size <= i.min() and i.max() < size):
        bad = i[(i < -size) | (i >= size)].flat[0]
        raise IndexRangeError(f"{op}: index {bad} is out of range for axis {axis} of size {size}")


def _take_kernel(
    x: np.ndarray, i: np.ndarray, out: np.ndarray | None = None, axis: int = 0
) -> np.ndarray:
    check_indices("take", i, x.shape[axis], axis)
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
    check_indices("scatter_add", i, out.shape[axis], axis)
    moved = np.moveaxis(out, axis, 0)
    # the indices' dims flattened to one, by its size: -1 is ambiguous when a dim is 0
    flat = ct.shape[:axis] + (i.size,) + ct.shape[axis + i.ndim :]
    values = np.moveaxis(ct.reshape(flat), axis, 0)
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
        "shape": as_shape(shape, "scatter_add"),
        "axis": normalize_axis(axis, len(as_shape(shape, "scatter_add")), "scatter_add"),
    },
    vjp=lambda ct, out, x, i, needs, shape, axis: (take(ct, i, axis=axis), None),
    shape_attrs=("shape",),
    doc="Zeros of shape with ct added at indices along axis: the adjoint of take.",
)


def _is_full_slice(item: Any) -> bool:
    return isinstance(item, slice) and item == slice(None)


def getitem(x: Any, index: Any) -> Any:
    """x[index]: basic indices become `slice`; integer array indices (with slices and
    integers beside them) become a `slice` of the others, then a `take` along the first
    array's axis and a `take_along_axis` along each other's, the arrays broadcast
    together as numpy's (each array's entries checked against its own axis)."""
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
    if any(i is None or i is Ellipsis for i in items):
        raise GraphcError(
            "getitem: an integer-array index beside None or ... is not supported; "
            "index in two steps (x[..., None] first)"
        )
    if any(getattr(items[k], "dtype", None) == np.bool_ for k in advanced):
        raise GraphcError("getitem: boolean masks give data-dependent shapes; use gc.where")
    if any(isinstance(items[j], (float, np.floating)) for j in range(len(items))):
        raise GraphcError("getitem: indices must be integers or slices, not floats")
    ints = [
        j
        for j, item in enumerate(items)
        if j not in advanced and isinstance(item, (int, np.integer))
    ]
    others = tuple(slice(None) if j in advanced else item for j, item in enumerate(items))
    if any(not _is_full_slice(item) for item in others):
        x = slice_(x, index=format_index(others))
    # the integers before an array took their axes away
    axes = [k - sum(j < k for j in ints) for k in advanced]
    arrays = [items[k] for k in advanced]
    if len(arrays) == 1:
        out, rank = take(x, arrays[0], axis=axes[0]), len(getattr(arrays[0], "shape", ()))
    else:
        out, rank = _gather(x, arrays, axes)
    group = sorted([*advanced, *ints])
    first = axes[0] if len(arrays) == 1 else 0  # where the arrays' dims are now
    # numpy: integers are indices of the arrays' kind; indices of that kind side by side
    # put their dims where the first stood, apart (x[0, :, i]) before every other dim
    at = group[0] if group == list(range(group[0], group[-1] + 1)) else 0
    if rank and first != at:
        moved = list(range(first, first + rank))
        rest = [d for d in range(len(out.shape)) if d not in moved]
        order = rest[:at] + moved + rest[at:]
        out = bind("transpose", out, axes=tuple(order))
    return out


def _gather(x: Any, arrays: list, axes: list[int]) -> tuple[Any, int]:
    """x at several integer arrays, broadcast together to a shape S, one per axis in
    `axes`: the result's dims are S, then x's other dims in order (and S's rank)."""
    arrays = [np.asarray(a) if isinstance(a, (list, tuple)) else a for a in arrays]
    rank_x = len(x.shape)
    order = [*axes, *(d for d in range(rank_x) if d not in axes)]
    if order != list(range(rank_x)):
        x = bind("transpose", x, axes=tuple(order))
    together = broadcast_shapes(*(tuple(getattr(a, "shape", ())) for a in arrays), op="getitem")
    n = len(together)

    def spread(a: Any) -> Any:
        return (
            a
            if tuple(getattr(a, "shape", ())) == together
            else bind("broadcast_to", a, shape=together)
        )

    out = take(x, spread(arrays[0]), axis=0)  # S + (the other arrays' axes) + the rest
    for a in arrays[1:]:
        ones = (1,) * (len(out.shape) - n)  # S + (1, 1, ...), then S + (1,) + the rest
        at = bind("reshape", spread(a), shape=(*together, *ones))
        at = bind("broadcast_to", at, shape=(*together, 1, *out.shape[n + 1 :]))
        out = bind("take_along_axis", out, at, axis=n)
        out = bind("reshape", out, shape=(*together, *out.shape[n + 1 :]))
    return out, n
