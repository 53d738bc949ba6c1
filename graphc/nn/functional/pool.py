"""torch.nn.functional spellings: pool."""

from __future__ import annotations

__all__: list[str] = []
