"""torch functions and Tensor methods that are a few registry ops each: `roll`, `lerp`,
`addcmul`, `addcdiv`, `trace`, `diff`, `masked_select`, `meshgrid`, `broadcast_tensors`,
`aminmax`, `std_mean`, `var_mean`.

They are built from op functions, so they record the tape (and differentiate) like any
op; each result's node is named as torch names it. A function here takes the tensor
first; `CompositeMethods` gives the same as methods.

>>> import graphc.eager as ge
>>> ge.tensor([1.0, 2.0, 3.0], requires_grad=True).roll(1)
tensor([3., 1., 2.], grad_fn=<RollBackward0>)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from graphc.ir.errors import ShapeError
from graphc.ir.types import normalize_axis
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import logical as L
from graphc.ops import reduce as R
from graphc.ops import shape as S


def spelled(t: Any, name: str) -> Any:
    from graphc.eager.grad_fn import spelled as name_node  # grad_fn imports Tensor, us

    return name_node(t, name)


class MinMaxPair(NamedTuple):
    """What `aminmax` returns, as torch.return_types.aminmax."""

    min: Any
    max: Any


def roll(x: Any, shifts: Any, dims: Any = None) -> Any:
    """Elements shifted by `shifts` along `dims`, wrapping around (of the flattened tensor
    when dims is None, in x's shape)."""
    if dims is None:
        return spelled(S.reshape(roll(S.reshape(x, (-1,)), shifts, 0), x.shape), "RollBackward0")
    shifts = shifts if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: {len(shifts)} shifts but {len(dims)} dims; give one per dim")
    out = x
    for shift, dim in zip(shifts, dims):
        axis = normalize_axis(dim, len(x.shape), "roll")
        size = x.shape[axis]
        cut = size - int(shift) % size if size else 0
        if cut % max(size, 1):  # the last `shift` elements move to the front
            tail, head = out.narrow(axis, cut, size - cut), out.narrow(axis, 0, cut)
            out = S.concat([tail, head], axis=axis)
        else:
            out = E.cast(out, out.dtype)  # a shift by whole turns: still new memory
    return spelled(out, "RollBackward0")


def lerp(start: Any, end: Any, weight: Any) -> Any:
    """start + weight * (end - start)."""
    name = "LerpBackward1" if hasattr(weight, "shape") else "LerpBackward0"  # torch's overloads
    return spelled(E.add(start, E.mul(weight, E.sub(end, start))), name)


def addcmul(x: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """x + value * tensor1 * tensor2."""
    return spelled(E.add(x, E.mul(E.mul(tensor1, tensor2), value)), "AddcmulBackward0")


def addcdiv(x: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """x + value * tensor1 / tensor2."""
    return spelled(E.add(x, E.mul(E.div(tensor1, tensor2), value)), "AddcdivBackward0")


def trace(x: Any) -> Any:
    """The sum of a matrix's diagonal."""
    if len(x.shape) != 2:
        raise ShapeError(f"trace: expected a matrix, got a tensor of shape {tuple(x.shape)}")
    return spelled(R.sum(x.diagonal()), "TraceBackward0")


def diff(x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The n-th forward difference along dim (after joining prepend and append to x)."""
    parts = [p for p in (prepend, x, append) if p is not None]
    out = S.concat(parts, axis=dim) if len(parts) > 1 else x
    axis = normalize_axis(dim, len(out.shape), "diff")
    for _ in range(n):
        size = out.shape[axis]
        if size == 0:
            break
        later, earlier = out.narrow(axis, 1, size - 1), out.narrow(axis, 0, size - 1)
        out = L.logical_xor(later, earlier) if out.dtype == np.bool_ else E.sub(later, earlier)
    return out


def masked_select(x: Any, mask: Any) -> Any:
    """The elements of x where mask (broadcast with x) holds, as a 1-d tensor."""
    shape = np.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    spread = S.broadcast_to(x, shape)
    picked = np.flatnonzero(np.broadcast_to(getattr(mask, "_data", mask), shape))
    return spelled(I.take(S.reshape(spread, (-1,)), picked), "MaskedSelectBackward0")


def broadcast_tensors(*tensors: Any) -> tuple:
    """Each tensor expanded to their common shape (views, as torch)."""
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple:
    """Coordinate grids of 1-d tensors: "ij" (the default) puts tensor i along dim i, "xy"
    swaps the first two, as numpy's meshgrid."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ShapeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        order[0], order[1] = 1, 0
    shape = [0] * len(tensors)
    for i, t in enumerate(tensors):
        if len(t.shape) > 1:
            raise ShapeError(f"meshgrid: expects 0-d or 1-d tensors, got shape {t.shape}")
        shape[order[i]] = int(np.prod(t.shape))
    grids = []
    for i, t in enumerate(tensors):
        along = [1] * len(tensors)
        along[order[i]] = -1
        grids.append(S.reshape(t, tuple(along)).expand(*shape))
    return tuple(grids)


def aminmax(x: Any, *, dim: Any = None, keepdim: bool = False) -> MinMaxPair:
    return MinMaxPair(
        spelled(R.min(x, axis=dim, keepdims=keepdim), "AminmaxBackward0"),
        spelled(R.max(x, axis=dim, keepdims=keepdim), "AminmaxBackward0"),
    )


def std_mean(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
             *, correction: int | None = None) -> tuple:  # fmt: skip
    """(std, mean) over dim, as torch.std_mean."""
    std = x.std(dim, unbiased, keepdim, correction=correction)
    return spelled(std, "StdMeanBackward0"), spelled(x.mean(dim, keepdim), "StdMeanBackward0")


def var_mean(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
             *, correction: int | None = None) -> tuple:  # fmt: skip
    """(var, mean) over dim, as torch.var_mean."""
    var = x.var(dim, unbiased, keepdim, correction=correction)
    return spelled(var, "VarMeanBackward0"), spelled(x.mean(dim, keepdim), "VarMeanBackward0")


class CompositeMethods:
    """The functions above as Tensor methods (mixed into `Tensor`)."""

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        return roll(self, shifts, dims)

    def lerp(self, end: Any, weight: Any) -> Any:
        return lerp(self, end, weight)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        return addcmul(self, tensor1, tensor2, value=value)

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        return addcdiv(self, tensor1, tensor2, value=value)

    def trace(self) -> Any:
        return trace(self)

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
        return diff(self, n, dim, prepend, append)

    def masked_select(self, mask: Any) -> Any:
        return masked_select(self, mask)

    def aminmax(self, *, dim: Any = None, keepdim: bool = False) -> MinMaxPair:
        return aminmax(self, dim=dim, keepdim=keepdim)
