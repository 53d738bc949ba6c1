"""Chunk tasks check what they get (issue 31): a block whose real shape or dtype differs
from what dask declared is an error naming the chunk, never a silently wrong reduction;
an error raised inside a chunk's task names the chunk's index and rows and keeps its
class and message, across worker processes too; chunk tasks have keys with their index."""

from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
from graphc.distributed import ChunkError, map_batches
from graphc.distributed.worker import ChunkSpec, Program, run_chunk

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")


def _score() -> gc.Graph:
    g = gc.Graph("score")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        w = gc.placeholder("w", shape=(3,), dtype="float64")
        gc.output(x @ w, name="y")
        gc.output(gc.mean(x @ w), name="m")
    return g


def _block(shape: tuple[int, ...], declared: tuple[int, ...], dtype: str = "float64") -> object:
    """A dask block whose task makes an array of `shape` and `dtype` while dask is told
    `declared` and float64 (as a from_delayed or map_blocks with a wrong shape would)."""
    made = dask.delayed(np.ones, pure=True)(shape, dtype)
    return da.from_delayed(made, shape=declared, dtype=np.float64)


def test_one_chunk_with_more_rows_than_declared_is_an_error_not_a_wrong_mean() -> None:
    x = _block((11, 3), declared=(10, 3))  # 11 rows for 10: the mean came out 3.3, not 3.0
    _, m = map_batches(_score(), x, np.ones(3))
    with pytest.raises(ChunkError, match=r"chunk 0 \(rows 0:10 of 10\)") as caught:
        m.compute(scheduler="sync")
    message = str(caught.value)
    assert "placeholder 'x'" in message and "(11, 3)" in message and "(10, 3)" in message
    assert isinstance(caught.value, gc.FeedError)


@pytest.mark.parametrize(
    ("shape", "dtype", "wrong"),
    [((11, 3), "float64", r"shape \(11, 3\)"), ((10, 4), "float64", r"shape \(10, 4\)")]
    + [((10, 3), "float32", "dtype float32")],
)
def test_a_bad_block_on_a_worker_process_names_its_chunk_and_placeholder(
    client: object, shape: tuple[int, ...], dtype: str, wrong: str
) -> None:
    x = da.concatenate([da.ones((10, 3), chunks=(5, 3)), _block(shape, (10, 3), dtype)])
    y, m = map_batches(_score(), x, np.ones(3))
    for out in (y, m):  # the per-row output and the reduction alike
        with pytest.raises(gc.FeedError, match=r"chunk 2 \(rows 10:20 of 20\)") as caught:
            out.compute()
        error = caught.value
        assert isinstance(error, ChunkError)
        assert (error.index, error.rows, error.cause) == (2, (10, 20), gc.FeedError)
        assert "placeholder 'x'" in str(error)
        assert re.search(wrong, str(error)), str(error)


def _lookup() -> gc.Graph:
    g = gc.Graph("lookup")
    with g:
        ids = gc.placeholder("ids", shape=("B",), dtype="int64")
        table = gc.placeholder("table", shape=(5, 2), dtype="float64")
        rows = gc.embedding(ids, table)
        gc.output(rows, name="rows")
        gc.output(gc.sum(rows), name="total")
    return g


def test_an_error_inside_a_chunk_keeps_its_class_and_message_across_processes(client) -> None:
    ids = np.arange(16) % 5
    ids[9] = 7  # out of range, in chunk 2 of chunks of 4 rows
    table = np.arange(10.0).reshape(5, 2)
    rows, total = map_batches(_lookup(), da.from_array(ids, chunks=4), table)
    with pytest.raises(gc.IndexRangeError) as caught:
        total.compute()
    error = caught.value
    assert isinstance(error, ChunkError) and isinstance(error, IndexError)
    assert (error.index, error.rows, error.cause) == (2, (8, 12), gc.IndexRangeError)
    message = str(error)
    assert message.startswith("chunk 2 (rows 8:12 of 16) of map_batches over graph 'lookup': ")
    assert "IndexRangeError: embedding: index 7 is out of range for 5 embeddings" in message
    with pytest.raises(ChunkError, match=r"chunk 2 \(rows 8:12 of 16\)"):
        rows.compute(scheduler="sync")  # dask's local scheduler raises the same


def test_callers_arrays_are_untouched_by_a_failed_chunk(client) -> None:
    ids = np.array([0, 1, 9, 2])
    before = ids.copy()
    with pytest.raises(ChunkError):
        map_batches(_lookup(), da.from_array(ids, chunks=2), np.zeros((5, 2)))[1].compute()
    np.testing.assert_array_equal(ids, before)


def test_chunk_tasks_have_keys_with_their_index() -> None:
    x = da.ones((10, 3), chunks=(4, 3))
    y, m = map_batches(_score(), x, np.ones(3))
    keys = [k for k in dict(m.__dask_graph__()) if isinstance(k, tuple) and len(k) == 2]
    chunk_keys = [k for k in keys if isinstance(k[0], str) and k[0].startswith("score_chunk-")]
    assert sorted(i for _, i in chunk_keys) == [0, 1, 2]
    assert len({name for name, _ in chunk_keys}) == 1
    assert float(m.compute(scheduler="sync")) == 3.0
    np.testing.assert_array_equal(y.compute(scheduler="sync"), np.full(10, 3.0))


def test_results_are_checked_against_the_shapes_the_graph_gives_the_chunk() -> None:
    g = _score()
    split_chunk = gc.Graph("score_chunk")
    with split_chunk:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        w = gc.placeholder("w", shape=(3,), dtype="float64")
        gc.output(x @ w, name="y")
    program = Program.of(split_chunk, 2, "numpy")
    blocks = ((0, "x", (4, 3), np.dtype("float64")),)
    good = ChunkSpec(g.name, 1, 4, 8, 12, blocks, (("y", (4,), np.dtype("float64")),))
    np.testing.assert_array_equal(run_chunk(program, good, np.ones((4, 3)), np.ones(3))[0], 3.0)
    bad = ChunkSpec(g.name, 1, 4, 8, 12, blocks, (("y", (5,), np.dtype("float64")),))
    with pytest.raises(gc.ShapeError, match=r"chunk 1 \(rows 4:8 of 12\).*output 'y'") as caught:
        run_chunk(program, bad, np.ones((4, 3)), np.ones(3))
    assert "shape (4,)" in str(caught.value) and "expected shape (5,)" in str(caught.value)


@pytest.mark.parametrize("chunks", [0, -3, 2.5, "big", True])
def test_chunks_must_be_a_row_count_auto_or_none(chunks: object) -> None:
    with pytest.raises(gc.GraphcError, match="chunks must be a number of rows >= 1, 'auto'"):
        map_batches(_score(), np.ones((4, 3)), np.ones(3), chunks=chunks)
