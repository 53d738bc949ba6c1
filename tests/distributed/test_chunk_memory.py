"""Chunks against the workers' memory limits (issue 31): a chunk too large for a worker
warns once, before anything runs; ``chunks="auto"`` takes the most rows whose chunk fits
half a worker thread's room (docs/distributed.md, "Memory limits").

The clusters here are in-process (threads), with dask's memory monitor off: map_batches
only reads their workers' limits, so the limits can be far below what this process
holds, and no worker process can be left behind."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.distributed import MemoryLimitWarning, map_batches, split_batch
from graphc.distributed.memory import (
    AUTO_SHARE,
    PROCESS_BYTES,
    ChunkMemory,
    pause_fraction,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

MIB = 2**20


@contextmanager
def cluster(memory_limit: str, threads: int = 1, default: bool = True) -> Iterator[Any]:
    """A Client of two in-process workers with `memory_limit` each, which never pause;
    `default=False`: a client that is not dask's default."""
    off = {
        f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")
    }
    with dask.config.set(off):  # read by the workers as they start
        local = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=threads,
            processes=False,
            dashboard_address=":0",
            memory_limit=memory_limit,
        )
    with local, distributed.Client(local, set_as_default=default) as client:
        yield client


def _mlp() -> gc.Graph:
    """examples/out_of_core.py's scoring MLP, float32: 32 features, 128 hidden, 10 classes."""
    g = gc.Graph("mlp_scores")
    with g:
        x = gc.placeholder("x", shape=("B", 32))
        w1 = gc.placeholder("w1", shape=(32, 128))
        w2 = gc.placeholder("w2", shape=(128, 10))
        logits = gc.relu(x @ w1) @ w2
        gc.output(gc.argmax(logits, axis=-1), name="predicted")
        gc.output(gc.mean(gc.softmax(logits, axis=-1), axis=0), name="mean_probs")
    return g


def _wide() -> gc.Graph:
    g = gc.Graph("wide")
    with g:
        x = gc.placeholder("x", shape=("B", 16), dtype="float64")
        w = gc.placeholder("w", shape=(16, 256), dtype="float64")
        v = gc.placeholder("v", shape=(256,), dtype="float64")
        h = gc.tanh(x @ w)
        gc.output(h @ v, name="y")
        gc.output(gc.mean(h, axis=0), name="column_means")
    return g


def _wide_feeds(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "x": rng.normal(size=(rows, 16)),
        "w": rng.normal(size=(16, 256)) / 4,
        "v": rng.normal(size=256),
    }


def _memory(g: gc.Graph, feeds: dict[str, Any], x: Any) -> ChunkMemory:
    free = {k: v for k, v in feeds.items() if k != "x"}
    return ChunkMemory(split_batch(g), 2, {"B": x.shape[0]}, free, {"x": x})


def test_a_chunk_too_large_for_the_workers_warns_once_before_anything_runs() -> None:
    # the finding: chunks of 100,000 rows under 200 MB workers paused both workers for
    # good, with no word from graphc
    params = {"w1": np.ones((32, 128), np.float32), "w2": np.ones((128, 10), np.float32)}
    x = da.zeros((200_000, 32), chunks=(100_000, 32), dtype=np.float32)  # never computed
    with cluster("200MB"), pytest.warns(MemoryLimitWarning) as record:
        map_batches(_mlp(), x, **params)
    assert len(record) == 1
    warning = record[0]
    assert warning.filename == __file__  # it points at the map_batches call
    text = str(warning.message)
    for part in (
        "a chunk of 100,000 rows needs about 65.6 MiB (plan 52.6 MiB",
        "memory limit of 190.7 MiB and 1 thread(s)",
        "stops running tasks at 80% of it (152.6 MiB)",
        f"its process ({PROCESS_BYTES / MIB:.1f} MiB)",
        "leave 24.6 MiB per thread",
        'chunks="auto" would take 18,',
    ):
        assert part in text, text
    with cluster("200MB"), warnings.catch_warnings():
        warnings.simplefilter("error", MemoryLimitWarning)
        map_batches(_mlp(), x, **params, chunks=10_000)  # 6.6 MiB a chunk: fits, silent


