"""torch.nn.functional spellings that move values between channels and positions:
pixel_shuffle, pixel_unshuffle and channel_shuffle, each a reshape, a transpose and a
reshape back, so gradients, traces and symbolic leading dims come with them."""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ops import reshape, transpose

__all__ = ["channel_shuffle", "pixel_shuffle", "pixel_unshuffle"]


def _factor(value: Any, name: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GraphcError(f"{op}: {name} must be a positive int, got {value!r}")
    return value


def _image(input: Any, op: str) -> tuple[tuple, int, int, int]:  # noqa: A002
    shape = tuple(input.shape)
    if len(shape) < 3:
        raise ShapeError(f"{op}: expected an input (*, C, H, W), got shape {shape}")
    return shape[:-3], shape[-3], shape[-2], shape[-1]


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:  # noqa: A002 - torch's names
    """(*, C r^2, H, W) to (*, C, H r, W r): each group of r^2 channels becomes an r x r
    block of positions (torch.nn.functional.pixel_shuffle, for sub-pixel convolution).

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.pixel_shuffle(ge.arange(4.0).reshape(1, 4, 1, 1), 2).tolist()
    [[[[0.0, 1.0], [2.0, 3.0]]]]
    """
    r = _factor(upscale_factor, "upscale_factor", "pixel_shuffle")
    lead, channels, height, width = _image(input, "pixel_shuffle")
    if not isinstance(channels, int) or channels % (r * r):
        raise ShapeError(
            f"pixel_shuffle: the channels (dim -3, {channels}) must be divisible by the "
            f"square of upscale_factor ({r * r})"
        )
    k = len(lead)
    x = reshape(input, (*lead, channels // (r * r), r, r, height, width))
    x = transpose(x, (*range(k), k, k + 3, k + 1, k + 4, k + 2))
    return reshape(x, (*lead, channels // (r * r), height * r, width * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:  # noqa: A002
    """(*, C, H r, W r) to (*, C r^2, H, W), pixel_shuffle's inverse
    (torch.nn.functional.pixel_unshuffle).

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.pixel_unshuffle(ge.arange(4.0).reshape(1, 1, 2, 2), 2).flatten().tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    r = _factor(downscale_factor, "downscale_factor", "pixel_unshuffle")
    lead, channels, height, width = _image(input, "pixel_unshuffle")
    for name, size in (("height", height), ("width", width)):
        if not isinstance(size, int) or size % r:
            raise ShapeError(
                f"pixel_unshuffle: the {name} ({size}) must be divisible by downscale_factor ({r})"
            )
    k = len(lead)
    x = reshape(input, (*lead, channels, height // r, r, width // r, r))
    x = transpose(x, (*range(k), k, k + 2, k + 4, k + 1, k + 3))
    return reshape(x, (*lead, channels * r * r, height // r, width // r))


def channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """Interleave the channels of (N, C, *) from `groups` groups
    (torch.nn.functional.channel_shuffle, ShuffleNet's): channel g * (C / groups) + i
    moves to i * groups + g.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.channel_shuffle(ge.arange(4.0).reshape(1, 4, 1), 2).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """
    g = _factor(groups, "groups", "channel_shuffle")
    shape = tuple(input.shape)
    if len(shape) < 3:
        raise ShapeError(f"channel_shuffle: expected an input (N, C, *), got shape {shape}")
    if not isinstance(shape[1], int) or shape[1] % g:
        raise ShapeError(
            f"channel_shuffle: the channels ({shape[1]}) must be divisible by groups ({g})"
        )
    x = reshape(input, (shape[0], g, shape[1] // g, *shape[2:]))
    x = transpose(x, (0, 2, 1, *range(3, len(shape) + 1)))
    return reshape(x, shape)
