"""Issue 31's map_batches goal reads the `scale` workload's out-of-core case: 1 GiB through
two 200 MB workers with chunks="auto" finishes. No test runs the case (it starts
clusters and writes 1 GiB): these feed made-up reports to the goal and check the case's
declaration."""

from __future__ import annotations

from typing import Any

from graphc.bench import goals, scale
from graphc.bench.core import BASELINE

TEXT = "scale: out of core 1 GiB, 200 MB workers (chunks='auto') finishes"


def _goal(cell: dict[str, Any] | None) -> goals.Goal:
    cases = {} if cell is None else {scale.OUT_OF_CORE: {scale.TWO: cell}}
    found = {g.text: g for g in goals.evaluate({"workloads": {"scale": {"cases": cases}}})}
    return found[TEXT]


def test_a_finished_run_meets_the_goal_and_shows_its_note() -> None:
    note = "chunks='auto': 501 chunks of about 16,744 rows; largest worker's ..."
    goal = _goal({"status": "ok", "median": 41.5, "note": note})
    assert goal.met is True
    assert "41.5 s" in goal.measured and note in goal.measured


def test_a_stalled_or_failed_run_misses_it() -> None:
    goal = _goal({"status": "error", "reason": "TimeoutError: not finished in 600 s: stalled"})
    assert goal.met is False and "stalled" in goal.measured


def test_without_the_case_it_is_not_measured() -> None:
    assert _goal(None).met is None
    assert _goal({"status": "skipped", "reason": "--quick"}).met is None


def test_the_case_is_a_gib_through_200_mb_workers_with_auto_chunks() -> None:
    case = next(c for c in scale.WORKLOAD.cases if c.label == scale.OUT_OF_CORE)
    params = case.params
    assert params["rows"] * scale.FEATURES * 4 == 2**30
    assert params["chunks"] == "auto" and params["memory_limit"] == "200MB"
    assert not case.quick and set(case.skip_modes) == {BASELINE, scale.ONE}
