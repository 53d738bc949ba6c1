"""Compiled plans at O0 and O2 against the reference interpreter: every op, random graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from tests.op_cases import all_cases, build_graph
from tests.strategies import random_feeds, random_graphs

CASES = all_cases()


def assert_same(got: object, want: list[np.ndarray], rtol: float, atol: float, msg: str) -> None:
    got_list = list(got) if isinstance(got, tuple) else [got]
    assert len(got_list) == len(want), msg
    for g, w in zip(got_list, want):
        assert isinstance(g, np.ndarray), msg
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{g.shape} {g.dtype} vs {w.shape} {w.dtype}\n{msg}"
        )
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=msg)


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_op_matches_reference(case: object, opt_level: int) -> None:
    g = build_graph(case)
    feeds = {f"x{i}": a for i, a in enumerate(case.inputs(seed=1))}
    want = gc.run(g, feeds)
    exe = gc.compile(g, opt_level=opt_level)
    rtol, atol = case.tolerance
    for _ in range(2):  # the second call runs on reused buffers
        assert_same(exe(**feeds), want, rtol, atol, f"{case.id}\n{exe.source()}")


@settings(max_examples=500)
@given(random_graphs(), st.sampled_from([0, 2]), st.integers(0, 2**16))
def test_random_graphs_match_reference(g: gc.Graph, opt_level: int, seed: int) -> None:
    feeds = random_feeds(g, seed=seed)
    want = gc.run(g, feeds)
    exe = gc.compile(g, opt_level=opt_level)
    msg = f"{g}\n{exe.source()}"
    assert_same(exe(**feeds), want, 1e-9, 1e-12, msg)
    other = random_feeds(g, seed=seed + 1)
    assert_same(exe(**other), gc.run(g, other), 1e-9, 1e-12, msg)


@settings(max_examples=60)
@given(random_graphs(min_ops=5, max_ops=15, dtype="float32"), st.integers(0, 2**16))
def test_random_float32_graphs_match_reference(g: gc.Graph, seed: int) -> None:
    feeds = random_feeds(g, seed=seed)
    exe = gc.compile(g, opt_level=2)
    assert_same(exe(**feeds), gc.run(g, feeds), 1e-5, 1e-6, f"{g}\n{exe.source()}")
