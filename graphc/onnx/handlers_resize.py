"""ONNX handlers: Resize (and Upsample, its opset 7-9 form), one axis at a time.

ONNX defines an n-d resize as 1-d resizes along each axis in turn, and a 1-d one as,
for each output position x, a weighted sum of the input at a few positions near the
position x maps to (x_original: by the coordinate transformation mode), the input
padded with its edge values. Both the positions and the weights depend only on the
sizes, so they are computed when the model is read (numpy, float64) and the resize
along an axis is the sum over taps j of take(input, index_j) * weight_j:

- nearest: one tap, the position x_original rounds to (nearest_mode), so a take;
- linear: floor(x_original) and the next one, weighted 1 - r and r (r: the fraction);
- cubic: four taps with Keys' kernel (cubic_coeff_a), `exclude_outside` zeroing the
  taps past the edges and renormalizing;
- antialias (opset 18, linear and cubic) widens the kernel by 1 / scale when shrinking;
- tf_crop_and_resize maps into the region of interest and gives extrapolation_value
  where x_original falls outside the input.

An axis whose size and mapping stay the same is left alone, so a symbolic batch or
channel dim passes through; a symbolic dim resized is refused by name (`dims=`).
Linear and cubic resizes of integers (rounded and saturated by ONNX) are refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.types import is_float, is_symbol
from graphc.onnx.importer import (
    Context,
    Value,
    handler,
    ints,
    known,
    needs_known,
    symbolic_hint,
)
from graphc.ops import elementwise as E
from graphc.ops import where
from graphc.ops.indexing import take


@handler("Resize", since=10)
def _resize(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    if ctx.opset < 11:  # Resize 10: (X, scales); onnxruntime's "simple" nearest rounding
        attrs = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "simple",
                 **attrs}  # fmt: skip
        roi, scales, sizes = None, inputs[1], None
    else:
        roi = inputs[1] if len(inputs) > 1 else None
        scales = inputs[2] if len(inputs) > 2 else None
        sizes = inputs[3] if len(inputs) > 3 else None
    return [_resized(ctx, x, roi, scales, sizes, attrs)]


@handler("Upsample", since=7)
def _upsample(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Upsample (opsets 7 to 9): scales an attribute (7) or an input (9), asymmetric."""
    scales = inputs[1] if len(inputs) > 1 else np.asarray(attrs.get("scales", []), np.float32)
    attrs = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "simple", **attrs}
    return [_resized(ctx, inputs[0], None, scales, None, attrs)]


def _given(value: Any) -> bool:
    return value is not None and not (known(value) and np.asarray(value).size == 0)


