"""The value kind of eager tensors: run the kernel now, record the tape if needed.

Every op function in `graphc.ops` reaches `EagerKind.apply` when a tensor is among
its arguments. The op's own rules canonicalize the attrs and check the types; their
answer depends only on the inputs' shapes and dtypes and on the attrs, so it is cached
under that key and a repeated call (the common case in a training loop) skips it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.eager.grad_fn import OpBackward
from graphc.eager.grad_mode import STATE
from graphc.eager.tensor import Tensor, make
from graphc.eager.views import make_view
from graphc.ir.registry import OpDef
from graphc.ir.types import TensorType, is_float
from graphc.ops import dispatch

_CACHE_LIMIT = 4096
_ndarray = np.ndarray
_new = object.__new__


class EagerKind:
    """Runs ops on tensors; priority between plain numpy (0) and graph values (100)."""

    priority = 50

    def __init__(self) -> None:
        self._canonical: dict[tuple, dict] = {}

    def lift(self, value: Any, dtype: np.dtype | None, peers: Sequence[Any]) -> Tensor:
        if isinstance(value, Tensor):
            return value
        if dtype is not None:  # a Python scalar, its (valid) weak dtype already chosen
            return make(np.asarray(value, dtype))
        return make(dispatch.NUMPY.lift(value, dtype))

    def _prepare(self, opdef: OpDef, arrays: list[np.ndarray], attrs: dict, key: tuple) -> dict:
        """The op's canonical attrs for these inputs, checked by its type rule; cached
        under `key` (unless an attr is unhashable: a list, an array)."""
        canonical, _ = dispatch.prepare(opdef, [TensorType.of(a) for a in arrays], attrs)
        try:
            if len(self._canonical) >= _CACHE_LIMIT:
                self._canonical.clear()
            self._canonical[key] = canonical
        except TypeError:
            pass
        return canonical

    def apply(self, opdef: OpDef, inputs: list[Tensor], attrs: dict[str, Any]) -> Tensor:
        arrays = [x._data for x in inputs]
        key = cache_key(opdef, arrays, attrs)
        try:  # a cache hit is the common case: this is the per-op overhead
            canonical = self._canonical[key]
        except (KeyError, TypeError):  # TypeError: an unhashable attr
            canonical = None
        if canonical is None:  # outside the except: a user's shape or dtype error is not
            # shown as raised "during handling of" the cache's KeyError
            canonical = self._prepare(opdef, arrays, attrs, key)
        view = opdef.rules.get("eager_view")
        if view is not None:  # slice, transpose, ...: the result shares the input's memory
            array = view(arrays[0], **canonical)
            if array is not None:  # None: a reshape numpy cannot view, so a copy below
                return make_view(opdef, inputs[0], canonical, array)
        result = opdef.kernel(*arrays, **canonical)
        if type(result) is not _ndarray:
            result = np.asarray(result)
        out = _new(Tensor)
        out._data = result
        out._counter = counter = [0]
        if STATE.enabled and opdef.vjp is not None and is_float(result.dtype):
            for x in inputs:
                if x._requires_grad:
                    out.grad_fn = OpBackward(opdef, canonical, inputs, result, counter)
                    out._requires_grad = True
                    break
        return out


def cache_key(opdef: OpDef, arrays: list[np.ndarray], attrs: dict) -> tuple:
    """What canonical attrs depend on: the op, the inputs' shapes and dtypes, the attrs."""
    if len(arrays) == 2:  # spelled out: building the key is most of a cache hit
        a, b = arrays
        key: tuple = (opdef.name, a.shape, a.dtype, b.shape, b.dtype)
    elif len(arrays) == 1:
        key = (opdef.name, arrays[0].shape, arrays[0].dtype)
    else:
        key = (opdef.name, *[(a.shape, a.dtype) for a in arrays])
    if attrs:
        # by type and exact value: 0, 0.0, False and -0.0 give different canonical attrs
        # (clip(int_x, 0, 1) stays int64, clip(int_x, 0.0, 1) is float64) but are equal keys.
        # The types tag the key cheaply; only floats (and tuples) need the slower exact form.
        kinds = tuple(map(type, attrs.values()))
        if _INEXACT.isdisjoint(kinds):
            key = (key, *attrs.items(), kinds)
        else:
            key = (key, *[(name, _exact(value)) for name, value in attrs.items()])
    return key


_pack_double = struct.Struct("<d").pack
_FLOATS = frozenset({float, np.float64, np.float32, np.float16})
_INEXACT = _FLOATS | {tuple}  # values whose == is coarser than "same type, same bits"


def _exact(value: Any) -> Any:
    """A key equal only for values of one type and one exact value (floats by their bits, so
    -0.0 differs from 0.0 and a nan equals itself)."""
    kind = type(value)
    if kind in _FLOATS:
        return kind, _pack_double(value)
    if kind is tuple:
        kinds = tuple(map(type, value))
        if _INEXACT.isdisjoint(kinds):
            return kinds, value
        return kind, *[_exact(item) for item in value]
    return kind, value


EAGER = EagerKind()
dispatch.register_value_kind(Tensor, EAGER)
