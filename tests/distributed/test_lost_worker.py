"""A worker holding a replica dies mid-training (its process killed with SIGKILL): the
step is run again on the survivors, or taken from a survivor that had applied it, and
training ends with the same bits as a run without the failure (same chunks, summed in
the same order). A worker that comes back gets a copy of a survivor's replica."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.distributed import DataParallelStep
from graphc.distributed.replica import StepRequest
from graphc.distributed.training import WorkerLostError
from tests.distributed.clusters import local_cluster

distributed = pytest.importorskip("distributed")

STEPS, CHUNKS, KILL_AT = 8, 4, 4


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Its own cluster of two worker processes: these tests kill them (their nannies
    start new ones). Its client is not the default one, as in the benchmark: the
    replicas' handles must use the client they were given."""
    with local_cluster(set_as_default=False) as client:
        yield client


@pytest.fixture
def two_workers(client: Any) -> Any:
    client.wait_for_workers(2, timeout=60)
    deadline = time.monotonic() + 60
    while len(_running(client)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    return client


def _running(client: Any) -> list[str]:
    workers = client.scheduler_info()["workers"]
    return sorted(a for a, info in workers.items() if info.get("status") == "running")


def _kill(client: Any, address: str) -> None:
    """SIGKILL the worker process at `address` and wait until the scheduler drops it."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while address in client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.05)


def _batches() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(STEPS, 45, 6))
    return xs, np.argmax(xs @ rng.normal(size=(6, 3)), axis=-1)


def _train_step() -> gc.TrainStep:
    model = nn.Sequential(
        nn.Linear(6, 16, dtype="float64", generator=1),
        nn.Tanh(),
        nn.Linear(16, 3, dtype="float64", generator=2),
    )
    xs, ys = _batches()
    opt = optim.Adam(model.parameters(), lr=0.01)
    return gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (xs[0], ys[0]))


@pytest.fixture(scope="module")
def reference(client: Any) -> tuple[list[bytes], dict[str, np.ndarray]]:
    """Losses and final state of the run without a failure, and a check that it is the
    single-process training up to the rounding of summing in chunks."""
    client.wait_for_workers(2, timeout=60)
    xs, ys = _batches()
    single = _train_step()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS) as parallel:
        losses = [parallel.step(xs[i], ys[i]) for i in range(STEPS)]
        state = parallel.states()
    want = [single.step(xs[i], ys[i]) for i in range(STEPS)]
    np.testing.assert_allclose(losses, want, rtol=1e-10)
    first = next(iter(state.values()))
    for name, value in single.executable.state.items():
        np.testing.assert_allclose(first[name], value, rtol=1e-9, atol=1e-14)
    return [loss.tobytes() for loss in losses], first


def _assert_same_bits(
    parallel: DataParallelStep, losses: list[np.ndarray], reference: tuple
) -> None:
    want_losses, want_state = reference
    assert [loss.tobytes() for loss in losses] == want_losses
    assert parallel.applied == STEPS
    states = parallel.states()
    assert states
    for state in states.values():
        for name, value in want_state.items():
            assert state[name].tobytes() == value.tobytes(), name
    parallel.parameters()  # read from a replica into the driver's TrainStep
    for name, value in parallel.train_step.executable.state.items():
        assert value.tobytes() == want_state[name].tobytes(), name


def _wrap_calls(parallel: DataParallelStep, monkeypatch: Any, on_call: Any) -> list[tuple]:
    """Route every call to a replica through `on_call(address, method, future)`, which
    returns the future the driver waits on; returns the log of (applied, address,
    method)."""
    log: list[tuple] = []
    real = parallel._call

    def call(address: str, method: str, *args: Any) -> Any:
        log.append((parallel.applied, address, method))
        return on_call(address, method, real(address, method, *args))

    monkeypatch.setattr(parallel, "_call", call)
    return log


def test_a_worker_killed_between_steps(two_workers, reference) -> None:
    client = two_workers
    xs, ys = _batches()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS) as parallel:
        losses = [parallel.step(xs[i], ys[i]) for i in range(KILL_AT)]
        victim = list(parallel._replicas)[1]
        _kill(client, victim)
        losses += [parallel.step(xs[i], ys[i]) for i in range(KILL_AT, STEPS)]
        assert victim not in parallel._replicas
        _assert_same_bits(parallel, losses, reference)


@pytest.mark.slow  # a cluster of its own; the quick run keeps a kill between steps
def test_a_worker_killed_while_its_step_is_in_flight(two_workers, reference, monkeypatch) -> None:
    client = two_workers
    xs, ys = _batches()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS) as parallel:
        victim = list(parallel._replicas)[1]

        def kill_after_sending(address: str, method: str, future: Any) -> Any:
            if method == "step" and address == victim and parallel.applied == KILL_AT:
                _kill(client, victim)
            return future

        log = _wrap_calls(parallel, monkeypatch, kill_after_sending)
        losses = [parallel.step(xs[i], ys[i]) for i in range(STEPS)]
        assert (KILL_AT, victim, "step") in log
        assert any(method == "fence" for _, _, method in log)
        monkeypatch.undo()
        _assert_same_bits(parallel, losses, reference)


class LostAnswer:
    """The future of a call whose answer died with its worker: never done."""

    def result(self, timeout: float | None = None) -> Any:
        time.sleep(min(timeout or 0.1, 0.1))
        raise TimeoutError

    def done(self) -> bool:
        return False


@pytest.mark.slow  # a cluster of its own
def test_a_step_a_survivor_applied_is_not_run_again(two_workers, reference, monkeypatch) -> None:
    """The victim dies after both replicas applied the step but before its answer came
    back: the survivor's fence reports the update applied, so the driver returns its
    loss without running the step again (which would apply the batch twice)."""
    client = two_workers
    xs, ys = _batches()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS) as parallel:
        survivor, victim = list(parallel._replicas)

        def lose_the_answer(address: str, method: str, future: Any) -> Any:
            if method == "step" and address == victim and parallel.applied == KILL_AT:
                future.result(timeout=60)  # the victim applied it...
                handle = parallel._replicas[survivor]
                while handle.snapshot().result(timeout=60).applied == KILL_AT:
                    time.sleep(0.01)  # ...and so did the survivor
                _kill(client, victim)
                return LostAnswer()
            return future

        log = _wrap_calls(parallel, monkeypatch, lose_the_answer)
        losses = [parallel.step(xs[i], ys[i]) for i in range(STEPS)]
        monkeypatch.undo()
        steps = [(applied, method) for applied, _, method in log if method == "step"]
        assert steps.count((KILL_AT, "step")) == 2  # sent once to each replica, not re-run
        _assert_same_bits(parallel, losses, reference)


def test_a_replica_behind_the_others_is_brought_forward(two_workers, reference) -> None:
    """One replica applied a step the other did not (its partials were all computed by
    the first: the same bits as dealt between two): settling copies the advanced state,
    with a warning, since the driver had not seen that step complete."""
    client = two_workers
    xs, ys = _batches()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS) as parallel:
        losses = [parallel.step(xs[i], ys[i]) for i in range(KILL_AT)]
        ahead, behind = list(parallel._replicas)
        rows, sizes = parallel._pieces(xs[KILL_AT], ys[KILL_AT])
        handle = parallel._replicas[ahead]
        alone = StepRequest(
            parallel.epoch, parallel.applied, sizes, dict(enumerate(rows)), (), 60.0, len(rows)
        )
        losses.append(handle.step(alone).result(timeout=60)[0])
        parallel._unsettled = True  # as after a step that raised
        with pytest.warns(RuntimeWarning, match=f"update {KILL_AT + 1}.*had been applied"):
            losses.append(parallel.step(xs[KILL_AT + 1], ys[KILL_AT + 1]))
        losses += [parallel.step(xs[i], ys[i]) for i in range(KILL_AT + 2, STEPS)]
        assert set(parallel._replicas) == {ahead, behind}
        _assert_same_bits(parallel, losses, reference)


@pytest.mark.slow  # a cluster of its own
def test_a_restarted_worker_gets_a_copy_of_a_survivors_replica(two_workers, reference) -> None:
    client = two_workers
    xs, ys = _batches()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS, rescan_every=0.0) as parallel:
        losses = [parallel.step(xs[i], ys[i]) for i in range(KILL_AT)]
        victim = list(parallel._replicas)[1]
        _kill(client, victim)
        losses.append(parallel.step(xs[KILL_AT], ys[KILL_AT]))
        client.wait_for_workers(2, timeout=60)
        deadline = time.monotonic() + 60
        while len(_running(client)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        losses += [parallel.step(xs[i], ys[i]) for i in range(KILL_AT + 1, STEPS)]
        assert len(parallel._replicas) == 2 and victim not in parallel._replicas
        assert set(parallel._replicas) == set(_running(client))
        _assert_same_bits(parallel, losses, reference)


def test_losing_every_replica_raises_worker_lost(two_workers) -> None:
    client = two_workers
    xs, ys = _batches()
    with DataParallelStep(_train_step(), client, chunks=CHUNKS) as parallel:
        parallel.step(xs[0], ys[0])
        for address in list(parallel._replicas):
            _kill(client, address)
        with pytest.raises(WorkerLostError, match="every worker holding a replica was lost"):
            parallel.step(xs[1], ys[1])
