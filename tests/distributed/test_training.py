"""Data-parallel training on a LocalCluster equals single-process training (float64), with
the parameters and optimizer state kept in a replica per worker."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.distributed import BatchSplitError, ChunkError, DataParallelStep, split_batch
from graphc.distributed.replica import ReplicaError
from graphc.distributed.training import StepTimeoutError

distributed = pytest.importorskip("distributed")

STEPS = 20


def _model(extra: object = None) -> nn.Module:
    layers = [nn.Linear(6, 16, dtype="float64", generator=1), nn.Tanh()]
    if extra is not None:
        layers.append(extra)
    layers.append(nn.Linear(16, 3, dtype="float64", generator=2))
    return nn.Sequential(*layers)


def _batches() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(STEPS, 37, 6))
    return xs, np.argmax(xs @ rng.normal(size=(6, 3)), axis=-1)  # labels a model can learn


def _step(make_optimizer=lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), loss=None) -> gc.TrainStep:
    xs, ys = _batches()
    model = _model()
    loss = nn.CrossEntropyLoss() if loss is None else loss
    return gc.compile_train_step(model, loss, make_optimizer(model.parameters()), (xs[0], ys[0]))


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.Adam(ps, lr=0.01),
    ],
    ids=["sgd-momentum", "adam"],
)
def test_twenty_steps_equal_single_process_training(client, make_optimizer) -> None:
    xs, ys = _batches()
    single = _step(make_optimizer)
    want = [float(single.step(xs[i], ys[i])) for i in range(STEPS)]
    with DataParallelStep(_step(make_optimizer), client, chunks=3) as parallel:
        got = [float(parallel.step(xs[i], ys[i])) for i in range(STEPS)]
        got_params = parallel.parameters()
        states = parallel.states()
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert want[-1] < want[0]
    want_params = single.parameters()
    assert sorted(got_params) == sorted(want_params)
    for name in want_params:
        np.testing.assert_allclose(got_params[name], want_params[name], rtol=1e-10, atol=1e-14)
    # every replica holds the same bits, optimizer state included, and that state is the
    # single process's (momentum buffers, Adam's moments and step count)
    assert len(states) == 2
    first, second = states.values()
    want_state = single.executable.state
    assert sorted(first) == sorted(want_state) == sorted(second)
    for name in want_state:
        assert first[name].tobytes() == second[name].tobytes(), name
        np.testing.assert_allclose(first[name], want_state[name], rtol=1e-9, atol=1e-14)


def test_sync_to_model_writes_the_trained_parameters_back(client) -> None:
    xs, ys = _batches()
    step = _step()
    model = step.model
    before = model[0].weight.detach().numpy().copy()
    with DataParallelStep(step, client) as parallel:
        assert parallel.chunks == 2  # one chunk per worker at the start
        for i in range(3):
            parallel.step(xs[i], ys[i])
        parallel.sync_to_model()
        after = model[0].weight.detach().numpy()
        assert not np.allclose(after, before)
        np.testing.assert_array_equal(after, parallel.parameters()["0.weight"])
        assert parallel.applied == 3


def test_a_batch_smaller_than_the_chunks(client) -> None:
    """A batch of fewer rows than chunks gives some replicas no rows: they still take
    the others' partials and apply the same update."""
    xs, ys = _batches()
    single = _step()
    with DataParallelStep(_step(), client, chunks=4) as parallel:
        for x, y in ((xs[0], ys[0]), (xs[1][:1], ys[1][:1]), (xs[2][:3], ys[2][:3])):
            np.testing.assert_allclose(parallel.step(x, y), single.step(x, y), rtol=1e-10)
        first, second = parallel.states().values()
    for name, value in single.executable.state.items():
        assert first[name].tobytes() == second[name].tobytes()
        np.testing.assert_allclose(first[name], value, rtol=1e-10, atol=1e-14)


def test_a_nan_in_the_batch_is_a_nan_loss_not_a_drift(client) -> None:
    """A nan reaches every replica's parameters alike, so their fingerprints are nan: the
    replicas agree (nan != nan must not read as a drift) and the step's loss is nan, as
    in one process; the next steps go on from that state the same way."""
    xs, ys = _batches()
    x = xs[0].copy()
    x[5, 2] = np.nan
    single = _step()
    with DataParallelStep(_step(), client) as parallel:
        for batch in ((x, ys[0]), (xs[1], ys[1])):
            want, got = single.step(*batch), parallel.step(*batch)
            assert np.isnan(want) and np.isnan(got)
        assert parallel.applied == 2