def test_the_workers_are_those_of_the_client_dask_computes_with() -> None:
    feeds = _wide_feeds(40_000)
    with cluster("165MiB", default=False) as client, warnings.catch_warnings():
        warnings.simplefilter("error", MemoryLimitWarning)
        map_batches(_wide(), **feeds)  # no default client: no limits known, no warning
        with client.as_current(), pytest.warns(MemoryLimitWarning, match="40,000 rows"):
            map_batches(_wide(), **feeds)  # the client dask.compute would use now


@pytest.mark.parametrize("threads", [1, 2])
def test_chunks_auto_takes_the_most_rows_within_half_a_threads_room(threads: int) -> None:
    feeds = _wide_feeds(5000)
    limit = 165 * MIB
    params = feeds["w"].nbytes + feeds["v"].nbytes
    room = (int(limit * pause_fraction() - PROCESS_BYTES - params)) // threads
    budget = int(room * AUTO_SHARE)
    with cluster(f"{limit}B", threads) as client, warnings.catch_warnings():
        warnings.simplefilter("error", MemoryLimitWarning)
        y, means = map_batches(_wide(), **feeds, chunks="auto")
        got = client.compute([y, means], sync=True)
    rows = y.chunks[0]
    assert len(rows) > 2 and len(set(rows[:-1])) == 1
    memory = _memory(_wide(), feeds, da.from_array(feeds["x"]))
    assert memory.at(rows[0]).total <= budget < memory.at(rows[0] + 1).total
    want = gc.compile(_wide())(**feeds)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-13)


def test_chunks_auto_without_a_cluster_keeps_rows_that_fit_this_machine_in_one_chunk() -> None:
    feeds = _wide_feeds(300)
    before = {k: v.copy() for k, v in feeds.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryLimitWarning)
        y, means = map_batches(_wide(), **feeds, chunks="auto")
    assert y.chunks == ((300,),)
    got = dask.compute(y, means, scheduler="sync")
    for a, b in zip(gc.compile(_wide())(**feeds), got):
        np.testing.assert_allclose(b, a, rtol=1e-10)
    for k, v in before.items():
        np.testing.assert_array_equal(feeds[k], v)


def test_input_blocks_larger_than_a_workers_room_warn_even_with_auto() -> None:
    feeds = _wide_feeds(40_000)  # 4.9 MiB of x in one block, over a room of 4 MiB
    x = da.from_array(feeds["x"], chunks=(40_000, 16))
    with cluster("165MiB"), pytest.warns(MemoryLimitWarning) as record:
        y, _ = map_batches(_wide(), x, feeds["w"], feeds["v"], chunks="auto")
    assert len(record) == 1
    text = str(record[0].message)
    assert "the batch inputs' own blocks of 40,000 rows, 4.9 MiB" in text, text
    assert f"cuts chunks of {y.chunks[0][0]:,} rows" in text
    assert "make the batch inputs' blocks at most" in text


def test_workers_without_room_for_any_chunk() -> None:
    feeds = _wide_feeds(100)
    # 80% of 150 MiB is less than a worker process running graphc takes
    with cluster("150MiB"):
        with pytest.raises(gc.GraphcError, match=r"chunks='auto' finds no memory for chunks"):
            map_batches(_wide(), **feeds, chunks="auto")
        with pytest.warns(MemoryLimitWarning, match="give the workers more memory"):
            map_batches(_wide(), **feeds, chunks=10)


def test_rows_within_is_the_largest_row_count_within_a_budget() -> None:
    feeds = _wide_feeds(10)
    memory = _memory(_wide(), feeds, da.from_array(feeds["x"]))
    for budget in (300_000, 3 * MIB + 12_345, 40 * MIB):
        rows = memory.rows_within(budget, 10**7)
        assert memory.at(rows).total <= budget < memory.at(rows + 1).total
    assert memory.rows_within(40 * MIB, 500) == 500  # all the rows fit
    assert memory.rows_within(10, 500) == 1  # nothing fits: one row, which check_chunk reports


def test_the_room_stops_where_dask_stops_a_worker() -> None:
    assert pause_fraction() == 0.8  # dask's default
    with dask.config.set({"distributed.worker.memory.pause": False}):
        assert pause_fraction() == 0.95  # then the nanny's terminate fraction
        with dask.config.set({"distributed.worker.memory.terminate": False}):
            assert pause_fraction() == 1.0
