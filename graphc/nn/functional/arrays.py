"""torch.nn.functional spellings: arrays."""

from __future__ import annotations

__all__: list[str] = []
