"""Tensor methods for array manipulation (flip, tril, cumsum, sort, topk, split, ...),
with PyTorch's names and argument names; each calls graphc's op function.

`x.gather(dim, index)` is torch.gather (graphc's `take_along_axis`), not graphc's own
`gc.gather`, which is numpy's take. Tensor.flatten and Tensor.repeat live in methods.py.
"""

from __future__ import annotations

from typing import Any

from graphc.ops import along_axis as A
from graphc.ops import arrays as Arr
from graphc.ops import elementwise as E
from graphc.ops import padding as P
from graphc.ops import sequences as Q
from graphc.ops import sorting as O


def _dims(dims: tuple) -> Any:
    """`f(0, 1)` and `f((0, 1))` (or a list) both mean the dims (0, 1)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    return tuple(dims)


class ArrayMethods:
    """Mixed into Tensor.

    >>> import graphc.eager as ge
    >>> x = ge.tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    >>> values, indices = x.sort(dim=1, descending=True)
    >>> values.sum().backward()
    >>> indices.tolist(), x.grad.tolist()
    ([[0, 2, 1]], [[1.0, 1.0, 1.0]])
    """

    # -- pieces and copies ---------------------------------------------------------------

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        """Pieces of `split_size` along dim (the last may be smaller), or of the sizes in
        a list, as torch.split."""
        return Arr.split(self, split_size, axis=dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """`chunks` pieces of equal size along dim (the last may be smaller)."""
        return Arr.chunk(self, chunks, axis=dim)

    def tile(self, *dims: Any) -> Any:
        """Repeat the tensor dims[i] times along each dim i (numpy's tile)."""
        return Arr.tile(self, _dims(dims))

    def flip(self, *dims: Any) -> Any:
        """Reverse the order of elements along the given dims (a copy, as torch)."""
        return Arr.flip(self, _dims(dims))

    def fliplr(self) -> Any:
        return Arr.flip(self, (1,))

    def flipud(self) -> Any:
        return Arr.flip(self, (0,))

    def tril(self, diagonal: int = 0) -> Any:
        return Arr.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Any:
        return Arr.triu(self, diagonal)

    def unpad(self, pad_width: Any, mode: str = "constant") -> Any:
        """The adjoint of pad (graphc's): interior plus padded values added back."""
        return P.unpad(self, pad_width, mode)

    def cumsum(self, dim: int, dtype: Any = None) -> Any:
        """Running sums along dim (ints and bools in int64); `dtype` casts first."""
        x = self if dtype is None else E.cast(self, dtype)
        return Q.cumsum(x, axis=dim)

    # -- sorting --------------------------------------------------------------------------

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """(values, indices) sorted along dim; always stable (ties keep their order)."""
        return O.sort(self, dim, descending)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        return O.argsort(self, dim, descending)

    def topk(
        self,
        k: int,
        dim: int = -1,
        largest: bool = True,
        sorted: bool = True,  # noqa: A002 - torch's name
    ) -> Any:
        """(values, indices) of the k largest (smallest) along dim; ties in index order."""
        return O.topk(self, k, dim, largest)

    # -- picking along a dim ----------------------------------------------------------------

    def gather(self, dim: int, index: Any) -> Any:
        """torch.gather: out[i][j] = self[i][index[i][j]] for dim 1 (take_along_axis)."""
        return A.take_along_axis(self, index, axis=dim)

    def take_along_dim(self, indices: Any, dim: int | None = None) -> Any:
        return A.take_along_axis(self, indices, axis=dim)

    def take_along_axis(self, indices: Any, axis: int | None = None) -> Any:
        return A.take_along_axis(self, indices, axis=axis)

    def scatter_add_along_axis(self, indices: Any, shape: Any, axis: int = 0) -> Any:
        """Zeros of shape with this tensor's entries added at indices along axis."""
        return A.scatter_add_along_axis(self, indices, shape, axis)
