"""Helpers for pass tests: graph text in, expected graph text out, same numbers."""

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
