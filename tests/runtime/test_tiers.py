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


def test_explains_line_follows_the_job_from_waiting_to_built() -> None:
    """A job not handed to the builder waits for the first call's end; one handed to it
    but not taken up yet is queued (explain() right after a first call said the kernels
    still waited for that call to return); then it builds, then it is in."""
    release, taken = threading.Event(), threading.Event()
    ahead = tiers.Job(lambda: (taken.set(), release.wait(30)), lambda job: None)
    job = tiers.Job(lambda: "code", lambda job: None)
    assert "they start when the first call returns" in job.describe()
    ahead.start()
    assert taken.wait(30)  # the builder is busy with `ahead`
    job.start()
    assert job.describe() == "tier: numpy, while the native kernels wait for the builder (queued)"
    release.set()
    assert job.wait(30)
    assert job.describe().startswith("tier: native, swapped in after a background build of")
