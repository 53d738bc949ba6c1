"""Learning-rate schedulers against torch.optim.lr_scheduler: the rates epoch by epoch,
the state dict, and compiled training steps that read the scheduled rate."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.optim import lr_scheduler
from tests.conftest import needs_torch, torch

SCHEDULES = {
    "StepLR": {"step_size": 3, "gamma": 0.5},
    "MultiStepLR": {"milestones": [2, 5, 5, 9], "gamma": 0.3},
    "ExponentialLR": {"gamma": 0.8},
    "CosineAnnealingLR": {"T_max": 4, "eta_min": 0.01},
    "LambdaLR": {"lr_lambda": [lambda e: 0.9**e, lambda e: 1 / (1 + e)]},
}


def two_groups(lib, make):
    """An optimizer of two param groups with different learning rates."""
    a, b = lib.ones(2, requires_grad=True), lib.ones(3, requires_grad=True)
    return make([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)


def rates(lib, make, name: str, epochs: int) -> list[list[float]]:
    opt = two_groups(lib, make)
    scheduler = getattr(lib.optim.lr_scheduler if lib is torch else lr_scheduler, name)(
        opt, **SCHEDULES[name]
    )
    seen = []
    for _ in range(epochs):
        seen.append(scheduler.get_last_lr())
        assert seen[-1] == [g["lr"] for g in opt.param_groups]
        opt.step()
        scheduler.step()
    return seen


@needs_torch
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_rates_epoch_by_epoch_match_torch(name: str) -> None:
    got = rates(ge, optim.SGD, name, 12)
    want = rates(torch, torch.optim.SGD, name, 12)
    np.testing.assert_allclose(got, want, rtol=1e-15)


@needs_torch
def test_two_schedulers_of_one_optimizer_compose_as_torch() -> None:
    def run(lib, schedulers) -> list[list[float]]:
        opt = two_groups(lib, optim.SGD if lib is ge else torch.optim.SGD)
        made = [schedulers.StepLR(opt, 2, 0.5), schedulers.ExponentialLR(opt, 0.9)]
        seen = []
        for _ in range(6):
            opt.step()
            for scheduler in made:
                scheduler.step()
            seen.append(made[-1].get_last_lr())
        return seen

    got = run(ge, lr_scheduler)
    want = run(torch, torch.optim.lr_scheduler)
    np.testing.assert_allclose(got, want, rtol=1e-15)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_resumes_the_schedule(name: str) -> None:
    """A schedule saved at epoch 4 and loaded into a new scheduler continues as the
    uninterrupted one does."""
    opt = two_groups(ge, optim.SGD)
    scheduler = getattr(lr_scheduler, name)(opt, **SCHEDULES[name])
    for _ in range(4):
        scheduler.step()
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    assert saved["last_epoch"] == 4 and "optimizer" not in saved
    again = two_groups(ge, optim.SGD)
    again.load_state_dict(saved_opt)
    resumed = getattr(lr_scheduler, name)(again, **SCHEDULES[name])
    resumed.load_state_dict(saved)
    for _ in range(5):
        scheduler.step()
        resumed.step()
        assert resumed.get_last_lr() == scheduler.get_last_lr()
        assert [g["lr"] for g in again.param_groups] == scheduler.get_last_lr()


def model() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(3, 4, dtype="float64", generator=0),
        nn.Tanh(),
        nn.Linear(4, 2, dtype="float64", generator=1),
    )


@needs_torch
@pytest.mark.parametrize(
    ("optimizer", "schedule"),
    [("SGD", "StepLR"), ("Adam", "CosineAnnealingLR")],
)
def test_a_compiled_step_reads_the_scheduled_rate_as_torch(optimizer: str, schedule: str) -> None:
    net = model()
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in net.state_dict().items()})
    settings = {"lr": 0.1, "momentum": 0.9} if optimizer == "SGD" else {"lr": 0.05}
    first, second = list(net.children())[0], list(net.children())[2]
    opt = getattr(optim, optimizer)(
        [{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.02}],
        **settings,
    )
    their_opt = getattr(torch.optim, optimizer)(
        [{"params": theirs[0].parameters()}, {"params": theirs[2].parameters(), "lr": 0.02}],
        **settings,
    )
    options = {"StepLR": {"step_size": 2, "gamma": 0.3}, "CosineAnnealingLR": {"T_max": 3}}
    scheduler = getattr(lr_scheduler, schedule)(opt, **options[schedule])
    their_scheduler = getattr(torch.optim.lr_scheduler, schedule)(their_opt, **options[schedule])
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))
    step = gc.compile_train_step(net, nn.MSELoss(), opt, (x, y))
    assert [p.name for p in step.graph.inputs[2:4]] == ["lr_group0", "lr_group1"]
    for _ in range(6):
        their_opt.zero_grad()
        loss = torch.nn.MSELoss()(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        their_opt.step()
        their_scheduler.step()
        np.testing.assert_allclose(float(step(x, y)), loss.item(), rtol=1e-12)
        scheduler.step()
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[key], value.numpy(), rtol=1e-10)


def test_a_step_compiled_without_a_scheduler_refuses_a_changed_constant() -> None:
    net = model()
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = np.ones((4, 3)), np.zeros((4, 2))
    step = gc.compile_train_step(net, nn.MSELoss(), opt, (x, y))
    assert "lr" not in [p.name for p in step.graph.inputs]  # a constant: SGD's gemm fold
    step(x, y)
    before = step.executable.state
    lr_scheduler.StepLR(opt, step_size=1)  # made after compiling: the step cannot follow
    opt.param_groups[0]["lr"] = 0.01
    with pytest.raises(optim.StaleTrainStepError, match="lr of param group 0 is 0.01.*lr=0.1"):
        step(x, y)
    for name, value in step.executable.state.items():  # nothing ran
        np.testing.assert_array_equal(value, before[name])
    opt.param_groups[0]["lr"] = 0.1
    opt.momentum = 0.5
    with pytest.raises(optim.StaleTrainStepError, match="momentum of param group 0 is 0.5"):
        step(x, y)
    opt.momentum = 0.9
    step(x, y)
    again = gc.compile_train_step(net, nn.MSELoss(), opt, (x, y))  # with the scheduler now
    opt.param_groups[0]["lr"] = 0.01
    again(x, y)


def test_bad_arguments_are_named_errors() -> None:
    opt = two_groups(ge, optim.SGD)
    with pytest.raises(gc.GraphcError, match="StepLR: step_size must be a positive int"):
        lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(gc.GraphcError, match="LambdaLR: 1 lr_lambda functions for 2"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(gc.GraphcError, match="expected a graphc.optim optimizer"):
        lr_scheduler.ExponentialLR(object(), 0.5)
    fresh = two_groups(ge, optim.SGD)
    with pytest.raises(gc.GraphcError, match="have no 'initial_lr'"):
        lr_scheduler.ExponentialLR(fresh, 0.5, last_epoch=3)


def test_docstring_examples() -> None:
    result = doctest.testmod(lr_scheduler)
    assert result.attempted > 0 and result.failed == 0
