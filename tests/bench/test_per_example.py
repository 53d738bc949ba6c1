"""The per-example workload: its hand-written numpy gradients against a loop of
one-example gradients and against graphc's vmap(grad) graph, and issue 35's goals read
from a report."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.bench import goals
from graphc.bench import per_example as pe
from graphc.bench.core import BATCH_GRADIENT, DEFAULT, NotApplicableError


def _inputs(batch: int) -> tuple[np.ndarray, ...]:
    return pe._inputs({"batch": batch})["args"]


def test_numpy_per_example_gradients_are_a_loop_of_one_example_gradients() -> None:
    *params, x, y = _inputs(5)
    got = pe.numpy_gradients(*params, x, y, per_example=True)
    for i in range(len(x)):
        one = pe.numpy_gradients(*params, x[i : i + 1], y[i : i + 1], per_example=False)
        for g, w in zip(got, one):
            np.testing.assert_allclose(g[i], w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("per_example", [True, False])
def test_the_graph_agrees_with_the_hand_written_gradients(per_example: bool) -> None:
    args = _inputs(7)
    graph = pe._graph({"args": args}, per_example)
    got = gc.compile(graph, backend="numpy")(*args)
    want = pe.numpy_gradients(*args, per_example=per_example)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def _report(
    ours: float | None, batched: float | None, jax: float | None, other_case: float = 1e-9
) -> dict[str, Any]:
    def cell(median: float | None) -> dict[str, Any]:
        return {"status": "ok" if median else "unavailable", "median": median}

    cases = {
        pe.PER_EXAMPLE: {DEFAULT: cell(ours), BATCH_GRADIENT: cell(batched), "jax": cell(jax)},
        pe.BATCHED: {DEFAULT: cell(other_case)},  # timed in other rounds: not read
    }
    return {"workloads": {"per-example": {"cases": cases}}}


def test_the_batch_gradient_mode_times_the_batch_mean_gradient_beside_the_per_example_one() -> None:
    params = {"batch": 9, "per_example": True}
    inputs = pe.WORKLOAD.make_inputs(params)
    prepared = pe.WORKLOAD.builders[BATCH_GRADIENT](params, inputs)
    assert prepared.checked is False and "denominator" in prepared.note
    got = prepared.arrays(prepared.call())
    want = pe.numpy_gradients(*inputs["args"], per_example=False)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    with pytest.raises(NotApplicableError, match="own"):
        batched = {"batch": 9, "per_example": False}
        pe.WORKLOAD.builders[BATCH_GRADIENT](batched, pe.WORKLOAD.make_inputs(batched))


def test_goals_read_both_modes_of_the_per_example_case_and_the_peer() -> None:
    within, ahead = goals.per_example_goals(_report(1.2e-3, 1e-3, 1.4e-3))
    assert within.met is True and "1.20x" in within.measured
    assert ahead.met is True
    within, ahead = goals.per_example_goals(_report(2.6e-3, 1e-3, 2.0e-3))
    assert within.met is False and within.past == pytest.approx(2.0)
    assert ahead.met is False
    within, ahead = goals.per_example_goals(_report(1e-3, None, None))
    assert within.met is None and ahead.met is None
