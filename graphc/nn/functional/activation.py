"""torch.nn.functional spellings: activation.

PyTorch's names, argument names and defaults, on eager tensors and graph values alike.
`inplace=True` is accepted and computes out of place: the result is a new tensor and
the input keeps its values (graphc's ops never write their inputs).

>>> import graphc.eager as ge
>>> import graphc.nn.functional as F
>>> F.leaky_relu(ge.tensor([-1.0, 2.0]), 0.5)
tensor([-0.5000,  2.0000])
"""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import GraphcError
from graphc.nn.functional.stochastic import next_key
from graphc.ops import activation as A
from graphc.ops import arrays
from graphc.ops import elementwise as E
from graphc.ops import nn as N
from graphc.ops import selection as Sel
from graphc.ops import shape as S
from graphc.ops.random import random_uniform

__all__ = [
    "celu",
    "elu",
    "gelu",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "log_softmax",
    "logsigmoid",
    "mish",
    "prelu",
    "relu",
    "relu6",
    "rrelu",
    "selu",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
]


def relu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's names
    """max(x, 0)."""
    return E.relu(input)


def relu6(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """min(max(x, 0), 6)."""
    return A.relu6(input)


def sigmoid(input: Any) -> Any:  # noqa: A002
    """1 / (1 + exp(-x))."""
    return E.sigmoid(input)


def tanh(input: Any) -> Any:  # noqa: A002
    return E.tanh(input)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:  # noqa: A002
    """log(1 + exp(beta x)) / beta; x itself where beta x > threshold."""
    return A.softplus(input, beta=beta, threshold=threshold)


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:  # noqa: A002
    """x where x > 0, else negative_slope * x."""
    return A.leaky_relu(input, negative_slope=negative_slope)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """x where x > 0, else alpha (exp(x) - 1)."""
    return A.elu(input, alpha=alpha)


def selu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """scale * elu(x, alpha), with SELU's fixed constants."""
    return A.selu(input)


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""
    return A.celu(input, alpha)


def silu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * sigmoid(x)."""
    return A.silu(input)


def gelu(input: Any, approximate: str = "none") -> Any:  # noqa: A002
    """x Phi(x): exactly with erf (approximate='none', the default, as PyTorch), or its
    tanh form (approximate='tanh', which is `graphc.gelu`)."""
    if approximate == "none":
        return A.gelu_exact(input)
    if approximate == "tanh":
        return E.gelu(input)
    raise GraphcError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def hardsigmoid(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """min(max(x + 3, 0), 6) / 6."""
    return A.hardsigmoid(input)


def hardswish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * hardsigmoid(x)."""
    return input * A.hardsigmoid(input)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False) -> Any:  # fmt: skip
    """x clipped to [min_val, max_val]."""
    return A.hardtanh(input, min_val=min_val, max_val=max_val)


def softsign(input: Any) -> Any:  # noqa: A002
    """x / (1 + |x|)."""
    return A.softsign(input)


def mish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * tanh(softplus(x))."""
    return input * E.tanh(A.softplus(input))


def logsigmoid(input: Any) -> Any:  # noqa: A002
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), without overflow (PyTorch's formula,
    so logsigmoid(inf) is +0.0 as there)."""
    return E.minimum(input, 0) - E.log1p(E.exp(E.neg(E.abs(input))))


def _softmax_dim(rank: int) -> int:
    # PyTorch's implicit choice when dim is not given (it warns; so should callers)
    return 0 if rank in (0, 1, 3) else 1


def softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """exp(x) / sum(exp(x)) along dim (cast to dtype first, if given)."""
    if dtype is not None:
        input = E.cast(input, dtype)  # noqa: A001
    return N.softmax(input, axis=_softmax_dim(len(input.shape)) if dim is None else dim)


def log_softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """x - logsumexp(x) along dim (cast to dtype first, if given)."""
    if dtype is not None:
        input = E.cast(input, dtype)  # noqa: A001
    return N.log_softmax(input, axis=_softmax_dim(len(input.shape)) if dim is None else dim)


def softmin(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """softmax(-x) along dim: weights that favour the smallest entries."""
    return softmax(E.neg(input), dim, dtype)


def glu(input: Any, dim: int = -1) -> Any:  # noqa: A002
    """The gated linear unit: a * sigmoid(b), a and b the halves of `dim`.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.glu(ge.tensor([2.0, 4.0, 0.0, 0.0])).tolist()
    [1.0, 2.0]
    """
    size = input.shape[dim] if len(input.shape) else None
    if size is None or isinstance(size, str) or size % 2:
        raise GraphcError(
            f"glu: dim {dim} must have an even size to halve, got input of shape "
            f"{tuple(input.shape)}"
        )
    a, b = arrays.split(input, size // 2, axis=dim)
    return a * E.sigmoid(b)


def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
    """x where x > 0, else weight * x, with one weight or one per channel (dim 1; a
    1-D input is its own channels' values, as torch's)."""
    count = weight.shape[0] if len(weight.shape) else 1
    if count != 1:
        channels = input.shape[1] if len(input.shape) >= 2 else None
        if channels != count:
            raise GraphcError(
                f"prelu: {count} weights need an input with {count} channels in dim 1, got "
                f"shape {tuple(input.shape)}"
            )
        weight = S.reshape(weight, (count,) + (1,) * (len(input.shape) - 2))
    return Sel.where(input > 0, input, weight * input)  # at 0 the slope is weight, as torch's


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:  # noqa: A002
    """x where x > threshold, else value."""
    return Sel.where(input > threshold, input, value)


def tanhshrink(input: Any) -> Any:  # noqa: A002
    """x - tanh(x)."""
    return input - E.tanh(input)


def hardshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """x where |x| > lambd, else 0.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.hardshrink(ge.tensor([-1.0, 0.3, 0.6])).tolist()
    [-1.0, 0.0, 0.6000000238418579]
    """
    return Sel.where(E.abs(input) > lambd, input, 0.0)


def softshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.softshrink(ge.tensor([-1.0, 0.25, 2.0])).tolist()
    [-0.5, 0.0, 1.5]
    """
    if lambd < 0:
        raise GraphcError(f"softshrink: lambd must be at least 0, got {lambd}")
    shrunk = Sel.where(input > lambd, input - lambd, 0.0)
    return Sel.where(input < -lambd, input + lambd, shrunk)


def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, inplace: bool = False) -> Any:  # fmt: skip
    """Randomized leaky ReLU (torch.nn.functional.rrelu): x where x >= 0, else a * x,
    with a drawn from U(lower, upper) for each element while `training` (from dropout's
    keys: graphc.nn.functional.stochastic), and (lower + upper) / 2 otherwise.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.rrelu(ge.tensor([-8.0, 2.0]), 0.25, 0.75).tolist()
    [-4.0, 2.0]
    """
    if not lower <= upper:
        raise GraphcError(f"rrelu: lower ({lower}) must be at most upper ({upper})")
    if not training:
        return A.leaky_relu(input, negative_slope=(lower + upper) / 2)
    draw = random_uniform(next_key(input), shape=tuple(input.shape), dtype=input.dtype)
    return Sel.where(input >= 0, input, input * (lower + (upper - lower) * draw))
