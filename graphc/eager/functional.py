"""Module-level functions with PyTorch's names and arguments (`graphc.eager.sum(x, dim=1)`).

Ops whose spelling is the same in numpy and PyTorch (`exp`, `matmul`, `where`, ...)
are graphc's op functions themselves, re-exported by `graphc.eager`; the ones here
wrap an op function to accept `dim`/`keepdim` or PyTorch's argument order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphc.eager.creation import as_tensor
from graphc.eager.errors import ArgumentError
from graphc.eager.grad_fn import spelled
from graphc.eager.tensor import Tensor
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import nn as N
from graphc.ops import shape as S
from graphc.ops.gemm import gemm as _gemm
from graphc.ops.methods import scaled
from graphc.ops.symbolic import Symbol


def _t(x: Any) -> Any:
    """x as a value with methods: a tensor, or a graph value while tracing (a model
    written with these functions traces, as with the op functions)."""
    return x if isinstance(x, (Tensor, Symbol)) else as_tensor(x)


def _reduce_as(x: Any, dtype: Any) -> Any:
    """x cast to `dtype` first, torch's reductions' `dtype=` (a graph value too)."""
    return _t(x) if dtype is None else _t(x).to(dtype)


def _as(out: Any, dtype: Any) -> Any:
    """The reduction's result in `dtype` too (numpy sums int32 into int64)."""
    return out if dtype is None else out.to(dtype)


def sum(x: Any, dim: Any = None, keepdim: bool | None = None, *, dtype: Any = None,
        axis: Any = None, keepdims: bool | None = None) -> Any:  # fmt: skip
    """torch.sum: sum(x), sum(x, dim=1, keepdim=True); numpy's axis/keepdims also work."""
    return _as(_reduce_as(x, dtype).sum(dim, keepdim, axis=axis, keepdims=keepdims), dtype)


def mean(x: Any, dim: Any = None, keepdim: bool | None = None, *, dtype: Any = None,
         axis: Any = None, keepdims: bool | None = None) -> Any:  # fmt: skip
    """torch.mean over dim (all by default)."""
    return _reduce_as(x, dtype).mean(dim, keepdim, axis=axis, keepdims=keepdims)


def prod(x: Any, dim: Any = None, keepdim: bool | None = None, *, dtype: Any = None,
         axis: Any = None, keepdims: bool | None = None) -> Any:  # fmt: skip
    """torch.prod: prod(x), prod(x, dim=1, keepdim=True); numpy's axis/keepdims also work."""
    return _as(_reduce_as(x, dtype).prod(dim, keepdim, axis=axis, keepdims=keepdims), dtype)


def norm(x: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False,
         dtype: Any = None) -> Any:  # fmt: skip
    """torch.norm: the vector p-norm over dim (all elements by default)."""
    return _t(x).norm(p, dim, keepdim, dtype)


def div(x: Any, y: Any, *, rounding_mode: str | None = None) -> Any:
    """torch.div: x / y, or rounded "floor" or "trunc" (keeping integer dtypes)."""
    return _t(x).div(y, rounding_mode=rounding_mode)


divide = div


def true_divide(x: Any, y: Any) -> Any:
    return E.div(x, y)


def frac(x: Any) -> Any:
    return _t(x).frac()


def flip(x: Any, dims: Any) -> Any:
    """torch.flip(x, dims): reversed along each of dims."""
    return _t(x).flip(dims)


