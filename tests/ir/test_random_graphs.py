"""The shared random-graph strategy keeps its promises (tests/strategies.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, given, settings

import graphc as gc
from graphc.ir.types import as_dtype, finfo, is_float
from tests.budget import draws
from tests.edge_draws import SMALL_DTYPES
from tests.edge_graphs import edge_graphs
from tests.edge_values import edge_array, int_specials
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


def test_edge_values_reach_the_extremes_of_the_small_dtypes() -> None:
    """edge_array's values for float16, bfloat16 and the small ints hold their own edges:
    float16 65504, its subnormal 6e-8, -0.0, nan and inf; int8 -128 and 127; uint64
    2**64 - 1; and no tame unsigned value wraps around."""
    rng = np.random.default_rng(0)
    for name in SMALL_DTYPES:
        dtype = as_dtype(name)
        # each call draws its own share of specials (sometimes none): several calls
        a = np.concatenate([edge_array(rng, (500,), dtype) for _ in range(16)])
        assert a.dtype == dtype
        if is_float(dtype):
            info = finfo(dtype)
            wide = a.astype(np.float64)
            for value in (float(info.max), float(info.smallest_subnormal), np.inf, -np.inf):
                assert value in wide, (name, value)
            assert np.isnan(wide).any() and (np.signbit(wide) & (wide == 0)).any(), name
        else:
            info = np.iinfo(dtype)
            assert info.min in a and info.max in a, name  # -128 and 127, 2**64 - 1
            if info.min == 0:  # a tame -3 wrapped would be 253 in uint8
                allowed = set(int_specials(dtype).tolist()) | set(range(6))
                assert set(a.tolist()) <= allowed, name


@pytest.mark.parametrize("small", [True, False])
def test_edge_graphs_draw_the_small_dtypes_unless_told_not_to(small: bool) -> None:
    def has_small(g: gc.Graph) -> bool:
        return any(str(p.type.dtype) in SMALL_DTYPES for p in g.inputs)

    found = find(
        edge_graphs(max_ops=2, small_dtypes=small),
        lambda g: not small or has_small(g),
        settings=settings(max_examples=300, database=None, derandomize=True),
    )
    assert has_small(found) == small


def test_random_feeds_of_every_dtype_stay_tame() -> None:
    """Unsigned feeds are 0..4 (not -4..4 wrapped to 252..255), small floats in [-1, 1]."""
    g = gc.Graph("feeds")
    with g:
        # the last small dtype is bfloat16 with ml_dtypes, uint64 without: named once
        for name in dict.fromkeys(("uint8", "uint64", "int8", "float16", *SMALL_DTYPES[-1:])):
            gc.output(gc.placeholder(name, (50,), name), name=f"out_{name}")
    for name, a in random_feeds(g, seed=3).items():
        assert a.dtype == as_dtype(name)
        wide = a.astype(np.float64)
        low = 0 if name.startswith("uint") else -4
        assert low <= wide.min() and wide.max() <= 4, name
        assert np.isfinite(wide).all(), name
