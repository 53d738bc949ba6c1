"""Pooling: average pooling (the op avg_pool2d and its gradient op), the builders
adaptive_avg_pool2d and global_avg_pool2d, and max_pool2d (maxpool.py) re-exported.

Average pooling sums each window (a loop over the kernel's taps, never over the batch)
and divides by the window's count, PyTorch's way. It is linear, so its gradient,
`avg_pool2d_backward`, is its adjoint (spread each cotangent / count over its window),
and the adjoint's gradient is avg_pool2d again. Adaptive average pooling with windows of
one size is average pooling; with PyTorch's uneven bin edges it is a product by 0/1 bin
matrices on each side, then a division by the counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.registry import REQUIRED
from graphc.ir.types import Dim, TensorType, as_shape, format_shape, is_float, is_half
from graphc.ops import linalg as L
from graphc.ops import reduce as R
from graphc.ops.defop import defop
from graphc.ops.maxpool import max_pool2d, max_pool2d_backward, max_pool2d_select
from graphc.ops.windows import concrete, expect_rank, kernel_taps, pool_attrs, pooled_hw, positive

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "avg_pool2d_backward",
    "global_avg_pool2d",
    "max_pool2d",
    "max_pool2d_backward",
    "max_pool2d_select",
]

# -- average pooling ---------------------------------------------------------------------------

_AVG_ATTRS = {
    "kernel_size": REQUIRED,
    "stride": None,
    "padding": (0, 0, 0, 0),
    "ceil_mode": False,
    "count_include_pad": True,
    "divisor_override": None,
}


def _avg_canon(op: str) -> Any:
    def canon(*types: TensorType, input_size: Any = None, **attrs: Any) -> dict:
        override = attrs.pop("divisor_override")
        include = attrs.pop("count_include_pad")
        if override is not None:
            override = positive(override, "divisor_override", op)
        if not isinstance(include, (bool, np.bool_)):
            raise GraphcError(f"{op}: count_include_pad must be a bool, got {include!r}")
        result = pool_attrs(op, dilation=1, **attrs)
        del result["dilation"]
        result.update(count_include_pad=bool(include), divisor_override=override)
        if input_size is not None:  # the backward's: the input's (H, W), maybe symbolic
            result = {"input_size": as_shape(input_size, op), **result}
        return result

    return canon


def _avg_geometry(hw: tuple, op: str, **attrs: Any) -> tuple[Dim, Dim]:
    return pooled_hw(
        hw, op, attrs["kernel_size"], attrs["stride"], attrs["padding"], (1, 1), attrs["ceil_mode"]
    )


def _counts(
    size: int, length: int, kernel: int, stride: int, before: int, after: int, include_pad: bool
) -> np.ndarray | None:
    """Each window's divisor along one axis, PyTorch's way: the window clipped to the
    padded input (to the input itself without `include_pad`); None if it is `kernel` for
    every window. Kernels compute it, on known sizes, so symbolic dims are no obstacle."""
    start = np.arange(length) * stride - before
    end = np.minimum(start + kernel, size + after)
    counts = end - start if include_pad else np.minimum(end, size) - np.maximum(start, 0)
    return None if np.all(counts == kernel) else counts


def window_divisor(hw: tuple, pooled: tuple, dtype: np.dtype, attrs: dict) -> Any:
    """What each window's sum is divided by: one number, or an (Ho, Wo) array (also
    the ONNX exporter's, to undo AveragePool's division)."""
    if attrs["divisor_override"] is not None:
        return dtype.type(attrs["divisor_override"])
    kernel, stride, (top, left, bottom, right) = (
        attrs["kernel_size"],
        attrs["stride"],
        attrs["padding"],
    )
    include = attrs["count_include_pad"]
    rows = _counts(hw[0], pooled[0], kernel[0], stride[0], top, bottom, include)
    cols = _counts(hw[1], pooled[1], kernel[1], stride[1], left, right, include)
    if rows is None and cols is None:
        return dtype.type(kernel[0] * kernel[1])
    rows = np.full(pooled[0], kernel[0]) if rows is None else rows
    cols = np.full(pooled[1], kernel[1]) if cols is None else cols
    return np.multiply.outer(rows, cols).astype(dtype)


def _avg_taps(hw: tuple, pooled: tuple, attrs: dict) -> tuple:
    return kernel_taps(
        pooled, hw, attrs["kernel_size"], attrs["stride"], (1, 1), attrs["padding"][:2]
    )


def _avg_pool2d_infer(x: TensorType, **attrs: Any) -> TensorType:
    expect_rank(x, 4, "the input (N, C, H, W)", "avg_pool2d")
    if not is_float(x.dtype):
        raise DTypeError(f"avg_pool2d: needs a floating input, got {x.dtype}")
    return x.with_shape(x.shape[:2] + _avg_geometry(x.shape[2:], "avg_pool2d", **attrs))


def _sums_dtype(dtype: np.dtype) -> np.dtype:
    """What a window's sum accumulates in: float32 for float16 and bfloat16 (PyTorch's
    opmath type: a sum of half floats rounded at every term drifts), the dtype itself
    otherwise."""
    return np.dtype(np.float32) if is_half(dtype) else dtype


def _avg_pool2d_kernel(x: np.ndarray, out: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    pooled = _avg_geometry(x.shape[2:], "avg_pool2d", **attrs)
    wide = _sums_dtype(x.dtype)
    out = np.empty(x.shape[:2] + pooled, x.dtype) if out is None else out
    total = out if wide == x.dtype else np.empty(out.shape, wide)
    x = x.astype(wide, copy=False)  # (widened once: mixed adds would cast window by window)
    total.fill(0)
    for _, _, at_out, at_x in _avg_taps(x.shape[2:], pooled, attrs):  # row-major, as PyTorch sums
        total[at_out] += x[at_x]
    np.divide(total, window_divisor(x.shape[2:], pooled, wide, attrs), out=total)
    if total is not out:
        np.copyto(out, total, casting="unsafe")  # one rounding, after the division
    return out


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    """The mean of each kH x kW window of an (N, C, H, W) input, PyTorch's semantics:
    `count_include_pad` counts the zero padding in the divisor, `ceil_mode` keeps a last
    partial window (divided by its part inside the padded input), `divisor_override`
    replaces every divisor. `padding` may be four ints (top, left, bottom, right).

    >>> import numpy as np, graphc as gc
    >>> gc.avg_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2)
    array([[[[ 2.5,  4.5],
             [10.5, 12.5]]]])
    """
    return _avg_pool2d(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def _avg_pool2d_scratch(out: TensorType, x: TensorType, **attrs: Any) -> int:
    # the (Ho, Wo) divisors; for half floats also the input widened and the float32 sums
    wide = _sums_dtype(x.dtype).itemsize
    divisors = (TensorType(out.shape[2:], x.dtype).size or 0) * wide
    if wide == x.dtype.itemsize:
        return divisors
    return divisors + ((out.size or 0) + (x.size or 0)) * wide


# the sums are linear: the gradient spreads each window's cotangent / divisor over it
_avg_pool2d = defop(
    "avg_pool2d",
    infer=_avg_pool2d_infer,
    kernel=_avg_pool2d_kernel,
    scratch=_avg_pool2d_scratch,
    attrs=_AVG_ATTRS,
    canonicalize=_avg_canon("avg_pool2d"),
    vjp=lambda ct, out, x, needs, **attrs: (
        avg_pool2d_backward(ct, input_size=tuple(x.shape[2:]), **attrs),
    ),
    cost=lambda out, x, kernel_size, **attrs: (out.size or 0) * kernel_size[0] * kernel_size[1],
    doc="The mean of each window of (N, C, H, W). gc.avg_pool2d(x, 2)",
)


def _avg_backward_infer(ct: TensorType, input_size: tuple, **attrs: Any) -> TensorType:
    op = "avg_pool2d_backward"
    expect_rank(ct, 4, "the cotangent (N, C, Ho, Wo)", op)
    if len(input_size) != 2:
        raise ShapeError(f"{op}: input_size is the input's (H, W), got {input_size!r}")
    if not is_float(ct.dtype):
        raise DTypeError(f"{op}: needs a floating cotangent, got {ct.dtype}")
    pooled = _avg_geometry(input_size, op, **attrs)
    if ct.shape[2:] != pooled:
        raise ShapeError(
            f"{op}: an input of {format_shape(input_size)} pools to {format_shape(pooled)}, "
            f"but the cotangent is {format_shape(ct.shape)}"
        )
    return ct.with_shape(ct.shape[:2] + tuple(input_size))


def _avg_backward_kernel(
    ct: np.ndarray, out: np.ndarray | None = None, input_size: tuple = (), **attrs: Any
) -> np.ndarray:
    # in the cotangent's dtype, half floats too: PyTorch's CPU kernel adds a half
    # gradient's overlapping shares in half as well (its forward sums in float32)
    share = np.divide(ct, window_divisor(input_size, ct.shape[2:], ct.dtype, attrs))
    grad = np.empty(ct.shape[:2] + tuple(input_size), ct.dtype) if out is None else out
    grad.fill(0)
    for _, _, at_out, at_x in _avg_taps(input_size, ct.shape[2:], attrs):
        grad[at_x] += share[at_out]
    return grad


def _avg_backward_scratch(out: TensorType, ct: TensorType, **attrs: Any) -> int:
    # `share`, the cotangent divided by the counts, and the (Ho, Wo) divisors
    divisors = TensorType(ct.shape[2:], ct.dtype)
    return (ct.size or 0) * ct.dtype.itemsize + (divisors.size or 0) * ct.dtype.itemsize


avg_pool2d_backward = defop(
    "avg_pool2d_backward",
    inputs=("ct",),
    infer=_avg_backward_infer,
    kernel=_avg_backward_kernel,
    attrs={"input_size": REQUIRED, **_AVG_ATTRS},
    canonicalize=_avg_canon("avg_pool2d_backward"),
    vjp=lambda ct, out, x, needs, input_size, **attrs: (_avg_pool2d(ct, **attrs),),
    shape_attrs=("input_size",),
    cost=lambda out, ct, kernel_size, **attrs: (ct.size or 0) * kernel_size[0] * kernel_size[1],
    scratch=_avg_backward_scratch,
    doc="The gradient of avg_pool2d (its adjoint): each window's cotangent divided by its "
    "count, added over the window of an input of input_size (H, W).",
)


def _bins(size: int, length: int) -> np.ndarray:
    """PyTorch's adaptive bins as a (length, size) 0/1 matrix: bin i covers
    floor(i * size / length) up to ceil((i + 1) * size / length)."""
    matrix = np.zeros((length, size))
    for i in range(length):
        matrix[i, (i * size) // length : -(-(i + 1) * size // length)] = 1
    return matrix


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """Average pooling to a given (Ho, Wo) (an int for both; None keeps that dim), with
    PyTorch's bins, which may overlap by one when the sizes do not divide.

    >>> import numpy as np, graphc as gc
    >>> gc.adaptive_avg_pool2d(np.arange(5.0).reshape(1, 1, 1, 5), (1, 3))
    array([[[[0.5, 2. , 3.5]]]])
    """
    op = "adaptive_avg_pool2d"
    dtype = _float_input(input, op)
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(sizes) != 2:
        raise GraphcError(f"{op}: output_size takes one int or two (h, w), got {output_size!r}")
    height, width = (concrete(d, "a spatial dim", op) for d in input.shape[2:])
    oh, ow = (
        d if s is None else positive(s, "output_size", op) for s, d in zip(sizes, (height, width))
    )
    if (oh, ow) == (1, 1):
        return global_avg_pool2d(input)
    if height % oh == 0 and width % ow == 0:
        return avg_pool2d(input, (height // oh, width // ow))
    rows, cols = _bins(height, oh), _bins(width, ow)
    total = L.matmul(L.matmul(rows.astype(dtype), input), cols.T.astype(dtype))
    counts = np.multiply.outer(rows.sum(axis=1), cols.sum(axis=1)).astype(dtype)
    return total / counts


def global_avg_pool2d(input: Any) -> Any:
    """The mean over H and W of an (N, C, H, W) input, kept as (N, C, 1, 1) (ONNX's
    GlobalAveragePool; PyTorch's adaptive_avg_pool2d(x, 1)).

    >>> import numpy as np, graphc as gc
    >>> gc.global_avg_pool2d(np.ones((2, 3, 4, 4), np.float32)).shape
    (2, 3, 1, 1)
    """
    _float_input(input, "global_avg_pool2d")
    return R.mean(input, axis=(2, 3), keepdims=True)


def _float_input(x: Any, op: str) -> np.dtype:
    if len(x.shape) != 4:
        raise ShapeError(
            f"{op}: the input must have rank 4 (N, C, H, W), got shape {tuple(x.shape)}"
        )
    dtype = np.dtype(x.dtype)
    if not is_float(dtype):
        raise DTypeError(f"{op}: needs a floating input, got {dtype}")
    return dtype
