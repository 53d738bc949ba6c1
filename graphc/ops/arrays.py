"""Array manipulation: flatten, split, chunk, tile, repeat, flip, tril, triu, diagonal
and diag here;
the rest of the family in their own modules, re-exported from this one: `padding.py` (pad),
`along_axis.py` (take_along_axis, embedding), `sorting.py` (argsort, sort, topk),
`sequences.py` (arange, cumsum, cumprod) and `einsum.py`.

flatten, split, chunk, tile, repeat, diagonal and diag are builders over reshape, slice,
take, where, pad and broadcast_to; flip, tril and triu are ops of their own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import ShapeError
from graphc.ir.types import Dim, TensorType, format_shape, is_symbol, normalize_axes, normalize_axis
from graphc.ops import indexing as I
from graphc.ops import selection as C
from graphc.ops import shape as S
from graphc.ops.along_axis import (
    embedding,
    scatter_add_along_axis,
    take_along_axis,
    take_along_dim,
)
from graphc.ops.defop import defop, elementwise_cost, into
from graphc.ops.dispatch import dtype_of, kind_of
from graphc.ops.einsum import einsum
from graphc.ops.padding import pad, unpad
from graphc.ops.sequences import arange, cumprod, cumsum
from graphc.ops.sorting import ValuesIndices, argsort, sort, topk
from graphc.ops.spelling import count, integer, merged_dim, one_axis, pick_axis, shape_of

__all__ = [
    "ValuesIndices",
    "arange",
    "argsort",
    "chunk",
    "cumprod",
    "cumsum",
    "diag",
    "diagonal",
    "einsum",
    "embedding",
    "flatten",
    "flip",
    "pad",
    "repeat",
    "scatter_add_along_axis",
    "sort",
    "split",
    "take_along_axis",
    "take_along_dim",
    "tile",
    "topk",
    "tril",
    "triu",
    "unpad",
]

# -- flatten ---------------------------------------------------------------------------


def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    """Merge dims start_dim..end_dim (inclusive) into one, as torch.flatten.

    A 0-d input becomes shape (1,). A symbolic dim can be merged only with dims of size 1.

    >>> import numpy as np, graphc as gc
    >>> gc.flatten(np.zeros((2, 3, 4)), 1).shape
    (2, 12)
    """
    shape = shape_of(x)
    if not shape:
        return S.reshape(x, (1,))
    start = normalize_axis(start_dim, len(shape), "flatten")
    end = normalize_axis(end_dim, len(shape), "flatten")
    if start > end:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    merged = merged_dim(shape[start : end + 1], "flatten")
    return S.reshape(x, shape[:start] + (merged,) + shape[end + 1 :])


# -- split and chunk: slices ---------------------------------------------------------------


def _window(axis: int, start: int, stop: int) -> tuple:
    return (slice(None),) * axis + (slice(start, stop),)


def split(
    x: Any, split_size_or_sections: Any, axis: int | None = None, *, dim: int | None = None
) -> tuple:
    """Pieces of x along axis, as torch.split: an int is each piece's size (the last may
    be smaller), a list gives the sizes, which must add up to the axis' size.

    Unlike numpy's split, an int is a size, not a count (gc.chunk takes a count). Each
    piece is a slice of x; a symbolic axis cannot be split.

    >>> import numpy as np, graphc as gc
    >>> [p.shape for p in gc.split(np.zeros((5, 2)), 2)]
    [(2, 2), (2, 2), (1, 2)]
    >>> [p.shape for p in gc.split(np.zeros((2, 5)), [1, 4], axis=1)]
    [(2, 1), (2, 4)]
    """
    shape = shape_of(x)
    axis = normalize_axis(pick_axis(axis, dim, "split", default=0), len(shape), "split")
    size = shape[axis]
    if is_symbol(size):
        raise ShapeError(
            f"split: cannot split the symbolic dim {size!r} of shape {format_shape(shape)} "
            "(the pieces' sizes would depend on it); split a dim of known size"
        )
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(
        split_size_or_sections, (bool, np.bool_)
    ):
        step = count(split_size_or_sections, "split", "split_size", low=0)
        if step == 0 and size:
            raise ShapeError(f"split: split_size 0 cannot split a dim of size {size}")
        sections = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    else:
        sections = [count(s, "split", "a section size") for s in split_size_or_sections]
        if sum(sections) != size:
            raise ShapeError(
                f"split: section sizes {sections} add up to {sum(sections)}, "
                f"but axis {axis} has size {size}"
            )
    pieces, start = [], 0
    for length in sections:
        pieces.append(I.slice_(x, index=_window(axis, start, start + length)))
        start += length
    return tuple(pieces)


def chunk(x: Any, chunks: int, axis: int | None = None, *, dim: int | None = None) -> tuple:
    """x cut into `chunks` pieces of ceil(size / chunks) along axis, as torch.chunk
    (fewer pieces when they run out first; `chunks` empty pieces of an empty axis).

    >>> import numpy as np, graphc as gc
    >>> [p.shape for p in gc.chunk(np.zeros(6), 4)]
    [(2,), (2,), (2,)]
    """
    chunks = count(chunks, "chunk", "chunks", low=1)
    shape = shape_of(x)
    axis = normalize_axis(pick_axis(axis, dim, "chunk", default=0), len(shape), "chunk")
    size = shape[axis]
    if size == 0:
        return split(x, [0] * chunks, axis=axis)
    if is_symbol(size):
        return split(x, size, axis=axis)  # the error that names the symbolic dim
    return split(x, -(-size // chunks), axis=axis)


# -- tile: broadcast_to between reshapes ---------------------------------------------------


def tile(x: Any, reps: Any) -> Any:
    """x repeated reps[i] times along each dim i, as numpy's tile and torch's tile (and
    torch's Tensor.repeat). Shorter reps are padded with 1s in front, a shorter shape too.

    A copy of x made by broadcast_to (whose gradient sums the copies back) between two
    reshapes. A symbolic dim can only be repeated once.

    >>> import numpy as np, graphc as gc
    >>> gc.tile(np.array([1, 2]), (2, 2)).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    if isinstance(reps, (int, np.integer)):
        reps = (reps,)
    reps = tuple(count(r, "tile", "a repeat count") for r in reps)
    shape = shape_of(x)
    rank = max(len(shape), len(reps))
    shape = (1,) * (rank - len(shape)) + shape
    reps = (1,) * (rank - len(reps)) + reps
    spread: list[Dim] = []  # a new axis of size 1 before every dim repeated more than once
    tiled: list[Dim] = []
    result: list[Dim] = []
    for r, d in zip(reps, shape):
        if r != 1:
            if is_symbol(d):
                raise ShapeError(
                    f"tile: cannot repeat the symbolic dim {d!r} {r} times (a dim is one int "
                    "or one symbol, never a product such as 2*B)"
                )
            spread.append(1)
            tiled.append(r)
        spread.append(d)
        tiled.append(d)
        result.append(d if r == 1 else r * d)  # type: ignore[operator]
    spread_x = S.reshape(x, tuple(spread))
    if tuple(tiled) == tuple(spread):
        return spread_x
    return S.reshape(S.broadcast_to(spread_x, tuple(tiled)), tuple(result))


# -- repeat: np.repeat, each element in turn ------------------------------------------------


def repeat(x: Any, repeats: Any, axis: int | None = None, *, dim: int | None = None) -> Any:
    """Each element of x repeated `repeats` times in turn along axis (of the flattened x
    by default), as np.repeat and torch.repeat_interleave (`dim=`): `repeats` is one count,
    or one per element along the axis, known when the graph is built. (Tensor.repeat is
    torch's tiling, `tile`.)

    One count is broadcast_to between reshapes; counts per element are a `take` of the
    positions np.repeat gives. Either way the gradient sums each element's copies.

    >>> import numpy as np, graphc as gc
    >>> gc.repeat(np.array([[1, 2], [3, 4]]), 2, axis=1).tolist()
    [[1, 1, 2, 2], [3, 3, 4, 4]]
    >>> gc.repeat(np.array([1, 2, 3]), [0, 1, 2]).tolist()
    [2, 3, 3]
    """
    axis = pick_axis(axis, dim, "repeat")
    if axis is None:
        x, axis = S.ravel(x), 0
    shape = tuple(shape_of(x))
    if not shape:  # a 0-d x has the one axis 0 (or -1), as in numpy
        x, shape = S.reshape(x, (1,)), (1,)
        one_axis(axis, 0, "repeat")
        axis = 0
    axis = normalize_axis(integer(axis, "repeat", "axis"), len(shape), "repeat")
    counts = _repeat_counts(repeats, shape[axis])
    if isinstance(counts, int):
        return _repeat_each(x, shape, axis, counts)
    positions = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return I.take(x, positions, axis=axis)


def _repeat_counts(repeats: Any, size: Dim) -> int | list[int]:
    """One count (an int), or one per element along the axis (a list of them)."""
    if kind_of(repeats) is not None or not isinstance(
        repeats, (int, np.integer, list, tuple, np.ndarray)
    ):
        raise ShapeError(
            "repeat: repeats must be an int or a sequence of ints known when the graph is "
            f"built (the result's shape follows from them), got {type(repeats).__name__}"
        )
    if np.ndim(repeats) == 0:
        return count(np.asarray(repeats).item(), "repeat", "repeats")
    counts = [count(r, "repeat", "each of repeats") for r in np.asarray(repeats).ravel().tolist()]
    if len(counts) == 1:
        return counts[0]
    if is_symbol(size) or len(counts) != size:
        raise ShapeError(
            f"repeat: {len(counts)} repeats for an axis of size {size!r} (give one per "
            "element, or one int)"
        )
    return counts


def _repeat_each(x: Any, shape: tuple, axis: int, times: int) -> Any:
    if times == 1:
        return C.cast(x, dtype_of(x))  # a copy: the result is never x or a view of it
    if times == 0:  # no copies: an empty slice (ONNX's Expand cannot broadcast 1 to 0)
        return I.slice_(x, index=(*(slice(None),) * axis, slice(0, 0)))
    size = shape[axis]
    if is_symbol(size):
        raise ShapeError(
            f"repeat: cannot repeat the symbolic dim {size!r} {times} times (a dim is one int "
            "or one symbol, never a product such as 2*B)"
        )
    spread = (*shape[: axis + 1], 1, *shape[axis + 1 :])
    copies = (*shape[: axis + 1], times, *shape[axis + 1 :])
    result = (*shape[:axis], size * times, *shape[axis + 1 :])
    return S.reshape(S.broadcast_to(S.reshape(x, spread), copies), result)


# -- flip ---------------------------------------------------------------------------------


def _flip_canon(x: TensorType, axis: Any) -> dict:
    if x.rank == 0:  # nothing to reverse; PyTorch allows dims 0 and -1 here
        for item in axis if isinstance(axis, (tuple, list)) else (axis,):
            one_axis(item, 0, "flip")
        return {"axis": ()}
    if axis is None:
        return {"axis": tuple(range(x.rank))}
    return {"axis": normalize_axes(axis, x.rank, "flip")}


def _flip_kernel(x: np.ndarray, out: np.ndarray | None = None, axis: tuple = ()) -> np.ndarray:
    return into(out, np.flip(x, axis) if axis else x)


# flip permutes values: its gradient is the cotangent flipped back
_flip = defop(
    "flip",
    infer=lambda x, axis: x,
    kernel=_flip_kernel,
    attrs={"axis": None},
    canonicalize=_flip_canon,
    vjp=lambda ct, out, x, needs, axis: (_flip(ct, axis=axis),),
    doc="x with the order of elements reversed along axis (every axis by default).",
)


def flip(x: Any, axis: Any = None, *, dims: Any = None) -> Any:
    """x reversed along the axes in `axis` (all by default), as np.flip and torch.flip.

    A copy, not a view (as torch.flip).

    >>> import numpy as np, graphc as gc
    >>> gc.flip(np.array([[1, 2], [3, 4]]), axis=1).tolist()
    [[2, 1], [4, 3]]
    """
    return _flip(x, axis=pick_axis(axis, dims, "flip", names=("axis", "dims")))


# -- tril and triu ----------------------------------------------------------------------------


def _triangle(name: str, lower: bool) -> Any:
    def canon(x: TensorType, k: Any) -> dict:
        if x.rank < 2:
            raise ShapeError(f"{name}: needs at least 2 dims, got shape {format_shape(x.shape)}")
        return {"k": integer(k, name, "k (the diagonal)")}

    def kernel(x: np.ndarray, out: np.ndarray | None = None, k: int = 0) -> np.ndarray:
        rows, cols = x.shape[-2:]
        # tril keeps column j <= row i + k; triu keeps j >= i + k, the complement of j <= i + k - 1
        keep = np.tri(rows, cols, k if lower else k - 1, dtype=np.bool_)
        if not lower:
            np.logical_not(keep, out=keep)
        if out is None:
            out = np.empty(x.shape, x.dtype)
        out.fill(0)  # copying through a mask keeps nan and -0.0 above it out (x * mask would not)
        np.copyto(out, x, where=keep)
        return out

    side = "on and below" if lower else "on and above"
    op = defop(
        name,
        infer=lambda x, k: x,
        kernel=kernel,
        attrs={"k": 0},
        canonicalize=canon,
        vjp=lambda ct, out, x, needs, k: (op(ct, k=k),),  # a mask: the gradient is masked too
        cost=elementwise_cost,
        doc=f"The elements of the last two dims {side} diagonal k, zeros elsewhere.",
    )
    return op


_tril = _triangle("tril", lower=True)
_triu = _triangle("triu", lower=False)


def tril(x: Any, k: int | None = None, *, diagonal: int | None = None) -> Any:
    """The lower triangle of the last two dims (on and below diagonal k), as np.tril and
    torch.tril (whose `diagonal` is numpy's k); batched over leading dims.

    >>> import numpy as np, graphc as gc
    >>> gc.tril(np.ones((2, 3), np.int64), k=-1).tolist()
    [[0, 0, 0], [1, 0, 0]]
    """
    return _tril(x, k=pick_axis(k, diagonal, "tril", default=0, names=("k", "diagonal")))


def triu(x: Any, k: int | None = None, *, diagonal: int | None = None) -> Any:
    """The upper triangle of the last two dims (on and above diagonal k), as np.triu
    and torch.triu; batched over leading dims.

    >>> import numpy as np, graphc as gc
    >>> gc.triu(np.ones((2, 3), np.int64), k=1).tolist()
    [[0, 1, 1], [0, 0, 1]]
    """
    return _triu(x, k=pick_axis(k, diagonal, "triu", default=0, names=("k", "diagonal")))


# -- diagonal ---------------------------------------------------------------------------------


def diagonal(
    x: Any,
    offset: int = 0,
    axis1: int | None = None,
    axis2: int | None = None,
    *,
    dim1: int | None = None,
    dim2: int | None = None,
) -> Any:
    """The entries (i, i + offset) of the matrices in dims axis1 and axis2 (0 and 1 by
    default), as a last dim after the others, as torch.diagonal (dim1, dim2) and
    np.diagonal (axis1, axis2). A builder over views: the two dims merged (reshape),
    every (n+1)-th entry taken (a strided slice), the diagonal moved last (transpose),
    so the gradient is the cotangent scattered back onto the diagonal. On an eager tensor
    whose two dims are next to each other (in either order) the result is a view, as
    torch's is; dims further apart are moved together first, which copies. The two dims
    must be concrete (the stride is one of them plus 1).

    >>> import numpy as np, graphc as gc
    >>> m = np.arange(12).reshape(3, 4)
    >>> gc.diagonal(m).tolist(), gc.diagonal(m, 1).tolist(), gc.diagonal(m, offset=-2).tolist()
    ([0, 5, 10], [1, 6, 11], [8])
    """
    axis1 = pick_axis(axis1, dim1, "diagonal", default=0, names=("axis1", "dim1"))
    axis2 = pick_axis(axis2, dim2, "diagonal", default=1, names=("axis2", "dim2"))
    shape = tuple(shape_of(x))
    rank = len(shape)
    if rank < 2:
        raise ShapeError(f"diagonal: needs at least 2 dims, got shape {format_shape(shape)}")
    first, second = normalize_axis(axis1, rank, "diagonal"), normalize_axis(axis2, rank, "diagonal")
    if first == second:
        raise ShapeError(
            f"diagonal: axis1 and axis2 are both dim {first} of shape {format_shape(shape)} "
            "(a diagonal runs along two different dims)"
        )
    offset = integer(offset, "diagonal", "offset")
    if is_symbol(shape[first]) or is_symbol(shape[second]):
        raise ShapeError(
            f"diagonal: dims {first} and {second} of shape {format_shape(shape)} must be "
            "concrete (the diagonal's stride and length follow from them)"
        )
    if first > second:  # entry (i, i + k) of dims (a, b) is entry (j + k', j) of (b, a), k' = -k
        first, second, offset = second, first, -offset
    if second != first + 1:  # dims apart: moved next to each other, at the end
        order = (*(a for a in range(rank) if a not in (first, second)), first, second)
        x = S.transpose(x, order)
        shape = tuple(shape[a] for a in order)
        first, second = rank - 2, rank - 1
    rows, cols = shape[first], shape[second]
    if offset >= 0:  # entry (i, i + offset) is merged position i * (cols + 1) + offset
        length, start = max(0, min(rows, cols - offset)), offset
    else:  # entry (i - offset, i) is merged position i * (cols + 1) - offset * cols
        length, start = max(0, min(rows + offset, cols)), -offset * cols
    merged = S.reshape(x, (*shape[:first], rows * cols, *shape[second + 1 :]))
    taken = slice(start, start + (length - 1) * (cols + 1) + 1, cols + 1) if length else slice(0, 0)
    result = I.slice_(merged, index=(*(slice(None),) * first, taken))
    if first == rank - 2:
        return result
    last = (*(a for a in range(rank - 1) if a != first), first)  # the diagonal's dim last
    return S.transpose(result, last)


# -- diag ------------------------------------------------------------------------------------------

_diagonal_of = diagonal  # inside diag, torch's keyword `diagonal=` hides the function


def diag(v: Any, k: int | None = None, *, diagonal: int | None = None) -> Any:
    """np.diag and torch.diag (`diagonal=`): of a 1-D v, the square matrix with v on its
    k-th diagonal (above the main one for k > 0) and zeros elsewhere; of a 2-D v, its k-th
    diagonal (`diagonal`). The matrix is a `where` on an identity pattern, padded by |k|,
    so the gradient of v is the cotangent's diagonal; v's length must be concrete. The
    result is a new array, never a view of v (as torch's; `diagonal` is the view).

    >>> import numpy as np, graphc as gc
    >>> gc.diag(np.array([1, 2]), 1).tolist()
    [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    >>> gc.diag(np.arange(9).reshape(3, 3), -1).tolist()
    [3, 7]
    """
    k = integer(pick_axis(k, diagonal, "diag", default=0, names=("k", "diagonal")), "diag", "k")
    if kind_of(v) is None:
        v = np.asarray(v)  # a list, as numpy takes
    shape = tuple(shape_of(v))
    if len(shape) == 2:  # a copy, as torch.diag's: gc.diagonal is the view
        return C.cast(_diagonal_of(v, k), dtype_of(v))
    if len(shape) != 1:
        raise ShapeError(f"diag: expects a 1-D or 2-D input, got shape {format_shape(shape)}")
    n = shape[0]
    if is_symbol(n):
        raise ShapeError(f"diag: the length of v must be concrete, got {n!r}")
    zero = np.zeros((), dtype_of(v))  # v's own dtype (a Python 0 would widen bools)
    square = C.where(np.eye(n, dtype=bool), S.expand_dims(v, 1), zero)
    if k == 0:
        return square
    before, after = (0, abs(k)) if k > 0 else (abs(k), 0)
    return pad(square, ((before, after), (after, before)))
