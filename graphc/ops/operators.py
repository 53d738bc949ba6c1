"""Python operators, shared by graph values and eager tensors.

Both kinds inherit `OperatorMixin` (through `ValueMethods`, methods.py), so `x + y`,
`x @ w`, `x[1:3, None]` and `x.T` mean exactly one thing in graphc: the op function of
that name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import linalg as L
from graphc.ops import logical
from graphc.ops import shape as S
from graphc.ops.dispatch import bind


class OperatorMixin:
    """Operators for any value kind that has `.shape` and `.dtype`."""

    __array_priority__ = 1000  # numpy defers `array + value` to our __radd__

    def __add__(self, other: Any) -> Any:
        return E.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return E.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return E.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return E.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return E.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return E.mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return E.div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return E.div(other, self)

    def __pow__(self, other: Any) -> Any:
        return E.pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return E.pow(other, self)

    def __floordiv__(self, other: Any) -> Any:  # Python's //: floor(x / y)
        return bind("floor_divide", self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return bind("floor_divide", other, self)

    def __mod__(self, other: Any) -> Any:  # Python's %: the sign of the divisor
        return bind("remainder", self, other)

    def __rmod__(self, other: Any) -> Any:
        return bind("remainder", other, self)

    def __matmul__(self, other: Any) -> Any:
        return L.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return L.matmul(other, self)

    def __neg__(self) -> Any:
        return E.neg(self)

    def __and__(self, other: Any) -> Any:
        return _logical(logical.logical_and, "&", self, other)

    def __or__(self, other: Any) -> Any:
        return _logical(logical.logical_or, "|", self, other)

    def __xor__(self, other: Any) -> Any:
        return _logical(logical.logical_xor, "^", self, other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self) -> Any:
        """`~x`: logical not of a bool value, bitwise not of an integer one (numpy's,
        torch's)."""
        dtype = self.dtype  # type: ignore[attr-defined]
        if dtype == np.bool_:
            return logical.logical_not(self)
        if dtype.kind not in "iu":
            raise DTypeError(f"~ (invert) takes bool and integer values, got {dtype}")
        return -self - 1  # two's complement: ~x == -x - 1, wrapping alike for unsigned

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return E.abs(self)

    def __lt__(self, other: Any) -> Any:
        return E.lt(self, other)

    def __le__(self, other: Any) -> Any:
        return E.le(self, other)

    def __gt__(self, other: Any) -> Any:
        return E.gt(self, other)

    def __ge__(self, other: Any) -> Any:
        return E.ge(self, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return E.eq(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return E.ne(self, other)

    __hash__ = object.__hash__  # values are hashed by identity, as in numpy and torch

    def __getitem__(self, index: Any) -> Any:
        return I.getitem(self, index)

    @property
    def T(self) -> Any:  # noqa: N802 - numpy's name
        return S.transpose(self)

    @property
    def ndim(self) -> int:
        return len(self.shape)  # type: ignore[attr-defined]


def _logical(op: Any, symbol: str, x: Any, y: Any) -> Any:
    """`x & y`, `x | y`, `x ^ y` of bool values (or Python bools): the logical ops."""
    y_bool = isinstance(y, (bool, np.bool_)) or getattr(y, "dtype", None) == np.bool_
    if y_bool and x.dtype == np.bool_:
        return op(x, y)
    other = type(y).__name__ if getattr(y, "dtype", None) is None else y.dtype
    raise DTypeError(
        f"{symbol}: graphc takes bool values only (logical {op.__name__[8:]}), got {x.dtype} "
        f"and {other}; integers have no bitwise ops in graphc"
    )
