"""Creating arrays, numpy's names: zeros, ones, full, eye, linspace (arange is in
sequences.py, an op of its own).

Each is a builder over the `constant` op, as `gc.arange` is an op with no operands: on
plain values it gives a numpy array; while a graph is being declared or traced it gives a
graph value (a constant, or a constant broadcast to a shape whose dims may be symbolic:
`gc.zeros(x.shape)` in a traced function). The default dtype is graphc's (and JAX's):
float32 for floats, where numpy gives float64. `graphc.eager` keeps torch's creation
functions under these names (`ge.zeros(2, 3)`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.types import as_dtype, as_shape
from graphc.ops import shape as S
from graphc.ops.dispatch import bind, dtype_of, is_python_scalar, kind_of, weak_dtype
from graphc.ops.selection import cast
from graphc.ops.spelling import count, integer

__all__ = ["eye", "full", "linspace", "ones", "zeros"]


def _float_dtype(dtype: Any) -> np.dtype:
    return np.dtype(np.float32) if dtype is None else as_dtype(dtype)


def _filled(shape: Any, value: np.ndarray, op: str) -> Any:
    """`value` (0-d) at every position of `shape`: a constant broadcast to it."""
    return S.broadcast_to(bind("constant", value=value), as_shape(shape, op))


def zeros(shape: Any, dtype: Any = None) -> Any:
    """An array of `shape` (an int, or a sequence of dims: symbolic ones in a graph)
    holding zeros, as np.zeros and jnp.zeros; float32 unless `dtype` says otherwise.

    >>> import graphc as gc
    >>> gc.zeros((2, 3)).tolist(), gc.zeros(2, "int64").dtype
    ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype('int64'))
    """
    return _filled(shape, np.zeros((), _float_dtype(dtype)), "zeros")


def ones(shape: Any, dtype: Any = None) -> Any:
    """An array of `shape` holding ones, as np.ones and jnp.ones; float32 by default.

    >>> import graphc as gc
    >>> gc.ones(3, bool).tolist()
    [True, True, True]
    """
    return _filled(shape, np.ones((), _float_dtype(dtype)), "ones")


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    """An array of `shape` holding `fill_value`, as np.full and jnp.full. A number's
    dtype is its own (int64 for an int, bool, float32 for a float) unless `dtype` is
    given; an array, graph value or tensor is broadcast to `shape` (cast to `dtype`)
    into a new array, differentiable in a graph value or tensor.

    >>> import graphc as gc
    >>> gc.full((2,), 7).tolist(), gc.full(2, 0.5).dtype
    ([7, 7], dtype('float32'))
    """
    if is_python_scalar(fill_value) or isinstance(fill_value, np.generic):
        if isinstance(fill_value, complex):
            raise DTypeError(f"full: graphc has no complex dtype, got fill_value {fill_value!r}")
        if dtype is None:
            dtype = (
                fill_value.dtype
                if isinstance(fill_value, np.generic)
                else weak_dtype(fill_value, ())
            )
        return _filled(shape, np.asarray(fill_value, as_dtype(dtype)), "full")
    if kind_of(fill_value) is None:  # an array or a list: a constant
        array = np.asarray(fill_value, None if dtype is None else as_dtype(dtype))
        return S.broadcast_to(bind("constant", value=array), as_shape(shape, "full"))
    dtype = dtype_of(fill_value) if dtype is None else as_dtype(dtype)
    # cast after broadcasting: a new array (jnp.full's), not a broadcast view of the fill
    return cast(S.broadcast_to(fill_value, as_shape(shape, "full")), dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Any:  # noqa: N803 - numpy's names
    """The N x M matrix (N x N by default) with ones on its k-th diagonal (above the main
    one for k > 0) and zeros elsewhere, as np.eye and jnp.eye; float32 by default. N and
    M are ints (a constant in a graph).

    >>> import graphc as gc
    >>> gc.eye(2, 3, k=1, dtype="int64").tolist()
    [[0, 1, 0], [0, 0, 1]]
    """
    rows = count(N, "eye", "N")
    cols = rows if M is None else count(M, "eye", "M")
    diagonal = integer(k, "eye", "k")
    return bind("constant", value=np.eye(rows, cols, diagonal, dtype=_float_dtype(dtype)))


def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Any:
    """`num` evenly spaced values from start to stop (included unless endpoint=False),
    as np.linspace: numpy's own values (computed in float64, then given dtype, float32
    by default; ints floor, as numpy 2). start and stop are numbers or arrays known when
    the graph is built (arrays give a new `axis` of samples). With retstep, the pair
    (values, step), the step numpy's (a float; nan for fewer than two samples).

    >>> import graphc as gc
    >>> gc.linspace(0, 1, 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    for name, value in (("start", start), ("stop", stop)):
        if kind_of(value) is not None:
            raise GraphcError(
                f"linspace: {name} must be a number or an array known when the graph is "
                f"built, got a {type(value).__name__} (compute start + (stop - start) * "
                "gc.linspace(0, 1, num) instead)"
            )
    samples = count(num, "linspace", "num")
    target = _float_dtype(dtype)
    values, step = np.linspace(
        start,
        stop,
        samples,
        endpoint=bool(endpoint),
        retstep=True,
        dtype=target,
        axis=integer(axis, "linspace", "axis"),
    )
    result = bind("constant", value=values)
    if retstep:
        return result, (float(step) if np.ndim(step) == 0 else step)
    return result
