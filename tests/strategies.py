"""Hypothesis strategies shared by the suite: random valid graphs and feeds for them.

`random_graphs()` declares a graph through the public API (`gc.Graph`,
`gc.placeholder`, op functions), mixing elementwise ops (activations with their attrs,
rounding, remainders, logical ops, clamp with tensor bounds), broadcasting (``(3,1)``
with ``(1,4)``, scalars), reductions with axis/keepdims, matmul, reshape, transpose,
and the ops of real models: conv2d and conv_transpose2d (stride, padding, dilation,
groups, bias), max and average pooling on values viewed as images (a symbolic batch
"B" kept), layer_norm and group_norm, pad in each mode, flip, cumsum, tril/triu, sort
and topk values, take_along_axis and einsum. Values stay numerically tame: exp only
sees tanh'd values, divisors, log1p's, rsqrt's and remainders' operands are ``1 + |y|``
or ``|x|``, products take a tanh'd factor, so feeds from `random_feeds` (uniform in
[-1, 1]) give finite results. Put `str(graph)` in assertion messages:

    @given(random_graphs())
    def test_something(g):
        feeds = random_feeds(g, seed=0)
        assert ..., str(g)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.errors import ShapeError
from graphc.ir.types import as_dtype, broadcast_shapes
from tests.edge_layers import einsum_equation

# Input shapes are drawn from this menu so that many pairs broadcast.
SHAPES: tuple[tuple[int | str, ...], ...] = (
    (),
    (3,),
    (4,),
    (3, 1),
    (1, 4),
    (3, 4),
    (2, 3, 4),
    (4, 3),
)
# With symbolic=True, shapes with a batch dim "B" join the menu.
SYMBOLIC_SHAPES: tuple[tuple[int | str, ...], ...] = (("B",), ("B", 4), ("B", 1), ("B", 3, 4))

Draw = Callable[[st.SearchStrategy], Any]


def _broadcasts(x: gc.Symbol, y: gc.Symbol) -> bool:
    try:
        broadcast_shapes(x.shape, y.shape)
    except ShapeError:
        return False
    return True


def _pick(draw: Draw, pool: list[gc.Symbol]) -> gc.Symbol:
    # favour recent values, so chains grow deep instead of wide
    index = draw(st.integers(0, len(pool) - 1))
    recent = draw(st.booleans())
    return pool[-1 - index // 2] if recent else pool[index]


def _unary(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol:
    x = _pick(draw, pool)
    name = draw(st.sampled_from(["tanh", "sigmoid", "relu", "neg", "abs", "sin", "exp", "scale",
                                 "erf", "silu", "softplus", "elu", "gelu_exact", "hardsigmoid",
                                 "leaky_relu", "hardtanh", "log1p", "expm1", "rsqrt",
                                 "reciprocal", "floor", "ceil", "trunc", "round", "softsign",
                                 "selu", "celu", "relu6"]))  # fmt: skip
    if name == "exp":
        return gc.exp(gc.tanh(x))
    if name == "scale":
        return x * draw(st.sampled_from([0.5, 2.0, -1.0])) + draw(st.sampled_from([0.0, 1.0]))
    if name == "softplus":
        return gc.softplus(x, draw(st.sampled_from([1.0, 2.0])), draw(st.sampled_from([20.0, 0.5])))
    if name == "elu":
        return gc.elu(x, draw(st.sampled_from([1.0, 0.5])))
    if name == "leaky_relu":
        return gc.leaky_relu(x, draw(st.sampled_from([0.01, 0.2])))
    if name == "hardtanh":
        return gc.hardtanh(x, *draw(st.sampled_from([(-1.0, 1.0), (-0.5, 0.25), (0.0, 6.0)])))
    if name == "log1p":
        return gc.log1p(gc.abs(x))
    if name == "expm1":
        return gc.expm1(gc.tanh(x))
    if name in ("rsqrt", "reciprocal"):  # of 1 + |x| >= 1
        return getattr(gc, name)(1.0 + gc.abs(x))
    if name in ("floor", "ceil", "trunc"):  # steps every half
        return getattr(gc, name)(x * 2.0)
    if name == "round":
        return gc.round(x, decimals=draw(st.sampled_from([0, 1, 2])))
    return getattr(gc, name)(x)


def _binary(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol:
    x = _pick(draw, pool)
    partners = [y for y in pool if _broadcasts(x, y)]
    y = draw(st.sampled_from(partners))
    name = draw(st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum", "where",
                                 "remainder", "fmod", "floor_divide", "clamp", "logical"]))  # fmt: skip
    if name == "mul":
        return x * gc.tanh(y)
    if name == "div":
        return x / (1.0 + gc.abs(y))
    if name == "where":
        return gc.where(x > y, x, y * 0.5)
    if name in ("remainder", "fmod", "floor_divide"):  # divisors 1 + |y| >= 1
        return getattr(gc, name)(x, 1.0 + gc.abs(y))
    if name == "clamp":  # tensor bounds: between y and y + 1
        return gc.clamp(x, y, y + 1.0) if draw(st.booleans()) else gc.clip(x, a_max=y)
    if name == "logical":  # of floats: nonzero is true
        both = getattr(gc, draw(st.sampled_from(["logical_and", "logical_or", "logical_xor"])))
        return gc.where(both(x, y - 0.5) if draw(st.booleans()) else gc.logical_not(x), x, y)
    return getattr(gc, name)(x, y)


def _reduce(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol | None:
    candidates = [x for x in pool if x.type.rank >= 1]
    if not candidates:
        return None
    x = draw(st.sampled_from(candidates))
    axis = draw(st.one_of(st.none(), st.integers(-x.type.rank, x.type.rank - 1)))
    keepdims = draw(st.booleans())
    name = draw(st.sampled_from(["sum", "mean", "max"]))
    return getattr(gc, name)(x, axis=axis, keepdims=keepdims)


def _matmul(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol | None:
    candidates = [x for x in pool if x.type.rank in (1, 2) and isinstance(x.shape[-1], int)]
    if not candidates:
        return None
    x = draw(st.sampled_from(candidates))
    k = x.shape[-1]
    partners = [y for y in pool if y.type.rank in (1, 2) and y.shape[0] == k]
    if partners and draw(st.booleans()):
        y = draw(st.sampled_from(partners))
    else:
        n = draw(st.integers(1, 4))
        seed = draw(st.integers(0, 2**16))
        weights = np.random.default_rng(seed).uniform(-1, 1, (k, n)).astype(dtype)
        y = gc.constant(weights)
    return gc.matmul(x, y)


def _reshape(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol | None:
    candidates = [x for x in pool if x.type.rank >= 1]
    if not candidates:
        return None
    x = draw(st.sampled_from(candidates))
    if x.type.rank >= 2 and (not x.type.is_concrete or draw(st.booleans())):
        return gc.transpose(x, tuple(reversed(range(x.type.rank))))
    if not x.type.is_concrete:
        return None
    size = x.type.size
    factors = [d for d in range(1, size + 1) if size % d == 0]
    first = draw(st.sampled_from(factors))
    shape = draw(st.sampled_from([(size,), (first, size // first), (size // first, first, 1)]))
    return gc.reshape(x, shape)


def _divisor(draw: Draw, size: int, near_root: bool = False) -> int:
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    if near_root:  # drawn first: an image with room for a kernel
        divisors.sort(key=lambda d: abs(d * d - size))
    return draw(st.sampled_from(divisors))


def _image(draw: Draw, pool: list[gc.Symbol]) -> gc.Symbol | None:
    """A pool value as an (N, C, H, W) image: rank 4 as it is, else reshaped (a symbolic
    batch stays first)."""
    x = _pick(draw, pool)
    if x.type.rank == 4:
        return x
    batch = x.shape[:1] if x.shape and isinstance(x.shape[0], str) else ()
    rest = x.shape[len(batch) :]
    if any(isinstance(d, str) for d in rest):
        return None
    size = math.prod(rest)
    lead = [] if batch else [_divisor(draw, size)]  # a known batch
    size //= math.prod(lead)
    channels = _divisor(draw, size)
    height = _divisor(draw, size // channels, near_root=True)
    return gc.reshape(x, (*batch, *lead, channels, height, size // channels // height))


def _window(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol | None:
    """conv2d and conv_transpose2d (stride, padding, dilation, groups, a bias) with
    constant weights, max_pool2d and avg_pool2d (ceil_mode, count_include_pad); a type
    rule that refuses (a window larger than the image) skips the op."""
    x = _image(draw, pool)
    if x is None:
        return None
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    channels = x.shape[1]
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.sampled_from([1, 2, (1, 2)]))
    padding = draw(st.sampled_from([0, 1, (1, 0), (0, 1, 1, 0)]))
    kind = draw(st.sampled_from(["conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"]))
    try:
        if kind in ("max_pool2d", "avg_pool2d"):
            # at most half the kernel (PyTorch's limit): no window of padding alone
            padding = (min(1, kernel[0] // 2), min(1, kernel[1] // 2)) if padding else 0
        if kind == "max_pool2d":  # dilated: unpadded, or a window may hold padding alone
            dilation = draw(st.sampled_from([1, 2])) if padding == 0 else 1
            return gc.max_pool2d(x, kernel, stride, padding, dilation, draw(st.booleans()))
        if kind == "avg_pool2d":
            ceil_mode, include = draw(st.booleans()), draw(st.booleans())
            return gc.avg_pool2d(x, kernel, stride, padding, ceil_mode, include)
        if not isinstance(channels, int):  # a symbolic channel dim: no constant weight fits
            return None
        groups = draw(st.sampled_from([g for g in (1, 2, 3) if channels % g == 0]))
        out = groups * draw(st.integers(1, 2))
        dilation = draw(st.sampled_from([1, 2, (2, 1)]))
        if kind == "conv2d":
            weight = rng.uniform(-1, 1, (out, channels // groups, *kernel)).astype(dtype)
            y = gc.conv2d(x, weight, None, stride, padding, dilation, groups)
        else:
            weight = rng.uniform(-1, 1, (channels, out // groups, *kernel)).astype(dtype)
            y = gc.conv_transpose2d(x, weight, None, stride, padding, 0, groups, dilation)
        if draw(st.booleans()):  # a bias, as gc.conv2d adds it (an epilogue at O2)
            y = y + rng.uniform(-1, 1, (out, 1, 1)).astype(dtype)
        return y
    except ShapeError:
        return None


def _normalize(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol:
    """layer_norm over the trailing dims from a drawn axis, with or without a constant
    scale and shift; group_norm of (N, C, ...) values."""
    x = _pick(draw, pool)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    channels = x.shape[1] if x.type.rank >= 2 else None
    merged = all(isinstance(d, int) for d in x.shape[2:])  # a group's dims make one dim
    if isinstance(channels, int) and merged and draw(st.integers(0, 2)) == 0:
        groups = draw(st.sampled_from([g for g in (1, 2, 3) if channels % g == 0]))
        return gc.group_norm(x, groups)  # reshape, layer_norm, reshape
    if x.type.rank == 0:
        x = gc.reshape(x, (1,))
    axis = draw(st.integers(-x.type.rank, x.type.rank - 1))
    normalized = tuple(1 if isinstance(d, str) else d for d in x.shape[axis:])
    weight = rng.uniform(0.5, 1.5, normalized).astype(dtype) if draw(st.booleans()) else None
    bias = rng.uniform(-1, 1, normalized[-1:]).astype(dtype) if draw(st.booleans()) else None
    return gc.layer_norm(x, weight, bias, axis=axis, eps=1e-5)


def _rearrange(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol | None:
    """pad (every mode), flip, cumsum, tril and triu, sorted values (sort, topk), a
    permutation by take_along_axis, and einsum with a partner."""
    x = _pick(draw, pool)
    rank = x.type.rank
    kind = draw(st.sampled_from(["pad", "flip", "cumsum", "triangle", "sort", "permute", "einsum"]))
    if kind == "einsum":
        y = draw(st.sampled_from(pool))
        return gc.einsum(einsum_equation(draw, x, y), x, y)
    if rank == 0:
        return None
    axis = draw(st.integers(-rank, rank - 1))
    if kind == "pad":
        mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
        limit = {"constant": 2, "reflect": 1, "edge": 2, "wrap": 1}[mode]
        widths = tuple(
            (0, 0) if isinstance(d, str) or d <= limit else (draw(st.integers(0, limit)),) * 2
            for d in x.shape
        )
        return gc.pad(x, widths, mode, **({"constant_values": 0.5} if mode == "constant" else {}))
    if kind == "flip":
        return gc.flip(x, axis)
    if kind == "cumsum":
        return gc.cumsum(x, axis)
    if kind == "triangle" and rank >= 2:
        return getattr(gc, draw(st.sampled_from(["tril", "triu"])))(x, k=draw(st.integers(-1, 1)))
    if kind == "sort":
        size = x.shape[axis]
        if isinstance(size, int) and draw(st.booleans()):
            k = draw(st.integers(1, size))
            return gc.topk(x, k, axis, largest=draw(st.booleans())).values
        return gc.sort(x, axis, descending=draw(st.booleans())).values
    if kind == "permute":
        same = [y for y in pool if y.shape == x.shape]
        return gc.take_along_axis(x, gc.argsort(draw(st.sampled_from(same)), axis), axis)
    return None


BUILDERS = (_unary, _binary, _reduce, _matmul, _reshape, _window, _normalize, _rearrange)


@st.composite
def random_graphs(
    draw: Draw,
    min_ops: int = 15,
    max_ops: int = 30,
    dtype: str | np.dtype = "float64",
    symbolic: bool = False,
) -> gc.Graph:
    """A valid graph of `min_ops`..`max_ops` non-constant ops over 1-3 placeholders x0.. and
    1-3 outputs out0..; with `symbolic`, some inputs have a symbolic batch dim "B"."""
    graph = gc.Graph("random")
    dtype = as_dtype(dtype)  # "bfloat16" is a numpy name only once ml_dtypes is imported
    target = draw(st.integers(min_ops, max_ops))
    shapes = SHAPES + SYMBOLIC_SHAPES if symbolic else SHAPES
    with graph:
        pool = [
            gc.placeholder(f"x{i}", shape=draw(st.sampled_from(shapes)), dtype=dtype)
            for i in range(draw(st.integers(1, 3)))
        ]
        results: list[gc.Symbol] = []
        # (a builder that gives None may still have added ops: go on until one result)
        while not results or sum(1 for n in graph.op_nodes if not n.is_constant) < target:
            value = draw(st.sampled_from(BUILDERS))(draw, pool, dtype)
            if value is not None:
                pool.append(value)
                results.append(value)
        others = results[:-1]
        extra = draw(st.lists(st.sampled_from(others), max_size=2, unique_by=id)) if others else []
        for i, value in enumerate([results[-1], *extra]):
            gc.output(value, name=f"out{i}")
    return graph


def random_feeds(graph: gc.Graph, seed: int = 0, dims: int = 3) -> dict[str, np.ndarray]:
    """Arrays for the placeholders of `graph`, uniform in [-1, 1] (symbolic dims -> `dims`);
    integers in -4..4 (0..4 unsigned), bools at random."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in graph.inputs:
        shape = tuple(dims if isinstance(d, str) else d for d in p.type.shape)
        if p.type.dtype == np.bool_:
            feeds[p.name] = rng.random(shape) < 0.5
        elif np.issubdtype(p.type.dtype, np.integer):
            low = -4 if np.iinfo(p.type.dtype).min < 0 else 0  # unsigned ones do not wrap
            feeds[p.name] = rng.integers(low, 5, shape).astype(p.type.dtype)
        else:
            feeds[p.name] = rng.uniform(-1, 1, shape).astype(p.type.dtype)
    return feeds
