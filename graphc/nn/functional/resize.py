"""torch.nn.functional spelling: interpolate, in its nearest-neighbour modes, its
linear ones ('linear', 'bilinear', 'bicubic', with or without align_corners) and 'area'.

Each output position i along a resized dim reads input position
min(floor(i * scale), size - 1) ('nearest') or min(floor((i + 0.5) * scale), size - 1)
('nearest-exact'), with scale = input size / output size, or 1 / scale_factor when one
is given, computed in float32 as torch's kernels compute it (a float64 scale picks a
different neighbour at some boundaries). The picks are `take`s, so the gradient adds
each output's cotangent into the input position it read. (torch's 1-D backward kernel
takes the 2-D kernel's shortcuts, so where a 1-D size stays or doubles under a
scale_factor its gradient is not its forward's; graphc's is.)

The linear modes are separable: along each resized dim (the last first, as torch's 2-D
kernels nest them) an output reads its two (cubic: four) neighbouring input positions,
`take`s weighted by constants from torch's source-index formula: with align_corners,
i * (size - 1) / (out - 1); without, (i + 0.5) * scale - 0.5, clamped at 0 for the
linear modes. 'area' is adaptive average pooling.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn.functional.pool import adaptive_avg_pool1d, adaptive_avg_pool2d
from graphc.ops import take

__all__ = ["interpolate"]

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "area")
_LINEAR = {"linear": 1, "bilinear": 2, "bicubic": 2}  # the input's spatial dims each takes
_CUBIC_A = -0.75  # torch's cubic convolution coefficient


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


def _source_positions(size: int, out: int, factor: float | None, align_corners: bool,
                      cubic: bool, real: type) -> np.ndarray:  # fmt: skip
    """Where in the input each output position reads from, by torch's
    area_pixel_compute_source_index, in `real` (float64 for a float64 input, float32
    otherwise, as torch's kernels compute)."""
    positions = np.arange(out, dtype=real)
    if align_corners:
        scale = real((size - 1) / (out - 1)) if out > 1 else real(0.0)
        return positions * scale
    if factor is not None and factor > 0:
        scale = real(1.0 / factor)
    else:
        scale = real(size) / real(out)
    source = scale * (positions + real(0.5)) - real(0.5)
    return source if cubic else np.maximum(source, real(0.0))


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """The four cubic convolution weights of taps -1, 0, 1, 2 at fractions t."""
    a = _CUBIC_A

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _resize_linear(x: Any, axis: int, size: int, out: int, factor: float | None,
                   align_corners: bool, cubic: bool) -> Any:  # fmt: skip
    """x resized along `axis` from `size` to `out` positions by linear (or cubic)
    interpolation: a weighted sum of `take`s of the neighbouring positions."""
    real = np.float64 if np.dtype(x.dtype) == np.float64 else np.float32
    source = _source_positions(size, out, factor, align_corners, cubic, real)
    base = np.floor(source).astype(np.int64)
    t = (source - base).astype(real)
    if cubic:
        taps = [np.clip(base + k, 0, size - 1) for k in (-1, 0, 1, 2)]
        weights = _cubic_weights(t)
    else:
        taps = [base, np.minimum(base + 1, size - 1)]
        weights = [real(1.0) - t, t]
    rank = len(x.shape)
    shape = (out,) + (1,) * (rank - axis - 1)  # broadcast along the resized axis
    result = None
    for tap, weight in zip(taps, weights):
        term = take(x, tap, axis=axis) * weight.astype(np.dtype(x.dtype)).reshape(shape)
        result = term if result is None else result + term
    return result


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
    or by `scale_factor`, in the modes 'nearest', 'nearest-exact', 'linear' (3-D),
    'bilinear' and 'bicubic' (4-D; with `align_corners` as torch's) and 'area'.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.interpolate(ge.arange(3.0).reshape(1, 1, 3), scale_factor=2).tolist()
    [[[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]]]
    """
    if mode not in _MODES:
        raise GraphcError(
            f"interpolate: mode {mode!r} is not supported; graphc has {', '.join(_MODES)}"
        )
    if align_corners is not None and mode not in _LINEAR:
        raise GraphcError(
            f"interpolate: align_corners is for the modes linear, bilinear and bicubic, not "
            f"{mode!r}"
        )
    if antialias:
        raise GraphcError("interpolate: antialias=True is not supported")
    dims = len(input.shape) - 2
    if dims not in (1, 2):
        raise ShapeError(
            f"interpolate: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape "
            f"{tuple(input.shape)}"
        )
    if mode in _LINEAR and _LINEAR[mode] != dims:
        raise ShapeError(
            f"interpolate: mode {mode!r} takes a {_LINEAR[mode] + 2}-D input, got shape "
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
    for d, (length, out) in enumerate(zip(sizes, outs)):
        if isinstance(length, str):
            raise ShapeError(f"interpolate: dim {d + 2} must have a known size, got {length!r}")
        if out <= 0:
            raise ShapeError(f"interpolate: the output size {outs} must be positive")
    outs = tuple(int(out) for out in outs)
    if mode == "area":
        pool = adaptive_avg_pool1d if dims == 1 else adaptive_avg_pool2d
        return pool(input, outs[0] if dims == 1 else outs)
    x = input
    if mode in _LINEAR:
        # the last dim first, as torch's 2-D kernels nest the two
        for d in reversed(range(dims)):
            x = _resize_linear(
                x, d + 2, sizes[d], outs[d], scales[d], bool(align_corners), mode == "bicubic"
            )
        return x
    for d, (length, out, factor) in enumerate(zip(sizes, outs, scales)):
        sources = _sources(length, out, factor, mode == "nearest-exact", dims == 2)
        x = take(x, sources, axis=d + 2)
    return x
