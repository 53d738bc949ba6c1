"""Drawing operands for the hostile random graphs (tests/edge_graphs.py, tests/edge_layers.py).

A builder picks its operands from the pool of values declared so far (`pick`, a
broadcasting `partner`), adds hostile scalars (`scalar`: nan, +-inf, -0.0, subnormals,
integer extremes, sometimes as a typed 0-d or broadcasting constant), draws an axis
(`draw_axis`), and for ops with fixed operand shapes (a convolution's weight, a layer norm's
scale) gets a value of exactly that shape and dtype (`operand`: a pool value broadcast
or reshaped to it, so gradients reach it, else a hostile or tame constant). `nchw`
views any value as an (N, C, H, W) image for convolution and pooling.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.errors import ShapeError
from graphc.ir.types import as_dtype, broadcast_shapes, finfo, is_float
from graphc.ops.symbolic import Symbol
from tests.edge_values import edge_array

Draw = Callable[[st.SearchStrategy], Any]

# the common dtypes, drawn most of the time
DTYPES = ("float32", "float64", "int32", "int64", "bool")
FLOATS = ("float32", "float64")
# graphc's small dtypes (issue 35), and bfloat16 where ml_dtypes is installed: drawn one
# time in SMALL_ONE_IN by `draw_dtype`, so that they meet every builder's ops without
# making the draws slower (each new dtype is new kernels to plan and build); every
# elementwise op case meets each of them on every engine in tests/ir/test_small_dtypes.py
SMALL_DTYPES = ("float16", "int8", "int16", "uint8", "uint16", "uint32", "uint64") + (
    ("bfloat16",) if importlib.util.find_spec("ml_dtypes") else ()
)
SMALL_FLOATS = tuple(d for d in SMALL_DTYPES if d in ("float16", "bfloat16"))
SMALL_ONE_IN = 8
# whether `draw_dtype` may give a small dtype: edge_graphs(small_dtypes=False) clears it
# while it draws (the ONNX round trip, until the exporter covers them)
SMALL_ALLOWED: ContextVar[bool] = ContextVar("SMALL_ALLOWED", default=True)


def draw_dtype(draw: Draw, floats: bool = False) -> str:
    """A dtype name: one of DTYPES (FLOATS with `floats`), or one time in SMALL_ONE_IN a
    small one (SMALL_DTYPES, SMALL_FLOATS) unless SMALL_ALLOWED is cleared."""
    small = SMALL_ALLOWED.get() and draw(st.integers(0, SMALL_ONE_IN - 1)) == 0
    if floats:
        return draw(st.sampled_from(SMALL_FLOATS if small else FLOATS))
    return draw(st.sampled_from(SMALL_DTYPES if small else DTYPES))


def floating(v: Symbol) -> bool:
    """Is the pool value `v` floating (bfloat16 too, which numpy calls kind 'V')?"""
    return is_float(v.dtype)


# small images a value is broadcast to (one with an empty batch)
NCHW_SHAPES: tuple[tuple[int, ...], ...] = (
    (1, 2, 3, 3),
    (2, 2, 4, 3),
    (1, 4, 5, 4),
    (0, 2, 3, 3),
    (2, 1, 2, 5),
)


def broadcasts(x: Symbol, y: Symbol) -> bool:
    try:
        broadcast_shapes(x.shape, y.shape)
    except ShapeError:
        return False
    return True


def pick(draw: Draw, pool: list[Symbol]) -> Symbol:
    # favour recent values, so chains grow deep instead of wide
    index = draw(st.integers(0, len(pool) - 1))
    return pool[-1 - index // 2] if draw(st.booleans()) else pool[index]


def pick_where(draw: Draw, pool: list[Symbol], fits: Callable[[Symbol], bool]) -> Symbol:
    """A pool value that `fits` (any value when none does: its op is then refused)."""
    return pick(draw, [v for v in pool if fits(v)] or pool)


def partner(draw: Draw, pool: list[Symbol], x: Symbol) -> Symbol:
    """A pool value that broadcasts with x (x itself at least)."""
    return draw(st.sampled_from([y for y in pool if broadcasts(x, y)] or [x]))


def scalar_value(draw: Draw, dtype: np.dtype) -> Any:
    """A Python number for `dtype`, often extreme."""
    dtype = as_dtype(dtype)
    if dtype == np.bool_:
        return draw(st.booleans())
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        values = [0, 1, -1, 2, 3, int(info.max), int(info.min)]
        return draw(st.sampled_from([v for v in values if info.min <= v]))  # no -1 if unsigned
    info = finfo(dtype)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e30, -1e30, 1e-30, float(info.max)]
    values += [float(info.smallest_subnormal), float("inf"), float("-inf"), float("nan")]
    return draw(st.sampled_from(values))


def scalar(draw: Draw, dtype: np.dtype) -> Any:
    """A constant operand: a weak Python scalar or a typed 0-d array, sometimes extreme."""
    value = scalar_value(draw, dtype)
    how = draw(st.integers(0, 3))
    if how == 0:
        return value
    if how == 3:
        # another dtype or a broadcasting shape: rules such as x*1 -> x must then decline
        dtype = as_dtype(draw_dtype(draw))
        shape = draw(st.sampled_from([(), (1,), (2, 1), (1, 3)]))
        with np.errstate(all="ignore"):
            return gc.constant(np.full(shape, value).astype(dtype))
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        return gc.constant(np.array(value, dtype=dtype))


def draw_axis(draw: Draw, x: Symbol, allow_none: bool = True) -> int | None:
    rank = x.type.rank
    if rank == 0:
        return None
    options = st.integers(-rank, rank - 1)
    return draw(st.one_of(st.none(), options) if allow_none else options)


def constant_of(draw: Draw, shape: tuple[int, ...], dtype: Any) -> Symbol:
    """A constant of `shape`: hostile values (edge_values.py), or tame ones in [-1, 1]."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    dtype = as_dtype(dtype)
    if draw(st.booleans()):
        return gc.constant(edge_array(rng, shape, dtype))
    if is_float(dtype):
        return gc.constant(rng.uniform(-1, 1, shape).astype(dtype))
    return gc.constant(rng.integers(-3, 4, shape).astype(dtype))


