"""Rounding and its kin: floor, ceil, trunc and round; the remainders remainder and
fmod, x minus y times a rounded quotient; and clamp (clip), which moves a value to the
nearest point of a range, with scalar or tensor bounds.

One block per op, as in elementwise.py. Rounding is flat almost everywhere, so its
gradient is zero; a remainder's is that of x - y q(x/y) with the quotient q held flat.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DivisionByZeroError, DTypeError, GraphcError
from graphc.ir.types import TensorType
from graphc.ops import elementwise as E
from graphc.ops.defop import defop, elementwise_cost, into, ufunc_infer
from graphc.ops.dispatch import dtype_of, is_python_scalar
from graphc.ops.selection import full_like, unbroadcast

__all__ = [
    "ceil",
    "clamp",
    "clip",
    "floor",
    "floor_divide",
    "fmod",
    "mod",
    "remainder",
    "round",
    "trunc",
]

# -- rounding (flat almost everywhere: gradient zero) ----------------------------------------


def _zero_vjp(ct: Any, out: Any, x: Any, needs: tuple, **attrs: Any) -> tuple:
    return (full_like(x, 0),)


def _rounding_infer(name: str) -> Any:
    def infer(x: TensorType, **attrs: Any) -> TensorType:
        if x.dtype == np.bool_:  # as PyTorch: "floor" is not implemented for 'Bool'
            raise DTypeError(f"{name}: not defined for bool (cast to a number first)")
        return x

    return infer


def _rounding(name: str, ufunc: np.ufunc, doc: str) -> Any:
    def kernel(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if x.dtype.kind in "iu":  # integers are already whole (numpy 2.0 would give floats)
            return into(out, x)
        return ufunc(x, out=out)

    return defop(
        name,
        infer=_rounding_infer(name),
        kernel=kernel,
        vjp=_zero_vjp,
        elementwise=True,
        inplace=True,
        cost=elementwise_cost,
        doc=doc,
    )


floor = _rounding("floor", np.floor, "The largest whole number <= x. gc.floor(-0.5) -> -1.0")
ceil = _rounding("ceil", np.ceil, "The smallest whole number >= x. gc.ceil(0.5) -> 1.0")
trunc = _rounding("trunc", np.trunc, "x rounded towards zero. gc.trunc(-1.5) -> -1.0")


def _round_canon(x: TensorType, decimals: Any) -> dict:
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise GraphcError(f"round: decimals must be an int, got {decimals!r}")
    if decimals and x.dtype.kind in "iu":  # PyTorch: "round_cpu" not implemented for 'Long'
        raise DTypeError(f"round: decimals={decimals} needs a float input, got {x.dtype}")
    return {"decimals": int(decimals)}


def _round_kernel(x: np.ndarray, out: np.ndarray | None = None, decimals: int = 0) -> np.ndarray:
    if x.dtype.kind in "iu":
        return into(out, x)
    if decimals == 0:
        return np.rint(x, out=out)  # half to even, as torch.round
    # numpy's and PyTorch's way: rint(x * 10^d) / 10^d, or rint(x / 10^-d) * 10^-d
    return np.round(x, decimals, out=np.empty_like(x) if out is None else out)


round = defop(
    "round",
    infer=_rounding_infer("round"),
    kernel=_round_kernel,
    attrs={"decimals": 0},
    canonicalize=_round_canon,
    vjp=_zero_vjp,
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="x rounded to `decimals` places, halves to even (as torch.round and numpy.round). "
    "gc.round(np.array([0.5, 1.5, 2.5])) -> array([0., 2., 2.])",
)

# -- remainders ---------------------------------------------------------------------------


def _remainder_kernel(ufunc: np.ufunc, name: str) -> Any:
    def kernel(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # numpy answers 0 (and warns) for an integer divided by zero; PyTorch raises
        integers = np.asarray(y).dtype.kind in "iub" and np.asarray(x).dtype.kind in "iub"
        if integers and not np.all(y):
            raise DivisionByZeroError(f"{name}: integer division by zero")
        return ufunc(x, y, out=out)

    kernel.__name__ = name
    return kernel


def _remainder_vjp(quotient: Any) -> Any:
    # x - y q(x/y) with q = floor or trunc, flat between its jumps:
    # d/dx = 1, d/dy = -q(x/y)
    def vjp(ct: Any, out: Any, x: Any, y: Any, needs: tuple) -> tuple:
        gx = unbroadcast(ct, x) if needs[0] else None
        gy = unbroadcast(E.neg(ct) * quotient(x / y), y) if needs[1] else None
        return gx, gy

    return vjp


def _remainder_op(name: str, ufunc: np.ufunc, quotient: Any, doc: str) -> Any:
    return defop(
        name,
        inputs=("x", "y"),
        infer=ufunc_infer(ufunc, name),
        kernel=_remainder_kernel(ufunc, name),
        vjp=_remainder_vjp(quotient),
        elementwise=True,
        inplace=True,
        cost=elementwise_cost,
        doc=doc,
    )


remainder = _remainder_op(
    "remainder",
    np.remainder,
    floor,
    "x - y * floor(x / y): the sign of y, as Python's %, numpy.remainder and "
    "torch.remainder. gc.remainder(np.array([-5, 5]), 3) -> array([1, 2])",
)
fmod = _remainder_op(
    "fmod",
    np.fmod,
    trunc,
    "x - y * trunc(x / y): the sign of x, as C's fmod, numpy.fmod and torch.fmod. "
    "gc.fmod(np.array([-5, 5]), 3) -> array([-2, 2])",
)
mod = remainder  # numpy.mod is numpy.remainder


def _floor_divide_infer(x: TensorType, y: TensorType) -> TensorType:
    if x.dtype == np.bool_ and y.dtype == np.bool_:  # as PyTorch (numpy gives int8)
        raise DTypeError("floor_divide: not defined for two bools (cast to a number first)")
    return ufunc_infer(np.floor_divide, "floor_divide")(x, y)


# x // y is flat almost everywhere (its jumps aside): both gradients are zero, as in
# PyTorch and JAX
floor_divide = defop(
    "floor_divide",
    inputs=("x", "y"),
    infer=_floor_divide_infer,
    kernel=_remainder_kernel(np.floor_divide, "floor_divide"),
    vjp=lambda ct, out, x, y, needs: (
        unbroadcast(full_like(ct, 0), x) if needs[0] else None,
        unbroadcast(full_like(ct, 0), y) if needs[1] else None,
    ),
    elementwise=True,
    inplace=True,
    cost=elementwise_cost,
    doc="floor(x / y), Python's // (numpy.floor_divide; torch.floor_divide rounds the same "
    "way since 1.13): its remainder is `remainder`'s. An integer divided by zero is an "
    "error, as in PyTorch. gc.floor_divide(np.array([-7, 7]), 2) -> array([-4, 3])",
)

# -- clamp with scalar or tensor bounds ---------------------------------------------------


def _scalar_bound(bound: Any) -> bool:
    """None, a Python or numpy scalar, or a 0-d array: a `clip` attribute."""
    if bound is None or is_python_scalar(bound) or isinstance(bound, np.generic):
        return True
    return isinstance(bound, np.ndarray) and bound.ndim == 0


def _promoted(x: Any, *bounds: Any) -> Any:
    """x cast to numpy's result dtype when a scalar bound with a dtype of its own (a
    numpy scalar or 0-d array: typed, where a Python number is weak) promotes it, as
    np.clip(int16_x, np.float32(0.5)) is float32; `clip` then clips in that dtype."""
    typed = [np.asarray(b).dtype for b in bounds if b is not None and not is_python_scalar(b)]
    if not typed:
        return x
    dtype = dtype_of(x)
    target = np.result_type(dtype, *typed)
    return x if target == dtype else E.cast(x, target)


def _pick(name: str, numpy_name: str, torch_value: Any, numpy_value: Any) -> Any:
    if torch_value is not None and numpy_value is not None:
        raise GraphcError(f"clamp: give either {name} or {numpy_name}, not both")
    return numpy_value if torch_value is None else torch_value


def clamp(x: Any, min: Any = None, max: Any = None, *, a_min: Any = None,  # noqa: A002
          a_max: Any = None) -> Any:  # fmt: skip
    """min(max(x, min), max), as torch.clamp: bounds may be scalars, arrays, tensors or
    graph values (broadcasting against x), and a nan anywhere gives nan. numpy's names
    a_min and a_max work too.

    A Python number bound is weak, a numpy scalar or 0-d array keeps its dtype, as in
    numpy 2: by np.float32(0.5) an int16 x is clipped as float32, by 0.5 as float64.
    Scalar bounds record one `clip` node. Tensor bounds are `maximum` and `minimum`:
    where x equals a bound they split the gradient between the two (PyTorch gives it
    all to x).

    >>> import numpy as np, graphc as gc
    >>> gc.clamp(np.array([-2.0, 0.5, 3.0]), np.zeros(3), 1.0)
    array([0. , 0.5, 1. ])
    """
    low, high = _pick("min", "a_min", min, a_min), _pick("max", "a_max", max, a_max)
    scalar_low, scalar_high = _scalar_bound(low), _scalar_bound(high)
    x = _promoted(x, *(b for b, scalar in ((low, scalar_low), (high, scalar_high)) if scalar))
    if scalar_low and scalar_high:
        return E.clip(x, low, high)
    if low is not None:
        x = E.clip(x, low, None) if scalar_low else E.maximum(x, low)
    if high is not None:
        x = E.clip(x, None, high) if scalar_high else E.minimum(x, high)
    return x


def clip(x: Any, a_min: Any = None, a_max: Any = None, *, min: Any = None,  # noqa: A002
         max: Any = None) -> Any:  # fmt: skip
    """numpy.clip's spelling of `clamp` (bounds may be arrays or tensors too).

    >>> import numpy as np, graphc as gc
    >>> gc.clip(np.array([-1.0, 2.0]), 0.0, 1.0)
    array([0., 1.])
    """
    return clamp(x, _pick("min", "a_min", min, a_min), _pick("max", "a_max", max, a_max))
