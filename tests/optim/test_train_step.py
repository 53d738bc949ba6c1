"""compile_train_step: one compiled graph trains exactly like the eager loop, in place."""

from __future__ import annotations

import doctest
import re
import tracemalloc

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.optim import train_step
from tests.conftest import needs_torch, torch

OPTIMIZERS = [
    (optim.SGD, dict(lr=0.1)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5)),
    (optim.Adam, dict(lr=0.01, weight_decay=1e-3)),
]


def mlp(seed: int = 0, dtype: str = "float64") -> nn.Module:
    return nn.Sequential(
        nn.Linear(6, 8, dtype=dtype, generator=seed),
        nn.Tanh(),
        nn.Linear(8, 3, dtype=dtype, generator=seed + 1),
    )


def data(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6))
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5)


def batches(x: np.ndarray, y: np.ndarray, size: int, steps: int):
    """Cycle through the data; the last batch of each pass is smaller (n % size)."""
    starts = list(range(0, len(x), size))
    for t in range(steps):
        s = starts[t % len(starts)]
        yield x[s : s + size], y[s : s + size]


def eager_train(model, opt, loss_fn, x, y, size: int, steps: int) -> list[float]:
    losses = []
    for xb, yb in batches(x, y, size, steps):
        opt.zero_grad()
        loss = loss_fn(model(ge.from_numpy(xb)), ge.from_numpy(yb))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def params(model: nn.Module) -> dict[str, np.ndarray]:
    return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize(("make", "settings"), OPTIMIZERS, ids=str)
@pytest.mark.parametrize("opt_level", [0, 2])
def test_static_training_equals_eager_training(make, settings: dict, opt_level: int) -> None:
    x, y = data()
    loss_fn = nn.CrossEntropyLoss()
    eager_model, static_model = mlp(), mlp()
    eager_opt = make(eager_model.parameters(), **settings)
    static_opt = make(static_model.parameters(), **settings)
    step = gc.compile_train_step(static_model, loss_fn, static_opt, (x[:16], y[:16]), opt_level)

    eager_losses = eager_train(eager_model, eager_opt, loss_fn, x, y, 16, 9)
    static_losses = [float(step.step(xb, yb)) for xb, yb in batches(x, y, 16, 9)]
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-10)
    assert static_losses[-1] < static_losses[0]
    before = params(static_model)
    step.sync_to_model()
    for name, value in params(eager_model).items():
        np.testing.assert_allclose(params(static_model)[name], value, rtol=1e-10)
        assert not np.array_equal(before[name], value)  # the model saw the training
    for eager_state, static_state in zip(eager_opt.state, static_opt.state):
        for key, value in eager_state.items():
            np.testing.assert_allclose(static_state[key].numpy(), value.numpy(), rtol=1e-10)


def test_training_continues_eagerly_after_sync_and_statically_after_load() -> None:
    x, y = data()
    loss_fn = nn.CrossEntropyLoss()
    a, b = mlp(), mlp()
    opt_a, opt_b = optim.Adam(a.parameters(), lr=0.02), optim.Adam(b.parameters(), lr=0.02)
    step = gc.compile_train_step(b, loss_fn, opt_b, (x[:8], y[:8]))
    eager_train(a, opt_a, loss_fn, x, y, 8, 4)
    for xb, yb in batches(x, y, 8, 4):
        step(xb, yb)
    step.sync_to_model()
    eager_train(a, opt_a, loss_fn, x, y, 8, 3)  # both continue eagerly from the same state
    eager_train(b, opt_b, loss_fn, x, y, 8, 3)
    for name, value in params(a).items():
        np.testing.assert_allclose(params(b)[name], value, rtol=1e-10)

    step.load_from_model()  # the executable picks up the eager progress
    static = [float(step(xb, yb)) for xb, yb in batches(x, y, 8, 2)]
    eager = eager_train(a, opt_a, loss_fn, x, y, 8, 2)
    np.testing.assert_allclose(static, eager, rtol=1e-10)


