"""Tensor methods for the elementwise math of real models (erf, log1p, floor, ...),
with torch.Tensor's names and arguments. Activations without a torch.Tensor method
(softplus, elu, ...) are functions in `graphc.nn.functional`, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from graphc.ops import activation as A


class MathMethods:
    """Mixed into Tensor.

    >>> import graphc.eager as ge
    >>> x = ge.tensor([0.5, -1.5])
    >>> x.floor(), x.round(), x.erf().abs() < 1
    (tensor([ 0., -2.]), tensor([ 0., -2.]), tensor([True, True]))
    """

    # -- unary math ----------------------------------------------------------------------

    def erf(self) -> Any:
        return A.erf(self)

    def log1p(self) -> Any:
        return A.log1p(self)

    def expm1(self) -> Any:
        return A.expm1(self)

    def reciprocal(self) -> Any:
        return A.reciprocal(self)

    def rsqrt(self) -> Any:
        return A.rsqrt(self)

    def gelu_exact(self) -> Any:
        """x/2 (1 + erf(x / sqrt 2)): torch.nn.functional.gelu(x) (`gelu()` is the tanh form)."""
        return A.gelu_exact(self)

    # -- rounding (gradient zero) ----------------------------------------------------------

    def floor(self) -> Any:
        return A.floor(self)

    def ceil(self) -> Any:
        return A.ceil(self)

    def round(self, decimals: int = 0) -> Any:
        """Halves to even, as torch.round."""
        return A.round(self, decimals=decimals)

    def trunc(self) -> Any:
        return A.trunc(self)

    fix = trunc

    # -- remainders --------------------------------------------------------------------

    def remainder(self, other: Any) -> Any:
        """x - other * floor(x / other): the sign of `other` (Python's %)."""
        return A.remainder(self, other)

    def fmod(self, other: Any) -> Any:
        """x - other * trunc(x / other): the sign of x (C's fmod)."""
        return A.fmod(self, other)

    # -- logical ops -------------------------------------------------------------------

    def logical_and(self, other: Any) -> Any:
        return A.logical_and(self, other)

    def logical_or(self, other: Any) -> Any:
        return A.logical_or(self, other)

    def logical_xor(self, other: Any) -> Any:
        return A.logical_xor(self, other)

    def logical_not(self) -> Any:
        return A.logical_not(self)

    # -- clamping: bounds may be tensors ---------------------------------------------------

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
        return A.clamp(self, min, max)

    clip = clamp

    def clamp_min(self, min: Any) -> Any:  # noqa: A002
        return A.clamp(self, min, None)

    def clamp_max(self, max: Any) -> Any:  # noqa: A002
        return A.clamp(self, None, max)
