"""Timing and memory of prepared calls.

Timing follows `timeit`: after a warm-up call, estimate the time of one call, choose
`number` so that one repeat (a loop of `number` calls) lasts a few milliseconds —
microsecond-scale calls are then not lost in timer resolution — and choose `repeats`
from the time budget, between a floor and a ceiling. Expensive single-shot calls
(compiling a long chain) are not looped, and when one call eats most of the budget
the warm-up call is the only sample.

The machine is shared, so its load drifts during a run. `interleave` therefore
takes the repeats of all modes of one case in a few rounds (a block of repeats of
each mode per round) rather than mode after mode, so a burst of load slows every
mode a little instead of one mode a lot. Each block starts with untimed warm-up
calls, for `warmup_seconds`: switching libraries leaves caches cold and the last
library's threads spinning (OpenBLAS's own worker busy-waits about 0.1 s after its
last call on this machine, graphc's OpenMP workers about 0.5 ms; on 2 cores that takes
half the machine from the next mode), and a training loop never sees that switch. The warm-up
calls are busy ones: idling instead lets this virtual machine's cores go cold, and
the calls after an idle pause measured up to twice as slow.

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
    warmup: int = 1  # untimed calls before each block of repeats
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
    warmup_seconds: float = 0.02,
    single_shot: bool = False,
) -> Schedule:
    """Plan the timing of `call`, warmed up by a first call that took `first` seconds.

    The plan spends about `budget` seconds (more if the floor of repeats needs it).
    """
    if single_shot:
        if first > budget / 3:
            return Schedule(call, 1, 1, 0, [first])
        repeats = max(1, min(max_repeats, int(budget / max(first, 1e-9))))
        return Schedule(call, 1, max(repeats, 3), 0)
    # the first call may have compiled or allocated: estimate from warm calls
    number = 1
    elapsed = _loop(call, 1) if first < 0.5 else first
    while elapsed < 2e-4:  # autorange: a loop long enough to time reliably
        number *= 10
        elapsed = _loop(call, number)
    per_call = elapsed / number
    number = max(1, math.ceil(repeat_seconds / per_call))
    repeats = int(budget / max(per_call * number, 1e-9))
    warmup = max(1, math.ceil(warmup_seconds / per_call))  # 1 when a call outlasts it
    return Schedule(call, number, max(min_repeats, min(max_repeats, repeats)), warmup)


def interleave(schedules: list[Schedule], rounds: int = 3) -> None:
    """Take every schedule's repeats in `rounds` rounds: per round, per schedule, warm-up
    calls and then a block of its remaining repeats divided by the rounds left."""
    for left in range(rounds, 0, -1):
        for s in schedules:
            missing = s.repeats - len(s.samples)
            if missing <= 0 or s.error is not None:
                continue
            try:
                _loop(s.call, s.warmup)
                for _ in range(math.ceil(missing / left)):
                    s.samples.append(_loop(s.call, s.number) / s.number)
            except Exception as exc:  # reported by the caller; the other modes go on
                s.error = exc


def measure(call: Callable[[], Any], budget: float, *, first: float, **options: Any) -> Timing:
    """Time one call on its own: `schedule`, then its repeats."""
    plan = schedule(call, budget, first=first, **options)
    interleave([plan], rounds=1)
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
