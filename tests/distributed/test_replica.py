"""The replica's own rules, in one process without dask: replicas that step together
hold the same bits as one TrainStep's step; a fence stops a step that waits for its
peers and refuses every update of an older epoch; copies are exact."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.distributed import split_batch
from graphc.distributed.replica import (
    PeerLostError,
    Replica,
    ReplicaError,
    ReplicaSpec,
    Snapshot,
    StepRequest,
    fingerprint,
)


def _train_step() -> gc.TrainStep:
    model = nn.Sequential(
        nn.Linear(4, 8, dtype="float64", generator=3),
        nn.Tanh(),
        nn.Linear(8, 2, dtype="float64", generator=4),
    )
    x, y = _batch()
    # the mean over every target (gc.cross_entropy): nn.CrossEntropyLoss's over the targets
    # not ignored needs a count of the labels first (a statistics pass: test_training.py)
    return gc.compile_train_step(
        model, gc.cross_entropy, optim.Adam(model.parameters(), lr=0.01), (x, y)
    )


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(10, 4))
    return x, (x[:, 0] > 0).astype(np.int64)


class Peer:
    """Another replica as seen from a replica: its async methods, called directly (what
    the dask actor handle does over the network)."""

    def __init__(self, replica: Replica, answers: bool = True) -> None:
        self.replica, self.answers = replica, answers

    async def partials(self, *args: Any) -> Any:
        if not self.answers:
            await asyncio.sleep(3600)  # a peer whose worker is gone: no answer, ever
        return await self.replica.partials(*args)

    async def snapshot(self) -> Snapshot:
        return await self.replica.snapshot()


def _replicas(step: gc.TrainStep, n: int) -> list[Replica]:
    split = split_batch(step.graph)
    exe = step.executable
    spec = ReplicaSpec.of(split, exe.updates, exe.opt_level, exe.backend.name)
    return [Replica(spec, Snapshot(0, exe.state, None), f"r{i}") for i in range(n)]


def _pieces(step: gc.TrainStep, seed: int, chunks: int) -> tuple[list[dict], dict]:
    x, y = _batch(seed)
    sizes = split_batch(step.graph).size_values({"B": len(x)})
    xs, ys = np.array_split(x, chunks), np.array_split(y, chunks)
    return [{"x": a, "y": b} for a, b in zip(xs, ys)], sizes


def test_replicas_stepping_together_hold_the_single_process_bits() -> None:
    step = _train_step()
    a, b = _replicas(step, 2)

    async def run() -> list[np.ndarray]:
        losses = []
        for seed in range(3):
            rows, sizes = _pieces(step, seed, 3)
            mine_a = {0: rows[0], 2: rows[2]}
            mine_b = {1: rows[1]}
            pair = await asyncio.gather(
                a.step(StepRequest(0, seed, sizes, mine_a, (Peer(b),), 10.0, 3)),
                b.step(StepRequest(0, seed, sizes, mine_b, (Peer(a),), 10.0, 3)),
            )
            (loss_a, mark_a), (loss_b, mark_b) = pair
            assert loss_a.tobytes() == loss_b.tobytes() and mark_a == mark_b
            losses.append(loss_a)
        return losses

    losses = asyncio.run(run())
    want = [step.step(*_batch(seed)) for seed in range(3)]
    np.testing.assert_allclose(losses, want, rtol=1e-12)
    assert a.applied == b.applied == 3
    for name, value in step.executable.state.items():
        assert a.state[name].tobytes() == b.state[name].tobytes(), name
        np.testing.assert_allclose(a.state[name], value, rtol=1e-10, atol=1e-14)
    # the same chunks computed by one replica alone: the same bits again
    (alone,) = _replicas(_train_step(), 1)

    async def run_alone() -> None:
        for seed in range(3):
            rows, sizes = _pieces(step, seed, 3)
            await alone.step(StepRequest(0, seed, sizes, dict(enumerate(rows)), (), 10.0, 3))

    asyncio.run(run_alone())
    for name in a.state:
        assert alone.state[name].tobytes() == a.state[name].tobytes(), name
    for r in (a, b, alone):
        asyncio.run(r.close())


def test_a_fence_stops_a_step_waiting_for_a_lost_peer_and_nothing_is_applied() -> None:
    step = _train_step()
    a, b = _replicas(step, 2)
    before = {k: v.copy() for k, v in a.state.items()}

    async def run() -> None:
        rows, sizes = _pieces(step, 0, 2)
        waiting = asyncio.ensure_future(
            a.step(StepRequest(0, 0, sizes, {0: rows[0]}, (Peer(b, answers=False),), 60.0, 2))
        )
        while not ((0, 0) in a._slots and a._slots[0, 0].done()):
            await asyncio.sleep(0.01)  # until a has computed its chunk and waits for b's
        assert await a.fence(1) == (0, None)
        with pytest.raises(ReplicaError, match="fenced"):
            await waiting
        with pytest.raises(ReplicaError, match="epoch 0"):  # the old epoch's partials
            await a.partials(0, 0, 1.0)
        with pytest.raises(ReplicaError, match="epoch 0"):  # and its steps are refused
            await a.step(StepRequest(0, 0, sizes, {0: rows[0]}, (), 1.0, 2))
        with pytest.raises(ReplicaError, match="already in 1"):
            await a.fence(1)

    asyncio.run(run())
    assert a.applied == 0 and a.epoch == 1
    for name, value in before.items():
        assert a.state[name].tobytes() == value.tobytes()
    for r in (a, b):
        asyncio.run(r.close())


def test_a_peer_that_never_answers_times_out_with_a_named_error() -> None:
    step = _train_step()
    a, b = _replicas(step, 2)

    async def run() -> None:
        rows, sizes = _pieces(step, 0, 2)
        with pytest.raises(PeerLostError, match="within 0.2 s"):
            await a.step(StepRequest(0, 0, sizes, {0: rows[0]}, (Peer(b, answers=False),), 0.2, 2))

    asyncio.run(run())
    assert a.applied == 0
    for r in (a, b):
        asyncio.run(r.close())


def test_a_step_at_the_wrong_count_of_updates_is_refused() -> None:
    step = _train_step()
    (a,) = _replicas(step, 1)

    async def run() -> None:
        rows, sizes = _pieces(step, 0, 1)
        with pytest.raises(ReplicaError, match="update 6 in epoch 0, but the replica holds 0"):
            await a.step(StepRequest(0, 5, sizes, {0: rows[0]}, (), 1.0, 1))

    asyncio.run(run())
    asyncio.run(a.close())


def test_a_step_missing_a_chunks_partials_is_refused() -> None:
    """Partials of chunks 0 and 1 of a batch cut into 3 (a peer left out): no update is
    made from part of the batch."""
    step = _train_step()
    (a,) = _replicas(step, 1)

    async def run() -> None:
        rows, sizes = _pieces(step, 0, 3)
        mine = {0: rows[0], 1: rows[1]}
        with pytest.raises(ReplicaError, match=r"chunks \[0, 1\]; expected chunks 0 to 2"):
            await a.step(StepRequest(0, 0, sizes, mine, (), 10.0, 3))

    asyncio.run(run())
    assert a.applied == 0
    asyncio.run(a.close())


def test_copy_from_takes_the_state_updates_and_loss() -> None:
    step = _train_step()
    a, b = _replicas(step, 2)

    async def run() -> None:
        rows, sizes = _pieces(step, 0, 1)
        loss, _ = await a.step(StepRequest(0, 0, sizes, {0: rows[0]}, (), 10.0, 1))
        assert await b.copy_from(Peer(a), 3, 10.0) == 1
        assert b.epoch == 3 and b.applied == 1 and b.loss.tobytes() == loss.tobytes()

    asyncio.run(run())
    for name in a.state:
        assert b.state[name].tobytes() == a.state[name].tobytes()
    for r in (a, b):
        asyncio.run(r.close())


def test_the_fingerprint_tells_drifted_states_apart() -> None:
    state = _train_step().executable.state
    same = {name: value.copy() for name, value in state.items()}
    assert fingerprint(same) == fingerprint(state)
    name = sorted(state)[0]
    same[name] = same[name] * (1 + 1e-9)
    assert fingerprint(same) != fingerprint(state)
