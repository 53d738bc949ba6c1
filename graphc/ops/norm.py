"""Normalization: batch_norm, layer_norm, group_norm."""

from __future__ import annotations

__all__: list[str] = []
