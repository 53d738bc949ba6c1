"""`jax.random`'s functions on graphc's counter-based keys (graphc/ops/random.py).

A key is an int64 scalar (JAX's is a pair of uint32 or a typed key array): `key(0)`.
Every function takes the key first, as JAX's, and draws the same numbers from the same
key on every run, level and backend; a key is never advanced in place, so derive new
ones with `split` or `fold_in` instead of reusing one. They work on arrays (numpy in,
numpy out), inside gc.trace / gc.jit (graph values: the draws are ops of the graph, and
a key that is an input gives fresh numbers per call) and on eager tensors.

>>> import graphc as gc
>>> k1, k2 = gc.random.split(gc.random.key(0))
>>> gc.random.uniform(k1, (2,)).dtype, gc.random.normal(k2, (3,)).shape
(dtype('float32'), (3,))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.types import as_dtype, is_float
from graphc.ops import elementwise, reduce, rounding, selection, shape, sorting
from graphc.ops import random as random_ops
from graphc.ops.indexing import take

__all__ = [
    "PRNGKey",
    "bernoulli",
    "categorical",
    "fold_in",
    "gumbel",
    "key",
    "normal",
    "permutation",
    "randint",
    "split",
    "uniform",
]


def key(seed: int) -> np.ndarray:
    """A key from an integer seed (`jax.random.key`): an int64 scalar."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise DTypeError(f"random.key: the seed must be an int, got {seed!r}")
    return np.asarray(int(seed), np.int64)


PRNGKey = key  # JAX's older name


def fold_in(key: Any, data: int) -> Any:
    """A new key from `key` and a Python int (`jax.random.fold_in`): independent of
    `key`'s own stream and of every other `data`."""
    return random_ops.fold_in(key, data=data)


def split(key: Any, num: int = 2) -> Any:
    """`num` new keys from `key`, stacked (`jax.random.split`): `k1, k2 = split(key)`."""
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
        raise ShapeError(f"random.split: num must be a positive int, got {num!r}")
    return shape.stack([fold_in(key, i) for i in range(int(num))])


def _float(dtype: Any, what: str) -> np.dtype:
    dt = as_dtype(dtype)
    if not is_float(dt):
        raise DTypeError(f"random.{what}: dtype must be a float, got {dt}")
    return dt


def uniform(
    key: Any, shape: Any = (), dtype: Any = np.float32, minval: Any = 0.0, maxval: Any = 1.0
) -> Any:
    """Uniform in [minval, maxval) (`jax.random.uniform`)."""
    dt = _float(dtype, "uniform")
    u = random_ops.random_uniform(key, shape=_shape(shape), dtype=dt)
    if (minval, maxval) == (0.0, 1.0):
        return u
    scaled = elementwise.add(elementwise.mul(u, elementwise.sub(maxval, minval)), minval)
    return selection.cast(scaled, dtype=dt)  # Python or float64 bounds keep `dtype`


def normal(key: Any, shape: Any = (), dtype: Any = np.float32) -> Any:
    """Standard normal (`jax.random.normal`)."""
    return random_ops.random_normal(key, shape=_shape(shape), dtype=_float(dtype, "normal"))


def bernoulli(key: Any, p: Any = 0.5, shape: Any = None) -> Any:
    """Booleans, True with probability `p` (`jax.random.bernoulli`); `shape` defaults
    to `p`'s."""
    size = np.shape(p) if shape is None and not hasattr(p, "shape") else shape
    if size is None:
        size = tuple(p.shape)
    return selection.lt(uniform(key, size, np.float64), p)


def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = np.int64) -> Any:
    """Integers in [minval, maxval) (`jax.random.randint`), each equally likely (the
    floor of a float64 uniform scaled to the range)."""
    dt = as_dtype(dtype)
    if not np.issubdtype(dt, np.integer):
        raise DTypeError(f"random.randint: dtype must be an integer type, got {dt}")
    u = uniform(key, shape, np.float64)
    span = elementwise.sub(maxval, minval)
    drawn = elementwise.add(rounding.floor(elementwise.mul(u, span)), minval)
    return selection.cast(drawn, dtype=dt)


def gumbel(key: Any, shape: Any = (), dtype: Any = np.float32) -> Any:
    """Standard Gumbel (`jax.random.gumbel`): -log(-log(u)) of a uniform in (0, 1)."""
    dt = _float(dtype, "gumbel")
    u = random_ops.random_uniform(key, shape=_shape(shape), dtype=np.float64)
    tiny = np.finfo(np.float64).tiny  # u = 0 would give -inf
    drawn = elementwise.neg(
        elementwise.log(elementwise.neg(elementwise.log(elementwise.maximum(u, tiny))))
    )
    return selection.cast(drawn, dtype=dt)


def categorical(key: Any, logits: Any, axis: int = -1) -> Any:
    """Indices drawn with probabilities softmax(logits) along `axis`
    (`jax.random.categorical`): the argmax of the logits plus Gumbel noise."""
    noise = gumbel(
        key, tuple(logits.shape) if hasattr(logits, "shape") else np.shape(logits), np.float64
    )
    return reduce.argmax(elementwise.add(logits, noise), axis=axis)


def permutation(key: Any, x: Any, axis: int = 0) -> Any:
    """A random order (`jax.random.permutation`): of `range(x)` for an int, else of
    `x`'s slices along `axis`."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return sorting.argsort(uniform(key, (int(x),), np.float64))
    length = (x.shape if hasattr(x, "shape") else np.shape(x))[axis]
    order = sorting.argsort(uniform(key, (length,), np.float64))
    return take(x, order, axis=axis)


def _shape(size: Any) -> tuple:
    return (size,) if isinstance(size, (int, np.integer, str)) else tuple(size)
