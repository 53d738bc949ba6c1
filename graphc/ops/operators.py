"""Python operators and numpy-style methods, shared by graph values and eager tensors.

Both kinds inherit `OperatorMixin`, so `x + y`, `x @ w`, `x[1:3, None]`, `x.T` and
`x.sum(axis=0)` mean exactly one thing in graphc: the op function of that name.
"""

from __future__ import annotations

from typing import Any

from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import linalg as L
from graphc.ops import nn as N
from graphc.ops import reduce as R
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

    # numpy-style methods; the eager Tensor adds PyTorch's spellings on top.
    def sum(self, axis: Any = None, keepdims: bool = False) -> Any:
        return R.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Any:
        return R.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        return R.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        return R.min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: Any = None, keepdims: bool = False) -> Any:
        return R.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis: Any = None, keepdims: bool = False) -> Any:
        return R.argmin(self, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
        return R.var(self, axis=axis, keepdims=keepdims, ddof=ddof)

    def reshape(self, *shape: Any) -> Any:
        return S.reshape(self, shape[0] if len(shape) == 1 else shape)

    def view_as(self, other: Any) -> Any:
        # PyTorch code traced into graphs calls it (the tutorials' GradCoeff)
        return S.reshape(self, other.shape)

    def transpose(self, *axes: Any) -> Any:
        return S.transpose(self, (axes[0] if len(axes) == 1 else axes) or None)

    def astype(self, dtype: Any) -> Any:
        return E.cast(self, dtype)

    def exp(self) -> Any:
        return E.exp(self)

    def log(self) -> Any:
        return E.log(self)

    def sqrt(self) -> Any:
        return E.sqrt(self)

    def tanh(self) -> Any:
        return E.tanh(self)

    def sigmoid(self) -> Any:
        return E.sigmoid(self)

    def relu(self) -> Any:
        return E.relu(self)

    def clip(self, a_min: Any = None, a_max: Any = None) -> Any:
        return E.clip(self, a_min, a_max)

    def softmax(self, axis: int = -1) -> Any:
        return N.softmax(self, axis=axis)

    def log_softmax(self, axis: int = -1) -> Any:
        return N.log_softmax(self, axis=axis)
