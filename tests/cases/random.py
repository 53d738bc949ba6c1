"""Op cases: random_uniform, random_normal, fold_in, against SplitMix64 in Python ints."""

from __future__ import annotations

import math

import numpy as np

import graphc as gc
from tests.op_cases import Arg, _case

MASK = 2**64 - 1


def splitmix(key: int, i: int) -> int:
    """Element i of stream `key`: SplitMix64's output, in exact Python integers."""
    z = (key + (i + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def uniform(key: np.ndarray, shape: tuple, dtype: str) -> np.ndarray:
    k = int(key) & MASK
    bits = [splitmix(k, i) for i in range(math.prod(shape))]
    if dtype == "float64":
        values = [(b >> 11) * 2.0**-53 for b in bits]
    else:
        values = [(b >> 40) * 2.0**-24 for b in bits]
    return np.array(values, dtype).reshape(shape)


def normal(key: np.ndarray, shape: tuple, dtype: str) -> np.ndarray:
    size = math.prod(shape)
    half = (size + 1) // 2
    k = int(key) & MASK
    bits = [splitmix(k, i) for i in range(2 * half)]
    u1 = [1.0 - (b >> 11) * 2.0**-53 for b in bits[:half]]
    u2 = [(b >> 11) * 2.0**-53 for b in bits[half:]]
    r = [math.sqrt(-2.0 * math.log(a)) for a in u1]
    values = [x * math.cos(2 * math.pi * b) for x, b in zip(r, u2)]
    values += [x * math.sin(2 * math.pi * b) for x, b in zip(r, u2)]
    return np.array(values[:size]).astype(dtype).reshape(shape)


def fold(key: np.ndarray, data: int) -> np.ndarray:
    z = splitmix(data & MASK, 0) ^ (int(key) & MASK)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return np.array(z - 2**64 if z >= 2**63 else z, np.int64)


KEY = Arg((), "int64", "int", -(2**62), 2**62)
for dtype in ("float32", "float64"):
    _case("random_uniform", dtype, lambda k, d=dtype: gc.random_uniform(k, shape=(3, 5), dtype=d),
          [KEY], lambda k, d=dtype: uniform(k, (3, 5), d))  # fmt: skip
    _case("random_normal", dtype, lambda k, d=dtype: gc.random_normal(k, shape=(7,), dtype=d),
          [KEY], lambda k, d=dtype: normal(k, (7,), d), rtol=1e-12, atol=1e-12)  # fmt: skip
_case("random_uniform", "empty", lambda k: gc.random_uniform(k, shape=(0, 4)), [KEY],
      lambda k: np.zeros((0, 4), np.float32))  # fmt: skip
_case("fold_in", "data", lambda k: gc.fold_in(k, 12345), [KEY], lambda k: fold(k, 12345))
_case("fold_in", "negative", lambda k: gc.fold_in(k, -7), [KEY], lambda k: fold(k, -7))
