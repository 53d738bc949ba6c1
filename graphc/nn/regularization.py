"""Dropout layers with PyTorch's names: active in train() mode, the identity in eval()."""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import GraphcError
from graphc.nn.functional.stochastic import dropout
from graphc.nn.module import Module

__all__ = ["Dropout"]


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

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise GraphcError(f"Dropout: p must be between 0 and 1, got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Any) -> Any:
        return dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
