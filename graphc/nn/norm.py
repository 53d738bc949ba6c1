"""Normalization layers (BatchNorm1d/2d, LayerNorm, GroupNorm)."""

from __future__ import annotations

__all__: list[str] = []
