"""The shared random-graph strategy keeps its promises (tests/strategies.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import graphc as gc
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs


@settings(max_examples=draws(20))
@given(random_graphs(min_ops=15, max_ops=30))
def test_sizes_inputs_outputs_and_finite_results(g: gc.Graph) -> None:
    ops = [n for n in g.op_nodes if not n.is_constant]
    # the last step may overshoot: einsum spelled out adds 7 ops (reshapes, sums, a product)
    assert 15 <= len(ops) <= 30 + 10, str(g)
    assert 1 <= len(g.inputs) <= 3 and 1 <= len(g.outputs) <= 3, str(g)
    assert len({o.inputs[0].name for o in g.outputs}) == len(g.outputs), str(g)
    gc.verify(g)
    feeds = random_feeds(g, seed=4)
    assert set(feeds) == {p.name for p in g.inputs}
    for result in gc.run(g, feeds):
        assert result.dtype == np.float64 and np.isfinite(result).all(), str(g)


@settings(max_examples=draws(20))
@given(random_graphs(min_ops=5, max_ops=15, dtype="float32", symbolic=True))
def test_symbolic_float32_graphs_run_at_several_sizes(g: gc.Graph) -> None:
    gc.verify(g)
    for size in (1, 4):
        feeds = random_feeds(g, seed=0, dims=size)
        for p in g.inputs:
            assert p.type.bind({"B": size}).matches(feeds[p.name]), str(g)
        for result in gc.run(g, feeds):
            assert result.dtype == np.float32 and np.isfinite(result).all(), str(g)


@settings(max_examples=draws(15))
@given(random_graphs(min_ops=5, max_ops=15, symbolic=True))
def test_symbolic_graphs_round_trip_through_text(g: gc.Graph) -> None:
    g2 = gc.parse(str(g))
    assert str(g2) == str(g)
    feeds = random_feeds(g, seed=1, dims=2)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        np.testing.assert_array_equal(a, b, err_msg=str(g))
