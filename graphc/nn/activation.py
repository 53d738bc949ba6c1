"""Activation layers with PyTorch's names, arguments and defaults: Softplus, LeakyReLU,
ELU, SELU, CELU, SiLU, GELU, Hardsigmoid, Hardswish, Hardtanh, ReLU6, Softsign, Mish,
LogSigmoid, Softmax, LogSoftmax, Softmin, Softmax2d, GLU, PReLU (with its learned
slopes), RReLU (random slopes while training), Threshold, Tanhshrink, Hardshrink,
Softshrink (ReLU, Sigmoid and Tanh are in layers.py).

Forwards call graphc.nn.functional, so they run eagerly and trace into graphs.
`inplace=True` is accepted and computes out of place (see graphc.nn.functional).

>>> import graphc.eager as ge
>>> from graphc import nn
>>> nn.GELU(approximate="tanh")(ge.zeros(2))
tensor([0., 0.])
"""

from __future__ import annotations

from typing import Any

from graphc.eager import full
from graphc.ir.errors import GraphcError
from graphc.ir.types import as_dtype
from graphc.nn import functional as F
from graphc.nn.module import Module

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "PReLU",
    "RReLU",
    "ReLU6",
    "SELU",
    "SiLU",
    "Softmax",
    "Softmax2d",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanhshrink",
    "Threshold",
]


class _Activation(Module):
    """A parameterless layer applying one function; `inplace` as PyTorch's (ignored)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear where beta x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class LeakyReLU(_Activation):
    """x where x > 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Activation):
    """x where x > 0, else alpha (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.celu(input, self.alpha)


class SELU(_Activation):
    """scale * elu(x, alpha) with SELU's constants."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.selu(input)


class SiLU(_Activation):
    """x * sigmoid(x)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.silu(input)


class Mish(_Activation):
    """x * tanh(softplus(x))."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.mish(input)


class GELU(Module):
    """x Phi(x), exact (approximate='none', PyTorch's default) or in its tanh form."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardsigmoid(_Activation):
    """min(max(x + 3, 0), 6) / 6."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.hardsigmoid(input)


class Hardswish(_Activation):
    """x * hardsigmoid(x)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.hardswish(input)


class Hardtanh(_Activation):
    """x clipped to [min_val, max_val], no gradient at the bounds."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        if not max_val > min_val:
            raise GraphcError(
                f"{type(self).__name__}: max_val ({max_val}) must be greater than min_val "
                f"({min_val})"
            )
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        extra = ", inplace=True" if self.inplace else ""
        return f"min_val={self.min_val}, max_val={self.max_val}{extra}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.softsign(input)


class LogSigmoid(Module):
    """log(sigmoid(x))."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.logsigmoid(input)


class Softmax(Module):
    """exp(x) / sum(exp(x)) along dim."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """x - logsumexp(x) along dim."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.log_softmax(input, self.dim)


class Softmin(Softmax):
    """softmax(-x) along dim."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.softmin(input, self.dim)


class GLU(Module):
    """a * sigmoid(b), a and b the two halves of `dim`."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """x where x > 0, else a * x, with a learned slope `weight` (one, or one per
    channel), starting at `init`.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.PReLU()(ge.tensor([-2.0, 3.0]))
    tensor([-0.5000,  3.0000], grad_fn=<WhereBackward0>)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = "float32") -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = full((num_parameters,), init, dtype=as_dtype(dtype), requires_grad=True)

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Threshold(Module):
    """x where x > threshold, else value."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else ""
        )


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.tanhshrink(input)


class Hardshrink(Module):
    """x where |x| > lambd, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.softshrink(input, self.lambd)


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W), at each position."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        if len(input.shape) not in (3, 4):
            raise GraphcError(
                f"Softmax2d: expected a 3D or 4D input, got shape {tuple(input.shape)}"
            )
        return F.softmax(input, -3)


class RReLU(Module):
    """Randomized leaky ReLU: x where x >= 0, else a * x with a drawn from
    U(lower, upper) per element while training, (lower + upper) / 2 in eval mode."""

    def __init__(
        self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False
    ) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (
            ", inplace=True" if self.inplace else ""
        )