def operand(draw: Draw, pool: list[Symbol], shape: tuple, dtype: Any) -> Symbol:
    """A value of exactly `shape` and `dtype`: a pool value broadcast or reshaped to it
    (so gradients flow into it), else a constant (folded with its users at O1 and O2)."""
    dtype = as_dtype(dtype)
    concrete = all(isinstance(d, int) for d in shape)
    fits = [v for v in pool if _broadcasts_to(v.shape, shape)]
    if concrete:
        size = math.prod(shape)
        fits += [v for v in pool if v.type.is_concrete and v.type.size == size and v.shape != shape]
    if not fits or (concrete and draw(st.booleans())):
        if not concrete:
            raise ShapeError(f"no pool value broadcasts to {shape}")  # the builder is skipped
        return constant_of(draw, shape, dtype)
    v = draw(st.sampled_from(fits))
    if v.dtype != dtype:
        v = gc.cast(v, dtype)
    if v.shape == tuple(shape):
        return v
    if _broadcasts_to(v.shape, shape):
        return gc.broadcast_to(v, tuple(shape))
    return gc.reshape(v, tuple(shape))


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return broadcast_shapes(shape, target) == tuple(target)
    except ShapeError:
        return False


def _factors(draw: Draw, size: int, count: int) -> tuple[int, ...]:
    """`count` positive ints whose product is `size`: the leading ones drawn small first,
    the last two near the square root of what is left (an image with room for a kernel)."""
    dims = []
    for _ in range(count - 2):
        d = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
        dims.append(d)
        size //= d
    near_root = sorted(
        (d for d in range(1, size + 1) if size % d == 0), key=lambda d: abs(d * d - size)
    )
    h = draw(st.sampled_from(near_root))
    return (*dims, h, size // h)


def nchw(draw: Draw, pool: list[Symbol]) -> Symbol:
    """A pool value as an image (N, C, H, W), floating more often than not: a rank-4
    value as it is; otherwise reshaped (a symbolic dim goes first, as the batch, or
    third, as a height) or broadcast to one of NCHW_SHAPES. Raises a graphc error where
    it cannot (the builder is then skipped)."""
    floats = [v for v in pool if floating(v)]
    x = pick(draw, floats) if floats and draw(st.integers(0, 3)) else pick(draw, pool)
    if x.type.rank == 4 and draw(st.integers(0, 3)) > 0:
        return x
    targets = [s for s in NCHW_SHAPES if _broadcasts_to(x.shape, s)]
    if targets and draw(st.integers(0, 2)) == 0:
        return gc.broadcast_to(x, draw(st.sampled_from(targets)))
    symbols = [d for d in x.shape if isinstance(d, str)]
    known = math.prod(d for d in x.shape if isinstance(d, int))
    if not symbols:
        if known == 0:
            empty = [(0, 2, 3, 3), (2, 0, 3, 3), (1, 2, 0, 3), (0, 1, 1, 1)]
            return gc.reshape(x, draw(st.sampled_from(empty)))
        return gc.reshape(x, _factors(draw, known, 4))
    if len(symbols) != 1:
        raise ShapeError(f"no image view of {x.shape}")
    c, h, w = _factors(draw, known, 3) if known else draw(st.sampled_from([(0, 3, 3), (2, 0, 3)]))
    shape = draw(st.sampled_from([(symbols[0], c, h, w), (c, h, symbols[0], w)]))
    return gc.reshape(x, shape)