def test_an_error_in_a_chunk_names_the_chunk_and_is_not_retried_as_a_lost_worker(client) -> None:
    """A label out of range fails one replica's chunk; its peer then fails for want of
    that chunk's partials, and may answer first. The caller gets the chunk's own error
    (its class kept, its chunk and rows named) at once, not a WorkerLostError after
    retrying a step that can never succeed; the next step runs as in one process. (The
    loss is gc.cross_entropy, a mean over every target: nn.CrossEntropyLoss's count of
    the targets not ignored finds the label on the driver, the test below.)"""
    xs, ys = _batches()
    bad = ys[0].copy()
    # 3 classes; rows 13:25 are chunk 1 of 3 (np.array_split of 37 rows), dealt to the
    # second replica: the first one's call, which the driver waits on first, fails as
    # its peer's echo
    bad[20] = 7
    single = _step(loss=gc.cross_entropy)
    with DataParallelStep(_step(loss=gc.cross_entropy), client, chunks=3, retries=1) as parallel:
        with pytest.raises(gc.IndexRangeError, match="label 7") as caught:
            parallel.step(xs[0], bad)
        assert isinstance(caught.value, ChunkError)
        assert caught.value.index == 1 and caught.value.rows == (13, 25)
        assert str(caught.value).startswith("chunk 1 (rows 13:25 of 37) of step 1")
        assert parallel.applied == 0
        np.testing.assert_allclose(parallel.step(xs[0], ys[0]), single.step(xs[0], ys[0]))


def test_a_label_out_of_range_is_refused_by_the_driver_before_a_chunk_goes_out(client) -> None:
    """nn.CrossEntropyLoss's mean divides by the count of the targets not ignored, which
    the driver computes from the whole batch's labels (one_hot's, which checks them):
    a label out of range is one_hot's error there, before any row is sent, and the next
    step runs as in one process."""
    xs, ys = _batches()
    bad = ys[0].copy()
    bad[20] = 7
    single = _step()
    with DataParallelStep(_step(), client, chunks=3, retries=1) as parallel:
        with pytest.raises(gc.IndexRangeError, match="label 7 is out of range") as caught:
            parallel.step(xs[0], bad)
        assert not isinstance(caught.value, ChunkError)
        assert parallel.applied == 0
        np.testing.assert_allclose(parallel.step(xs[0], ys[0]), single.step(xs[0], ys[0]))


@pytest.mark.parametrize("ignored", [1, -100])
def test_a_loss_over_the_rows_not_ignored_trains_as_in_one_process(client, ignored: int) -> None:
    """Cross entropy with weight, ignore_index and label_smoothing, or with torch's
    defaults and padding labels of -100, divides by the weight (or count) of the rows
    not ignored, a sum over the batch its gradient spreads over the rows: one split
    refuses it. Those statistics read the labels only, so the driver computes them from
    the whole batch and sends them with the batch's sizes."""
    xs, ys = _batches()
    ys = ys.copy()
    ys[:, ::4] = ignored  # ignored rows in every chunk

    def loss() -> nn.Module:
        if ignored == -100:
            return nn.CrossEntropyLoss()
        return nn.CrossEntropyLoss(
            weight=np.array([1.0, 2.0, 0.5]), ignore_index=1, label_smoothing=0.2
        )

    def step() -> gc.TrainStep:
        model = _model()
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return gc.compile_train_step(model, loss(), opt, (xs[0], ys[0]))

    single = step()
    with pytest.raises(BatchSplitError, match="sum over the batch"):
        split_batch(single.graph)
    with DataParallelStep(step(), client, chunks=3) as parallel:
        for i in range(4):
            np.testing.assert_allclose(parallel.step(xs[i], ys[i]), single.step(xs[i], ys[i]))
        got = parallel.parameters()
    for name, value in single.parameters().items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-14)


def test_batch_norm_training_statistics_are_refused(client) -> None:
    xs, ys = _batches()
    model = _model(nn.BatchNorm1d(16, dtype="float64"))
    step = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1), (xs[0], ys[0])
    )
    with pytest.raises(BatchSplitError, match="reduction over the batch"):
        DataParallelStep(step, client)


def test_dropout_masks_along_the_batch_are_refused(client) -> None:
    xs, ys = _batches()
    model = _model(nn.Dropout(0.5))
    step = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1), (xs[0], ys[0])
    )
    with pytest.raises(BatchSplitError, match="random|position"):
        DataParallelStep(step, client)


