"""Comparisons, selection, clipping and casting: eq..ge, where, clip, cast, full_like.

Split from the arithmetic in elementwise.py, which re-exports every name here. This
module imports no other op module (sum_to is reached through `bind`), so the gradient
helpers below can serve every op family without an import cycle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.attrs import attr_problem, int64_value
from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.types import TensorType, as_dtype, broadcast_shapes, is_float
from graphc.ops.defop import defop, elementwise_cost, into, ufunc_infer, ufunc_kernel
from graphc.ops.dispatch import bind, dtype_of
from graphc.ops.logical import logical_or


def unbroadcast(ct: Any, x: Any) -> Any:
    """The cotangent of `x` from that of a result `x` was broadcast into."""
    if tuple(ct.shape) != tuple(x.shape):
        ct = bind("sum_to", ct, shape=x.shape)
    if ct.dtype != x.dtype:
        ct = cast(ct, x.dtype)
    return ct


# -- comparisons (boolean results, no gradient) -----------------------------------


def _compare(name: str, ufunc: np.ufunc, doc: str, props: tuple = ()) -> Any:
    return defop(
        name,
        inputs=("x", "y"),
        infer=ufunc_infer(ufunc, name),
        kernel=ufunc_kernel(ufunc),
        elementwise=True,
        cost=elementwise_cost,
        doc=doc,
        props=("comparison", *props),
    )


eq = _compare("eq", np.equal, "x == y, elementwise (bool).", props=("commutative",))
ne = _compare("ne", np.not_equal, "x != y, elementwise (bool).", props=("commutative",))
lt = _compare("lt", np.less, "x < y, elementwise (bool).")
le = _compare("le", np.less_equal, "x <= y, elementwise (bool).")
gt = _compare("gt", np.greater, "x > y, elementwise (bool).")
ge = _compare("ge", np.greater_equal, "x >= y, elementwise (bool).")

# -- selection, clipping, casting ----------------------------------------------


def _where_infer(cond: TensorType, x: TensorType, y: TensorType) -> TensorType:
    if cond.dtype != np.bool_:
        raise DTypeError(f"where: the condition must be bool, got {cond.dtype}")
    shape = broadcast_shapes(cond.shape, x.shape, y.shape, op="where")
    return TensorType(shape, np.result_type(x.dtype, y.dtype))


def _zero_bits(v: Any) -> bool:
    """Is v a scalar whose bits are all zero (0, False, +0.0; not -0.0)?"""
    return np.ndim(v) == 0 and not any(np.asarray(v).tobytes())


def _where_kernel(c: np.ndarray, x: Any, y: Any, out: np.ndarray | None = None) -> np.ndarray:
    # where(c, x, 0) into a float buffer is x's bits and-ed with a mask that is all ones
    # where c holds: exact (nan, inf and -0.0 kept or cleared bit for bit) and ~1.7x as
    # fast as np.where, which has no fast loop for a scalar branch. A relu's gradient.
    # Without out= (eager), the result is made here: np.where's own array is fresh, and
    # copying it again cost an eager LeNet step four passes over its activations
    if out is None:
        dtype = np.result_type(x, y)
        if not is_float(dtype) or not (_zero_bits(x) or _zero_bits(y)):
            return np.asarray(np.where(c, x, y))
        out = np.empty(np.broadcast_shapes(np.shape(c), np.shape(x), np.shape(y)), dtype)
    if is_float(out.dtype) and np.asarray(c).dtype == np.bool_:
        if _zero_bits(y) and isinstance(x, np.ndarray) and x.dtype == out.dtype:
            kept, mask = x, np.negative(c, dtype=f"u{out.itemsize}")  # True -> all ones
        elif _zero_bits(x) and isinstance(y, np.ndarray) and y.dtype == out.dtype:
            kept, mask = y, np.subtract(c, 1, dtype=f"u{out.itemsize}")  # False -> all ones
        else:
            return into(out, np.where(c, x, y))
        unsigned = mask.dtype
        np.bitwise_and(kept.view(unsigned), mask, out=out.view(unsigned))
        return out
    return into(out, np.where(c, x, y))


# d where(c, x, y) = where(c, dx, 0) + where(c, 0, dy)
where = defop(
    "where",
    inputs=("condition", "x", "y"),
    infer=_where_infer,
    kernel=_where_kernel,
    vjp=lambda ct, out, c, x, y, needs: (
        None,
        unbroadcast(where(c, ct, 0), x) if needs[1] else None,
        unbroadcast(where(c, 0, ct), y) if needs[2] else None,
    ),
    elementwise=True,
    cost=elementwise_cost,
    doc="x where condition holds, else y. gc.where(x > 0, x, 0) is a relu.",
)


def _clip_kernel(
    x: np.ndarray, out: np.ndarray | None = None, a_min: Any = None, a_max: Any = None
) -> np.ndarray:
    if x.dtype.kind in "iu":  # a Python int bound past the range limits nothing here
        info = np.iinfo(x.dtype)  # (the type rule refused one limiting everything); numpy
        if type(a_min) is int and a_min < info.min:  # 2.0 raises OverflowError on it,
            a_min = None  # 2.1 and later skip it: the same result on every numpy
        if type(a_max) is int and a_max > info.max:
            a_max = None
    if a_min is None and a_max is None:
        return into(out, x)
    return np.clip(x, a_min, a_max, out=out)


def _clip_vjp(ct: Any, out: Any, x: Any, needs: tuple, a_min: Any, a_max: Any) -> tuple:
    # d clip(x) = dx inside [a_min, a_max], 0 outside
    if a_min is not None:
        ct = where(lt(x, a_min), 0, ct)
    if a_max is not None:
        ct = where(gt(x, a_max), 0, ct)
    return (ct,)


def _clip_canon(x: TensorType, a_min: Any, a_max: Any) -> dict:
    bounds = {}
    for key, bound in (("a_min", a_min), ("a_max", a_max)):
        if bound is not None and (np.ndim(bound) != 0 or isinstance(bound, (str, bytes))):
            raise GraphcError(f"clip: {key} must be a scalar or None, got {bound!r}")
        # kept as Python scalars: weak, as in numpy 2 (clip(int_x, 0.5, 1) is float64)
        bounds[key] = None if bound is None else np.asarray(bound).item()
    floats = _float_result(x, *bounds.values())
    for key, bound in bounds.items():
        if type(bound) is int and attr_problem(bound):
            # past what a graph holds (ir/attrs.py): numpy's kernel rounds it to a float
            # result's dtype, and an int x's ignores a bound beyond its range on the side
            # where it limits nothing
            if floats:
                bounds[key] = np.asarray(bound, np.result_type(x.dtype, 0.0)).item()
            elif x.dtype.kind in "iu" and (
                bound <= np.iinfo(x.dtype).min if key == "a_min" else bound >= np.iinfo(x.dtype).max
            ):
                bounds[key] = None
    return bounds


def _float_result(x: TensorType, *bounds: Any) -> bool:
    """Whether clip's result is a float: x's, or float64 for an int x by a float bound."""
    return is_float(x.dtype) or any(type(b) is float for b in bounds)


def _clip_infer(x: TensorType, a_min: Any, a_max: Any) -> TensorType:
    bounds = [b for b in (a_min, a_max) if b is not None]
    if x.dtype.kind in "iu" and not _float_result(x, a_min, a_max):
        # as numpy 2: an int bound past the dtype's range is kept when it limits
        # nothing (clip(uint8_x, -1, 2)), and an error when it would limit everything
        # (with a float bound the result is float64, and numpy clips to it)
        info = np.iinfo(x.dtype)
        if (type(a_min) is int and a_min > info.max) or (type(a_max) is int and a_max < info.min):
            raise DTypeError(
                f"clip: the bounds ({a_min}, {a_max}) are past every {x.dtype} value "
                f"({info.min}..{info.max})"
            )
    return x.with_dtype(np.result_type(x.dtype, *bounds))


clip = defop(
    "clip",
    infer=_clip_infer,
    canonicalize=_clip_canon,
    kernel=_clip_kernel,
    attrs={"a_min": None, "a_max": None},
    vjp=_clip_vjp,
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="Limit x to [a_min, a_max] (either may be None). gc.clip(x, 0, 6) is relu6.",
)


def _cast_canon(x: TensorType, dtype: Any) -> dict:
    return {"dtype": as_dtype(dtype)}


def _cast_kernel(x: np.ndarray, out: np.ndarray | None = None, dtype: Any = None) -> np.ndarray:
    if out is None:
        return x.astype(dtype)
    np.copyto(out, x, casting="unsafe")
    return out


def _cast_vjp(ct: Any, out: Any, x: Any, needs: tuple, dtype: Any) -> tuple:
    # a cast is the identity on values: the gradient is cast back
    return (cast(ct, x.dtype) if is_float(x.dtype) else None,)


cast = defop(
    "cast",
    infer=lambda x, dtype: x.with_dtype(dtype),
    kernel=_cast_kernel,
    attrs={"dtype": "float32"},
    canonicalize=_cast_canon,
    vjp=_cast_vjp,
    elementwise=True,
    cost=elementwise_cost,
    doc="x converted to dtype (numpy's astype). gc.cast(x, 'int64')",
)


def _full_like_canon(x: TensorType, value: Any) -> dict:
    # one Python scalar: a string, an array or an int past x's range fails only in the kernel
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise GraphcError(f"full_like: value must be a real scalar, got {value!r}")
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, int):
        hint = (
            "for uint64's largest values cast from int64 (gc.cast(gc.full_like(x, -1), 'uint64'))"
        )
        value = int64_value(value, "full_like", "value", hint)
    if isinstance(value, int) and np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        if not info.min <= value <= info.max:
            raise GraphcError(f"full_like: value {value} does not fit {x.dtype}")
    return {"value": value}


# full_like(x, v): x supplies only shape and dtype, so it gets no gradient
full_like = defop(
    "full_like",
    infer=lambda x, value: x,
    kernel=lambda x, out=None, value=0: into(out, np.full_like(x, value)),
    attrs={"value": 0},
    canonicalize=_full_like_canon,
    vjp=lambda ct, out, x, needs, value: (None,),
    elementwise=True,
    doc="An array like x filled with value. gc.full_like(x, 0) is zeros_like.",
    props=("reads_only_type",),
)


def zeros_like(x: Any) -> Any:
    """Zeros of x's shape and dtype."""
    return full_like(x, 0)


