"""Timing and memory of one prepared call.

Timing follows `timeit`: after a warm-up call, estimate the time of one call, then run
`repeats` repeats of a loop of `number` calls each (`number` makes a repeat last a
few milliseconds, so microsecond-scale calls are not lost in timer resolution), and
report the median, min and max time per call. `repeats` is chosen from the time
budget, between a floor and a ceiling. Expensive single-shot calls (compiling a long
chain) are not looped, and when one call eats most of the budget the first call is
the only sample.

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
from dataclasses import dataclass
from typing import Any


@dataclass
class Timing:
    """Seconds per call over `repeats` repeats of `number` calls each."""

    median: float
    min: float
    max: float
    repeats: int
    number: int


def _loop(call: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        call()
    return time.perf_counter() - start


def measure(
    call: Callable[[], Any],
    budget: float,
    *,
    first: float,
    min_repeats: int = 5,
    max_repeats: int = 50,
    repeat_seconds: float = 0.005,
    single_shot: bool = False,
) -> Timing:
    """Time `call`, already warmed up by a first call that took `first` seconds.

    Spends about `budget` seconds (more if the floor of repeats needs it).
    """
    if single_shot:
        if first > budget / 3:
            return Timing(first, first, first, 1, 1)
        repeats = max(1, min(max_repeats, int(budget / max(first, 1e-9))))
        samples = [_loop(call, 1) for _ in range(max(repeats, 3))]
        return _timing(samples, 1)
    number, elapsed = 1, first
    while elapsed < 2e-4:  # autorange: a loop long enough to time reliably
        number *= 10
        elapsed = _loop(call, number)
    per_call = elapsed / number
    number = max(1, math.ceil(repeat_seconds / per_call))
    repeats = int(budget / max(per_call * number, 1e-9))
    repeats = max(min_repeats, min(max_repeats, repeats))
    samples = [_loop(call, number) / number for _ in range(repeats)]
    return _timing(samples, number)


def _timing(samples: list[float], number: int) -> Timing:
    return Timing(statistics.median(samples), min(samples), max(samples), len(samples), number)


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
