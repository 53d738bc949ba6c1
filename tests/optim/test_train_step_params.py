"""Which parameters a compiled training step trains, and with which hyperparameters:
frozen ones (requires_grad False) stay as they are, param groups keep their own."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch


def model() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(3, 4, dtype="float64", generator=0),
        nn.Tanh(),
        nn.Linear(4, 2, dtype="float64", generator=1),
    )


def batch(seed: int = 0, size: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((size, 3)), rng.standard_normal((size, 2))


def eager_step(net: nn.Module, opt: optim.Optimizer, x: np.ndarray, y: np.ndarray) -> float:
    opt.zero_grad()
    loss = nn.MSELoss()(net(ge.tensor(x)), ge.tensor(y))
    loss.backward()
    opt.step()
    return loss.item()


def frozen_first_layer() -> tuple[nn.Sequential, optim.SGD]:
    net = model()
    net[0].weight.requires_grad_(False)
    return net, optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)


def test_a_frozen_parameter_is_not_trained_by_the_compiled_step() -> None:
    eager, eager_opt = frozen_first_layer()
    static, static_opt = frozen_first_layer()
    frozen = static[0].weight.detach().numpy().copy()
    step = gc.compile_train_step(static, nn.MSELoss(), static_opt, batch(), backend="numpy")
    assert "0.weight" not in step.trained  # not differentiated, not updated
    assert "0.weight" not in [p.name for p in step.graph.inputs]
    assert "0.weight" not in step.parameters()
    for t in range(3):
        x, y = batch(t)
        np.testing.assert_allclose(float(step(x, y)), eager_step(eager, eager_opt, x, y))
    step.sync_to_model()
    np.testing.assert_array_equal(static[0].weight.detach().numpy(), frozen)
    np.testing.assert_array_equal(eager[0].weight.detach().numpy(), frozen)
    for (_, got), (_, want) in zip(static.named_parameters(), eager.named_parameters()):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    assert static_opt.state[0] == {}  # the frozen weight got no momentum buffer


@needs_torch
def test_a_frozen_parameter_trains_as_in_torch() -> None:
    static, static_opt = frozen_first_layer()
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in static.state_dict().items()})
    theirs[0].weight.requires_grad_(False)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    step = gc.compile_train_step(static, nn.MSELoss(), static_opt, batch())
    _steps_agree_with_torch(step, static, theirs, their_opt, 3, rtol=1e-12)


def test_changing_requires_grad_after_compiling_is_a_named_error() -> None:
    net, opt = frozen_first_layer()
    step = gc.compile_train_step(net, nn.MSELoss(), opt, batch())
    x, y = batch()
    step(x, y)
    before = step.executable.state
    net[0].weight.requires_grad_(True)
    with pytest.raises(optim.StaleTrainStepError, match="'0.weight' was compiled with"):
        step(x, y)
    assert isinstance(optim.StaleTrainStepError("x"), gc.GraphcError)
    for name, value in step.executable.state.items():  # the refused step changed nothing
        np.testing.assert_array_equal(value, before[name])
    net[2].bias.requires_grad_(False)
    net[0].weight.requires_grad_(False)
    with pytest.raises(optim.StaleTrainStepError, match="'2.bias' .* now False"):
        step(x, y)
    # the remedy the message names: sync, compile again
    net[2].bias.requires_grad_(True)
    net[0].weight.requires_grad_(True)
    step.sync_to_model()
    again = gc.compile_train_step(net, nn.MSELoss(), opt, batch())
    assert "0.weight" in again.trained
    again(x, y)


def test_all_parameters_frozen_is_a_clear_error() -> None:
    net = model()
    opt = optim.SGD(net.parameters(), lr=0.1)
    for p in net.parameters():
        p.requires_grad_(False)
    with pytest.raises(gc.GraphcError, match="frozen, requires_grad False: \\['0.bias'"):
        gc.compile_train_step(net, nn.MSELoss(), opt, batch())


def grouped(net: nn.Module, make=optim.SGD) -> optim.Optimizer:
    """Two groups, the second with its own settings (torch's optimizers too)."""
    if make.__name__ == "Adam":
        second = {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1}
        first = {"lr": 0.05}
    else:
        second = {"lr": 0.01, "momentum": 0.5, "weight_decay": 0.1}
        first = {"lr": 0.1, "momentum": 0.9}
    groups = [{"params": net[0].parameters()}, {"params": net[2].parameters(), **second}]
    return make(groups, **first)


def test_param_groups_train_the_compiled_step_as_the_eager_one() -> None:
    eager, static = model(), model()
    eager_opt, static_opt = grouped(eager), grouped(static)
    step = gc.compile_train_step(static, nn.MSELoss(), static_opt, batch())
    for t in range(4):
        x, y = batch(t, size=8 if t < 3 else 5)
        np.testing.assert_allclose(
            float(step(x, y)), eager_step(eager, eager_opt, x, y), rtol=1e-12
        )
    step.sync_to_model()
    for (_, got), (_, want) in zip(static.named_parameters(), eager.named_parameters()):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    # the second group's lr is what moved its bias: a step with the first group's lr differs
    one = model()
    single = optim.SGD(one.parameters(), lr=0.1, momentum=0.9)
    for t in range(4):
        eager_step(one, single, *batch(t, size=8 if t < 3 else 5))
    assert not np.allclose(one[2].bias.detach().numpy(), static[2].bias.detach().numpy())


@needs_torch
def test_param_groups_train_the_compiled_step_as_torch() -> None:
    static = model()
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in static.state_dict().items()})
    step = gc.compile_train_step(static, nn.MSELoss(), grouped(static, optim.Adam), batch())
    their_opt = grouped(theirs, torch.optim.Adam)
    _steps_agree_with_torch(step, static, theirs, their_opt, 4, rtol=1e-10)


