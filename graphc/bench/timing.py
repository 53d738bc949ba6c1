"""Timing and memory of prepared calls.

Timing follows `timeit`: after a warm-up call, estimate the time of one call, choose
`number` so that one repeat (a loop of `number` calls) lasts a few milliseconds —
microsecond-scale calls are then not lost in timer resolution — and choose `repeats`
from the time budget, between a floor and a ceiling. Expensive single-shot calls
(compiling a long chain) are not looped, and when one call eats most of the budget
the warm-up call is the only sample.

The machine is shared, so its load drifts during a run. `interleave` therefore
takes the repeats of all modes of one case in rounds (one repeat of each mode per
round) rather than mode after mode: a burst of load then slows every mode a little
instead of one mode a lot, and the ratios between modes stay meaningful.

Peak memory is `tracemalloc`'s peak over one call made after the timing runs
(numpy reports its buffers to tracemalloc), so it counts temporaries and returned
arrays but not what existed before the call; the caller adds memory the mode keeps
between calls.
"""

from __future__ import annotations

import math
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timing:
    """Seconds per call over `repeats` repeats of `number` calls each."""

    median: float
    min: float
    max: float
    repeats: int
    number: int


@dataclass
class Schedule:
    """How one call is timed: `repeats` loops of `number` calls; samples so far."""

    call: Callable[[], Any]
    number: int
    repeats: int
    samples: list[float] = field(default_factory=list)  # seconds per call
    error: Exception | None = None  # a call that raised stops this schedule

    def timing(self) -> Timing:
        s = self.samples
        return Timing(statistics.median(s), min(s), max(s), len(s), self.number)


def _loop(call: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        call()
    return time.perf_counter() - start


def schedule(
    call: Callable[[], Any],
    budget: float,
    *,
    first: float,
    min_repeats: int = 5,
    max_repeats: int = 50,
    repeat_seconds: float = 0.005,
    single_shot: bool = False,
) -> Schedule:
    """Plan the timing of `call`, warmed up by a first call that took `first` seconds.

    The plan spends about `budget` seconds (more if the floor of repeats needs it).
    """
    if single_shot:
        if first > budget / 3:
            return Schedule(call, 1, 1, [first])
        repeats = max(1, min(max_repeats, int(budget / max(first, 1e-9))))
        return Schedule(call, 1, max(repeats, 3))
    number, elapsed = 1, first
    while elapsed < 2e-4:  # autorange: a loop long enough to time reliably
        number *= 10
        elapsed = _loop(call, number)
    per_call = elapsed / number
    number = max(1, math.ceil(repeat_seconds / per_call))
    repeats = int(budget / max(per_call * number, 1e-9))
    return Schedule(call, number, max(min_repeats, min(max_repeats, repeats)))


def interleave(schedules: list[Schedule]) -> None:
    """Take every schedule's repeats, one repeat of each per round, until all are done."""
    while True:
        pending = [s for s in schedules if len(s.samples) < s.repeats and s.error is None]
        if not pending:
            return
        for s in pending:
            try:
                s.samples.append(_loop(s.call, s.number) / s.number)
            except Exception as exc:  # reported by the caller; the other modes go on
                s.error = exc


def measure(call: Callable[[], Any], budget: float, *, first: float, **options: Any) -> Timing:
    """Time one call on its own: `schedule`, then its repeats."""
    plan = schedule(call, budget, first=first, **options)
    interleave([plan])
    if plan.error is not None:
        raise plan.error
    return plan.timing()


def peak_bytes(call: Callable[[], Any]) -> int:
    """Peak bytes traced by tracemalloc during one call, its return value included."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return max(0, peak - base)
