"""Picking along an axis by an index array: `take_along_axis` (torch.gather) and its
adjoint `scatter_add_along_axis`, and `embedding` (rows of a weight, by id).

`gc.gather` stays numpy's `take` (whole slices by a list of indices); the elementwise
gather of PyTorch is `take_along_axis`, numpy's name, also spelled `take_along_dim`
(torch's) and `Tensor.gather(dim, index)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, IndexRangeError, ShapeError
from graphc.ir.types import Shape, TensorType, as_shape, format_shape, is_symbol
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S
from graphc.ops.defop import defop, into
from graphc.ops.indexing import check_indices
from graphc.ops.spelling import flattened, integer, one_axis, pick_axis

# -- take_along_axis and scatter_add_along_axis -----------------------------------------------


def _check_index_type(op: str, indices: TensorType) -> None:
    if not np.issubdtype(indices.dtype, np.integer):
        raise DTypeError(f"{op}: indices must be integers, got {indices.dtype}")


def _check_window(op: str, shape: Shape, indices: Shape, axis: int) -> None:
    """indices' dims off the axis fit in shape's: torch.gather reads the window
    [0:n) of each; a symbolic dim must be the very same symbol."""
    if len(shape) != len(indices):
        raise ShapeError(
            f"{op}: indices of shape {format_shape(indices)} must have the rank of "
            f"shape {format_shape(shape)}"
        )
    for d, (size, n) in enumerate(zip(shape, indices)):
        fits = n == size if is_symbol(size) or is_symbol(n) else n <= size  # type: ignore[operator]
        if d != axis and not fits:
            raise ShapeError(
                f"{op}: indices of shape {format_shape(indices)} do not fit shape "
                f"{format_shape(shape)} off axis {axis} (each dim at most the array's)"
            )


def _grid(indices: np.ndarray, axis: int) -> tuple:
    """The full index tuple that puts `indices` along `axis` and ranges elsewhere."""
    grid = list(np.ogrid[tuple(slice(0, n) for n in indices.shape)])
    grid[axis] = indices
    return tuple(grid)


def _take_along_canon(x: TensorType, indices: TensorType, axis: Any) -> dict:
    _check_index_type("take_along_axis", indices)
    return {"axis": one_axis(axis, x.rank, "take_along_axis")}


def _take_along_infer(x: TensorType, indices: TensorType, axis: int) -> TensorType:
    _check_window("take_along_axis", x.shape, indices.shape, axis)
    return x.with_shape(indices.shape)


def _take_along_kernel(
    x: np.ndarray, i: np.ndarray, out: np.ndarray | None = None, axis: int = 0
) -> np.ndarray:
    if x.ndim == 0:  # as torch.gather: a 0-d array has one element, at index 0 (or -1)
        check_indices("take_along_axis", i.reshape(1), 1, 0)
        return into(out, x)
    check_indices("take_along_axis", i, x.shape[axis], axis)
    _check_window("take_along_axis", x.shape, i.shape, axis)  # fed sizes of symbolic dims
    return into(out, x[_grid(i, axis)])


# picking entries: the gradient adds each cotangent back where its entry came from
_take_along_axis = defop(
    "take_along_axis",
    inputs=("x", "indices"),
    infer=_take_along_infer,
    kernel=_take_along_kernel,
    attrs={"axis": 0},
    canonicalize=_take_along_canon,
    vjp=lambda ct, out, x, i, needs, axis: (
        _scatter_add_along_axis(ct, i, shape=x.shape, axis=axis),
        None,
    ),
    doc="out[..., j, ...] = x[..., indices[..., j, ...], ...] along axis (np.take_along_axis).",
)


def take_along_axis(
    x: Any, indices: Any, axis: int | None = None, *, dim: int | None = None
) -> Any:
    """Entries of x picked along `axis` by `indices` of x's rank, as np.take_along_axis
    and torch.gather: out[i][j][k] = x[i][indices[i][j][k]][k] for axis 1.

    The indices' other dims may be smaller than x's, as in torch.gather (the window
    from 0 is read); negative indices count from the end, as in numpy. Without an axis
    both are flattened first (numpy's axis=None, torch.take_along_dim's dim=None).

    >>> import numpy as np, graphc as gc
    >>> x = np.array([[10, 11, 12], [20, 21, 22]])
    >>> gc.take_along_axis(x, np.array([[2, 0], [1, 1]]), axis=1).tolist()
    [[12, 10], [21, 21]]
    """
    axis = pick_axis(axis, dim, "take_along_axis")
    if axis is None:  # numpy's and torch's None: along the flattened x (and indices)
        x, indices = flattened(x, "take_along_axis"), flattened(indices, "take_along_axis")
        axis = 0
    return _take_along_axis(x, indices, axis=axis)


take_along_dim = take_along_axis


def _scatter_along_canon(ct: TensorType, indices: TensorType, shape: Any, axis: Any) -> dict:
    _check_index_type("scatter_add_along_axis", indices)
    shape = as_shape(shape, "scatter_add_along_axis")
    return {"shape": shape, "axis": one_axis(axis, len(shape), "scatter_add_along_axis")}


def _scatter_along_infer(
    ct: TensorType, indices: TensorType, shape: Shape, axis: int
) -> TensorType:
    if ct.shape != indices.shape:
        raise ShapeError(
            f"scatter_add_along_axis: the values have shape {format_shape(ct.shape)}, "
            f"the indices {format_shape(indices.shape)}; they must be the same"
        )
    _check_window("scatter_add_along_axis", shape, indices.shape, axis)
    return ct.with_shape(shape)


def _scatter_along_kernel(
    ct: np.ndarray, i: np.ndarray, out: np.ndarray | None = None, shape: Shape = (), axis: int = 0
) -> np.ndarray:
    if out is None:
        out = np.zeros(shape, ct.dtype)
    else:
        out.fill(0)
    if out.ndim == 0:
        check_indices("scatter_add_along_axis", i.reshape(1), 1, 0)
        out[...] = ct
        return out
    check_indices("scatter_add_along_axis", i, out.shape[axis], axis)
    _check_window("scatter_add_along_axis", out.shape, i.shape, axis)
    np.add.at(out, _grid(i, axis), ct)  # repeated indices add up, in index order
    return out


_scatter_add_along_axis = defop(
    "scatter_add_along_axis",
    inputs=("ct", "indices"),
    infer=_scatter_along_infer,
    kernel=_scatter_along_kernel,
    attrs={"shape": (), "axis": 0},
    canonicalize=_scatter_along_canon,
    vjp=lambda ct, out, x, i, needs, shape, axis: (_take_along_axis(ct, i, axis=axis), None),
    shape_attrs=("shape",),
    doc="Zeros of shape with ct added at indices along axis: the adjoint of take_along_axis.",
)


def scatter_add_along_axis(
    ct: Any, indices: Any, shape: Any, axis: int | None = None, *, dim: int | None = None
) -> Any:
    """Zeros of `shape` with each entry of `ct` added at its index along `axis`: the
    adjoint of take_along_axis (torch's `zeros(shape).scatter_add(dim, indices, ct)`).

    >>> import numpy as np, graphc as gc
    >>> gc.scatter_add_along_axis(np.ones((1, 3)), np.array([[0, 2, 0]]), (1, 3), axis=1).tolist()
    [[2.0, 0.0, 1.0]]
    """
    axis = pick_axis(axis, dim, "scatter_add_along_axis", default=0)
    return _scatter_add_along_axis(ct, indices, shape=shape, axis=axis)


# -- embedding ------------------------------------------------------------------------------


def _embedding_canon(indices: TensorType, weight: TensorType, padding_idx: Any) -> dict:
    _check_index_type("embedding", indices)
    if weight.rank != 2:
        raise ShapeError(
            f"embedding: the weight must be (num_embeddings, embedding_dim), "
            f"got shape {format_shape(weight.shape)}"
        )
    if padding_idx is None:
        return {"padding_idx": None}
    padding_idx = integer(padding_idx, "embedding", "padding_idx")
    rows = weight.shape[0]
    if is_symbol(rows):
        if padding_idx < 0:
            raise ShapeError(
                f"embedding: a negative padding_idx needs a known number of rows, not {rows!r}"
            )
    elif not -rows <= padding_idx < rows:
        raise IndexRangeError(
            f"embedding: padding_idx {padding_idx} is out of range for {rows} embeddings"
        )
    return {"padding_idx": padding_idx if padding_idx >= 0 else padding_idx + rows}


def _embedding_infer(indices: TensorType, weight: TensorType, padding_idx: Any) -> TensorType:
    return TensorType(indices.shape + (weight.shape[1],), weight.dtype)


def _embedding_kernel(
    ids: np.ndarray, weight: np.ndarray, out: np.ndarray | None = None, padding_idx: Any = None
) -> np.ndarray:
    rows = weight.shape[0]
    if ids.size and not (ids.min() >= 0 and ids.max() < rows):  # torch takes no negative ids
        bad = ids[(ids < 0) | (ids >= rows)].flat[0]
        raise IndexRangeError(f"embedding: index {bad} is out of range for {rows} embeddings")
    if out is None:
        out = np.empty(ids.shape + weight.shape[1:], weight.dtype)
    # checked above, so mode="clip" changes nothing; numpy buffers `out` in mode="raise"
    return np.take(weight, ids, axis=0, out=out, mode="clip")


def _embedding_vjp(
    ct: Any, out: Any, ids: Any, weight: Any, needs: tuple, padding_idx: Any
) -> tuple:
    # each row's gradient is the sum of the cotangents of the places it was read; the
    # padding row is read but never learns, as in torch
    if padding_idx is not None:
        ct = E.where(S.expand_dims(E.ne(ids, padding_idx), -1), ct, 0)
    return (None, I.scatter_add(ct, ids, shape=weight.shape, axis=0))


_embedding = defop(
    "embedding",
    inputs=("indices", "weight"),
    infer=_embedding_infer,
    kernel=_embedding_kernel,
    attrs={"padding_idx": None},
    canonicalize=_embedding_canon,
    vjp=_embedding_vjp,
    doc="The rows of weight at indices (F.embedding); padding_idx's row gets no gradient.",
)


def embedding(indices: Any, weight: Any, padding_idx: int | None = None) -> Any:
    """weight[indices]: one row of the (num_embeddings, embedding_dim) weight per index,
    as torch.nn.functional.embedding. Indices must be in [0, num_embeddings).

    The weight's gradient adds the cotangents of each row's uses (a scatter-add);
    the row `padding_idx` (negative counts from the end) gets none.

    >>> import numpy as np, graphc as gc
    >>> weight = np.arange(6.0).reshape(3, 2)
    >>> gc.embedding(np.array([[2, 0]]), weight).tolist()
    [[[4.0, 5.0], [0.0, 1.0]]]
    """
    return _embedding(indices, weight, padding_idx=padding_idx)
