"""torch.nn.functional spelling: interpolate, in its nearest-neighbour modes.

Each output position i along a resized dim reads input position
min(floor(i * scale), size - 1) ('nearest') or min(floor((i + 0.5) * scale), size - 1)
('nearest-exact'), with scale = input size / output size, or 1 / scale_factor when one
is given, computed in float32 as torch's kernels compute it (a float64 scale picks a
different neighbour at some boundaries). The picks are `take`s, so the gradient adds
each output's cotangent into the input position it read. (torch's 1-D backward kernel
takes the 2-D kernel's shortcuts, so where a 1-D size stays or doubles under a
scale_factor its gradient is not its forward's; graphc's is.)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ops import take

__all__ = ["interpolate"]

_MODES = ("nearest", "nearest-exact")


def _per_dim(value: Any, dims: int, name: str) -> tuple | None:
    if value is None:
        return None
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
    if len(items) != dims:
        raise GraphcError(f"interpolate: {name} must be one value or {dims}, got {value!r}")
    return items


def _sources(
    size: int, out: int, scale_factor: float | None, exact: bool, shortcuts: bool
) -> np.ndarray:
    """The input position each of the `out` output positions reads. torch's 2-D nearest
    kernel copies a dim whose size stays and halves the index of one that doubles,
    whatever the scale_factor (`shortcuts`); its 1-D kernel does not."""
    if shortcuts and not exact and out == size:
        return np.arange(out)
    if shortcuts and not exact and out == 2 * size:
        return np.arange(out) // 2
    positions = np.arange(out, dtype=np.float32)
    if scale_factor is not None and scale_factor > 0:
        scale = np.float32(1.0 / scale_factor)
    else:
        scale = np.float32(size) / np.float32(out)
    if exact:
        positions = positions + np.float32(0.5)
    return np.minimum(np.floor(positions * scale).astype(np.int64), size - 1)


def interpolate(
    input: Any,  # noqa: A002 - torch's names
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Any:
    """torch.nn.functional.interpolate for (N, C, L) and (N, C, H, W) inputs, to `size`
    or by `scale_factor`, in the modes 'nearest' and 'nearest-exact'.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.interpolate(ge.arange(3.0).reshape(1, 1, 3), scale_factor=2).tolist()
    [[[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]]]
    """
    if mode not in _MODES:
        raise GraphcError(
            f"interpolate: mode {mode!r} is not supported; graphc has {', '.join(_MODES)}"
        )
    if align_corners is not None:
        raise GraphcError(f"interpolate: align_corners is for linear modes, not {mode!r}")
    dims = len(input.shape) - 2
    if dims not in (1, 2):
        raise ShapeError(
            f"interpolate: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape "
            f"{tuple(input.shape)}"
        )
    if (size is None) == (scale_factor is None):
        raise GraphcError("interpolate: give either size or scale_factor, not both or neither")
    sizes = tuple(input.shape[2:])
    scales = _per_dim(scale_factor, dims, "scale_factor")
    outs = _per_dim(size, dims, "size")
    if outs is None:
        outs = tuple(math.floor(s * f) for s, f in zip(sizes, scales))
    if recompute_scale_factor or scales is None:
        scales = (None,) * dims  # the scale then comes from the sizes
    x = input
    for d, (length, out, factor) in enumerate(zip(sizes, outs, scales)):
        if isinstance(length, str):
            raise ShapeError(f"interpolate: dim {d + 2} must have a known size, got {length!r}")
        if out <= 0:
            raise ShapeError(f"interpolate: the output size {outs} must be positive")
        sources = _sources(length, int(out), factor, mode == "nearest-exact", dims == 2)
        x = take(x, sources, axis=d + 2)
    return x
