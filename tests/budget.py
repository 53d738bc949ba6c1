"""How much of the generated tests a run takes.

`python -m pytest` is the quick run: every test file, but a sample of the generated
cases and a twentieth of the hypothesis draws (and tests/conftest.py keeps the first case
of each parametrized test). `python -m pytest --full` (what CI
runs) takes every case, every draw and the tests marked slow. The sample is the same
in every quick run (chosen by a stable hash of the case's id), and it always keeps the
first cases of each op, so no op goes untested.
"""

from __future__ import annotations

import os
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

FULL_ENV = "GRAPHC_TESTS"  # "full": set by `--full` (tests/conftest.py)


def full() -> bool:
    """Whether this run takes every generated case (`--full`)."""
    return os.environ.get(FULL_ENV) == "full"


def draws(n: int) -> int:
    """Hypothesis's `max_examples` for a test that takes `n` draws in the full run."""
    return n if full() else max(3, n // 20)


def sample(
    items: Iterable[T],
    key: Callable[[T], Any] = lambda item: item.op,
    ident: Callable[[T], str] = lambda item: item.id,
    first: int = 1,
    one_in: int = 5,
) -> list[T]:
    """`items`, or in the quick run the first `first` of each `key` (an op) and about
    one in `one_in` of the rest, chosen by a hash of `ident` (stable across runs)."""
    items = list(items)
    if full():
        return items
    seen: Counter = Counter()
    kept = []
    for item in items:
        k = key(item)
        seen[k] += 1
        if seen[k] <= first or zlib.crc32(ident(item).encode()) % one_in == 0:
            kept.append(item)
    return kept


def pairs(firsts: Iterable[Any], seconds: Iterable[Any]) -> list[tuple[Any, Any]]:
    """Every (first, second) pair, or in the quick run each first once, with the seconds
    taken in turn (every layout once, the dtypes alternating)."""
    firsts, seconds = list(firsts), list(seconds)
    if full():
        return [(a, b) for a in firsts for b in seconds]
    return [(a, seconds[k % len(seconds)]) for k, a in enumerate(firsts)]
