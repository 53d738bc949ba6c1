"""Hypothesis strategies shared by the suite: random valid graphs and feeds for them.

`random_graphs()` declares a graph through the public API (`gc.Graph`,
`gc.placeholder`, op functions), mixing elementwise ops, broadcasting (``(3,1)``
with ``(1,4)``, scalars), reductions with axis/keepdims, matmul, reshape and
transpose. Values stay numerically tame: exp only sees tanh'd values, divisors are
``1 + |y|``, products take a tanh'd factor, so feeds from `random_feeds` (uniform in
[-1, 1]) give finite results. Put `str(graph)` in assertion messages:

    @given(random_graphs())
    def test_something(g):
        feeds = random_feeds(g, seed=0)
        assert ..., str(g)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.errors import ShapeError
from graphc.ir.types import broadcast_shapes

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
                                 "leaky_relu"]))  # fmt: skip
    if name == "exp":
        return gc.exp(gc.tanh(x))
    if name == "scale":
        return x * draw(st.sampled_from([0.5, 2.0, -1.0])) + draw(st.sampled_from([0.0, 1.0]))
    return getattr(gc, name)(x)


def _binary(draw: Draw, pool: list[gc.Symbol], dtype: str) -> gc.Symbol:
    x = _pick(draw, pool)
    partners = [y for y in pool if _broadcasts(x, y)]
    y = draw(st.sampled_from(partners))
    name = draw(st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum", "where"]))
    if name == "mul":
        return x * gc.tanh(y)
    if name == "div":
        return x / (1.0 + gc.abs(y))
    if name == "where":
        return gc.where(x > y, x, y * 0.5)
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


BUILDERS = (_unary, _binary, _reduce, _matmul, _reshape)


@st.composite
def random_graphs(
    draw: Draw,
    min_ops: int = 15,
    max_ops: int = 30,
    dtype: str = "float64",
    symbolic: bool = False,
) -> gc.Graph:
    """A valid graph of `min_ops`..`max_ops` non-constant ops over 1-3 placeholders x0.. and
    1-3 outputs out0..; with `symbolic`, some inputs have a symbolic batch dim "B"."""
    graph = gc.Graph("random")
    target = draw(st.integers(min_ops, max_ops))
    shapes = SHAPES + SYMBOLIC_SHAPES if symbolic else SHAPES
    with graph:
        pool = [
            gc.placeholder(f"x{i}", shape=draw(st.sampled_from(shapes)), dtype=dtype)
            for i in range(draw(st.integers(1, 3)))
        ]
        results: list[gc.Symbol] = []
        while sum(1 for n in graph.op_nodes if not n.is_constant) < target:
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
    """Arrays for the placeholders of `graph`, uniform in [-1, 1] (symbolic dims -> `dims`)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in graph.inputs:
        shape = tuple(dims if isinstance(d, str) else d for d in p.type.shape)
        if p.type.dtype == np.bool_:
            feeds[p.name] = rng.random(shape) < 0.5
        elif np.issubdtype(p.type.dtype, np.integer):
            feeds[p.name] = rng.integers(-4, 5, shape).astype(p.type.dtype)
        else:
            feeds[p.name] = rng.uniform(-1, 1, shape).astype(p.type.dtype)
    return feeds
