"""map_batches on dask: equal to the single-process executable, lazily, on dask's local
scheduler and on a LocalCluster of two processes; plans compiled once per worker."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.distributed import BatchSplitError, ChunkError, map_batches
from tests.budget import draws
from tests.distributed.batch_graphs import batch_feeds, batch_graphs

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")


def _tuple(out: object) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _dask_feeds(g: gc.Graph, feeds: dict, chunks: int) -> dict:
    """Batch inputs as dask arrays chunked along the batch; parameters as numpy."""
    return {
        p.name: da.from_array(feeds[p.name], chunks=(chunks, *feeds[p.name].shape[1:]))
        if "B" in p.type.shape
        else feeds[p.name]
        for p in g.inputs
    }


def _check(g: gc.Graph, rows: int, chunks: int, **compute: object) -> None:
    feeds = batch_feeds(g, rows)
    want = _tuple(gc.compile(g)(**feeds))
    lazy = _tuple(map_batches(g, **_dask_feeds(g, feeds, chunks)))
    assert all(isinstance(x, da.Array) for x in lazy)
    got = dask.compute(*lazy, **compute)
    for o, a, b in zip(g.outputs, want, got):
        assert b.shape == a.shape and b.dtype == a.dtype, o.name
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-13, err_msg=f"{o.name}\n{g}")


ROWS_AND_CHUNKS = [(23, 5), (23, 23), (6, 1), (23, 40), (0, 4)]  # uneven, one, size 1, empty


@settings(max_examples=draws(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch_graphs(), st.sampled_from(ROWS_AND_CHUNKS))
def test_random_graphs_on_the_local_scheduler(g: gc.Graph, rows_chunks: tuple) -> None:
    rows, chunks = rows_chunks
    if rows == 0 and any(n.op in ("max", "min") for n in g.op_nodes):
        return  # no extremum of an empty batch, in one process either
    _check(g, rows, chunks, scheduler="sync")


@settings(max_examples=draws(20))
@given(batch_graphs(gradients=True), st.sampled_from(ROWS_AND_CHUNKS[:3]))
def test_random_gradients_on_threads(g: gc.Graph, rows_chunks: tuple) -> None:
    _check(g, *rows_chunks, scheduler="threads")


@settings(
    max_examples=draws(8),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batch_graphs(), st.sampled_from(ROWS_AND_CHUNKS[:4]))
def test_random_graphs_on_a_local_cluster(client: object, g: gc.Graph, rows_chunks: tuple) -> None:
    _check(g, *rows_chunks)


def _mlp() -> gc.Graph:
    g = gc.Graph("mlp")
    with g:
        x = gc.placeholder("x", shape=("B", 6), dtype="float64")
        y = gc.placeholder("y", shape=("B",), dtype="int64")
        w1 = gc.placeholder("w1", shape=(6, 16), dtype="float64")
        w2 = gc.placeholder("w2", shape=(16, 3), dtype="float64")
        logits = gc.relu(x @ w1) @ w2
        gc.output(gc.cross_entropy(logits, y), name="loss")
        gc.output(gc.softmax(logits, axis=-1), name="probs")
    return gc.gradients(g, wrt=["w1", "w2"], outputs=["loss"])


def _mlp_feeds(rows: int) -> dict:
    rng = np.random.default_rng(1)
    return {
        "x": rng.normal(size=(rows, 6)),
        "y": rng.integers(0, 3, rows),
        "w1": rng.normal(size=(6, 16)) / 3,
        "w2": rng.normal(size=(16, 3)) / 4,
    }


def test_an_executable_over_a_cluster_equals_it_and_compiles_once_per_worker(client) -> None:
    from graphc.distributed import worker

    client.run(worker.clear_cache)
    g = _mlp()
    exe = gc.compile(g, backend="numpy")
    feeds = _mlp_feeds(1000)
    want = exe(**feeds)
    x = da.from_array(feeds["x"], chunks=(90, 6))
    y = da.from_array(feeds["y"], chunks=90)
    got = dask.compute(*map_batches(exe, x, y, feeds["w1"], feeds["w2"]))
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-10)
    infos = client.run(worker.cache_info)
    # 12 chunk tasks, the merges and the combine over two workers: each compiled each
    # program it ran once, with one plan per chunk shape (90 rows and the last 10)
    for info in infos.values():
        assert info["compiles"] == len(info["programs"]) <= 3
        chunk_plans = [n for key, n in info["programs"].items() if "_chunk-" in key]
        assert all(n <= 2 for n in chunk_plans)
    assert sum(len(i["programs"]) for i in infos.values()) >= 3


def test_passes_over_the_data_on_a_cluster(client) -> None:
    # x - mean(x) over the batch: the mean is a first pass's result, a delayed value
    # every chunk of the second pass receives on its worker
    g = gc.Graph("centered")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.output(gc.sum((x - gc.mean(x, axis=0)) ** 2, axis=0), name="scatter")
    x = np.random.default_rng(6).normal(size=(50, 3))
    got = map_batches(g, da.from_array(x, chunks=(12, 3))).compute()
    np.testing.assert_allclose(got, np.sum((x - x.mean(axis=0)) ** 2, axis=0), rtol=1e-12)


def test_numpy_batch_inputs_are_chunked_and_outputs_stay_lazy() -> None:
    g = _mlp()
    feeds = _mlp_feeds(50)
    out = map_batches(g, **feeds, chunks=7)
    loss, probs = out[0], out[1]
    assert probs.chunks[0] == (7,) * 7 + (1,)
    assert loss.shape == () and probs.shape == (50, 3)
    np.testing.assert_allclose(
        loss.compute(scheduler="sync"), gc.compile(g)(**feeds)[0], rtol=1e-12
    )


def test_inputs_chunked_differently_are_aligned() -> None:
    g = _mlp()
    feeds = _mlp_feeds(40)
    x = da.from_array(feeds["x"], chunks=(13, 3))
    y = da.from_array(feeds["y"], chunks=7)
    got = dask.compute(*map_batches(g, x, y, feeds["w1"], feeds["w2"]), scheduler="sync")
    for a, b in zip(gc.compile(g)(**feeds), got):
        np.testing.assert_allclose(b, a, rtol=1e-10)


def test_empty_blocks_of_a_filtered_array_make_no_chunks() -> None:
    # x[mask] with compute_chunk_sizes() leaves blocks of no rows; a chunk of them would
    # ask max for the extremum of nothing, where the whole batch has one
    g = gc.Graph("extrema")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.output(gc.max(x, axis=0), name="top")
        gc.output(gc.min(x), name="bottom")
        gc.output(x * 2.0, name="twice")
    values = np.random.default_rng(3).normal(size=(12, 3))
    x = da.from_array(values, chunks=4)
    kept = x[x[:, 0] > np.sort(values[:, 0])[-3]]  # the last 2 rows by the first column
    kept.compute_chunk_sizes()
    assert 0 in kept.chunks[0]
    rows = values[values[:, 0] > np.sort(values[:, 0])[-3]]
    top, bottom, twice = dask.compute(*map_batches(g, kept), scheduler="sync")
    np.testing.assert_array_equal(top, rows.max(axis=0))
    assert bottom == rows.min()
    np.testing.assert_array_equal(twice, rows * 2.0)


def test_callers_arrays_are_not_modified() -> None:
    g = _mlp()
    feeds = _mlp_feeds(30)
    copies = {k: v.copy() for k, v in feeds.items()}
    dask.compute(*map_batches(g, **feeds, chunks=4), scheduler="sync")
    for k in feeds:
        np.testing.assert_array_equal(feeds[k], copies[k])


def test_an_unsplittable_graph_raises_before_anything_runs() -> None:
    g = gc.Graph("gram")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.output(x @ gc.transpose(x, (1, 0)), name="gram")
    with pytest.raises(BatchSplitError, match=r"node 'matmul' \(op matmul\)"):
        map_batches(g, da.ones((8, 3), chunks=4))


def test_feed_mistakes_name_the_placeholder() -> None:
    g = _mlp()
    feeds = _mlp_feeds(10)
    with pytest.raises(gc.FeedError, match="placeholder 'x' expects dtype float64"):
        map_batches(g, **{**feeds, "x": feeds["x"].astype(np.float32)})
    with pytest.raises(gc.FeedError, match="missing"):
        map_batches(g, x=feeds["x"])
    with pytest.raises(gc.FeedError, match="placeholder 'y'.*symbolic dim B is 9"):
        map_batches(g, **{**feeds, "y": feeds["y"][:9]})


@pytest.mark.parametrize(
    ("options", "message"),
    [({"backend": "nope"}, "unknown backend 'nope'"), ({"opt_level": 7}, "got 7")],
)
def test_a_bad_backend_or_opt_level_is_refused_before_anything_runs(options, message) -> None:
    # each worker's compile refused them, once per chunk, as if a chunk had failed
    with pytest.raises(gc.GraphcError, match=message) as info:
        map_batches(_mlp(), **_mlp_feeds(10), chunks=4, **options)
    assert not isinstance(info.value, ChunkError)


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")
def test_an_executables_check_numerics_holds_in_its_chunks() -> None:
    # map_batches took an Executable's graph, opt level and backend, and dropped its
    # check_numerics: the nan its plan refuses came back as a result
    g = gc.Graph("logs")
    with g:
        x = gc.placeholder("x", shape=("B",), dtype="float64")
        gc.output(gc.log(x), name="y")
        gc.output(gc.sum(gc.log(x)), name="total")
    x = np.array([1.0, 2.0, -1.0, 3.0])
    exe = gc.compile(g, check_numerics=True)
    with pytest.raises(gc.NumericsError, match="node 'log'"):
        exe(x)
    with pytest.raises(gc.NumericsError, match=r"^chunk 1 \(rows 2:4 of 4\).*node 'log'"):
        dask.compute(*map_batches(exe, x, chunks=2), scheduler="sync")
    # a Graph: off (on numpy, so that y is numpy's log bit for bit: native's log is
    # within its declared bound of it, tests/backends/test_native_ulp.py)
    results = map_batches(g, x, chunks=2, backend="numpy")
    y, total = dask.compute(*results, scheduler="sync")
    np.testing.assert_array_equal(y, np.log(x))
    assert np.isnan(total)


def test_a_python_list_feeds_a_batch_input_as_it_feeds_the_executable() -> None:
    # the executable takes a list of floats for a float32 placeholder (nothing is lost);
    # map_batches read it as float64 and refused it
    g = gc.Graph("f32")
    with g:
        x = gc.placeholder("x", shape=("B", 2), dtype="float32")
        gc.output(gc.sum(x * x, axis=1), name="y")
    rows = [[1.0, 2.0], [3.0, 4.5], [0.5, -1.0]]
    got = map_batches(g, rows, chunks=2).compute(scheduler="sync")
    want = np.sum(np.square(np.asarray(rows, np.float32)), axis=1)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    with pytest.raises(gc.FeedError, match="placeholder 'x' expects dtype float32"):
        map_batches(g, np.asarray(rows))  # an array of another dtype is still refused


@pytest.mark.slow  # a child interpreter importing graphc
def test_graphc_imports_without_dask_and_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['dask'] = None; sys.modules['distributed'] = None\n"
        "import graphc, graphc.distributed as gd\n"
        "assert 'dask.array' not in sys.modules\n"
        "g = graphc.Graph('g')\n"
        "with g:\n"
        "    x = graphc.placeholder('x', shape=('B',))\n"
        "    _ = graphc.output(x * 2, name='y')\n"
        "print(gd.split_batch(g))\n"
        "try:\n"
        "    gd.map_batches(g, [1.0])\n"
        "except graphc.GraphcError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "BatchSplit of 'g'" in out.stdout
    assert 'pip install "graphc[dask]"' in out.stdout
    plain = subprocess.run(
        [sys.executable, "-c", "import sys, graphc; print('dask' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert plain.stdout.strip() == "False"
