"""torch's composites on eager tensors: the functions `roll`, `lerp`, `addcmul`,
`addcdiv`, `trace`, `diff`, `aminmax`, `frac`, and Tensor methods naming the nodes of
shared ones (`mT`, `scatter`, `index_add`, `addmm`, ...); and the eager-only
`masked_select` (its shape depends on the mask's values), `meshgrid`,
`broadcast_tensors`, `std_mean`, `var_mean`.

The shared composites are built once, from op functions, in graphc/ops (composites.py,
elementwise_composites.py, bias_products.py, order_statistics.py, scatters.py), and graph
values have them as methods too; here a tensor's result only gets torch's name for its
node (`RollBackward0`, ...). The functions take the tensor first and work on graph
values while tracing; `CompositeMethods` gives them as Tensor methods.

>>> import graphc.eager as ge
>>> ge.tensor([1.0, 2.0, 3.0], requires_grad=True).roll(1)
tensor([3., 1., 2.], grad_fn=<RollBackward0>)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import ShapeError
from graphc.ops import composites as C
from graphc.ops import indexing as I
from graphc.ops import order_statistics, scatters
from graphc.ops import shape as S
from graphc.ops.composites import MinMaxPair

__all__ = ["MinMaxPair"]


def spelled(t: Any, name: str) -> Any:
    from graphc.eager.grad_fn import spelled as name_node  # grad_fn imports Tensor, us

    return name_node(t, name)


def roll(x: Any, shifts: Any, dims: Any = None) -> Any:
    """Elements shifted by `shifts` along `dims`, wrapping around (of the flattened tensor
    when dims is None, in x's shape)."""
    return spelled(C.roll(x, shifts, dims), "RollBackward0")


def lerp(start: Any, end: Any, weight: Any) -> Any:
    """start + weight * (end - start)."""
    name = "LerpBackward1" if hasattr(weight, "shape") else "LerpBackward0"  # torch's overloads
    return spelled(C.lerp(start, end, weight), name)


def addcmul(x: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """x + value * tensor1 * tensor2."""
    return spelled(C.addcmul(x, tensor1, tensor2, value=value), "AddcmulBackward0")


def addcdiv(x: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """x + value * tensor1 / tensor2."""
    return spelled(C.addcdiv(x, tensor1, tensor2, value=value), "AddcdivBackward0")


def trace(x: Any) -> Any:
    """The sum of a matrix's diagonal."""
    return spelled(C.matrix_trace(x), "TraceBackward0")


def diff(x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The n-th forward difference along dim (after joining prepend and append to x)."""
    return C.diff(x, n, dim, prepend, append)


def aminmax(x: Any, *, dim: Any = None, keepdim: bool = False) -> MinMaxPair:
    both = C.aminmax(x, dim=dim, keepdim=keepdim)
    return MinMaxPair(*(spelled(v, "AminmaxBackward0") for v in both))


def frac(x: Any) -> Any:
    """The fractional part, with x's sign (x - trunc(x))."""
    return spelled(C.frac(x), "FracBackward0")


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
    """The functions above, and torch's out-of-place scatters, as Tensor methods (mixed
    into `Tensor` before the shared `ValueMethods`, whose methods they name)."""

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

    def masked_select(self, mask: Any) -> Any:
        return masked_select(self, mask)

    def aminmax(self, *, dim: Any = None, keepdim: bool = False) -> MinMaxPair:
        return aminmax(self, dim=dim, keepdim=keepdim)

    def frac(self) -> Any:
        return frac(self)

    @property
    def mT(self) -> Any:  # noqa: N802 - torch's name
        """The last two dims swapped (of matrices, or batches of them)."""
        from graphc.ops.methods import ValueMethods  # the shared property

        return spelled(ValueMethods.mT.fget(self), "TransposeBackward0")  # type: ignore[attr-defined]

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        """torch's scatter, out of place: for dim 1, out[i][index[i][j]] = src[i][j]."""
        out = scatters.scatter(self, dim, index, src, value=value)
        number = src is None or not hasattr(src, "shape")
        return spelled(out, "ScatterBackward1" if number else "ScatterBackward0")

    def scatter_add(self, *args: Any, **kwargs: Any) -> Any:
        """torch's scatter_add(dim, index, src) when the first argument is a dim; graphc's
        own scatter_add(indices, shape, axis) (numpy's add.at into zeros) otherwise."""
        from graphc.ops.methods import ValueMethods

        out = ValueMethods.scatter_add(self, *args, **kwargs)  # type: ignore[attr-defined]
        by_dim = args and isinstance(args[0], (int, np.integer)) or "dim" in kwargs
        return spelled(out, "ScatterAddBackward0") if by_dim else out

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        out = scatters.index_add(self, dim, index, source, alpha=alpha)
        return spelled(out, "IndexAddBackward0")

    def index_fill(self, dim: int, index: Any, value: Any) -> Any:
        name = "IndexFillBackward1" if hasattr(value, "shape") else "IndexFillBackward0"
        return spelled(scatters.index_fill(self, dim, index, value), name)

    def nanmedian(self, dim: Any = None, keepdim: bool = False) -> Any:
        """The lower middle value of those not nan; (values, indices) along dim."""
        out = order_statistics.nanmedian(self, dim, keepdim)
        if dim is None:
            return spelled(out, "NanmedianBackward0")
        return type(out)(spelled(out.values, "NanmedianBackward1"), out.indices)

    def index_copy(self, dim: int, index: Any, source: Any) -> Any:
        return spelled(scatters.index_copy(self, dim, index, source), "IndexCopyBackward0")


# shared methods whose node torch names after the method (the op recorded last may serve
# several methods: a `gemm` is addmm, a `pow` exp2)
NODE_NAMES = {
    "addmm": "AddmmBackward0",
    "addmv": "AddmvBackward0",
    "addr": "AddrBackward0",
    "baddbmm": "BaddbmmBackward0",
    "addbmm": "AddbmmBackward0",
    "exp2": "Exp2Backward0",
    "logit": "LogitBackward0",
    "xlogy": "XlogyBackward0",
    "hypot": "HypotBackward0",
    "fmax": "FmaxBackward0",
    "fmin": "FminBackward0",
    "float_power": "PowBackward0",
    "dist": "DistBackward0",
    "kthvalue": "KthvalueBackward0",
    "logcumsumexp": "LogcumsumexpBackward0",
    "rot90": "Rot90Backward0",
    "unfold": "UnfoldBackward0",
    "sgn": "SgnBackward0",
    "absolute": "AbsBackward0",
    "msort": "SortBackward0",
    "cummax": "CummaxBackward0",
    "cummin": "CumminBackward0",
    "sum_to_size": "SumBackward1",
    "sinc": "SincBackward0",
    "deg2rad": "Deg2RadBackward0",
    "rad2deg": "Rad2DegBackward0",
    "diag_embed": "DiagEmbedBackward0",
    "diagflat": "DiagEmbedBackward0",
    "narrow_copy": "NarrowCopyBackward0",
}


def _naming(name: str, node_name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        from graphc.ops.methods import ValueMethods  # the shared method this one names

        out = getattr(ValueMethods, name)(self, *args, **kwargs)
        if isinstance(out, tuple):  # (values, indices): the values are differentiable
            return type(out)(spelled(out[0], node_name), *out[1:])
        return spelled(out, node_name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The shared `{name}`, its node named {node_name} as torch names it."
    return method


for _name, _node_name in NODE_NAMES.items():
    setattr(CompositeMethods, _name, _naming(_name, _node_name))
del _name, _node_name
