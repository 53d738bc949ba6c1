"""Dropout layers with PyTorch's names: active in train() mode, the identity in eval().
Dropout zeroes elements; Dropout1d/2d/3d whole channels; AlphaDropout and
FeatureAlphaDropout are SELU's (elements or channels set to its saturation value, then
scaled and shifted to keep mean and variance)."""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import GraphcError
from graphc.nn.functional import stochastic
from graphc.nn.module import Module

__all__ = [
    "AlphaDropout",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "FeatureAlphaDropout",
]


class Dropout(Module):
    """torch.nn.Dropout: zero elements with probability p while training, scale the
    rest by 1/(1-p); the identity after `eval()`. `inplace=True` is accepted and computes
    out of place, as the activations do (see graphc.nn.functional.dropout).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> layer = nn.Dropout(0.5).eval()
    >>> layer(ge.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    function = staticmethod(stochastic.dropout)

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise GraphcError(f"{type(self).__name__}: p must be between 0 and 1, got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return self.function(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """torch.nn.Dropout1d: zero whole channels of (N, C, L) or (C, L) inputs with
    probability p while training, scale the rest by 1/(1-p).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Dropout1d(0.5).eval()(ge.ones(2, 3)).tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    function = staticmethod(stochastic.dropout1d)


class Dropout2d(Dropout):
    """torch.nn.Dropout2d: zero whole channels of (N, C, H, W) inputs with probability p
    while training, scale the rest by 1/(1-p) (a 3-D input is (N, C, L), as torch's)."""

    function = staticmethod(stochastic.dropout2d)


class Dropout3d(Dropout):
    """torch.nn.Dropout3d: zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs
    with probability p while training, scale the rest by 1/(1-p)."""

    function = staticmethod(stochastic.dropout3d)


class AlphaDropout(Dropout):
    """torch.nn.AlphaDropout: SELU's dropout, keeping the mean and variance of its input
    (see graphc.nn.functional.alpha_dropout); the identity after `eval()`."""

    function = staticmethod(stochastic.alpha_dropout)


class FeatureAlphaDropout(Dropout):
    """torch.nn.FeatureAlphaDropout: alpha dropout of whole channels of (N, C, ...)."""

    function = staticmethod(stochastic.feature_alpha_dropout)
