"""torch.nn.functional spellings: norm."""

from __future__ import annotations

__all__: list[str] = []
