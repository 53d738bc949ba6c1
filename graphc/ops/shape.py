"""Shape ops: reshape, transpose, broadcast_to, sum_to, concat (indexing is in indexing.py),
and the builders over them: numpy's moveaxis, ravel, stack, hstack and vstack, torch's
permute, expand and unsqueeze.

Shape attributes may hold symbolic dims ("B"); the runtime binds them per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import (
    Dim,
    Shape,
    TensorType,
    as_shape,
    format_shape,
    is_symbol,
    normalize_axis,
)
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops.defop import VARIADIC, defop, into
from graphc.ops.spelling import merged_dim, shape_of, torch_keywords

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
        return {"shape": as_shape(dims, "reshape")}
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
    return {"shape": as_shape([missing if d == -1 else d for d in dims], "reshape")}


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
    props=("one_element_identity",),
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
    permutes=True,
    vjp=lambda ct, out, x, needs, axes: (transpose(ct, tuple(np.argsort(axes).tolist())),),
    doc="Permute the axes of x (reverse them by default). gc.transpose(x, (0, 2, 1))",
    props=("one_element_identity",),
)


def permute(x: Any, *axes: Any) -> Any:
    """PyTorch's name: permute(x, 1, 0) or permute(x, (1, 0))."""
    return transpose(x, axes[0] if len(axes) == 1 else axes)


def swapaxes(x: Any, a: int, b: int) -> Any:
    """Exchange two axes."""
    perm = list(range(len(x.shape)))
    a, b = normalize_axis(a, len(perm), "swapaxes"), normalize_axis(b, len(perm), "swapaxes")
    if perm:  # a 0-d value's one axis (0 or -1, as torch) with itself: the value as it is
        perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, tuple(perm))


def moveaxis(x: Any, source: Any, destination: Any) -> Any:
    """x with its axes `source` (an int or a sequence) moved to the positions
    `destination`, the others in their order, as np.moveaxis and torch.moveaxis: a
    transpose.

    >>> import numpy as np, graphc as gc
    >>> gc.moveaxis(np.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    rank = len(shape_of(x))
    sources = _axis_list(source, rank, "source")
    destinations = _axis_list(destination, rank, "destination")
    if len(sources) != len(destinations):
        raise ShapeError(
            f"moveaxis: source {source!r} and destination {destination!r} must name as many axes"
        )
    order = [a for a in range(rank) if a not in sources]
    for dest, src in sorted(zip(destinations, sources)):
        order.insert(dest, src)
    return transpose(x, tuple(order))


def _axis_list(axes: Any, rank: int, what: str) -> list[int]:
    items = list(axes) if isinstance(axes, (tuple, list)) else [axes]
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ShapeError(f"moveaxis: {what} axes must be ints, got {axes!r}")
    normal = [normalize_axis(int(a), rank, "moveaxis") for a in items]
    if len(set(normal)) != len(normal):
        raise ShapeError(f"moveaxis: repeated axis in {what} {axes!r}")
    return normal


def ravel(x: Any) -> Any:
    """x as one dim, in C order, as np.ravel and torch.ravel (a 0-d x gives one element):
    a reshape. A symbolic dim may be merged only with dims of size 1.

    >>> import numpy as np, graphc as gc
    >>> gc.ravel(np.arange(6).reshape(2, 3)).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    return reshape(x, (merged_dim(shape_of(x), "ravel"),))


# -- broadcast_to and its adjoint, sum_to ---------------------------------------------


def _shape_canon(op: str) -> Any:
    return lambda x, shape: {"shape": as_shape(shape, op)}


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
    props=("one_element_identity",),
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
    # dtype: the result keeps x's dtype, as the type rule says (add.reduce would widen
    # small ints and bools to int64)
    if out is not None and out.flags.c_contiguous:  # reshaping it gives a view: sum into it
        kept = out.reshape((1,) * lead + tuple(shape))
        np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=True, out=kept)
        return out
    summed = np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=True)
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
    props=("one_element_sum",),
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


@torch_keywords
def expand_dims(x: Any, axis: int) -> Any:
    """Insert a dim of size 1 at `axis` (numpy's name; PyTorch's unsqueeze)."""
    shape = list(x.shape)
    shape.insert(normalize_axis(axis, len(shape) + 1, "expand_dims"), 1)
    return reshape(x, tuple(shape))


unsqueeze = expand_dims


@torch_keywords
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
        if d == 0:
            continue  # an empty piece adds nothing, also to a symbolic total
        if is_symbol(d) or is_symbol(total):
            # a dim is one int or one symbol, never a sum such as B + 2
            if total != 0:
                shown = ", ".join(format_shape(t.shape) for t in types)
                raise ShapeError(
                    f"concat: cannot add symbolic dims along axis {axis} ({shown}); "
                    "concat along another axis, or give the sizes"
                )
            total = d
        else:
            total = total + d  # type: ignore[operator]
    dtype = np.result_type(*(t.dtype for t in types))
    return TensorType(first.shape[:axis] + (total,) + first.shape[axis + 1 :], dtype)


def _concat_vjp(ct: Any, out: Any, *inputs: Any, needs: tuple, axis: int) -> tuple:
    # each input's gradient is its own slab of the cotangent. The type rule lets a
    # symbolic size along the axis only beside empty pieces: that input's slab is all
    # of ct (':'), and an empty piece's slab is 0:0 wherever it stands
    grads, start = [], 0
    for x, need in zip(inputs, needs):
        size = x.shape[axis]
        if is_symbol(size):
            window = slice(None)
        elif size == 0:
            window = slice(0, 0)
        else:
            window = slice(start, start + size)
            start += size
        if need:
            slab = I.getitem(ct, (slice(None),) * axis + (window,))
            grads.append(E.unbroadcast(slab, x))
        else:
            grads.append(None)
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


@torch_keywords
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


def _at_least(value: Any, rank: int) -> Any:
    """value with dims of size 1 in front up to `rank` (1-D (n,) becomes (1, n)), as
    np.atleast_1d and np.atleast_2d; at least that rank already, value itself."""
    shape = shape_of(value)
    if len(shape) >= rank:
        return value
    return reshape(value, (1,) * (rank - len(shape)) + tuple(shape))


def hstack(values: Sequence[Any]) -> Any:
    """Join arrays along their second axis, or their first when 1-D (0-d ones become
    1-D), as np.hstack and torch.hstack: a concat.

    >>> import numpy as np, graphc as gc
    >>> gc.hstack([np.array([1, 2]), np.array([3])]).tolist()
    [1, 2, 3]
    """
    if not values:
        raise GraphcError("hstack: needs at least one input")
    values = [_at_least(v, 1) for v in values]
    return concat(values, axis=0 if len(shape_of(values[0])) == 1 else 1)


def vstack(values: Sequence[Any]) -> Any:
    """Join arrays along their first axis, 1-D ones (n,) as rows (1, n), as np.vstack
    and torch.vstack: a concat.

    >>> import numpy as np, graphc as gc
    >>> gc.vstack([np.array([1, 2]), np.array([[3, 4], [5, 6]])]).tolist()
    [[1, 2], [3, 4], [5, 6]]
    """
    if not values:
        raise GraphcError("vstack: needs at least one input")
    return concat([_at_least(v, 2) for v in values], axis=0)
