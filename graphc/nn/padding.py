"""Padding layers with torch's names: ZeroPad, ConstantPad, ReflectionPad,
ReplicationPad and CircularPad, each in 1d, 2d and 3d, over graphc.nn.functional.pad.

`padding` is one int for every side or torch's tuple of (before, after) pairs from the
last dim backwards: (left, right), then (top, bottom), then (front, back). As in torch,
the constant ones take any input with enough dims; the others take the input with
and without its batch dim only ((C, L) or (N, C, L) in 1d, and so on).

>>> import graphc.eager as ge
>>> from graphc import nn
>>> nn.ReflectionPad1d((2, 1))(ge.tensor([[1.0, 2.0, 3.0]])).tolist()
[[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
"""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn import functional as F
from graphc.nn.module import Module

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


class _PadNd(Module):
    """What the padding layers share: `dims` padded dims, `mode` as F.pad names it."""

    dims = 1
    mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        sides = 2 * self.dims
        if isinstance(padding, int):
            padding = (padding,) * sides
        if not isinstance(padding, (tuple, list)) or len(padding) != sides:
            raise GraphcError(
                f"{type(self).__name__}: padding must be one int or {sides} ints, got {padding!r}"
            )
        self.padding = tuple(padding)

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        rank = len(input.shape)
        if self.mode == "constant":
            if rank < self.dims:
                raise ShapeError(
                    f"{type(self).__name__}: the padding {self.padding} pads {self.dims} dims, "
                    f"got input of shape {tuple(input.shape)}"
                )
            return F.pad(input, self.padding, "constant", getattr(self, "value", 0.0))
        if rank not in (self.dims + 1, self.dims + 2):
            raise ShapeError(
                f"{type(self).__name__}: expected {self.dims + 1}D or {self.dims + 2}D input, "
                f"got input of shape {tuple(input.shape)}"
            )
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value` (torch.nn.ConstantPad1d)."""


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with `value` (torch.nn.ConstantPad2d).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.ConstantPad2d((1, 0, 0, 1), 9.0)(ge.ones(1, 1, 1)).tolist()
    [[[9.0, 1.0], [9.0, 9.0]]]
    """

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with `value` (torch.nn.ConstantPad3d)."""

    dims = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros (torch.nn.ZeroPad1d)."""


class ZeroPad2d(_ZeroPadNd):
    """Pad the last two dims with zeros (torch.nn.ZeroPad2d)."""

    dims = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last three dims with zeros (torch.nn.ZeroPad3d)."""

    dims = 3


class ReflectionPad1d(_PadNd):
    """Pad L of (C, L) or (N, C, L) with its reflection, the edge not repeated
    (torch.nn.ReflectionPad1d)."""

    mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Pad H and W with their reflection (torch.nn.ReflectionPad2d)."""

    dims = 2


class ReflectionPad3d(ReflectionPad1d):
    """Pad D, H and W with their reflection (torch.nn.ReflectionPad3d)."""

    dims = 3


class ReplicationPad1d(_PadNd):
    """Pad L by repeating its edge values (torch.nn.ReplicationPad1d)."""

    mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Pad H and W by repeating their edge values (torch.nn.ReplicationPad2d)."""

    dims = 2


class ReplicationPad3d(ReplicationPad1d):
    """Pad D, H and W by repeating their edge values (torch.nn.ReplicationPad3d)."""

    dims = 3


class CircularPad1d(_PadNd):
    """Pad L by wrapping around (torch.nn.CircularPad1d)."""

    mode = "circular"


class CircularPad2d(CircularPad1d):
    """Pad H and W by wrapping around (torch.nn.CircularPad2d)."""

    dims = 2


class CircularPad3d(CircularPad1d):
    """Pad D, H and W by wrapping around (torch.nn.CircularPad3d)."""

    dims = 3
