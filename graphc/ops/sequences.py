"""Sequences along an axis: `arange` (a creation op: ONNX's Range), `cumsum` and
`cumprod`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.types import TensorType, as_dim, as_dtype
from graphc.ops.defop import defop, into
from graphc.ops.dispatch import bind
from graphc.ops.selection import isfinite
from graphc.ops.spelling import flattened, one_axis, pick_axis

# -- arange ------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _number(value: Any, what: str) -> int | float:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphcError(f"arange: {what} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise GraphcError(f"arange: {what} must be finite, got {value!r}")
    return value


def _arange_canon(start: Any, step: Any, length: Any, dtype: Any) -> dict:
    start, step = _number(start, "start"), _number(step, "step")
    if dtype is None:  # as torch: int64 for int bounds, else graphc's default float
        dtype = np.int64 if _is_int(start) and _is_int(step) else np.float32
    dtype = as_dtype(dtype)
    if dtype == np.bool_:
        raise DTypeError("arange: cannot make a range of bools")
    if dtype.kind == "i":
        if not (float(start).is_integer() and float(step).is_integer()):
            raise DTypeError(f"arange: start {start} and step {step} must be whole for {dtype}")
        start, step = int(start), int(step)
    else:
        start, step = float(start), float(step)
    if step == 0:
        raise GraphcError("arange: step must not be zero")
    return {"start": start, "step": step, "length": as_dim(length), "dtype": dtype}


def _arange_kernel(
    out: np.ndarray | None = None,
    start: Any = 0,
    step: Any = 1,
    length: int = 0,
    dtype: Any = np.int64,
) -> np.ndarray:
    # start + i * step, each value computed once from i (as torch, in float64 for
    # floats), so no error accumulates along the range as a running sum's would
    if np.dtype(dtype).kind == "i":
        values = np.arange(length, dtype=np.int64) * step + start
    else:
        values = np.arange(length, dtype=np.float64) * step + start
    if out is None:
        return values.astype(dtype, copy=False)
    np.copyto(out, values, casting="unsafe")
    return out


_arange = defop(
    "arange",
    inputs=(),
    infer=lambda start, step, length, dtype: TensorType((length,), dtype),
    kernel=_arange_kernel,
    attrs={"start": 0, "step": 1, "length": 0, "dtype": None},
    canonicalize=_arange_canon,
    shape_attrs=("length",),
    doc="`length` values start, start + step, ... (ONNX Range); length may be symbolic.",
)


def _range_length(start: Any, stop: Any, step: Any) -> int:
    if _is_int(start) and _is_int(stop) and _is_int(step):
        return len(range(int(start), int(stop), int(step)))
    return max(0, math.ceil((float(stop) - float(start)) / float(step)))  # as torch and numpy


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
    """Values from start (0 if only one bound is given) up to stop, excluding it, by
    step, as np.arange and torch.arange: int64 for ints, float32 if a bound is a float.

    Each value is start + i * step (computed in float64 for floats, as torch does).
    In a graph `stop` may be a symbolic dim (`gc.arange(x.shape[1])`: positions 0..T-1)
    when start is 0 and step 1. `graphc.eager.arange` is torch's creation function.

    >>> import graphc as gc
    >>> gc.arange(5).tolist(), gc.arange(1, 2, 0.25).tolist()
    ([0, 1, 2, 3, 4], [1.0, 1.25, 1.5, 1.75])
    """
    if stop is None:
        start, stop = 0, start
    start, step = _number(start, "start"), _number(step, "step")
    if step == 0:
        raise GraphcError("arange: step must not be zero")
    if isinstance(stop, str):
        if not (_is_int(start) and _is_int(step) and start == 0 and step == 1):
            raise ShapeError(
                f"arange: a symbolic stop {stop!r} needs start 0 and step 1 "
                "(the length would be a sum of dims)"
            )
        length: Any = stop
    else:
        length = _range_length(start, _number(stop, "stop"), step)
    if dtype is None and not isinstance(stop, str) and not _is_int(stop):
        dtype = np.float32  # a float stop makes a float range, as in torch
    return _arange(start=start, step=step, length=length, dtype=dtype)


# -- cumsum ------------------------------------------------------------------------------------


def _cumsum_dtype(dtype: np.dtype) -> np.dtype:
    # numpy's (and torch's) accumulation dtype: small ints and bools widen to int64
    return as_dtype(np.cumsum(np.zeros(1, dtype)).dtype)


def _cumsum_canon(x: TensorType, axis: Any) -> dict:
    return {"axis": one_axis(axis, x.rank, "cumsum")}


def _cumsum_kernel(x: np.ndarray, out: np.ndarray | None = None, axis: Any = 0) -> np.ndarray:
    dtype = _cumsum_dtype(x.dtype)
    if x.ndim == 0:  # np.cumsum would flatten to shape (1,)
        return into(out, x.astype(dtype))
    return np.cumsum(x, axis=axis, dtype=dtype, out=out)


def _cumsum_vjp(ct: Any, out: Any, x: Any, needs: tuple, axis: Any) -> tuple:
    # out[j] = sum of x[i] for i <= j, so dx[i] = sum of ct[j] for j >= i: a reverse cumsum
    if axis is None:
        return (ct,)
    # flip lives in arrays.py, which imports this module: reached by name, as sum_to is
    flipped = bind("flip", ct, axis=(axis,))
    return (bind("flip", _cumsum(flipped, axis=axis), axis=(axis,)),)


_cumsum = defop(
    "cumsum",
    infer=lambda x, axis: x.with_dtype(_cumsum_dtype(x.dtype)),
    kernel=_cumsum_kernel,
    attrs={"axis": 0},
    canonicalize=_cumsum_canon,
    vjp=_cumsum_vjp,
    cost=lambda out, x, axis: x.size or 0,
    doc="Running sums along axis (int32 and bool sums widen to int64).",
)


def cumsum(x: Any, axis: int | None = None, *, dim: int | None = None) -> Any:
    """Running sums along axis, as np.cumsum and torch.cumsum; without an axis, of the
    flattened x (numpy). Ints and bools sum in int64. The gradient is a reverse cumsum.

    >>> import numpy as np, graphc as gc
    >>> gc.cumsum(np.array([[1, 2], [3, 4]]), dim=1).tolist()
    [[1, 3], [3, 7]]
    """
    axis = pick_axis(axis, dim, "cumsum")
    if axis is None:
        x, axis = flattened(x, "cumsum"), 0
    return _cumsum(x, axis=axis)


# -- cumprod -----------------------------------------------------------------------------------


def _cumprod_canon(x: TensorType, axis: Any) -> dict:
    return {"axis": one_axis(axis, x.rank, "cumprod")}


def _cumprod_kernel(x: np.ndarray, out: np.ndarray | None = None, axis: Any = 0) -> np.ndarray:
    dtype = _cumsum_dtype(x.dtype)  # numpy's and torch's: the same widening as cumsum's
    if x.ndim == 0:  # np.cumprod would flatten to shape (1,)
        return into(out, x.astype(dtype))
    return np.cumprod(x, axis=axis, dtype=dtype, out=out)


def _reverse_cumsum(v: Any, axis: int) -> Any:
    """sum of v[j] for j >= i, at each i along axis."""
    flipped = bind("flip", v, axis=(axis,))  # flip is arrays.py's, which imports this module
    return bind("flip", _cumsum(flipped, axis=axis), axis=(axis,))


def _cumprod_vjp(ct: Any, out: Any, x: Any, needs: tuple, axis: Any) -> tuple:
    # out[j] is the product of x[k] for k <= j, so dx[i] = sum over j >= i of ct[j] times
    # the product of x[k] for k <= j but i. Torch's formula, which holds at zeros: before
    # the first zero of x along the axis it is the reverse cumsum of ct * out, over x[i];
    # at the first zero, the reverse cumsum of ct times the running product with that
    # zero taken as 1. Past it every such product holds the first zero, so the gradient
    # is 0 there, written as x[first zero] times the rest (its value: the same with that
    # zero taken as 1, over x[i] between the first two zeros, and at the second zero with
    # both taken as 1; past that 0): as a value 0, but differentiable again, its
    # derivative in the first zero is the rest, as torch's double backward has it
    if axis is None:  # a 0-d x: out is x
        return (ct,)
    zero = bind("eq", x, 0)
    zeros_so_far = _cumsum(bind("cast", zero, dtype=np.int64), axis=axis)
    first = bind("logical_and", zero, bind("eq", zeros_so_far, 1))
    second = bind("logical_and", zero, bind("eq", zeros_so_far, 2))
    safe = bind("where", zero, 1, x)
    # out is 0 from the first zero on; where a product overflowed before it, inf * 0 made
    # it nan there, which would spoil the sums before the zero
    settled = bind("where", bind("eq", zeros_so_far, 0), out, _finite(out))
    before = _reverse_cumsum(ct * settled, axis) / safe
    at_first = _reverse_cumsum(ct * _cumprod(bind("where", first, 1, x), axis=axis), axis)
    both_as_one = bind("where", bind("logical_or", first, second), 1, x)
    at_second = _finite(_reverse_cumsum(ct * _cumprod(both_as_one, axis=axis), axis))
    rest = bind("where", bind("eq", zeros_so_far, 1), _finite(at_first / safe), 0)
    first_zero = bind("sum", bind("where", first, x, 0), axis=(axis,), keepdims=True)
    past = first_zero * bind("where", second, at_second, rest)
    return (
        bind("where", bind("eq", zeros_so_far, 0), before, bind("where", first, at_first, past)),
    )


def _finite(v: Any) -> Any:
    """v where it is finite, else 0: it is multiplied by a zero (an overflowed product
    would make the zero nan)."""
    return bind("where", isfinite(v), v, 0)


_cumprod = defop(
    "cumprod",
    infer=lambda x, axis: x.with_dtype(_cumsum_dtype(x.dtype)),
    kernel=_cumprod_kernel,
    attrs={"axis": 0},
    canonicalize=_cumprod_canon,
    vjp=_cumprod_vjp,
    cost=lambda out, x, axis: x.size or 0,
    doc="Running products along axis (int32 and bool products widen to int64).",
)


def cumprod(x: Any, axis: int | None = None, *, dim: int | None = None) -> Any:
    """Running products along axis, as np.cumprod and torch.cumprod; without an axis, of
    the flattened x (numpy). Ints and bools multiply in int64. The gradient is torch's,
    right where x has zeros.

    >>> import numpy as np, graphc as gc
    >>> gc.cumprod(np.array([[1, 2, 3], [4, 0, 5]]), dim=1).tolist()
    [[1, 2, 6], [4, 0, 0]]
    """
    axis = pick_axis(axis, dim, "cumprod")
    if axis is None:
        x, axis = flattened(x, "cumprod"), 0
    return _cumprod(x, axis=axis)
