"""Hostile feeds and a bit-for-bit comparison for the differential tests.

`edge_feeds` fills each placeholder with a mix of the values that break numerical code:
for floats 0, -0.0, +-1, nan, +-inf, the largest finite, the smallest normal and
subnormal, and magnitudes across the type's range (1e-38 to 1e38 for float32 and
bfloat16, 1e-300 to 1e300 for float64, 1e-8 to 6e4 for float16: 65504 and the subnormal
6e-8 among the specials); for integers 0, +-1, the type's min and max and their
neighbours (int8 -128 and 127, uint64 2**64 - 1); bools at random.
Symbolic dims take the size given for them (0 and 1 included).

`assert_bits_equal` holds two results to the same dtype, shape and bits, except that
any NaN equals any NaN (IEEE 754 leaves the sign and payload of an arithmetic NaN
unspecified).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

import graphc as gc
from graphc.ir.types import as_dtype, finfo, is_float

# unsigned views of the same width, to compare bits
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def float_specials(dtype: np.dtype) -> np.ndarray:
    """The float values every kernel must survive, in `dtype`."""
    info = finfo(dtype)
    tiny = info.smallest_normal
    sub = info.smallest_subnormal
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, np.nan, -np.nan, np.inf, -np.inf]
    values += [info.max, -info.max, tiny, -tiny, sub, -sub, tiny / 2, 4 * sub]
    values += [np.sqrt(info.max), 1 / np.sqrt(info.max), 88.0, 89.0, 710.0, -745.0, 1e-7]
    with np.errstate(over="ignore"):  # 710.0 is inf in float16
        return np.array(values, dtype=np.float64).astype(dtype)


def int_specials(dtype: np.dtype) -> np.ndarray:
    """The integer values every kernel must survive, in `dtype`."""
    info = np.iinfo(dtype)
    values = [0, 1, -1, 2, -2, 3, 7, info.min, info.max, info.min + 1, info.max - 1]
    values += [info.max // 2, -(info.max // 2), 46341, -46341, 2**31 - 1, -(2**31)]
    return np.array([v for v in values if info.min <= v <= info.max], dtype=dtype)


def edge_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An array of `shape` and `dtype`: specials, tame values and wild magnitudes mixed."""
    dtype = as_dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.issubdtype(dtype, np.integer):
        pool = int_specials(dtype)
        low = -5 if np.iinfo(dtype).min < 0 else 0  # tame unsigned values do not wrap
        tame = rng.integers(low, 6, size).astype(dtype)
        picks = pool[rng.integers(0, len(pool), size)]
    else:
        pool = float_specials(dtype)
        tame = rng.uniform(-2, 2, size).astype(dtype)
        # 1e-300..1e300 float64, 1e-38..1e38 float32 and bfloat16, 1e-8..1e4 float16
        top = min(300, int(np.log10(float(finfo(dtype).max))))
        bottom = 8 if dtype.itemsize == 2 and top < 38 else top  # float16's subnormals: 6e-8
        wild = rng.standard_normal(size) * 10.0 ** rng.uniform(-bottom, top, size)
        with np.errstate(over="ignore"):
            wild = wild.astype(dtype)
        picks = np.where(rng.random(size) < 0.5, pool[rng.integers(0, len(pool), size)], wild)
    # mostly specials, sometimes a plain tame array so that finite paths are exercised too
    share = rng.choice([0.0, 0.3, 0.7, 1.0])
    values = np.where(rng.random(size) < share, picks, tame).astype(dtype)
    return values.reshape(shape)


def edge_feeds(
    graph: gc.Graph, seed: int = 0, dims: Mapping[str, int] | int = 3
) -> dict[str, np.ndarray]:
    """Hostile arrays for the placeholders of `graph` (a symbolic dim d takes `dims[d]`)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in graph.inputs:
        shape = tuple(
            (dims if isinstance(dims, int) else dims[d]) if isinstance(d, str) else d
            for d in p.type.shape
        )
        feeds[p.name] = edge_array(rng, shape, p.type.dtype)
    return feeds


def sprinkled_feeds(graph: gc.Graph, seed: int, share: float = 0.125) -> dict[str, np.ndarray]:
    """Normal values for the (concrete) placeholders of a float `graph`, `share` of them
    an edge value (nan, inf, -0.0, subnormals, the largest finite): mostly finite, so
    that sums over many terms (a convolution's) stay informative."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in graph.inputs:
        a = rng.standard_normal(p.type.shape).astype(p.type.dtype)
        mask = rng.random(a.shape) < share
        a[mask] = rng.choice(float_specials(p.type.dtype), int(mask.sum()))
        feeds[p.name] = a
    return feeds


def bits_differ(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why `got` is not `want` bit for bit (any NaN equals any NaN), or None."""
    if not isinstance(got, np.ndarray):
        return f"got a {type(got).__name__}, not an ndarray"
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"type {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    if is_float(got.dtype):
        both_nan = np.isnan(got) & np.isnan(want)
        uint = _UINT[got.dtype.itemsize]
        same = got.view(uint) == want.view(uint)  # same itemsize: a view of any layout
        bad = ~(same | both_nan)
    else:
        bad = got != want
    if not np.any(bad):
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (
        f"{int(np.sum(bad))} of {got.size} elements differ, first at {at}: "
        f"{got[at]!r} vs {want[at]!r}"
    )


def assert_bits_equal(got: object, want: Sequence[np.ndarray], msg: str) -> None:
    """`got` (an executable's result: one array or a tuple) equals `want` bit for bit."""
    got_list = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got_list) == len(want), f"{len(got_list)} results vs {len(want)}\n{msg}"
    for k, (g, w) in enumerate(zip(got_list, want)):
        why = bits_differ(g, np.asarray(w))
        assert why is None, f"output {k}: {why}\n{msg}"
