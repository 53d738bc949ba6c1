"""Random graphs over hostile values, dtypes, shapes and names: O0 = O1 = O2 = reference.

The graphs come from tests/edge_graphs.py (float32/64, int32/64 and bool, and one time
in eight float16, bfloat16, int8, int16 or uint8-uint64; 0-d, empty
and symbolic shapes; untamed exp/log/sqrt/div/pow; hostile names), the feeds from
tests/edge_values.py (nan, +-inf, -0.0, subnormals, extremes, integer min/max). Each
executable is called on two feed sets; a graph with the symbolic dim "B" is fed at two
batch sizes, one of them 0 or 1. Results must match bit for bit (tests/differential.py).
The full run (python -m pytest --full) draws 300 graphs and 2,000 more in the slow test;
the quick run a tenth of each (tests/budget.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.types import is_float
from tests.budget import draws
from tests.differential import check_levels, check_round_trip
from tests.edge_graphs import edge_graphs
from tests.edge_values import edge_feeds


def _feed_sets(graph: gc.Graph, seed: int, sizes: tuple[int, int]) -> list[dict]:
    symbolic = any(isinstance(d, str) for p in graph.inputs for d in p.type.shape)
    if symbolic:
        return [edge_feeds(graph, seed, {"B": size}) for size in sizes]
    return [edge_feeds(graph, seed), edge_feeds(graph, seed + 1)]


BATCHES = st.tuples(st.sampled_from([0, 1]), st.sampled_from([1, 2, 3, 5]))


@settings(max_examples=draws(300), derandomize=True)
@given(edge_graphs(), st.integers(0, 2**16), BATCHES)
def test_edge_graphs_agree(graph: gc.Graph, seed: int, sizes: tuple[int, int]) -> None:
    feeds = _feed_sets(graph, seed, sizes)
    check_levels(graph, feeds)
    check_round_trip(graph, feeds)


@pytest.mark.slow
@settings(max_examples=draws(1000))
@given(edge_graphs(max_ops=12), st.integers(0, 2**16), BATCHES)
def test_edge_graphs_agree_slow(graph: gc.Graph, seed: int, sizes: tuple[int, int]) -> None:
    feeds = _feed_sets(graph, seed, sizes)
    check_levels(graph, feeds)
    check_round_trip(graph, feeds)


@settings(max_examples=draws(25), derandomize=True)
@given(edge_graphs(min_ops=3, max_ops=10, symbolic=True), st.integers(0, 2**16))
def test_edge_graphs_agree_past_a_chunk(graph: gc.Graph, seed: int) -> None:
    # fused elementwise groups run in chunks of 65,536 elements (graphc/backends/numpy/chunked.py):
    # a batch of 25,000 rows crosses chunk boundaries, with a ragged last chunk. A value
    # with "B" twice in its shape (an outer product) would hold 25,000**2 elements: skip
    if all(n.type.shape.count("B") <= 1 for n in graph.nodes):
        check_levels(graph, _feed_sets(graph, seed, (25_001, 1)))


def _gradient_graph(graph: gc.Graph) -> gc.Graph | None:
    """The joint forward + backward graph of `graph`'s float outputs with respect to its
    float placeholders (a seed placeholder per output), or None when there are none."""
    wrt = [p.name for p in graph.inputs if is_float(p.type.dtype)]
    outputs = [o.name for o in graph.outputs if is_float(o.type.dtype)]
    if not wrt or not outputs:
        return None
    return gc.gradients(graph, wrt=wrt, outputs=outputs, seeds=True)


@settings(max_examples=draws(60), derandomize=True)
@given(edge_graphs(min_ops=2, max_ops=8, float_input=True), st.integers(0, 2**16), BATCHES)
def test_edge_gradient_graphs_agree(graph: gc.Graph, seed: int, sizes: tuple[int, int]) -> None:
    # backward graphs bring sum_to, unslice, scatter_add and the VJP rules of every op
    # (convolutions, pooling, norms, pad, sorts and gathers too), on symbolic concat,
    # empty takes and symbolic slices too
    joint = _gradient_graph(graph)
    if joint is not None:
        feeds = _feed_sets(joint, seed, sizes)
        check_levels(joint, feeds)
        check_round_trip(joint, feeds)


@pytest.mark.slow
@settings(max_examples=draws(250))
@given(edge_graphs(min_ops=2, max_ops=12, float_input=True), st.integers(0, 2**16), BATCHES)
def test_edge_gradient_graphs_agree_slow(
    graph: gc.Graph, seed: int, sizes: tuple[int, int]
) -> None:
    joint = _gradient_graph(graph)
    if joint is not None:
        feeds = _feed_sets(joint, seed, sizes)
        check_levels(joint, feeds)
        check_round_trip(joint, feeds)
