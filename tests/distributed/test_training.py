"""Data-parallel training on a LocalCluster equals single-process training (float64)."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.distributed import BatchSplitError, DataParallelStep

pytest.importorskip("distributed")

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
    runs = {}
    for how in ("single", "parallel"):
        model = _model()
        step = gc.compile_train_step(
            model, nn.CrossEntropyLoss(), make_optimizer(model.parameters()), (xs[0], ys[0])
        )
        if how == "parallel":
            step = DataParallelStep(step, client, chunks=3)
        losses = [float(step.step(xs[i], ys[i])) for i in range(STEPS)]
        runs[how] = (losses, step.parameters())
    (want, want_params), (got, got_params) = runs["single"], runs["parallel"]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert want[-1] < want[0]
    assert sorted(got_params) == sorted(want_params)
    for name in want_params:
        np.testing.assert_allclose(got_params[name], want_params[name], rtol=1e-10, atol=1e-14)


def test_sync_to_model_writes_the_trained_parameters_back(client) -> None:
    xs, ys = _batches()
    model = _model()
    before = model[0].weight.detach().numpy().copy()
    step = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1), (xs[0], ys[0])
    )
    parallel = DataParallelStep(step, client)
    assert parallel.chunks is None  # one chunk per worker
    for i in range(3):
        parallel.step(xs[i], ys[i])
    parallel.sync_to_model()
    after = model[0].weight.detach().numpy()
    assert not np.allclose(after, before)
    np.testing.assert_array_equal(after, parallel.parameters()["0.weight"])


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


def test_only_a_train_step_is_accepted(client) -> None:
    with pytest.raises(gc.GraphcError, match="expected the TrainStep"):
        DataParallelStep(gc.Graph("g"), client)


def test_parameters_go_to_the_workers_once_per_step(client, monkeypatch) -> None:
    """Guards "broadcast once per step, not re-pickled per chunk": each step scatters the
    parameters in one broadcast call, and each chunk task gets futures for them and
    only its own rows as arrays."""
    distributed = pytest.importorskip("distributed")
    xs, ys = _batches()
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (xs[0], ys[0]))
    parallel = DataParallelStep(step, client, chunks=4)
    scatters, submits = [], []
    real_scatter, real_submit = client.scatter, client.submit

    def scatter(data, **kwargs):
        scatters.append((len(data), kwargs.get("broadcast")))
        return real_scatter(data, **kwargs)

    def submit(fn, *args, **kwargs):
        submits.append(args)
        return real_submit(fn, *args, **kwargs)

    monkeypatch.setattr(client, "scatter", scatter)
    monkeypatch.setattr(client, "submit", submit)
    for i in range(3):
        parallel.step(xs[i], ys[i])
    parameters = len(parallel.state)
    assert scatters == [(parameters, True)] * 3
    assert len(submits) == 3 * 4
    rows = -(-xs.shape[1] // 4)
    for args in submits:
        futures = [a for a in args if isinstance(a, distributed.Future)]
        arrays = [a for a in args if isinstance(a, np.ndarray) and a.ndim]
        assert len(futures) == parameters + 1  # the parameters and the chunk program
        assert all(a.shape[0] <= rows for a in arrays), [a.shape for a in arrays]
