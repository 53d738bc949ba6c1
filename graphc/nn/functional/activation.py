"""torch.nn.functional spellings: activation."""

from __future__ import annotations

__all__: list[str] = []
