"""Randomness from an explicit key, counter based (as JAX's PRNG), so plans stay pure.

A key is an int64 scalar. Element i (in C order) of a random array drawn with key k
is a function of (k, i) only: SplitMix64's output for the state k advanced i + 1 times
(x = k + (i+1)·0x9E3779B97F4A7C15, then its finalizer), computed for every element at
once in uint64 arithmetic. So the same key gives the same array on every run, at every
level and in every mode, and two draws are independent when their keys differ: derive
keys with `fold_in(key, data)` (a key hashed with an int, as JAX's), never by reusing
one. SplitMix64 passes BigCrush as a generator; its 53 (float64) or 24 (float32) high
bits make a uniform in [0, 1); a normal is Box-Muller on two uniforms.

The ops are pure: a graph with the same key computes the same values, so folding,
CSE and the reference agree bit for bit. Where fresh randomness is wanted on every
call (dropout while training), the key is an input that the caller advances (a
compiled training step keeps it as state and folds it every step).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.types import TensorType, as_dtype, as_shape, is_float
from graphc.ops.defop import defop, into

__all__ = ["fold_in", "random_normal", "random_uniform"]

# the int64 placeholder a traced dropout draws its keys from (nn/functional/stochastic.py):
# a compiled train step keeps it as state, gc.jit feeds a fresh one to every call
KEY = "rng_key"

# the process's host generator: eager's random draws and manual_seed (eager/creation.py),
# and gc.jit's fresh dropout keys, share it, as PyTorch's default generator
_HOST = [np.random.default_rng()]


def host_generator() -> np.random.Generator:
    return _HOST[0]


def seed_host(seed: int) -> np.random.Generator:
    _HOST[0] = np.random.default_rng(seed)
    return _HOST[0]


def fresh_key() -> np.ndarray:
    """An int64 key drawn from the host generator (dropout's, each call)."""
    return np.asarray(_HOST[0].integers(-(2**63), 2**63 - 1), np.int64)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _finalize(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer, in place on a uint64 array."""
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def random_bits(key: Any, count: int, offset: int = 0) -> np.ndarray:
    """`count` uint64 words of stream `key`, starting at element `offset`."""
    with np.errstate(over="ignore"):
        k = np.asarray(key, np.int64).astype(np.uint64)
        index = np.arange(offset + 1, offset + count + 1, dtype=np.uint64)
        return _finalize(k + index * _GOLDEN)


def _uniform01(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == np.float64:
        return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return ((bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)).astype(dtype)


def _check_key(key: TensorType, op: str) -> None:
    if key.dtype != np.int64 or key.shape != ():
        raise DTypeError(f"{op}: the key must be an int64 scalar, got {key}")


def _creation_canon(key: TensorType, shape: Any, dtype: Any) -> dict:
    dt = as_dtype(dtype)
    if not is_float(dt):
        raise DTypeError(f"random: dtype must be a float, got {dt}")
    return {"shape": as_shape(shape, "random"), "dtype": dt}


def _creation_infer(op: str) -> Any:
    def infer(key: TensorType, shape: tuple, dtype: np.dtype) -> TensorType:
        _check_key(key, op)
        return TensorType(shape, dtype)

    return infer


def _uniform_kernel(
    key: np.ndarray, out: np.ndarray | None = None, shape: tuple = (), dtype: Any = None
) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    values = _uniform01(random_bits(key, size), np.dtype(dtype)).reshape(shape)
    return into(out, values)


def _normal_kernel(
    key: np.ndarray, out: np.ndarray | None = None, shape: tuple = (), dtype: Any = None
) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    half = (size + 1) // 2
    bits = random_bits(key, 2 * half)
    u1 = 1.0 - _uniform01(bits[:half], np.dtype(np.float64))  # in (0, 1]: log is finite
    u2 = _uniform01(bits[half:], np.dtype(np.float64))
    radius = np.sqrt(-2.0 * np.log(u1))
    values = np.concatenate([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)])
    return into(out, values[:size].astype(dtype).reshape(shape))


# random arrays: no gradient (the key is an int; nothing differentiable flows in)
random_uniform = defop(
    "random_uniform",
    inputs=("key",),
    infer=_creation_infer("random_uniform"),
    kernel=_uniform_kernel,
    attrs={"shape": (), "dtype": np.dtype(np.float32)},
    canonicalize=_creation_canon,
    shape_attrs=("shape",),
    doc="Uniform [0, 1) of `shape` from an int64 key (counter based: same key, same array).",
)

random_normal = defop(
    "random_normal",
    inputs=("key",),
    infer=_creation_infer("random_normal"),
    kernel=_normal_kernel,
    attrs={"shape": (), "dtype": np.dtype(np.float32)},
    canonicalize=_creation_canon,
    shape_attrs=("shape",),
    doc="Standard normal of `shape` from an int64 key (Box-Muller on the key's stream).",
)


def _fold_canon(key: TensorType, data: Any) -> dict:
    if isinstance(data, (bool, np.bool_)) or not isinstance(data, (int, np.integer)):
        raise ShapeError(f"fold_in: data must be an int, got {data!r}")
    return {"data": int(data)}


def _fold_kernel(key: np.ndarray, out: np.ndarray | None = None, data: int = 0) -> np.ndarray:
    with np.errstate(over="ignore"):
        mixed = random_bits(np.asarray(data, np.int64), 1)[0] ^ np.asarray(key, np.int64).astype(
            np.uint64
        )
        word = _finalize(np.array([mixed], np.uint64))[0]
    return into(out, np.array(word.astype(np.int64)))


def _fold_infer(key: TensorType, data: int) -> TensorType:
    _check_key(key, "fold_in")
    return key


fold_in = defop(
    "fold_in",
    inputs=("key",),
    infer=_fold_infer,
    kernel=_fold_kernel,
    attrs={"data": 0},
    canonicalize=_fold_canon,
    doc="A new int64 key from `key` and an int (JAX's fold_in): independent streams.",
)
