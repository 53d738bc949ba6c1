"""Convolution: conv1d, conv2d, conv_transpose1d/2d (NCHW, stride, padding, dilation, groups)."""

from __future__ import annotations

__all__: list[str] = []
