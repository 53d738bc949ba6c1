"""max_pool2d and its two gradient ops (NCHW; re-exported by pool.py).

The gradient goes to each window's maximum where PyTorch's CPU kernel finds it: a scan
of the window in row-major order that takes a tap greater than the maximum so far, or
any nan. So of equal values the first wins (also of -0.0 and 0.0, whose value is then
the first one's), and of nans the last. `max_pool2d_backward` routes a
cotangent there; `max_pool2d_select` reads a value there, its adjoint. Each is the
other's gradient rule (their gradient with respect to the input is zero almost
everywhere), so second derivatives work. Both find the maxima again from the forward's
result instead of index arrays, so the forward computes maxima only. Kernels loop over
the kernel's taps, never over the batch, and never materialize the padding.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.registry import REQUIRED
from graphc.ir.types import TensorType, format_shape, is_float
from graphc.ops.defop import defop
from graphc.ops.windows import expect_rank, kernel_taps, pool_attrs, pooled_hw

ATTRS = {
    "kernel_size": REQUIRED,
    "stride": None,
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "ceil_mode": False,
}


def _canon(op: str) -> Any:
    return lambda *types, **attrs: pool_attrs(op, **attrs)


def _taps(x_shape: tuple, pooled: tuple, attrs: dict) -> tuple:
    return kernel_taps(
        pooled, x_shape[-2:], attrs["kernel_size"], attrs["stride"], attrs["dilation"],
        attrs["padding"][:2],
    )  # fmt: skip


def _cost(out: TensorType, *inputs: TensorType, kernel_size: tuple, **attrs: Any) -> int:
    return (max(t.size or 0 for t in (out, *inputs))) * kernel_size[0] * kernel_size[1]


def _routing_scratch(out: TensorType, *inputs: TensorType, kernel_size: tuple, **attrs: Any) -> int:
    """What `_routes` and `_kept` hold at once, per pooled element: `todo`, the number
    of each window's last nan tap, two taps' `hit` (the loop's and the generator's next),
    a tap's test of that number, and one tap's mask of the value's itemsize (a tap
    covers at most every window)."""
    value, pooled = inputs[0], inputs[2]
    numbers = np.min_scalar_type(-kernel_size[0] * kernel_size[1]).itemsize
    return (pooled.size or 0) * (4 + numbers + value.dtype.itemsize)


def _max_pool2d_infer(x: TensorType, **attrs: Any) -> TensorType:
    expect_rank(x, 4, "the input (N, C, H, W)", "max_pool2d")
    if x.dtype.kind not in "iu" and not is_float(x.dtype):
        raise DTypeError(f"max_pool2d: needs a float or integer input, got {x.dtype}")
    return x.with_shape(x.shape[:2] + pooled_hw(x.shape, "max_pool2d", **attrs))


def _max_pool2d_kernel(x: np.ndarray, out: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    pooled = pooled_hw(x.shape, "max_pool2d", **attrs)
    result = np.empty(x.shape[:2] + pooled, x.dtype) if out is None else out
    # the padding: never a window's maximum
    result.fill(-np.inf if is_float(x.dtype) else np.iinfo(x.dtype).min)
    for _, _, at_out, at_x in _taps(x.shape, pooled, attrs):
        # PyTorch's step, "the tap if it is greater or nan": numpy's maximum gives its
        # first operand's nan, then the second's, and the second of equal values
        np.maximum(x[at_x], result[at_out], out=result[at_out])
    return result


max_pool2d = defop(
    "max_pool2d",
    infer=_max_pool2d_infer,
    kernel=_max_pool2d_kernel,
    attrs=ATTRS,
    canonicalize=_canon("max_pool2d"),
    vjp=lambda ct, out, x, needs, **attrs: (max_pool2d_backward(ct, x, out, **attrs),),
    cost=_cost,
    doc="The maximum of each kH x kW window of (N, C, H, W): stride (the kernel size by "
    "default), padding (top, left, bottom, right) that never wins, dilation, ceil_mode "
    "(a last partial window counts). gc.max_pool2d(x, 2)",
)


def _routes(x: np.ndarray, pooled: np.ndarray, attrs: dict) -> Iterator[tuple]:
    """(window index, input index, hit) per kernel tap: hit marks the windows whose
    maximum is at this tap: the first position equal to it, or in a window holding a
    nan (pooled is nan there) its last nan."""
    taps = _taps(x.shape, pooled.shape[-2:], attrs)
    todo = np.ones(pooled.shape, bool)
    last_nan = _last_nan_taps(x, pooled, taps)
    for t, (_, _, at_out, at_x) in enumerate(taps):
        hit = np.equal(x[at_x], pooled[at_out])  # never true in a nan window
        hit &= todo[at_out]
        if last_nan is not None:
            hit |= np.equal(last_nan[at_out], t)
        todo[at_out] ^= hit
        yield at_out, at_x, hit


def _last_nan_taps(x: np.ndarray, pooled: np.ndarray, taps: tuple) -> np.ndarray | None:
    """Per window, the number of its last tap holding a nan (-1 where none does), or
    None when no window does."""
    if not is_float(pooled.dtype) or not np.isnan(pooled).any():
        return None
    last = np.full(pooled.shape, -1, np.min_scalar_type(-len(taps)))
    for t, (_, _, at_out, at_x) in enumerate(taps):
        np.copyto(last[at_out], t, where=np.isnan(x[at_x]))
    return last


_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}  # unsigned views of the floats


def _kept(values: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """The bits of `values` where `hit`, zero bits (+0.0) elsewhere. Masking bits is
    branchless, several times faster than np.where or a ufunc's where= on scattered hits,
    and keeps an inf or nan of `values` out where hit is false (a product by 0/1 would
    not)."""
    bits = _BITS[values.dtype.itemsize]
    mask = hit.astype(bits)
    np.negative(mask, out=mask)  # all ones where hit
    return np.bitwise_and(mask, values.view(bits), out=mask)


def _check_routed(
    op: str, value: TensorType, x: TensorType, pooled: TensorType, attrs: dict
) -> None:
    expect_rank(x, 4, "the input (N, C, H, W)", op)
    want = TensorType(x.shape[:2] + pooled_hw(x.shape, op, **attrs), x.dtype)
    if pooled != want:
        raise ShapeError(f"{op}: pooled must be max_pool2d of the input, {want}, got {pooled}")
    if not is_float(value.dtype):
        raise DTypeError(f"{op}: the routed value must be floating, got {value.dtype}")


def _backward_infer(ct: TensorType, x: TensorType, pooled: TensorType, **attrs: Any) -> TensorType:
    _check_routed("max_pool2d_backward", ct, x, pooled, attrs)
    if ct.shape != pooled.shape:
        raise ShapeError(
            f"max_pool2d_backward: the cotangent {format_shape(ct.shape)} must have the "
            f"pooled shape {format_shape(pooled.shape)}"
        )
    return TensorType(x.shape, ct.dtype)


def _backward_kernel(
    ct: np.ndarray, x: np.ndarray, pooled: np.ndarray, out: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    grad = np.empty(x.shape, ct.dtype) if out is None else out
    grad.fill(0)
    for at_out, at_x, hit in _routes(x, pooled, attrs):  # overlapping windows add up
        np.add(grad[at_x], _kept(ct[at_out], hit).view(ct.dtype), out=grad[at_x])
    return grad


max_pool2d_backward = defop(
    "max_pool2d_backward",
    inputs=("ct", "x", "pooled"),
    infer=_backward_infer,
    kernel=_backward_kernel,
    attrs=ATTRS,
    canonicalize=_canon("max_pool2d_backward"),
    vjp=lambda ct, out, routed, x, pooled, needs, **attrs: (
        max_pool2d_select(ct, x, pooled, **attrs) if needs[0] else None,
        None,
        None,
    ),
    cost=_cost,
    scratch=_routing_scratch,
    doc="The gradient of max_pool2d: each window's cotangent added at its maximum (pooled "
    "is max_pool2d(x) with the same attrs).",
)


def _select_infer(v: TensorType, x: TensorType, pooled: TensorType, **attrs: Any) -> TensorType:
    _check_routed("max_pool2d_select", v, x, pooled, attrs)
    if v.shape != x.shape:
        raise ShapeError(
            f"max_pool2d_select: the value {format_shape(v.shape)} must have the input's "
            f"shape {format_shape(x.shape)}"
        )
    return TensorType(pooled.shape, v.dtype)


def _select_kernel(
    v: np.ndarray, x: np.ndarray, pooled: np.ndarray, out: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    picked = np.empty(pooled.shape, v.dtype) if out is None else out
    picked.fill(0)
    bits = picked.view(_BITS[v.dtype.itemsize])
    for at_out, at_x, hit in _routes(x, pooled, attrs):  # one hit per window: or the bits
        np.bitwise_or(bits[at_out], _kept(v[at_x], hit), out=bits[at_out])
    return picked


max_pool2d_select = defop(
    "max_pool2d_select",
    inputs=("v", "x", "pooled"),
    infer=_select_infer,
    kernel=_select_kernel,
    attrs=ATTRS,
    canonicalize=_canon("max_pool2d_select"),
    vjp=lambda ct, out, v, x, pooled, needs, **attrs: (
        max_pool2d_backward(ct, x, pooled, **attrs) if needs[0] else None,
        None,
        None,
    ),
    cost=_cost,
    scratch=_routing_scratch,
    doc="v read at each window's maximum of x (pooled is max_pool2d(x)): the adjoint of "
    "max_pool2d_backward.",
)