def test_bad_chunks_and_batches_are_refused_before_anything_is_sent(client) -> None:
    xs, ys = _batches()
    with pytest.raises(gc.GraphcError, match="chunks must be at least 1, got 0"):
        DataParallelStep(_step(), client, chunks=0)
    # not at the first step, as a chunk's error of every replica's compile
    with pytest.raises(gc.GraphcError, match="unknown backend 'nope'"):
        DataParallelStep(_step(), client, backend="nope")
    with DataParallelStep(_step(), client) as parallel:
        with pytest.raises(gc.FeedError, match="'y'"):
            parallel.step(xs[0], ys[0][:-1])  # one label short
        with pytest.raises(gc.FeedError, match="'x'"):
            parallel.step(xs[0].astype(np.float32), ys[0])
        assert parallel.applied == 0
        parallel.step(xs[0], ys[0])  # and nothing was left half done
        assert parallel.applied == 1


def test_only_a_train_step_is_accepted(client) -> None:
    with pytest.raises(gc.GraphcError, match="expected the TrainStep"):
        DataParallelStep(gc.Graph("g"), client)


def test_only_rows_go_out_and_only_the_loss_comes_back(client, monkeypatch) -> None:
    """Guards "the state lives on the workers": a step sends each replica its chunks'
    rows (and the batch's sizes, scalars), never a parameter; no task, scatter or gather
    goes through the scheduler; each replica answers with the 0-d loss only."""
    xs, ys = _batches()
    with DataParallelStep(_step(), client, chunks=4) as parallel:
        sent, answers = [], []
        real_call = parallel._call

        class Recorded:
            def __init__(self, call):
                self.call = call

            def result(self, timeout=None):
                value = self.call.result(timeout=timeout)
                answers.append(value)
                return value

            def done(self):
                return self.call.done()

        def call(address, method, *args):
            sent.append((method, args))
            return Recorded(real_call(address, method, *args))

        def through_the_scheduler(*args, **kwargs):
            raise AssertionError("a step went through the scheduler")

        monkeypatch.setattr(parallel, "_call", call)
        for name in ("submit", "map", "scatter", "gather", "compute"):
            monkeypatch.setattr(client, name, through_the_scheduler)
        for i in range(3):
            parallel.step(xs[i], ys[i])
        monkeypatch.undo()
    assert [method for method, _ in sent] == ["step"] * 6  # a call per replica per step
    rows = -(-xs.shape[1] // 4)
    for _, (request,) in sent:
        # the batch's sizes and the count of its labels (cross entropy's mean), no rows
        assert all(np.size(v) == 1 for v in request.sizes.values())
        assert len(request.rows) == 2 and len(request.peers) == 1  # 4 chunks, 2 replicas
        for arrays in request.rows.values():
            assert sorted(arrays) == ["x", "y"]
            assert all(a.shape[0] <= rows for a in arrays.values())
    assert len(answers) == 6
    for loss, fingerprint in answers:  # the loss, and a float to compare the replicas' states
        assert isinstance(loss, np.ndarray) and loss.ndim == 0
        assert isinstance(fingerprint, float)


def test_a_step_past_its_timeout_raises_and_the_next_call_settles(client) -> None:
    """No wait blocks forever: a step that does not finish within `timeout` raises
    StepTimeoutError naming the replicas it waited for. The replicas may have applied
    it meanwhile: the next call fences them and carries on from the state they agree on
    (with a warning when that includes the step that raised)."""
    xs, ys = _batches()
    single = _step()
    with DataParallelStep(_step(), client) as parallel:
        parallel.step(xs[0], ys[0])
        single.step(xs[0], ys[0])
        # a timeout no step can meet: with 1e-4 s, one loaded run's step returned without
        # raising (the replicas' own waits for partials share the timeout, and one that
        # expires is a lost peer, retried)
        parallel.timeout = 1e-9
        with pytest.raises(StepTimeoutError, match="did not finish within 1e-09 s"):
            parallel.step(xs[1], ys[1])
        parallel.timeout = 60.0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            parallel.step(xs[2], ys[2])
        if parallel.applied == 3:  # the step that timed out had been applied
            assert any("had been applied" in str(w.message) for w in caught)
            single.step(xs[1], ys[1])
        else:
            assert parallel.applied == 2
        single.step(xs[2], ys[2])
        got = parallel.parameters()
        first, second = parallel.states().values()
    for name, value in single.parameters().items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10)
    for name in first:
        assert first[name].tobytes() == second[name].tobytes()


