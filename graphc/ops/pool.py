"""Pooling: max_pool2d, avg_pool2d, adaptive and global average pooling."""

from __future__ import annotations

__all__: list[str] = []