def ones_like(x: Any) -> Any:
    """Ones of x's shape and dtype."""
    return full_like(x, 1)


# -- nan and inf tests (builders over the comparisons) -------------------------------------


def isnan(x: Any) -> Any:
    """True where x is nan (x != x); False throughout for integers and bools.
    gc.isnan(np.array([1.0, np.nan])) -> array([False,  True])"""
    return ne(x, x)


def isinf(x: Any) -> Any:
    """True where x is +inf or -inf. gc.isinf(np.array([np.inf, 1.0])) -> array([ True, False])"""
    if not is_float(dtype_of(x)):  # no infinity in its dtype
        return ne(x, x)
    return logical_or(eq(x, np.inf), eq(x, -np.inf))


def isfinite(x: Any) -> Any:
    """True where x is neither nan nor inf (|x| < inf: nan compares false).
    gc.isfinite(np.array([1.0, np.inf, np.nan])) -> array([ True, False, False])"""
    if not is_float(dtype_of(x)):
        return eq(x, x)
    return lt(bind("abs", x), np.inf)


def nan_to_num(
    x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
    neginf: float | None = None,
) -> Any:  # fmt: skip
    """x with nan replaced by `nan`, +inf by `posinf` and -inf by `neginf` (by default the
    largest and the lowest finite value of x's dtype), as np.nan_to_num and
    torch.nan_to_num: `where`s, so the gradient is 1 at the numbers kept and 0 at those
    replaced. Integers and bools have none of them: a copy of x. (`copy` is numpy's;
    graphc never writes into x.)

    >>> import numpy as np, graphc as gc
    >>> gc.nan_to_num(np.array([np.nan, np.inf, -np.inf, 1.5]), posinf=9.0).tolist()
    [0.0, 9.0, -1.7976931348623157e+308, 1.5]
    """
    dtype = dtype_of(x)
    if not is_float(dtype):
        return cast(x, dtype)  # a copy, never x itself (numpy's and torch's)
    top = _finite_limits(dtype)
    # the replacements as arrays of x's dtype: a Python float is weak, but would be
    # rounded from float64 all the same; an array says so once, here
    with np.errstate(over="ignore"):
        values = [
            np.asarray(top if posinf is None else posinf, dtype),
            np.asarray(-top if neginf is None else neginf, dtype),
            np.asarray(nan, dtype),
        ]
    result = where(eq(x, np.inf), values[0], x)
    result = where(eq(x, -np.inf), values[1], result)
    return where(ne(x, x), values[2], result)


def _finite_limits(dtype: np.dtype) -> float:
    """The largest finite value of a float dtype (ml_dtypes' bfloat16 too)."""
    try:
        return float(np.finfo(dtype).max)
    except ValueError:  # numpy's finfo knows numpy's dtypes only
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).max)


# numpy's long names for the same ops
equal, not_equal, less, less_equal, greater, greater_equal = eq, ne, lt, le, gt, ge
clamp = clip
