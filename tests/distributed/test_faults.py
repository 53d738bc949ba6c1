"""A worker dies in the middle of a map: dask reruns the lost tasks on a fresh worker
process (which compiles the graph again from its JSON text) and the result is exact."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from graphc.distributed import map_batches

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

ROWS, CHUNK, KILLED_BLOCK = 400, 25, 9


def rows_of(block: np.ndarray, marker: str, block_info: dict | None = None) -> np.ndarray:
    """The batch's rows, made on the workers; one block kills its worker the first time."""
    (start, stop), _ = block_info[None]["array-location"]
    if block_info[None]["chunk-location"][0] == KILLED_BLOCK and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os._exit(1)  # the worker process dies mid-map, holding finished chunks' results
    time.sleep(0.02)
    return np.random.default_rng(start).normal(size=(stop - start, 6))


def _graph() -> gc.Graph:
    g = gc.Graph("score")
    with g:
        x = gc.placeholder("x", shape=("B", 6), dtype="float64")
        w = gc.placeholder("w", shape=(6, 4), dtype="float64")
        h = gc.tanh(x @ w)
        gc.output(h, name="h")
        gc.output(gc.mean(h, axis=0), name="column_means")
        gc.output(gc.logsumexp(h[:, 0], axis=0), name="first_lse")
    return g


def test_a_killed_worker_is_replaced_and_the_result_is_still_exact(client, tmp_path) -> None:
    marker = str(tmp_path / "killed")
    w = np.random.default_rng(7).normal(size=(6, 4))
    template = da.zeros((ROWS, 6), chunks=(CHUNK, 6))
    x = template.map_blocks(rows_of, marker, dtype=np.float64)
    before = set(client.scheduler_info()["workers"])
    got = dask.compute(*map_batches(_graph(), x, w))
    assert os.path.exists(marker), "no worker was killed"
    assert int(Path(marker).read_text()) not in client.run(os.getpid).values()
    assert set(client.scheduler_info()["workers"]) != before  # the nanny started a new one
    xs = np.concatenate(
        [np.random.default_rng(s).normal(size=(CHUNK, 6)) for s in range(0, ROWS, CHUNK)]
    )
    want = gc.compile(_graph())(xs, w)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-10)
