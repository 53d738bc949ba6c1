"""Distance layers with torch.nn's names and arguments: CosineSimilarity and
PairwiseDistance (their forwards are graphc.nn.functional's)."""

from __future__ import annotations

from typing import Any

from graphc.nn.functional import distance as F
from graphc.nn.module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """The cosine similarity of x1 and x2 along `dim`.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> similarity = nn.CosineSimilarity()(ge.ones(2, 3), -2 * ge.ones(2, 3))
    >>> [round(v, 6) for v in similarity.tolist()]
    [-1.0, -1.0]
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p norm of x1 - x2 (+ eps) along the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