def median(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """torch.median: the lower middle value; (values, indices) along dim."""
    return _t(x).median(dim, keepdim)


def tile(x: Any, dims: Any) -> Any:
    """torch.tile: x repeated dims[i] times along each dim i, in new memory."""
    return _t(x).tile(dims)


def tensor_split(x: Any, indices_or_sections: Any, dim: int = 0) -> Any:
    return _t(x).tensor_split(indices_or_sections, dim)


def gather(x: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Any:
    """torch.gather: out[i][j] = x[i][index[i][j]] for dim 1 (graphc's own `gc.gather`
    is numpy's take)."""
    return _t(x).gather(dim, index)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """torch.where: x where condition holds, y elsewhere; of a condition alone, the
    indices where it holds, one tensor per dim (nonzero(as_tuple=True))."""
    if x is None and y is None:
        return as_tensor(condition).nonzero(as_tuple=True)
    return E.where(condition, x, y)


def narrow(x: Any, dim: int, start: int, length: int) -> Any:
    return _t(x).narrow(dim, start, length)


def count_nonzero(x: Any, dim: Any = None) -> Any:
    return _t(x).count_nonzero(dim)


def nonzero(x: Any, *, as_tuple: bool = False) -> Any:
    """torch.nonzero: the indices of the nonzero elements, one row each (or per dim)."""
    return as_tensor(x).nonzero(as_tuple=as_tuple)


def argwhere(x: Any) -> Any:
    return as_tensor(x).nonzero()


def nansum(x: Any, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
           keepdims: bool | None = None) -> Any:  # fmt: skip
    """torch.nansum: the sum over dim (all by default) counting nan as 0."""
    return _t(x).nansum(dim, keepdim, axis=axis, keepdims=keepdims)


def diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """torch.diagonal: the entries (i, i + offset) of dims dim1 and dim2, as a last dim."""
    return _t(x).diagonal(offset, dim1, dim2)


def max(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
        keepdims: bool = False) -> Any:  # fmt: skip
    """torch.max: the largest value; (values, indices) along dim; maximum with a tensor."""
    return _t(x).max(dim, keepdim, axis=axis, keepdims=keepdims)


def min(x: Any, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
        keepdims: bool = False) -> Any:  # fmt: skip
    """torch.min: the smallest value; (values, indices) along dim; minimum with a tensor."""
    return _t(x).min(dim, keepdim, axis=axis, keepdims=keepdims)


def amax(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _t(x).amax(dim, keepdim)


def repeat_interleave(x: Any, repeats: Any, dim: int | None = None) -> Any:
    """torch.repeat_interleave: each element repeated in turn along dim (np.repeat)."""
    return _t(x).repeat_interleave(repeats, dim)


def movedim(x: Any, source: Any, destination: Any) -> Any:
    """torch.movedim, torch.moveaxis's other name."""
    return _t(x).moveaxis(source, destination)


def amin(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _t(x).amin(dim, keepdim)


def argmax(x: Any, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
           keepdims: bool | None = None) -> Any:  # fmt: skip
    return _t(x).argmax(dim, keepdim, axis=axis, keepdims=keepdims)


def argmin(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _t(x).argmin(dim, keepdim)


def var(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None) -> Any:  # fmt: skip
    """torch.var: unbiased (ddof=1) unless unbiased=False or correction= says otherwise."""
    return _t(x).var(dim, unbiased, keepdim, correction=correction)


def std(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None) -> Any:  # fmt: skip
    return _t(x).std(dim, unbiased, keepdim, correction=correction)


def logsumexp(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _t(x).logsumexp(dim, keepdim)


def cat(tensors: Sequence[Any], dim: int = 0, *, axis: int | None = None) -> Any:
    """torch.cat: join along an existing dim. cat([a, b], dim=0)

    As torch, 1-d tensors with no elements are left out whatever the others' shapes
    (the old way of starting an accumulation: `out = cat([out, x])` from `zeros(0)`)."""
    tensors = list(tensors)
    if not tensors:
        raise ArgumentError("cat: expected a non-empty list of tensors")
    kept = [x for x in tensors if tuple(getattr(x, "shape", (None,))) != (0,)]
    return S.concat(kept or tensors[:1], axis=dim if axis is None else axis)


concat = concatenate = cat


def stack(tensors: Sequence[Any], dim: int = 0, *, axis: int | None = None) -> Any:
    """torch.stack: join along a new dim."""
    if not len(tensors):
        raise ArgumentError("stack: expected a non-empty list of tensors")
    return spelled(S.stack(list(tensors), axis=dim if axis is None else axis), "StackBackward0")


def transpose(x: Any, *dims: Any) -> Any:
    """torch.transpose(x, 0, 1) swaps two dims; transpose(x, axes) permutes (numpy)."""
    return _t(x).transpose(*dims)


def permute(x: Any, *dims: Any) -> Any:
    return _t(x).permute(*dims)


def t(x: Any) -> Any:
    return _t(x).t()


def reshape(x: Any, *shape: Any) -> Any:
    return _t(x).reshape(*shape)


def squeeze(x: Any, dim: Any = None) -> Any:
    return _t(x).squeeze(dim)


def unsqueeze(x: Any, dim: int) -> Any:
    return _t(x).unsqueeze(dim)


def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    return _t(x).flatten(start_dim, end_dim)


def clamp(x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
    """torch.clamp(x, min, max)."""
    return _t(x).clamp(min, max)


clip = clamp


def softmax(x: Any, dim: int = -1) -> Any:
    return N.softmax(x, axis=dim)


def log_softmax(x: Any, dim: int = -1) -> Any:
    return N.log_softmax(x, axis=dim)


def mm(x: Any, y: Any) -> Any:
    return _t(x).mm(y)


def mv(x: Any, v: Any) -> Any:
    """torch.mv: a matrix times a vector."""
    return _t(x).matmul(v)


def bmm(x: Any, y: Any) -> Any:
    return _t(x).bmm(y)


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:  # noqa: A002
    """torch.addmm: beta * input + alpha * mat1 @ mat2, one gemm node (input is not read
    when beta is 0)."""
    return _gemm(_t(mat1), mat2, input, alpha=alpha, beta=beta)


def index_select(x: Any, dim: int, index: Any) -> Any:
    """torch.index_select(x, dim, index)."""
    return I.take(x, index, axis=dim)


def numel(x: Any) -> int:
    return _t(x).numel()


def equal(x: Any, y: Any) -> bool:
    """torch.equal: True when x and y have the same shape and the same values (a Python
    bool; `graphc.eager.eq` is the elementwise comparison)."""
    return as_tensor(x).equal(as_tensor(y))  # values: a graph value refuses, naming itself


def is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def _scaled(y: Any, alpha: Any) -> Any:
    """alpha * y; of two Python numbers a Python number, so it stays weak (the op of two
    numbers gives an int64 or float64 array, which made x.add(1, alpha=2) float64)."""
    if isinstance(y, (int, float)) and isinstance(alpha, (int, float)):
        return y * alpha
    return scaled(y, alpha)


def add(x: Any, y: Any, alpha: Any = 1) -> Any:
    """torch.add(x, y, alpha=1): x + alpha * y."""
    return E.add(x, _scaled(y, alpha))


def sub(x: Any, y: Any, alpha: Any = 1) -> Any:
    """torch.sub(x, y, alpha=1): x - alpha * y."""
    return E.sub(x, _scaled(y, alpha))


subtract = sub
