"""Every registered op survives text, JSON and networkx round trips, and still computes.

Parametrized over the registry with the shared case table (tests/op_cases.py), so a
new op without a case fails here instead of going untested.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import graphc as gc
from graphc.ir.registry import all_ops
from tests.op_cases import build_graph, cases_for

ROUND_TRIPS: dict[str, Callable[[gc.Graph], gc.Graph]] = {
    "text": lambda g: gc.parse(str(g)),
    "json": lambda g: gc.from_json(gc.to_json(g)),
    "networkx": lambda g: gc.from_networkx(gc.to_networkx(g)),
}


@pytest.mark.parametrize("op", sorted(all_ops()))
@pytest.mark.parametrize("how", list(ROUND_TRIPS))
def test_op_round_trip(op: str, how: str) -> None:
    cases = cases_for(op)
    assert cases, f"op '{op}' has no case in tests/op_cases.py: add one"
    for case in cases:
        g = build_graph(case)
        assert any(n.op == op for n in g), f"case {case.id} builds no '{op}' node:\n{g}"
        gc.verify(g)
        g2 = ROUND_TRIPS[how](g)
        gc.verify(g2)
        assert str(g2) == str(g), f"{case.id}:\n{g}\n---\n{g2}"
        feeds = {f"x{i}": x for i, x in enumerate(case.inputs(seed=0))}
        (expected,), (got,) = gc.run(g, feeds), gc.run(g2, feeds)
        assert got.dtype == expected.dtype and got.shape == expected.shape, case.id
        np.testing.assert_array_equal(got, expected, err_msg=f"{case.id}:\n{g}")