def test_parameters_stay_in_the_executables_buffers_and_update_in_place() -> None:
    x, y = data()
    model = mlp()
    tensors = list(model.parameters())
    originals = [t.detach().numpy().copy() for t in tensors]
    step = gc.compile_train_step(model, nn.CrossEntropyLoss(), optim.Adam(tensors), (x, y))
    step(x, y)
    # the model is untouched until sync: the executable holds the parameters
    for t, original in zip(tensors, originals):
        np.testing.assert_array_equal(t.detach().numpy(), original)
    states = [target for targets in step.state_names.values() for target in targets.values()]
    assert sorted(step.executable.updates) == sorted([*step.trained, *states])
    plan = step.executable.plan(x, y)
    assert plan.late_updates == {}  # every update is written into its own state buffer
    loss_node = next(o for o in step.graph.outputs if o.name == "loss").inputs[0]
    assert plan.returns == [loss_node.name]  # only the loss leaves the executable
    trained = step.parameters()
    assert list(trained) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    step.sync_to_model()
    assert list(model.parameters()) == tensors  # the same tensor objects, new values
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(trained[name], value)
    assert not np.array_equal(tensors[0].detach().numpy(), originals[0])


def test_a_step_allocates_nothing_that_grows_with_steps() -> None:
    # a 512 KB weight: a step that copied a parameter (or its state) would show up clearly
    width = 256
    model = nn.Sequential(
        nn.Linear(width, width, dtype="float64", generator=0),
        nn.ReLU(),
        nn.Linear(width, 10, dtype="float64", generator=1),
    )
    opt = optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, width)), rng.integers(0, 10, 8)
    step = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (x, y))
    for _ in range(3):  # warm-up: plan, code and arena are made on the first call
        step(x, y)
    # a compiling backend's final tier (its kernels, then its entry in C, built in the
    # background) would otherwise come in while counting: wait() puts it in, and the
    # calls after make what it keeps (its arena)
    step.executable.wait()
    for _ in range(3):
        step(x, y)
    weight_bytes = width * width * 8

    def traced(steps: int) -> tuple[int, int]:
        tracemalloc.start()
        try:
            for _ in range(steps):
                step(x, y)
            return tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    current_few, peak_few = traced(3)
    current_many, peak_many = traced(30)
    assert current_few < 4096 and current_many < 4096  # nothing is kept between steps
    # transient numpy temporaries only (ufunc buffers of <= 8192 elements on strided
    # operands), well under one copy of the weight
    assert peak_many < weight_bytes // 2
    assert peak_many <= peak_few + 4096  # and the bound does not grow with steps


def test_frozen_parameters_are_constants_and_stay_unchanged() -> None:
    x, y = data()
    model = mlp()
    head = model[2]
    opt = optim.SGD(head.parameters(), lr=0.5)  # only the last layer trains
    step = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (x, y))
    assert sorted(step.trained) == ["2.bias", "2.weight"]
    assert [p.name for p in step.graph.inputs] == ["x", "y", "2.weight", "2.bias"]
    first = model[0].weight.detach().numpy().copy()
    for _ in range(3):
        step(x, y)
    step.sync_to_model()
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), first)


def test_a_regression_step_on_the_last_smaller_batch() -> None:
    model = nn.Linear(1, 1, dtype="float64", generator=0)
    x = np.linspace(-1, 1, 10).reshape(10, 1)
    y = 2 * x + 3
    step = gc.compile_train_step(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.5), (x, y))
    for _ in range(200):
        step(x[:7], y[:7])
        step(x[7:], y[7:])
    step.sync_to_model()
    np.testing.assert_allclose(model.weight.item(), 2.0, rtol=1e-6)
    np.testing.assert_allclose(model.bias.item(), 3.0, rtol=1e-6)
    assert step.executable.plans_built == 2  # one plan per batch size


def test_user_mistakes_are_clear_errors() -> None:
    x, y = data()
    model = mlp()
    loss_fn = nn.CrossEntropyLoss()
    other = optim.SGD(mlp(5).parameters(), lr=0.1)
    with pytest.raises(gc.GraphcError, match="does not depend on any parameter the optimizer"):
        gc.compile_train_step(model, loss_fn, other, (x, y))
    opt = optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(gc.GraphcError, match="example_batch must be \\(x, y\\), got 3"):
        gc.compile_train_step(model, loss_fn, opt, (x, y, y))
    with pytest.raises(gc.GraphcError, match="x must have a batch axis"):
        gc.compile_train_step(model, loss_fn, opt, (np.float64(1.0), y))
    step = gc.compile_train_step(model, loss_fn, opt, (x, y))
    with pytest.raises(gc.FeedError, match="placeholder 'x' expects dtype float64"):
        step(x.astype(np.float32), y)


