"""`gc.jit`: trace once per input signature, compile, cache, run.

The cache key of a call is its signature: each argument's shape and dtype, the
value of each Python scalar argument (static, as in tf.function), plus the identity of the eager tensors the caller names as parameters (`params=` or a
module's `named_parameters()`). Eager tensors that tracing lifts from a closure are
fed their current values at every call, so in-place updates (an optimizer step)
are seen without retracing; replacing such a tensor by a new object is not seen
unless it is named in `params`.

Python scalars (int, float, bool) are static rather than inputs: traced as placeholders
they would be strongly typed, so `x * n` on a float32 `x` would give float64 and
`if flag:` or `axis=n` could not run. Pass a numpy scalar to make a value an input.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from graphc.frontend.trace import (
    TensorSpec,
    eager_tensor_type,
    lifted_tensors,
    module_parameters,
    parameter_names,
    tensor_value,
    trace,
)
from graphc.ir.graph import Graph
from graphc.ops.dispatch import is_python_scalar, weak_dtype
from graphc.runtime.executable import Executable
from graphc.runtime.executable import compile as compile_graph


class CacheInfo(NamedTuple):
    """How a jitted function's cache has been used: traces = misses."""

    hits: int
    misses: int
    size: int


@dataclass
class _Entry:
    graph: Graph
    executable: Executable  # fed positionally: the arguments' arrays, then the lifted tensors'
    lifted: list[Any]  # the eager tensors lifted into placeholders, in placeholder order
    structure: Any  # how to pack outputs: None (one), "tuple", or a list of dict keys

    def pack(self, result: Any) -> Any:
        results = result if len(self.graph.outputs) > 1 else (result,)
        if self.structure is None:
            return results[0]
        if self.structure == "tuple":
            return tuple(results)
        return dict(zip(self.structure, results))


def _exact(value: Any) -> Any:
    """A static scalar as a cache key that tells values apart exactly: 0.0 and -0.0 are
    two traces (1/x differs), and a NaN equals itself (else every call would retrace)."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, complex):
        return (value.real.hex(), value.imag.hex())
    return value


def _as_array(value: Any) -> np.ndarray:
    tensor_type = eager_tensor_type()
    if tensor_type is not None and isinstance(value, tensor_type):
        return tensor_value(value)
    if is_python_scalar(value):
        return np.asarray(value, dtype=weak_dtype(value, ()))
    return np.asarray(value)


class Jitted:
    """A function that runs as a compiled graph; see `jit`."""

    def __init__(self, fn: Callable[..., Any], params: Mapping[str, Any] | None = None) -> None:
        self.fn = fn
        self.params = params
        self._cache: dict[tuple, _Entry] = {}
        self._hits = 0
        self._misses = 0
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def _named_params(self) -> dict[str, Any]:
        return dict(self.params) if self.params is not None else module_parameters(self.fn)

    def signature(self, arrays: list[np.ndarray], statics: tuple = ()) -> tuple:
        params = self._named_params()
        return (
            tuple((a.shape, a.dtype.str) for a in arrays),
            tuple((name, id(t)) for name, t in params.items()),
            tuple((i, kind, _exact(value)) for i, kind, value in statics),
        )

    @staticmethod
    def _split(args: tuple) -> tuple[list[np.ndarray], tuple]:
        """The arrays fed as inputs, and (position, type, value) of each static scalar."""
        statics = tuple((i, type(a).__name__, a) for i, a in enumerate(args) if is_python_scalar(a))
        arrays = [_as_array(a) for a in args if not is_python_scalar(a)]
        return arrays, statics

    def _entry(self, arrays: list[np.ndarray], statics: tuple) -> _Entry:
        """The cached trace for this signature, traced and compiled on a miss."""
        key = self.signature(arrays, statics)
        entry = self._cache.get(key)
        if entry is None:
            self._misses += 1
            entry = self._cache[key] = self._build(arrays, statics)
        else:
            self._hits += 1
        return entry

    def __call__(self, *args: Any) -> Any:
        arrays, statics = self._split(args)
        entry = self._entry(arrays, statics)
        lifted = (tensor_value(t) for t in entry.lifted)
        return entry.pack(entry.executable(*arrays, *lifted))

    def _build(self, arrays: list[np.ndarray], statics: tuple = ()) -> _Entry:
        structure: list[Any] = []
        static_at = {i: value for i, _, value in statics}
        count = len(arrays) + len(static_at)

        def recording(*values: Any) -> Any:
            inputs = iter(values)
            args = [static_at[i] if i in static_at else next(inputs) for i in range(count)]
            result = self.fn(*args)
            if isinstance(result, Mapping):
                structure.append(list(result))
            elif isinstance(result, (tuple, list)):
                structure.append("tuple")
            else:
                structure.append(None)
            return result

        functools.update_wrapper(recording, self.fn)
        names = [n for i, n in enumerate(parameter_names(self.fn, count)) if i not in static_at]
        recording.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
        )  # placeholders keep the names of the parameters they stand for
        specs = [TensorSpec(a.shape, a.dtype) for a in arrays]
        name = getattr(self.fn, "__name__", None)
        graph = trace(recording, *specs, name=name, params=self._named_params())
        by_name = lifted_tensors(graph)
        lifted = [by_name[p.name] for p in graph.inputs[len(arrays) :]]
        return _Entry(graph, compile_graph(graph), lifted, structure[0])

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def graph_for(self, *args: Any) -> Graph:
        """The traced graph that a call with these arguments runs (tracing if needed)."""
        return self._entry(*self._split(args)).graph


def jit(fn: Callable[..., Any], params: Mapping[str, Any] | None = None) -> Jitted:
    """Compile `fn` on first call for each input signature (shapes, dtypes), then reuse it.

    Python scalar arguments are static: each value gets its own trace (see the module doc).

    >>> import numpy as np, graphc as gc
    >>> f = gc.jit(lambda x: gc.relu(x) * 2)
    >>> f(np.array([-1.0, 2.0], np.float32))
    array([0., 4.], dtype=float32)
    >>> f.cache_info().misses
    1
    """
    return Jitted(fn, params)
