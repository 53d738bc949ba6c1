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
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.registry import get_op
from graphc.runtime.backend import get_backend
from tests.budget import draws, sample
from tests.declared_reference import _ulp_distance
from tests.differential import check_levels
from tests.edge_values import bits_differ, edge_feeds
from tests.native_checks import HAVE_NATIVE, needs_native
from tests.op_cases import OpCase, all_cases, build_graph, case_feeds
from tests.strategies import random_feeds, random_graphs

CASES = sample(all_cases())
BACKENDS = ["numpy", "native"] if HAVE_NATIVE else ["numpy"]
# the quick run keeps both backends of the random-graph tests (conftest.py: quick_cases)
every_backend = pytest.mark.parametrize("backend", BACKENDS)
quick_on_each = pytest.mark.quick_cases(len(BACKENDS))


@every_backend
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_op_matches_reference(case: OpCase, backend: str) -> None:
    declared = get_backend(backend).inexact_lowerings.get(case.op)
    if get_op(case.op).has("fusion") and declared is not None and declared.bound is None:
        pytest.skip(
            f"{backend} declares its {case.op} inexact with no bound of its own: its kernel "
            "is held to the bounds of the ops it fuses where its fusion makes it (the random "
            "graphs at O2)"
        )
    g = build_graph(case)
    tame, hostile = case_feeds(case)
    check_levels(g, [tame, hostile], backend=backend)


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


# -- the harness on a backend with inexact kernels (tests/declared_reference.py) ----------


def _exp_graph(dtype: str = "float64") -> gc.Graph:
    g = gc.Graph("exp")
    with g:
        x = gc.placeholder("x", ("B",), dtype)
        gc.output(gc.exp(x) * 3.0 + x, name="y")
    return g


def _exp_feeds(dtype: str = "float64") -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        {"x": rng.uniform(-20, 20, 4099).astype(dtype)},
        {"x": np.linspace(-1, 1, 7, dtype=dtype)},
    ]


@needs_native
def test_native_exp_is_held_to_its_declared_bound_and_the_rest_to_numpys_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """libmvec's exp differs from numpy's in the last bits (its bound: 4 ulp), so the
    harness passes native's results; with the bound made 0 it fails at exp, and with exp
    declared exact it fails at the output: no difference goes unchecked."""
    native = get_backend("native")
    g, feeds = _exp_graph(), _exp_feeds()
    with np.errstate(all="ignore"):
        assert any(
            bits_differ(gc.compile(g, backend="native")(**f), np.exp(f["x"]) * 3.0 + f["x"])
            for f in feeds
        ), "native's exp gave numpy's bits here: the test needs feeds where it does not"
    check_levels(g, feeds, backend="native")
    declared = native.inexact_lowerings["exp"]
    monkeypatch.setitem(native.inexact_lowerings, "exp", replace(declared, bound=0))
    with pytest.raises(AssertionError, match=r"exp.*beyond its declared bound"):
        check_levels(g, feeds, backend="native")
    monkeypatch.delitem(native.inexact_lowerings, "exp")
    with pytest.raises(AssertionError, match=r"output 0 \('y'\)"):
        check_levels(g, feeds, backend="native")


@needs_native
def test_a_loop_whose_body_holds_an_inexact_op_matches_on_native() -> None:
    """A scan's body with tanh (graphc's float32 tanh on native): the loop runs its body's
    kernels, whose bits the harness follows into the body."""
    g = gc.Graph("loop")
    with g:
        h = gc.placeholder("h", (3,), "float32")
        xs = gc.placeholder("xs", (5, 3), "float32")
        last, hs = gc.scan(lambda c, x: (gc.tanh(c * 1.5 + x), gc.tanh(c)), h, xs)
        gc.output(last, name="last")
        gc.output(hs, name="hs")
    rng = np.random.default_rng(1)
    feeds = {"h": rng.uniform(-2, 2, 3).astype(np.float32)}
    feeds["xs"] = rng.uniform(-2, 2, (5, 3)).astype(np.float32)
    check_levels(g, [feeds], backend="native")


@pytest.mark.quick_cases(3)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_ulp_distance_counts_the_floats_between(dtype: str) -> None:
    x = np.array([1.0, 3e-5, -2.5, 0.0], dtype)
    up = np.nextafter(x, np.array(np.inf, dtype))
    three = np.nextafter(np.nextafter(up, up + 1), up + 1)
    assert _ulp_distance(x, up).tolist() == [1, 1, 1, 1]
    assert _ulp_distance(three, x).tolist() == [3, 3, 3, 3]
    zero = np.array([0.0], dtype)
    assert _ulp_distance(zero, -zero).tolist() == [1]  # -0.0 and +0.0: neighbours
    smallest = np.array([np.finfo(dtype).smallest_subnormal], dtype)
    assert _ulp_distance(smallest, -smallest).tolist() == [3]