def test_explain_and_repr_describe_the_step() -> None:
    x, y = data()
    model = mlp()
    step = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), optim.SGD(model.parameters()), (x, y)
    )
    assert "2.weight" in step.explain(x, y)
    assert repr(step).startswith("<TrainStep: 4 trained parameter(s), SGD")


def test_docstring_example() -> None:
    result = doctest.testmod(train_step)
    assert result.attempted > 0 and result.failed == 0


def _dropout_model(p: float) -> nn.Module:
    return nn.Sequential(
        nn.Linear(6, 16, dtype="float64", generator=0), nn.ReLU(), nn.Dropout(p),
        nn.Linear(16, 3, dtype="float64", generator=1),
    )  # fmt: skip


def test_dropout_keys_are_state_advanced_every_step() -> None:
    x, y = data()
    ge.manual_seed(5)
    model = _dropout_model(0.5)
    train = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.0), (x, y)
    )
    keys = []
    for _ in range(3):
        keys.append(int(train.executable.state["rng_key"]))
        train.step(x, y)
    assert len(set(keys)) == 3  # a new key, hence new masks, every step
    # lr 0: the parameters never move, so different losses come from different masks
    losses = {float(train.step(x, y)) for _ in range(3)}
    assert len(losses) == 3
    # the same seed gives the same run; seed() restarts it
    ge.manual_seed(5)
    twin = _dropout_model(0.5)
    again = gc.compile_train_step(
        twin, nn.CrossEntropyLoss(), optim.SGD(twin.parameters(), lr=0.0), (x, y)
    )
    assert int(again.executable.state["rng_key"]) == keys[0]
    train.seed(keys[0])
    assert float(train.step(x, y)) == float(again.step(x, y))


def test_dropout_of_zero_trains_exactly_as_eager() -> None:
    x, y = data()
    eager_model, static_model = _dropout_model(0.0), _dropout_model(0.0)
    eager_opt = optim.SGD(eager_model.parameters(), lr=0.1)
    train = gc.compile_train_step(
        static_model, nn.CrossEntropyLoss(), optim.SGD(static_model.parameters(), lr=0.1), (x, y)
    )
    want = eager_train(eager_model, eager_opt, nn.CrossEntropyLoss(), x, y, 40, 4)
    assert [float(train.step(x, y)) for _ in range(4)] == want


def _batch_norm_model(layer: nn.Module, features: int) -> nn.Module:
    return nn.Sequential(nn.Linear(3, features, dtype="float64", generator=0), layer)


@pytest.mark.parametrize(
    ("layer", "shape", "refused"),
    [
        (nn.BatchNorm1d(4, dtype="float64"), (4,), "(1, 4)"),
        (nn.BatchNorm1d(2, dtype="float64"), (2, 1), "(1, 2, 1)"),
    ],
    ids=["BatchNorm1d-2d", "BatchNorm1d-3d-length-1"],
)
def test_a_batch_of_one_through_batch_norm_is_refused_and_changes_no_state(
    layer: nn.Module, shape: tuple, refused: str
) -> None:
    features = shape[0]
    rng = np.random.default_rng(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _batch_norm_model(layer, features)

        def forward(self, x):
            h = self.body[0](x)
            return self.body[1](h.reshape((h.shape[0], *shape)))

    model = Net()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    target = (features, *shape[1:])
    step = gc.compile_train_step(
        model, nn.MSELoss(), opt, (rng.standard_normal((8, 3)), rng.standard_normal((8, *target)))
    )
    step(rng.standard_normal((8, 3)), rng.standard_normal((8, *target)))
    before = step.executable.state
    with pytest.raises(
        gc.ShapeError, match=f"more than 1 value per channel .* {re.escape(refused)}"
    ):
        step(rng.standard_normal((1, 3)), rng.standard_normal((1, *target)))
    after = step.executable.state
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value)
    assert np.isfinite(step.buffers()["body.1.running_var"]).all()
    # eagerly the same batch raises the same error
    with pytest.raises(
        gc.ShapeError, match=f"more than 1 value per channel .* {re.escape(refused)}"
    ):
        model(ge.tensor(rng.standard_normal((1, 3))))
    step(rng.standard_normal((2, 3)), rng.standard_normal((2, *target)))  # two values: fine


@needs_torch
def test_torch_refuses_a_batch_of_one_through_batch_norm_too() -> None:
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        torch.nn.BatchNorm1d(4)(torch.ones(1, 4))
    with pytest.raises(ValueError):  # graphc's ShapeError is a ValueError too
        raise gc.ShapeError("batch_norm")
