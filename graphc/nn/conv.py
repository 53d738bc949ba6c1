"""Convolution and pooling layers (Conv1d, Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten)."""

from __future__ import annotations

__all__: list[str] = []
