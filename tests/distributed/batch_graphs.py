"""Random graphs with a symbolic batch dim "B" that the batch split can split.

`batch_graphs()` declares per-row work (elementwise ops with parameters broadcast
against the rows, matmuls by weights, softmax, reductions and reshapes over the other
axes, transposes that move the batch axis) on one or two batch inputs, then outputs
some of those mapped values and some reductions over the batch (sum, mean, max, min,
logsumexp, x.T @ y contractions, sum_to), some of them post-processed with
parameters (tanh(mean) * w), and with `gradients=True` the gradient of a mean loss
with respect to every parameter. Values stay tame (exp sees tanh'd values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

import graphc as gc

Draw = Callable[[st.SearchStrategy], Any]
WIDTH = 4


def _rowwise(draw: Draw, x: gc.Symbol, params: list[gc.Symbol], n: int) -> gc.Symbol:
    """One per-row op on x (shape (B, WIDTH) or (B, 3, WIDTH))."""
    kind = draw(
        st.sampled_from(
            ["unary", "param", "matmul", "softmax", "reduce_keep", "transpose", "reshape"]
        )
    )
    if kind == "unary":
        return draw(st.sampled_from([gc.tanh, gc.sigmoid, gc.relu, gc.sin, lambda v: v * v]))(x)
    if kind == "param":
        w = gc.placeholder(f"p{n}", shape=(WIDTH,), dtype="float64")
        params.append(w)
        return draw(st.sampled_from([gc.add, gc.mul, gc.sub]))(x, w)
    if kind == "matmul":
        w = gc.placeholder(f"p{n}", shape=(WIDTH, WIDTH), dtype="float64")
        params.append(w)
        return gc.tanh(x @ w)
    if kind == "softmax":
        return gc.softmax(x, axis=-1)
    if kind == "reduce_keep":  # over the feature axis, kept so shapes stay (.., WIDTH)
        op = draw(st.sampled_from([gc.sum, gc.mean, gc.max]))
        return x - op(x, axis=-1, keepdims=True)
    if kind == "transpose":  # batch axis moves away and back
        rank = len(x.shape)
        axes = tuple(reversed(range(rank)))
        return gc.transpose(gc.exp(gc.tanh(gc.transpose(x, axes))), axes)
    if len(x.shape) == 3:  # (B, 3, W) -> (B, 3 * W) -> back
        flat = gc.reshape(x, ("B", 3 * WIDTH))
        return gc.reshape(gc.tanh(flat), ("B", 3, WIDTH))
    return gc.reshape(gc.reshape(x, ("B", 2, WIDTH // 2)) * 0.5, ("B", WIDTH))


def _over_batch(draw: Draw, x: gc.Symbol, y: gc.Symbol | None) -> gc.Symbol:
    """A reduction of mapped values over the batch axis."""
    kind = draw(st.sampled_from(["sum", "mean", "max", "min", "logsumexp", "contract", "all"]))
    if kind == "contract":
        other = y if y is not None and len(y.shape) == len(x.shape) else x
        if len(x.shape) == 2:
            return gc.transpose(x, (1, 0)) @ other
        return gc.sum(gc.transpose(x, (1, 2, 0)) @ gc.transpose(other, (1, 0, 2)), axis=0)
    if kind == "all":
        return gc.mean(x)
    op = {"sum": gc.sum, "mean": gc.mean, "max": gc.max, "min": gc.min}.get(kind, gc.logsumexp)
    return op(x, axis=0, keepdims=draw(st.booleans()))


@st.composite
def batch_graphs(draw: Draw, gradients: bool = False) -> gc.Graph:
    g = gc.Graph("batched")
    params: list[gc.Symbol] = []
    with g:
        x = gc.placeholder(
            "x", shape=draw(st.sampled_from([("B", WIDTH), ("B", 3, WIDTH)])), dtype="float64"
        )
        pool = [x]
        if draw(st.booleans()):
            pool.append(gc.placeholder("z", shape=x.shape, dtype="float64"))
        for n in range(draw(st.integers(2, 6))):
            value = draw(st.sampled_from(pool))
            if draw(st.booleans()) and len(pool) > 1:
                value = value + draw(st.sampled_from(pool))
            pool.append(_rowwise(draw, value, params, n))
        last = pool[-1]
        if gradients:
            gc.output(gc.mean(gc.sum(last * last, axis=-1)), name="loss")
        else:
            if draw(st.booleans()):
                gc.output(last, name="rows")
            reduced = _over_batch(draw, last, draw(st.sampled_from(pool)))
            if draw(st.booleans()):
                w = gc.placeholder("post", shape=(), dtype="float64")
                params.append(w)
                reduced = gc.tanh(reduced) * w
            gc.output(reduced, name="reduced")
            if draw(st.booleans()):
                gc.output(gc.sum(draw(st.sampled_from(pool)), axis=-1), name="row_sums")
    if gradients and params:
        return gc.gradients(g, wrt=[p.name for p in params])
    return g


def batch_feeds(graph: gc.Graph, rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Uniform [-1, 1] arrays for the graph's placeholders, "B" -> `rows`."""
    rng = np.random.default_rng(seed)
    return {
        p.name: rng.uniform(-1, 1, tuple(rows if d == "B" else d for d in p.type.shape))
        for p in graph.inputs
    }
