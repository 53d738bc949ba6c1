"""Array manipulation: pad, tile, flip, split, tril/triu, cumsum, arange, gather along an axis, embedding, einsum, sort, topk."""

from __future__ import annotations

__all__: list[str] = []
