"""runtime/tiers.py without a compiling backend: the builder thread's jobs."""

from __future__ import annotations

import threading

from graphc.runtime import tiers


def test_settle_waits_for_the_jobs_running_now_within_its_timeout() -> None:
    """tiers.settle (the tests' teardown): True once every queued or running job is over,
    False while one still runs past the timeout."""
    release = threading.Event()
    slow = tiers.Job(lambda: release.wait(30), lambda job: None)
    slow.start()
    assert tiers.settle(timeout=0.05) is False
    release.set()
    assert tiers.settle(timeout=30) is True and slow.finished.is_set()