def _resized(ctx: Context, x: Value, roi: Any, scales: Any, sizes: Any, attrs: dict) -> Value:
    shape = list(x.shape)
    rank = len(shape)
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    mode = attrs.get("mode", "nearest")
    transform = attrs.get("coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"mode '{mode}' is not one of nearest, linear and cubic")
    if mode != "nearest" and not is_float(np.dtype(x.dtype)):
        raise ctx.error(f"a {mode} resize of {x.dtype} values is not supported (floats are)")
    if _given(sizes):
        target = ints(ctx, sizes, "Resize's sizes")
        factors = [None] * len(axes)
    elif _given(scales):
        if not known(scales):
            raise needs_known(ctx, scales, "Resize's scales")
        factors = [float(s) for s in np.asarray(scales, np.float32).reshape(-1)]
        target = [None] * len(axes)
    else:
        raise ctx.error("Resize needs scales or sizes")
    if len(factors) != len(axes) or len(target) != len(axes):
        raise ctx.error(f"Resize's scales or sizes are not one per axis of {axes}")
    box = None
    if transform == "tf_crop_and_resize":
        if not _given(roi) or not known(roi):
            raise (
                needs_known(ctx, roi, "Resize's roi")
                if _given(roi)
                else ctx.error("tf_crop_and_resize needs a roi")
            )
        box = np.asarray(roi, np.float64).reshape(-1)
        if box.size != 2 * len(axes):
            raise ctx.error(f"Resize's roi {box.tolist()} is not a start and end per axis")
    plan = _sizes(ctx, shape, axes, factors, target, attrs.get("keep_aspect_ratio_policy"))
    for k, (axis, (scale, length)) in enumerate(zip(axes, plan)):
        region = None if box is None else (box[k], box[k + len(axes)])
        size = shape[axis]
        if region is None and length == size and scale == 1.0:
            continue  # the same positions: nothing to resize
        if is_symbol(size) or is_symbol(length):
            raise ctx.error(
                f"cannot resize the symbolic dim '{size}' (axis {axis}) to {length}"
                f"{symbolic_hint([x])}"
            )
        ctx.check_size(length * 4, "Resize's table of positions")
        x = _along(ctx, x, axis, size, length, scale, region, mode, attrs)
    return x


def _sizes(
    ctx: Context, shape: list, axes: list[int], factors: list, target: list, policy: Any
) -> list[tuple[float, Any]]:
    """(scale, output size) per resized axis, as ONNX computes them."""
    plan = []
    for axis, factor, size in zip(axes, factors, target):
        dim = shape[axis]
        if factor is not None:  # output = floor(dim * scale), the scale as given (float32)
            if factor <= 0:
                raise ctx.error(f"Resize's scale {factor} must be positive")
            length = dim if factor == 1.0 or is_symbol(dim) else math.floor(dim * factor)
            plan.append((factor, length))
        elif size == dim:
            plan.append((1.0, dim))
        elif is_symbol(dim) or is_symbol(size):
            plan.append((float("nan"), size))  # refused by the caller, naming the dim
        else:
            if size < 0 or dim == 0:
                raise ctx.error(f"Resize's size {size} for a dim of {dim}")
            plan.append((size / dim, size))
    if policy in ("not_larger", "not_smaller") and factors[0] is None:
        ratios = [s for s, _ in plan]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        plan = [(scale, int(scale * shape[a] + 0.5)) for a in axes]
    elif policy not in (None, "stretch") and factors[0] is None:
        raise ctx.error(f"keep_aspect_ratio_policy '{policy}' is not one ONNX defines")
    return plan


def _along(
    ctx: Context,
    x: Value,
    axis: int,
    size: int,
    length: int,
    scale: float,
    region: Any,
    mode: str,
    attrs: dict,
) -> Value:
    """x resized along `axis` from `size` to `length` positions."""
    at = _original(np.arange(length, dtype=np.float64), size, length, scale, region, attrs)
    below = np.floor(at)
    ratio = np.where(at == below, 1.0, at - below)  # (0, 1]: the left neighbour preferred
    weights = _weights(ctx, mode, ratio, scale, attrs)  # (taps, length)
    taps = weights.shape[0]
    pad = -(-taps // 2)
    # the `taps` positions nearest x_original (the smaller one on a tie), in the input
    # padded by `pad` edge values on each side: their values are those at the clipped one
    first = np.clip(np.ceil(at + pad) - taps // 2, 0, size + 2 * pad - taps)
    positions = first[None, :] + np.arange(taps)[:, None] - pad
    if attrs.get("exclude_outside", 0):
        weights = np.where((positions < 0) | (positions >= size), 0.0, weights)
        weights = weights / weights.sum(axis=0, keepdims=True)
    index = np.clip(positions, 0, size - 1).astype(np.int64)
    dtype = np.dtype(x.dtype)
    along = [length if k == axis else 1 for k in range(len(x.shape))]
    if mode == "nearest":  # one weight of 1 per position: a take
        y = take(x, (index * (weights != 0)).sum(axis=0), axis=axis)
    else:
        y = None
        for tap in range(taps):
            term = E.mul(take(x, index[tap], axis=axis), weights[tap].astype(dtype).reshape(along))
            y = term if y is None else E.add(y, term)
    if region is not None:  # tf_crop_and_resize: outside the input, extrapolation_value
        outside = ((at < 0) | (at > size - 1)).reshape(along)
        if outside.any():
            fill = np.asarray(attrs.get("extrapolation_value", 0.0), dtype)
            y = where(outside, fill, y)
    return y


def _original(
    at: np.ndarray, size: int, length: int, scale: float, region: Any, attrs: dict
) -> np.ndarray:
    """Each output position's position in the input (coordinate_transformation_mode)."""
    transform = attrs.get("coordinate_transformation_mode", "half_pixel")
    span = scale * size  # the output's length before rounding
    if transform == "half_pixel":
        return (at + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (at + 0.5) / scale - 0.5 if span != 1 else np.full_like(at, -0.5)
    if transform == "half_pixel_symmetric":
        offset = size / 2 * (1 - length / span)
        return offset + (at + 0.5) / scale - 0.5
    if transform == "align_corners":
        return at * (size - 1) / (span - 1) if span != 1 else np.zeros_like(at)
    if transform == "asymmetric":
        return at / scale
    if transform == "tf_crop_and_resize":
        start, end = region
        if span == 1:
            return np.full_like(at, (end - start) * (size - 1) / 2 + start * (size - 1))
        return at * (end - start) * (size - 1) / (span - 1) + start * (size - 1)
    raise ValueError(f"coordinate_transformation_mode '{transform}' is not one ONNX defines")


def _weights(ctx: Context, mode: str, ratio: np.ndarray, scale: float, attrs: dict) -> np.ndarray:
    """The taps' weights per output position (taps, positions), from each position's
    fraction `ratio` in (0, 1]."""
    whole = ratio == 1.0
    if mode == "nearest":
        rounding = attrs.get("nearest_mode", "round_prefer_floor")
        if rounding == "simple":  # onnxruntime before opset 11: down when growing, else up
            rounding = "floor" if scale >= 1 else "ceil"
        up = {
            "round_prefer_floor": ratio > 0.5,
            "round_prefer_ceil": ratio >= 0.5,
            "floor": np.zeros_like(whole),
            "ceil": np.ones_like(whole),
        }.get(rounding)
        if up is None:
            raise ctx.error(f"nearest_mode '{rounding}' is not one ONNX defines")
        up = up | whole  # a whole position is its own (the right tap of the pair)
        return np.stack([~up, up]).astype(np.float64)
    shrink = min(scale, 1.0) if attrs.get("antialias", 0) else 1.0
    if mode == "linear":
        start = int(np.floor(-1 / shrink) + 1)
        offsets = np.arange(start, 2 - start)[:, None] - ratio[None, :]
        kernel = np.clip(1 - np.abs(offsets * shrink), 0, 1)
    else:
        a = float(attrs.get("cubic_coeff_a", -0.75))
        start = int(np.floor(-2 / shrink) + 1)
        distance = np.abs((np.arange(start, 2 - start)[:, None] - ratio[None, :]) * shrink)
        near = ((a + 2) * distance - (a + 3)) * distance**2 + 1
        far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a
        kernel = np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))
    return kernel / kernel.sum(axis=0, keepdims=True)


__all__: list[str] = []
