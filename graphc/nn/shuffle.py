"""PixelShuffle, PixelUnshuffle and ChannelShuffle: torch's layers over
graphc.nn.functional's pixel_shuffle, pixel_unshuffle and channel_shuffle."""

from __future__ import annotations

from typing import Any

from graphc.nn import functional as F
from graphc.nn.module import Module

__all__ = ["ChannelShuffle", "PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """(*, C r^2, H, W) to (*, C, H r, W r): torch.nn.PixelShuffle.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.PixelShuffle(3)(ge.ones(2, 18, 4, 5)).shape
    (2, 2, 12, 15)
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) to (*, C r^2, H, W): torch.nn.PixelUnshuffle."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of `groups` groups: torch.nn.ChannelShuffle."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
