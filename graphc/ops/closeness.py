"""isclose and allclose: whether values agree within a tolerance, with torch's rules.

Builders over the comparisons: x and y are close where they are equal (infinities of
one sign too), where both are nan if equal_nan, and where |x - y| is finite and at most
atol + rtol * |y| (y is the reference: the test is not symmetric, as in torch and numpy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.types import is_float
from graphc.ops import elementwise as E
from graphc.ops import reduce as R
from graphc.ops.dispatch import dtype_of
from graphc.ops.logical import logical_and, logical_not, logical_or
from graphc.ops.selection import isfinite, isnan
from graphc.ops.symbolic import Symbol

__all__ = ["allclose", "isclose"]


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.generic)) and not hasattr(value, "shape")


def _common_dtype(x: Any, y: Any) -> np.dtype:
    """The dtype both operands have (a Python number takes the other's): torch compares
    tensors of one dtype only."""
    if _is_number(y):
        return dtype_of(x)
    if _is_number(x):
        return dtype_of(y)
    dx, dy = dtype_of(x), dtype_of(y)
    if dx != dy:
        raise DTypeError(
            f"isclose: x is {dx} and y is {dy}; as in torch, both must have one dtype "
            "(cast one of them first)"
        )
    return dx


def isclose(x: Any, y: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Any:  # fmt: skip
    """True where x is within atol + rtol * |y| of y, elementwise with broadcasting, as
    torch.isclose (and np.isclose): equal values are close (inf to inf), nan is close to
    nan only if equal_nan, and an infinite difference never. Integers are compared and
    subtracted as integers, the difference then held against the allowance in float64
    (torch's allowance is float32); bools are close when equal. Both
    operands have one dtype, as in torch; a Python number takes the other's.

    >>> import numpy as np, graphc as gc
    >>> gc.isclose(np.array([1.0, 1.1, np.inf, np.nan]), np.array([1.0 + 1e-9, 1.0, np.inf, np.nan])).tolist()
    [True, False, True, False]
    """
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
            raise GraphcError(f"isclose: {name} must be a number, got {value!r}")
        if not value >= 0:
            raise GraphcError(f"isclose: {name} must be >= 0, got {value!r}")
    dtype = _common_dtype(x, y)
    close = E.eq(x, y)
    if dtype == np.bool_:
        return close
    if equal_nan and is_float(dtype):
        close = logical_or(close, logical_and(isnan(x), isnan(y)))
    if rtol == 0 and atol == 0:
        return close
    # integers: equal and subtracted as integers (2**62 + 1 and 2**62 + 3 are one
    # float64), the difference and the allowance compared in float64
    difference = E.abs(E.sub(x, y))
    if not is_float(dtype):
        difference = E.cast(difference, np.float64)
        y = y if _is_number(y) else E.cast(y, np.float64)
    allowed = E.add(E.mul(E.abs(y), float(rtol)), float(atol))
    near = logical_and(isfinite(difference), E.le(difference, allowed))
    return logical_or(close, near)


def allclose(x: Any, y: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Any:  # fmt: skip
    """Whether every element of x is close to y (`isclose`, with broadcasting), as
    torch.allclose: a Python bool on tensors and arrays; on graph values a 0-d bool
    value (the answer exists only when the graph runs).

    >>> import numpy as np, graphc as gc
    >>> gc.allclose(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7]))
    True
    """
    close = isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)
    every = E.eq(R.sum(logical_not(close)), 0)  # a count, so no elements give True
    return every if isinstance(every, Symbol) else bool(every)
