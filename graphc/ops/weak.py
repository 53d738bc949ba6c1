"""Weakly typed graph values: a Python scalar that entered a graph as a loop carry, a
branch result or fori_loop's counter, and still takes the dtype of the array it meets.

`x * 2` keeps the dtype of a float32 `x` because the Python 2 is weak (numpy 2's NEP 50,
graphc/ops/dispatch.py). A control-flow function must trace its body on a graph value,
so a Python scalar given as `gc.scan`'s initial carry becomes a placeholder; were it a
plain int64 placeholder, `carry + x` on float32 xs would give float64 (numpy's lattice)
where JAX gives float32. A `WeakSymbol` is that placeholder still marked weak, as a
JAX tracer of a weakly typed aval is:

- in an elementwise op with strongly typed operands it is cast to the dtype the Python
  scalar of its kind would take there (`weak_dtype`): `carry + x` is float32 (a weak
  bool stays bool: numpy promotes a bool array as it does a Python bool);
- in an elementwise op whose operands are all weak (weak values and Python scalars)
  they meet at the default dtype of the highest Python kind among them (bool < int <
  float < complex): a weak int times 2.5 is float32, as in JAX; the result is weak
  again when it has that dtype (a comparison's bool result is strong). An op that
  makes a float of weak ints (true division, sqrt) computes in the default float and
  gives a weak float, as Python's `1 / 2` and JAX do (not numpy's float64);
- anywhere else (an index, a matmul, a cast) it is an ordinary value of its dtype.

A weak value's dtype is its kind's default (int64, float32, bool, complex64) until a
control-flow function gives it the dtype its carry or branch settles on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError
from graphc.ir.registry import OpDef
from graphc.ir.types import is_float
from graphc.ops import dispatch
from graphc.ops.dispatch import bind, dtype_of, is_python_scalar, weak_dtype
from graphc.ops.symbolic import SYMBOLIC, Symbol

# a Python scalar standing for each kind of dtype, and the order of the kinds
_SCALAR_OF_KIND = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}
_RANK = {bool: 0, int: 1, float: 2, complex: 3}


class WeakSymbol(Symbol):
    """A graph value that came from a Python scalar and is still weakly typed."""

    __slots__ = ()

    @property
    def scalar(self) -> Any:
        """A Python scalar of this value's kind (what `weak_dtype` is asked about)."""
        return _SCALAR_OF_KIND["f" if is_float(self.dtype) else self.dtype.kind]


def weak(value: Symbol) -> WeakSymbol:
    """The graph value `value` marked weak."""
    return value if isinstance(value, WeakSymbol) else WeakSymbol(value.node)


def strong(value: Symbol) -> Symbol:
    """The graph value `value` as an ordinary (strongly typed) one."""
    return Symbol(value.node) if isinstance(value, WeakSymbol) else value


def is_weak(value: Any) -> bool:
    """Whether `value` is weakly typed: a Python scalar or a `WeakSymbol`."""
    return isinstance(value, WeakSymbol) or is_python_scalar(value)


def weak_scalar(value: Any) -> Any:
    """The Python scalar standing for the weak `value` (itself when it is one)."""
    return value.scalar if isinstance(value, WeakSymbol) else value


def join_weak(values: Sequence[Any]) -> np.dtype:
    """The dtype weak values meet at with nothing strong beside them: the default dtype
    of the highest Python kind among them."""
    scalars = [weak_scalar(v) for v in values]
    top = max(scalars, key=lambda s: _RANK.get(type(s), 2 if isinstance(s, float) else 1))
    return weak_dtype(top, ())


def as_dtype_of(value: Any, dtype: np.dtype, where: str) -> Symbol:
    """A weak `value` (Python scalar or WeakSymbol) as a graph value of `dtype`."""
    if isinstance(value, Symbol):
        return strong(value) if value.dtype == dtype else bind("cast", strong(value), dtype=dtype)
    try:
        array = np.asarray(value, dtype)
    except OverflowError:
        raise DTypeError(f"{where}: the Python scalar {value!r} does not fit {dtype}") from None
    return SYMBOLIC.lift(array, None, ())


class WeakKind:
    """How ops apply when a weak graph value is among their inputs (see the module doc).
    Its priority is just above graph values', so any op reading a weak value comes here."""

    priority = 101

    def lift(self, value: Any, dtype: np.dtype | None, peers: Sequence[Any]) -> Any:
        # Python scalars wait for `apply`, which knows the op and so the dtype they take
        if isinstance(value, Symbol) or is_python_scalar(value):
            return value
        return SYMBOLIC.lift(value, dtype, peers)

    def apply(self, opdef: OpDef, inputs: list[Any], attrs: dict[str, Any]) -> Symbol:
        where = f"op '{opdef.name}'"
        if not opdef.elementwise:  # a weak value is an ordinary one of its dtype here
            fixed = [dtype_of(x) for x in inputs if not is_python_scalar(x)]
            plain = [
                as_dtype_of(x, weak_dtype(x, fixed), where) if is_python_scalar(x) else strong(x)
                for x in inputs
            ]
            return SYMBOLIC.apply(opdef, plain, attrs)
        fixed = [dtype_of(x) for x in inputs if not is_weak(x)]
        if fixed:
            plain = [
                as_dtype_of(x, weak_dtype(weak_scalar(x), fixed), where)
                if is_weak(x) and not _is_bool_value(x)
                else strong(x)
                for x in inputs
            ]
            return SYMBOLIC.apply(opdef, plain, attrs)
        meet = join_weak(inputs)
        result = SYMBOLIC.apply(opdef, [as_dtype_of(x, meet, where) for x in inputs], attrs)
        if meet.kind in "biu" and is_float(result.dtype):  # 1 / 2: a weak float
            meet = weak_dtype(0.0, ())
            result = SYMBOLIC.apply(opdef, [as_dtype_of(x, meet, where) for x in inputs], attrs)
        return weak(result) if result.dtype == meet else result


def _is_bool_value(value: Any) -> bool:
    """A weak bool graph value, which stays bool: numpy promotes a bool array exactly as
    it does a Python bool (it takes the other operands' dtype), and an op may need it
    as a bool (where's condition)."""
    return isinstance(value, WeakSymbol) and value.dtype == np.bool_


WEAK = WeakKind()
dispatch.register_value_kind(WeakSymbol, WEAK)