def test_replicas_too_slow_to_fence_are_slow_not_lost(client) -> None:
    """After a timed-out step the next call fences the replicas first. A fence that does
    not finish within `timeout` is a StepTimeoutError like the step's, and the replicas
    are kept: it used to drop every one of them and report the state lost."""
    xs, ys = _batches()
    with DataParallelStep(_step(), client) as parallel:
        parallel.step(xs[0], ys[0])
        parallel.timeout = 1e-4
        for _ in range(3):
            with pytest.raises(StepTimeoutError, match="did not finish within 0.0001 s"):
                parallel.step(xs[1], ys[1])
        parallel.timeout = 60.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an update applied before its step timed out
            parallel.step(xs[2], ys[2])
        assert 2 <= parallel.applied <= 5
        first, second = parallel.states().values()
    for name in first:
        assert first[name].tobytes() == second[name].tobytes()


def test_replicas_that_disagree_are_reported(client) -> None:
    """The replicas report their loss and a fingerprint of their new state each step: a
    replica whose state differs (here: given another run's parameters) is an error. Its
    loss alone would not show it: every replica's loss comes from the same partials."""
    xs, ys = _batches()
    faster = _step(lambda ps: optim.SGD(ps, lr=0.5, momentum=0.9))
    with DataParallelStep(_step(), client) as parallel, DataParallelStep(faster, client) as other:
        parallel.step(xs[0], ys[0])
        other.step(xs[0], ys[0])
        address = list(parallel._replicas)[1]
        parallel._replicas[address].copy_from(
            other._replicas[address], parallel.epoch, 30.0
        ).result(timeout=30)
        with pytest.raises(ReplicaError, match="states after step 2 differ"):
            parallel.step(xs[1], ys[1])


def test_close_drops_the_replicas(client) -> None:
    """close() releases every replica's actor, so the workers forget it and its state."""
    parallel = DataParallelStep(_step(), client)
    keys = [f.key for f in parallel._actors.values()]
    assert all(client.who_has(keys).values())
    parallel.close()
    assert "0 replica(s)" in repr(parallel)
    deadline = time.monotonic() + 10
    while any(client.who_has(keys).values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(client.who_has(keys).values())
    xs, ys = _batches()
    with pytest.raises(gc.GraphcError, match="closed"):
        parallel.step(xs[0], ys[0])
    with pytest.raises(gc.GraphcError, match="closed"):
        parallel.parameters()


def test_a_scheduled_lr_reaches_the_replicas_every_step(client) -> None:
    """An lr scheduler made before compiling feeds each step's lr (TrainStep's
    placeholders): data-parallel steps read it as one process's do (they raised
    KeyError 'lr'), and a constant hyperparameter changed later is refused as there."""
    xs, ys = _batches()

    def scheduled() -> tuple[gc.TrainStep, optim.lr_scheduler.StepLR]:
        model = _model()
        opt = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
        schedule = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        step = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (xs[0], ys[0]))
        return step, schedule

    single, single_schedule = scheduled()
    want = []
    for i in range(6):
        want.append(float(single.step(xs[i], ys[i])))
        single_schedule.step()
    step, schedule = scheduled()
    with DataParallelStep(step, client, chunks=3) as parallel:
        got = []
        for i in range(6):
            got.append(float(parallel.step(xs[i], ys[i])))
            schedule.step()
        np.testing.assert_allclose(got, want, rtol=1e-10)
        step.optimizer.param_groups[0]["momentum"] = 0.5
        with pytest.raises(optim.StaleTrainStepError, match="momentum"):
            parallel.step(xs[6], ys[6])


@pytest.mark.slow  # 4 s; test_split's recurrent cases check the split in the quick run
def test_a_recurrent_model_trains_as_in_one_process(client) -> None:
    """A GRU's backward scan sums its weight gradients over the steps: each chunk's sums
    are partials merged by sum (the split refused every scan before)."""

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(6, 8, batch_first=True, dtype="float64", generator=3)
            self.head = nn.Linear(8, 3, dtype="float64", generator=4)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    xs, ys = _batches()
    xs = xs.reshape(STEPS, 37, 2, 3).repeat(2, axis=3)  # (steps, batch, time 2, features 6)

    def step() -> gc.TrainStep:
        model = Model()
        return gc.compile_train_step(
            model, nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=0.01), (xs[0], ys[0])
        )

    single = step()
    want = [float(single.step(xs[i], ys[i])) for i in range(5)]
    with DataParallelStep(step(), client, chunks=3) as parallel:
        got = [float(parallel.step(xs[i], ys[i])) for i in range(5)]
        got_params = parallel.parameters()
    np.testing.assert_allclose(got, want, rtol=1e-10)
    for name, value in single.parameters().items():
        np.testing.assert_allclose(got_params[name], value, rtol=1e-9, atol=1e-13)
