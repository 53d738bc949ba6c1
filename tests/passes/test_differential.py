"""Optimizing never changes results: random graphs agree at O0, O1 and O2.

The graphs (tests/strategies.py) mix elementwise ops, broadcasting, reductions,
matmul, reshapes and transposes; the results of O1 and O2 must match O0 within 1e-6
(relative, float64) through the reference interpreter. The graph text is in every
failure message.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

import graphc as gc
from tests.strategies import random_feeds, random_graphs


@settings(
    max_examples=500,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(random_graphs(min_ops=15, max_ops=30, dtype="float64", symbolic=True))
def test_levels_agree(graph: gc.Graph) -> None:
    feeds = random_feeds(graph, seed=1)
    expected = gc.run(graph, feeds)
    for level in (1, 2):
        optimized = gc.optimize(graph, level=level, verify=True)
        actual = gc.run(optimized, feeds)
        message = f"O{level} differs from O0 on\n{graph}\noptimized:\n{optimized}"
        assert len(actual) == len(expected), message
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and a.shape == e.shape, message
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-12, err_msg=message)
