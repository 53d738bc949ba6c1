"""Compiled plans at O0, O1 and O2 against the reference interpreter, bit for bit.

On every backend present: numpy, and native where a C compiler is (its inexact
kernels each within their declared bound, tests/differential.py).

Every op of the table (tests/op_cases.py) on its own inputs and on hostile ones of the
same shapes and dtypes, and the tame random graphs of tests/strategies.py on tame and
on hostile feeds (nan, inf, -0.0, subnormals, extremes). Any NaN equals any NaN; all
other bits must match (tests/differential.py). The hostile-graph generator has its
own file, test_edge_differential.py.
"""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from tests.budget import draws, sample
from tests.differential import check_levels
from tests.edge_values import edge_feeds
from tests.native_checks import HAVE_NATIVE
from tests.op_cases import all_cases, build_graph, case_feeds
from tests.strategies import random_feeds, random_graphs

CASES = sample(all_cases())
BACKENDS = ["numpy", "native"] if HAVE_NATIVE else ["numpy"]
# the quick run keeps both backends of the random-graph tests (conftest.py: quick_cases)
every_backend = pytest.mark.parametrize("backend", BACKENDS)
quick_on_each = pytest.mark.quick_cases(len(BACKENDS))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_op_matches_reference(case: object) -> None:
    g = build_graph(case)
    tame, hostile = case_feeds(case)
    check_levels(g, [tame, hostile])


@every_backend
@quick_on_each
@settings(max_examples=draws(150))
@given(random_graphs(), st.integers(0, 2**16))
def test_random_graphs_match_reference(backend: str, g: gc.Graph, seed: int) -> None:
    check_levels(g, [random_feeds(g, seed=seed), edge_feeds(g, seed=seed)], backend=backend)


@every_backend
@quick_on_each
@settings(max_examples=draws(60))
@given(random_graphs(min_ops=5, max_ops=15, dtype="float32", symbolic=True), st.integers(0, 2**16))
def test_random_float32_graphs_match_reference(backend: str, g: gc.Graph, seed: int) -> None:
    feed_sets = [edge_feeds(g, seed=seed, dims=0), random_feeds(g, seed=seed, dims=1)]
    check_levels(g, feed_sets, backend=backend)


# the small floats: numpy's float16 loops and graphc's float32-then-round kernels
# (bfloat16 every op), at every level and on the native backend's numpy fallback
SMALL_FLOATS = ["float16"] + (["bfloat16"] if importlib.util.find_spec("ml_dtypes") else [])


@pytest.mark.parametrize("dtype", SMALL_FLOATS)
@settings(max_examples=draws(40), derandomize=True)
@given(data=st.data())
def test_random_small_float_graphs_match_reference(dtype: str, data: st.DataObject) -> None:
    g = data.draw(random_graphs(min_ops=5, max_ops=15, dtype=dtype, symbolic=True))
    seed = data.draw(st.integers(0, 2**16))
    check_levels(g, [random_feeds(g, seed=seed, dims=2), edge_feeds(g, seed=seed, dims=1)])
