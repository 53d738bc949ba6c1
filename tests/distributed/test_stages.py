"""Graphs whose rows need statistics of the whole batch (x - mean(x) over the batch, a
variance, a standardization) run in passes over the data: their stages by structure,
and map_batches over them equal to numpy and torch."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.distributed import BatchSplitError, split_batch
from graphc.distributed.stages import split_stages

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


def _standardize() -> gc.Graph:
    g = gc.Graph("standardize")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        w = gc.placeholder("w", shape=(3,), dtype="float64")
        mean = gc.mean(x, axis=0)
        std = gc.sqrt(gc.mean((x - mean) ** 2, axis=0))
        z = (x - mean) / std
        gc.output(z * w, name="z")
        gc.output(gc.sum(z * z), name="total")  # a reduction of standardized rows: B * 3
        gc.output(mean, name="center")
    return g


def test_each_feedback_value_gets_the_pass_after_those_it_reads() -> None:
    g = _standardize()
    with pytest.raises(BatchSplitError, match="a reduction over the batch, with per-row"):
        split_batch(g)
    stages = split_stages(g)
    # the mean, then the standard deviation (its rows need the mean), then the outputs
    fed = [[g.node(name) for name in s.feeds.values()] for s in stages]
    assert [[n.op for n in nodes] for nodes in fed] == [["mean"], ["sqrt"], []]
    mean, std = fed[0][0].name, fed[1][0].name
    placeholders = [[p.name for p in s.split.graph.inputs] for s in stages]
    assert placeholders == [["x"], ["x", mean], ["x", "w", mean, std]]
    assert [o.name for o in stages[-1].split.graph.outputs] == ["z", "total", "center"]


def test_a_graph_without_feedback_is_one_stage() -> None:
    g = gc.Graph("plain")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.output(gc.mean(x * 2.0, axis=0), name="m")
    [stage] = split_stages(g)
    assert stage.feeds == {} and stage.split.graph is g


def test_what_no_pass_can_serve_is_still_refused() -> None:
    g = gc.Graph("sorted")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.output(gc.cumsum(x, axis=0), name="c")
    with pytest.raises(BatchSplitError, match="accumulates earlier rows"):
        split_stages(g)


def _numpy_standardize(x: np.ndarray, w: np.ndarray) -> tuple:
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    return z * w, np.sum(z * z), x.mean(axis=0)


@pytest.mark.parametrize("chunks", [5, 23])
def test_map_batches_standardizes_in_passes_as_numpy_does(chunks: int) -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(23, 3)) * [1.0, 10.0, 0.1] + [0.0, 5.0, -2.0]
    w = rng.normal(size=3)
    lazy = gc.distributed.map_batches(_standardize(), da.from_array(x, chunks=(chunks, 3)), w)
    got = dask.compute(*lazy, scheduler="sync")
    for a, b in zip(got, _numpy_standardize(x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    assert lazy[0].chunks[0] == da.from_array(x, chunks=(chunks, 3)).chunks[0]


def test_softmax_and_log_softmax_over_the_batch_equal_torchs() -> None:
    # one op each, refused by one split; spelled out as x - logsumexp(x) over the batch,
    # they are two passes (and the softmax over the other axis stays per row)
    torch = pytest.importorskip("torch")
    g = gc.Graph("batch_softmax")
    with g:
        x = gc.placeholder("x", shape=("B", 4), dtype="float64")
        gc.output(gc.softmax(x, axis=0), name="p")
        gc.output(gc.log_softmax(x, axis=0), name="logp")
        gc.output(gc.softmax(x, axis=1), name="rows")
        e = gc.exp(x - gc.max(x, axis=0))  # the same, by hand: the max, then the sum
        gc.output(e / gc.sum(e, axis=0), name="by_hand")
    # pass 1: the two logsumexps and the max; pass 2: the sum of exp(x - max); then rows
    assert [len(s.feeds) for s in split_stages(g)] == [3, 1, 0]
    x = np.random.default_rng(5).normal(size=(30, 4)) * 4
    lazy = gc.distributed.map_batches(g, da.from_array(x, chunks=(7, 4)))
    p, logp, rows, by_hand = dask.compute(*lazy, scheduler="sync")
    t = torch.tensor(x)
    np.testing.assert_allclose(p, torch.softmax(t, dim=0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(logp, torch.log_softmax(t, dim=0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(rows, torch.softmax(t, dim=1).numpy(), rtol=1e-12)
    np.testing.assert_allclose(by_hand, torch.softmax(t, dim=0).numpy(), rtol=1e-12)
