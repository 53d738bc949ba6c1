"""Helpers for pass tests: graph text in, expected graph text out, same numbers; feeds at
the edges (nan, inf, -0.0, subnormals, extreme magnitudes, integer limits) and a bit for
bit comparison for rules that claim exactness."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import graphc as gc
from tests.strategies import random_feeds


def same_numbers(before: gc.Graph, after: gc.Graph, seed: int = 0, rtol: float = 1e-6) -> None:
    """Both graphs give the same outputs on random feeds (checked with the interpreter)."""
    feeds = random_feeds(before, seed=seed)
    expected = gc.run(before, feeds)
    actual = gc.run(after, feeds)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert e.dtype == a.dtype and e.shape == a.shape, f"{before}\n->\n{after}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=1e-12, err_msg=f"{before}\n->\n{after}")


def check_pass(pass_: Callable[[gc.Graph], gc.Graph], before: str, expected: str) -> gc.Graph:
    """`pass_` turns the graph `before` into exactly `expected` (both as text)."""
    graph = gc.parse(before)
    result = pass_(graph)
    gc.verify(result)
    assert str(result) == str(gc.parse(expected)), f"got:\n{result}"
    assert str(graph) == str(gc.parse(before)), "the pass changed its input graph"
    same_numbers(graph, result)
    return result


def edge_values(dtype: np.dtype) -> np.ndarray:
    """The values where exactness breaks first, for one dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([False, True])
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.array([info.min, info.min + 1, -2, -1, 0, 1, 2, info.max - 1, info.max], dtype)
    info = np.finfo(dtype)
    tiny = info.smallest_subnormal
    return np.array(
        [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, np.nan, -np.nan, np.inf, -np.inf, info.max, -info.max,
         info.max / 3, info.tiny, -info.tiny, tiny, -tiny, tiny * 3, 1e-30, -7.5, 2.0**-70],
        dtype,
    )  # fmt: skip


def edge_feeds(graph: gc.Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for `graph` drawn from `edge_values` (symbolic dims -> 3)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in graph.inputs:
        shape = tuple(3 if isinstance(d, str) else d for d in p.type.shape)
        feeds[p.name] = rng.choice(edge_values(p.type.dtype), size=shape)
    return feeds


def assert_bits_equal(got: np.ndarray, want: np.ndarray, msg: str = "") -> None:
    """Same dtype, shape and bits; where both are NaN they count as equal (IEEE 754 does
    not specify a NaN's sign or payload for arithmetic)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{got!r} vs {want!r}\n{msg}"
    if got.dtype.kind in "fc":
        both_nan = np.isnan(got) & np.isnan(want)
        got, want = np.where(both_nan, 0, got), np.where(both_nan, 0, want)
    unsigned = f"u{got.dtype.itemsize}" if got.dtype != np.bool_ else np.bool_
    same = np.ascontiguousarray(got).view(unsigned) == np.ascontiguousarray(want).view(unsigned)
    assert np.all(same), f"{got!r} vs {want!r}\n{msg}"
