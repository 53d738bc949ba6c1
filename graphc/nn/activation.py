"""Activation layers with PyTorch's names."""

from __future__ import annotations

__all__: list[str] = []
