"""How one op function serves graph values, eager tensors and plain arrays.

`gc.add(x, y)` calls `bind("add", x, y)`. The kinds of value among the arguments
decide who handles the call: each kind registers a `ValueKind` with a priority, and
the highest-priority kind present wins. Graph values record a node; eager tensors
compute (and record a tape entry); plain arrays and Python scalars, when nothing
else is present, just run the numpy kernel. The winner lifts the other arguments
into its own kind (a scalar becomes a constant node, or a tensor).

Python scalars are "weak", as in numpy 2 and JAX: `x * 2` keeps the dtype of `x`.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.graph import Graph
from graphc.ir.registry import REQUIRED, OpDef, get_op
from graphc.ir.types import TensorType, TupleType, as_dtype


class ValueKind(Protocol):
    """A kind of value the op functions accept: how to lift foreign values into it and
    how to apply an op to values of it."""

    priority: int

    def lift(self, value: Any, dtype: np.dtype | None, peers: Sequence[Any]) -> Any:
        """Turn a foreign value (array, scalar, other kind) into this kind.

        `dtype` is set for Python scalars (their weak dtype); `peers` are all inputs.
        """

    def apply(self, opdef: OpDef, inputs: list[Any], attrs: dict[str, Any]) -> Any:
        """Run or record `opdef` on inputs already of this kind."""


_KINDS: dict[type, ValueKind] = {}


def _no_context_kind() -> ValueKind | None:
    return None


_CONTEXT_KIND: Callable[[], ValueKind | None] = _no_context_kind


def set_context_kind(choose: Callable[[], ValueKind | None]) -> None:
    """Who handles calls while a context is open (a graph being declared or traced).

    The context's kind outranks argument kinds of lower priority, so inside
    `with graph:` even ops on plain arrays or eager tensors record nodes.
    """
    global _CONTEXT_KIND
    _CONTEXT_KIND = choose


def register_value_kind(cls: type, kind: ValueKind) -> None:
    """Values of `cls` (and its subclasses) are handled by `kind`."""
    _KINDS[cls] = kind


def kind_of(value: Any) -> ValueKind | None:
    """The registered kind of `value`; None for plain arrays and Python scalars."""
    for cls in type(value).__mro__:
        kind = _KINDS.get(cls)
        if kind is not None:
            return kind
    return None


def is_python_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is float or kind is int or kind is bool:  # the common case, without ABC checks
        return True
    return isinstance(value, (bool, numbers.Number)) and not isinstance(value, np.generic)


_WEAK_DTYPES: dict[tuple, np.dtype] = {}


def weak_dtype(scalar: Any, strong: Sequence[np.dtype]) -> np.dtype:
    """The dtype a Python scalar takes next to operands of dtypes `strong`.

    Alone, a Python float is float32 (graphc's default float), an int int64.
    """
    if strong:
        # numpy 2 (NEP 50) promotion depends on the scalar's type only, not its value.
        # The strong dtypes are promoted first, then with the scalar: the same answer for
        # numpy's dtypes, but numpy promotes ml_dtypes' bfloat16 with a bool or int8 and a
        # Python scalar all at once to float64 (where(cond, 0, bf16_x) was float64)
        key = (type(scalar), *strong)
        dtype = _WEAK_DTYPES.get(key)
        if dtype is None:
            common = np.result_type(*strong)
            dtype = _WEAK_DTYPES[key] = as_dtype(np.result_type(common, scalar))
        return dtype
    if isinstance(scalar, bool):
        return np.dtype(np.bool_)
    if isinstance(scalar, int):
        return np.dtype(np.int64)
    if isinstance(scalar, complex):  # graphc has no complex dtype: a named error
        return as_dtype(np.complex64)
    return np.dtype(np.float32)


def full_attrs(opdef: OpDef, attrs: dict[str, Any]) -> dict[str, Any]:
    """Attrs with defaults filled in; unknown or missing attrs are errors naming the op."""
    unknown = set(attrs) - set(opdef.attrs)
    if unknown:
        expected = ", ".join(opdef.attrs) or "none"
        raise GraphcError(
            f"op '{opdef.name}' got unknown attribute(s) {sorted(unknown)}; expected: {expected}"
        )
    result = {}
    for key, default in opdef.attrs.items():
        value = attrs.get(key, default)
        if value is REQUIRED:
            raise GraphcError(f"op '{opdef.name}' needs the attribute '{key}'")
        result[key] = value
    return result


def prepare(
    opdef: OpDef, types: Sequence[TensorType], attrs: dict[str, Any]
) -> tuple[dict, TensorType]:
    """Canonical attrs and the output type, by the op's own rules."""
    attrs = full_attrs(opdef, attrs)
    if opdef.canonicalize is not None:
        attrs = opdef.canonicalize(*types, **attrs)
    return attrs, opdef.infer(*types, **attrs)


def bind(name: str, *inputs: Any, **attrs: Any) -> Any:
    """Apply the op `name` to `inputs`, by whichever kind of value is present."""
    opdef = get_op(name)
    if opdef.arity is not None and len(inputs) != opdef.arity:
        raise GraphcError(f"op '{name}' takes {opdef.arity} input(s), got {len(inputs)}")
    kind: ValueKind | None = None
    scalars = False
    for x in inputs:
        candidate = kind_of(x)
        if candidate is None:
            scalars = scalars or is_python_scalar(x)
        elif kind is None or candidate.priority > kind.priority:
            kind = candidate
    context = _CONTEXT_KIND()  # an open graph records every op, whatever its inputs
    if context is not None and (kind is None or context.priority > kind.priority):
        kind = context
    elif kind is None:
        kind = NUMPY
    if not scalars:  # eager per-op overhead matters: skip weak typing when there is none
        return kind.apply(opdef, [kind.lift(x, None, inputs) for x in inputs], attrs)
    flags = [is_python_scalar(x) for x in inputs]
    strong = [dtype_of(x) for x, scalar in zip(inputs, flags) if not scalar]
    try:
        weak = [weak_dtype(x, strong) if scalar else None for x, scalar in zip(inputs, flags)]
        lifted = [kind.lift(x, dtype, inputs) for x, dtype in zip(inputs, weak)]
    except OverflowError as exc:  # a Python int too big for the other operands' dtype
        raise DTypeError(f"op '{name}': {exc}") from None
    return kind.apply(opdef, lifted, attrs)


def dtype_of(value: Any) -> np.dtype:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.asarray(value).dtype
    return as_dtype(dtype)


class NumpyKind:
    """Plain numpy arrays: run the kernel at once (used by constant folding too)."""

    priority = 0

    def lift(self, value: Any, dtype: np.dtype | None, peers: Sequence[Any] = ()) -> np.ndarray:
        if kind_of(value) is not None:
            raise GraphcError(f"cannot use a {type(value).__name__} as a plain array here")
        if dtype is None and is_python_scalar(value):
            dtype = weak_dtype(value, ())
        array = np.asarray(value, dtype=dtype)
        try:
            as_dtype(array.dtype)
        except DTypeError as exc:
            raise DTypeError(f"{exc} (value of type {type(value).__name__})") from None
        return array

    def apply(self, opdef: OpDef, inputs: list[Any], attrs: dict[str, Any]) -> Any:
        given = attrs
        attrs, out_type = prepare(opdef, [TensorType.of(x) for x in inputs], attrs)
        if _FOLDING.graph is not None and _elements(out_type) > _FOLDING.limit:
            with _FOLDING.graph:  # too big to compute now: a node, run when the graph runs
                return bind(opdef.name, *inputs, **given)
        result = opdef.kernel(*inputs, **attrs)
        # a node with several results (scan, cond) gives a tuple of arrays
        return result if isinstance(result, tuple) else np.asarray(result)


NUMPY = NumpyKind()


class _Folding(threading.local):
    """Set by `fold_limit` in this thread: the largest result computed on plain arrays,
    and the graph that records the ops whose result would be larger."""

    limit: int = 0
    graph: Graph | None = None


_FOLDING = _Folding()


@contextmanager
def fold_limit(limit: int, graph: Graph) -> Iterator[None]:
    """While open, an op on plain arrays whose result would hold more than `limit`
    elements records a node in `graph` (its inputs constants) instead of computing it:
    an importer folding a model's known values never materializes a huge one (a
    ConstantOfShape of 2**50 elements, a broadcast of two long vectors)."""
    saved = (_FOLDING.limit, _FOLDING.graph)
    _FOLDING.limit, _FOLDING.graph = limit, graph
    try:
        yield
    finally:
        _FOLDING.limit, _FOLDING.graph = saved


def _elements(out_type: Any) -> int:
    types = out_type.items if isinstance(out_type, TupleType) else (out_type,)
    return sum(t.size or 0 for t in types)
