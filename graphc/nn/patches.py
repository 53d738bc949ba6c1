"""Unfold and Fold: torch's layers over graphc.nn.functional's unfold (sliding windows
as columns) and fold (columns summed back into an image)."""

from __future__ import annotations

from typing import Any

from graphc.nn import functional as F
from graphc.nn.module import Module

__all__ = ["Fold", "Unfold"]


class Unfold(Module):
    """Every sliding window of (N, C, H, W) as a column: torch.nn.Unfold.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Unfold(kernel_size=3, padding=1)(ge.ones(2, 5, 4, 4)).shape
    (2, 45, 16)
    """

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
            f"stride={self.stride}"
        )


class Fold(Module):
    """Columns summed into an image of `output_size`: torch.nn.Fold."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:  # fmt: skip
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
            f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
        )
