"""The `scale` workload's clusters: only the running case's are up while it is timed, and
the training workers keep glibc's allocator defaults even after another cluster's
nanny has left MALLOC_TRIM_THRESHOLD_ in this process's environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from graphc.bench import scale


class _Closable:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(self.name)


@pytest.fixture
def clusters() -> Iterator[dict[tuple, Any]]:
    """scale._clusters, emptied for the test and restored afterwards."""
    saved = dict(scale._clusters)
    scale._clusters.clear()
    yield scale._clusters
    scale._clusters.clear()
    scale._clusters.update(saved)


def test_a_case_keeps_only_its_own_clusters(clusters: dict[tuple, Any]) -> None:
    log: list[str] = []
    keys = [("infer", 1, True, None), ("infer", 2, True, None), ("train", 1), ("train", 2)]
    for key in keys:
        clusters[key] = _Closable(log, f"cluster {key}"), _Closable(log, f"client {key}")
    step = scale._case_clusters({"kind": "step", "rows": 64, "chunk": 32})
    assert step == {("train", 1), ("train", 2)}
    scale._retire(step)
    assert set(clusters) == step
    # each closed cluster's client first, then the cluster itself
    assert log == [f"{what} {key}" for key in keys[:2] for what in ("client", "cluster")]
    infer = scale._case_clusters({"kind": "infer", "rows": 10, "chunk": 5, "queuing": False})
    assert infer == {("infer", 1, False, None), ("infer", 2, False, None)}
    scale._retire(infer)
    assert clusters == {}


def test_training_workers_do_not_inherit_a_nannys_trim_threshold(
    clusters: dict[tuple, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr(scale, "_USERS_TRIM", None)
    monkeypatch.setenv(scale.TRIM, "65536")  # as an earlier nanny leaves it here
    c = scale.training_client(1)
    try:
        seen = c.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        assert list(seen.values()) == [None]
        assert os.environ[scale.TRIM] == "65536"  # this process's own is put back
    finally:
        scale._retire(set())
