"""Issue 31's goals on DataParallelStep read the `scale` workload's cells they name: the
overhead of a step on one worker beyond one process's (B=64), and two workers' time on
the 256-512-10 MLP against one process's. No test asserts a timing: these feed made-up
reports to the goal functions."""

from __future__ import annotations

from typing import Any

from graphc.bench import goals, scale
from graphc.bench.core import BASELINE

OVERHEAD = "scale: per-step overhead of DataParallelStep < 5 ms"
THROUGHPUT = (
    "scale: training 256-512-10 B=4096 on 2 workers >= 0.9x one process's throughput "
    "(time ratio <= 1.11x)"
)


def _cell(median: float) -> dict[str, Any]:
    return {"status": "ok", "median": median, "peak_bytes": None, "agrees": True}


def _found(cases: dict[str, Any]) -> dict[str, goals.Goal]:
    report = {"workloads": {"scale": {"cases": cases}}}
    return {g.text: g for g in goals.evaluate(report)}


def test_the_goals_read_the_step_cases() -> None:
    found = _found(
        {
            scale.STEP_OVERHEAD_CASE: {BASELINE: _cell(0.2e-3), scale.ONE: _cell(4.0e-3)},
            scale.STEP_LARGE_CASE: {BASELINE: _cell(0.200), scale.TWO: _cell(0.220)},
        }
    )
    assert found[OVERHEAD].met is True
    assert "3.8" in found[OVERHEAD].measured  # 4.0 ms less 0.2 ms
    assert found[THROUGHPUT].met is True  # 0.220 <= 0.200 / 0.9
    assert "1.10x" in found[THROUGHPUT].measured


def test_the_goals_are_missed_past_their_limits() -> None:
    found = _found(
        {
            scale.STEP_OVERHEAD_CASE: {BASELINE: _cell(0.2e-3), scale.ONE: _cell(6.0e-3)},
            scale.STEP_LARGE_CASE: {BASELINE: _cell(0.200), scale.TWO: _cell(0.230)},
        }
    )
    assert found[OVERHEAD].met is False
    assert found[THROUGHPUT].met is False  # 0.230 > 0.222


def test_the_goals_are_not_measured_without_their_cells() -> None:
    found = _found({scale.STEP_OVERHEAD_CASE: {BASELINE: _cell(0.2e-3)}})
    assert found[OVERHEAD].met is None and found[OVERHEAD].measured == "not measured"
    assert found[THROUGHPUT].met is None