def _steps_agree_with_torch(step, static, theirs, their_opt, steps: int, rtol: float) -> None:
    """`steps` compiled steps against torch's: each loss, then every parameter."""
    for t in range(steps):
        x, y = batch(t)
        their_opt.zero_grad()
        loss = torch.nn.MSELoss()(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        their_opt.step()
        np.testing.assert_allclose(float(step(x, y)), loss.item(), rtol=1e-12)
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(static.state_dict()[key], value.numpy(), rtol=rtol)


def gated(lib, dtype) -> object:
    """Linear layers whose last one's weight reaches the loss only through a comparison
    (a boolean: no gradient) and its bias only through argmax (an integer)."""

    class Gated(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = lib.nn.Sequential(lib.nn.Linear(3, 4, dtype=dtype), lib.nn.Tanh())
            self.gate = lib.nn.Linear(4, 2, dtype=dtype)

        def forward(self, x):
            h = self.inner(x) * (self.gate.weight.sum() > -100.0)
            return h[:, :2] + self.gate.bias.argmax()

    return Gated()


@needs_torch
def test_a_parameter_reached_by_no_gradient_is_skipped_as_torch_skips_it() -> None:
    torch.manual_seed(0)
    theirs = gated(torch, torch.float64)
    static = gated(type("graphc", (), {"nn": nn}), "float64")  # the same class on graphc's nn
    static.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    untouched = {k: v.numpy().copy() for k, v in theirs.state_dict().items() if "gate" in k}
    static_opt = optim.SGD(static.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    step = gc.compile_train_step(static, nn.MSELoss(), static_opt, batch())
    assert sorted(step.trained) == ["inner.0.bias", "inner.0.weight"]
    _steps_agree_with_torch(step, static, theirs, their_opt, 3, rtol=1e-12)
    assert theirs.gate.weight.grad is None and theirs.gate.bias.grad is None
    for key, value in untouched.items():  # no weight decay, no momentum
        np.testing.assert_array_equal(static.state_dict()[key], value)
    assert static_opt.state[2] == {} and static_opt.state[3] == {}


def behind_stop_gradient(lib, dtype) -> object:
    """Two linear layers multiplied, the second's output detached (torch) or behind
    gc.stop_gradient (graphc)."""

    class Behind(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.front = lib.nn.Linear(3, 2, dtype=dtype)
            self.back = lib.nn.Linear(3, 2, dtype=dtype)

        def forward(self, x):
            back = self.back(x)
            return self.front(x) * (back.detach() if lib is torch else gc.stop_gradient(back))

    return Behind()


@needs_torch
def test_a_parameter_behind_stop_gradient_is_skipped_as_torch_skips_a_detached_one() -> None:
    """gc.stop_gradient is torch's detach: the layer behind it gets no .grad in torch, so
    no weight decay or momentum either; its zero gradient here must not train it."""
    torch.manual_seed(0)
    theirs = behind_stop_gradient(torch, torch.float64)
    static = behind_stop_gradient(type("graphc", (), {"nn": nn}), "float64")
    static.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    behind = static.back.weight.detach().numpy().copy()
    opt = optim.SGD(static.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    step = gc.compile_train_step(static, nn.MSELoss(), opt, batch(), backend="numpy")
    assert sorted(step.trained) == ["front.bias", "front.weight"]
    _steps_agree_with_torch(step, static, theirs, their_opt, 3, rtol=1e-10)
    assert theirs.back.weight.grad is None
    np.testing.assert_array_equal(static.back.weight.detach().numpy(), behind)


def test_a_custom_function_named_stop_gradient_still_trains_what_is_behind_it() -> None:
    """Which custom node stops the gradient is read from its backward (a fill of
    zeros), never from its name, which the user chooses."""

    @gc.custom_vjp
    def stop_gradient(x):  # the user's own, with a real backward
        return x * 1.0

    stop_gradient.defvjp(lambda x: (x * 1.0, ()), lambda res, ct: (ct * 2.0,))

    class Through(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.front = nn.Linear(3, 2, dtype="float64")
            self.back = nn.Linear(3, 2, dtype="float64")

        def forward(self, x):
            return self.front(x) * stop_gradient(self.back(x))

    model = Through()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = gc.compile_train_step(model, nn.MSELoss(), opt, batch(), backend="numpy")
    assert sorted(step.trained) == ["back.bias", "back.weight", "front.bias", "front.weight"]
