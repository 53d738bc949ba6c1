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
from graphc.ops.along_axis import take_along_axis
from graphc.ops.indexing import take

__all__ = [
    "PRNGKey",
    "bernoulli",
    "categorical",
    "choice",
    "exponential",
    "fold_in",
    "gumbel",
    "key",
    "laplace",
    "logistic",
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


def split(key: Any, num: Any = 2) -> Any:
    """`num` new keys from `key`, stacked (`jax.random.split`): `k1, k2 = split(key)`;
    `num` may be a shape, as JAX's: `split(key, (2, 3))` is (2, 3) keys."""
    dims = tuple(num) if isinstance(num, (tuple, list)) else (num,)
    if not dims or any(
        isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in dims
    ):
        raise ShapeError(f"random.split: num must be a positive int or a shape, got {num!r}")
    count = int(np.prod(dims))
    keys = shape.stack([fold_in(key, i) for i in range(count)])
    return keys if len(dims) == 1 else _reshape(keys, dims)


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
    if _is_number(minval, 0.0) and _is_number(maxval, 1.0):  # (bounds may be arrays)
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


def categorical(key: Any, logits: Any, axis: int = -1, shape: Any = None) -> Any:
    """Indices drawn with probabilities softmax(logits) along `axis`
    (`jax.random.categorical`): the argmax of the logits plus Gumbel noise. `shape`, as
    JAX's, is the result's shape: the logits' other axes broadcast to it."""
    dims = tuple(logits.shape) if hasattr(logits, "shape") else np.shape(logits)
    if shape is None:
        return reduce.argmax(elementwise.add(logits, gumbel(key, dims, np.float64)), axis=axis)
    last = _moveaxis(logits, axis, len(dims))
    size = (*_shape(shape), dims[axis])
    noise = gumbel(key, size, np.float64)
    return reduce.argmax(elementwise.add(last, noise), axis=-1)


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random order (`jax.random.permutation`): of `range(x)` for an int, else of
    `x`'s slices along `axis`; with `independent=True` each row along `axis` gets its
    own order (JAX's)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return sorting.argsort(uniform(key, (int(x),), np.float64))
    dims = tuple(x.shape if hasattr(x, "shape") else np.shape(x))
    if independent:
        order = sorting.argsort(uniform(key, dims, np.float64), axis=axis)
        return take_along_axis(x, order, axis=axis)
    order = sorting.argsort(uniform(key, (dims[axis],), np.float64))
    return take(x, order, axis=axis)


def choice(
    key: Any,
    a: Any,
    shape: Any = (),
    replace: bool = True,
    p: Any = None,
    axis: int = 0,
) -> Any:
    """Entries of `a` (or of `range(a)` for an int) drawn at random (`jax.random.choice`):
    with replacement (uniformly, or with probabilities `p`) or without (Gumbel top-k:
    the order of Gumbel-perturbed log-probabilities)."""
    whole = isinstance(a, (int, np.integer)) and not isinstance(a, bool)
    n = int(a) if whole else (a.shape if hasattr(a, "shape") else np.shape(a))[axis]
    dims = _shape(shape)
    count = int(np.prod(dims, dtype=np.int64))
    if not replace and count > n:
        raise ShapeError(
            f"random.choice: {count} draws without replacement from {n} entries; at most {n}"
        )
    if p is None:
        logits = np.zeros(n)
    else:
        logits = elementwise.log(p)
    if replace:
        picks = categorical(key, logits, shape=dims)
    else:
        noisy = elementwise.add(logits, gumbel(key, (n,), np.float64))
        order = sorting.argsort(noisy, descending=True)
        picks = _reshape(take(order, np.arange(count), axis=0), dims)
    if whole:
        return picks
    return take(a, picks, axis=axis)


def _reshape(x: Any, dims: tuple) -> Any:
    return shape.reshape(x, dims)  # (the functions' `shape` arguments hide the module)


def exponential(key: Any, shape: Any = (), dtype: Any = np.float32) -> Any:
    """Standard exponential (`jax.random.exponential`): -log(1 - u)."""
    dt = _float(dtype, "exponential")
    u = random_ops.random_uniform(key, shape=_shape(shape), dtype=np.float64)
    return selection.cast(elementwise.neg(elementwise.log1p(elementwise.neg(u))), dtype=dt)


def laplace(key: Any, shape: Any = (), dtype: Any = np.float32) -> Any:
    """Standard Laplace (`jax.random.laplace`): sign(v) * -log(1 - |v|), v uniform in
    (-1, 1)."""
    dt = _float(dtype, "laplace")
    v = elementwise.sub(
        elementwise.mul(random_ops.random_uniform(key, shape=_shape(shape), dtype=np.float64), 2.0),
        1.0,
    )
    magnitude = elementwise.neg(elementwise.log1p(elementwise.neg(elementwise.abs(v))))
    return selection.cast(elementwise.mul(elementwise.sign(v), magnitude), dtype=dt)


def logistic(key: Any, shape: Any = (), dtype: Any = np.float32) -> Any:
    """Standard logistic (`jax.random.logistic`): log(u / (1 - u))."""
    dt = _float(dtype, "logistic")
    tiny = np.finfo(np.float64).tiny  # u = 0 would give -inf
    u = elementwise.maximum(
        random_ops.random_uniform(key, shape=_shape(shape), dtype=np.float64), tiny
    )
    return selection.cast(elementwise.log(elementwise.div(u, elementwise.sub(1.0, u))), dtype=dt)


def _is_number(value: Any, number: float) -> bool:
    return (
        isinstance(value, (int, float, np.number))
        and not isinstance(value, bool)
        and (value == number)
    )


def _moveaxis(x: Any, axis: int, rank: int) -> Any:
    """`x` with its `axis` moved last."""
    return shape.moveaxis(x, axis, rank - 1) if axis % rank != rank - 1 else x


def _shape(size: Any) -> tuple:
    return (size,) if isinstance(size, (int, np.integer, str)) else tuple(size)
