"""Optimizer settings and schedules found missing or different by a hunt against
torch.optim 2.13: maximize, amsgrad, Adam's decoupled_weight_decay, the schedulers'
first step when resumed with last_epoch. Every number is torch's."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

CASES = [
    ("Adam", {"lr": 0.1, "amsgrad": True, "maximize": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1, "maximize": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("Adam", {"lr": 0.1, "amsgrad": True}),
    ("Adam", {"lr": 0.1, "maximize": True, "weight_decay": 0.2, "decoupled_weight_decay": True}),
    ("AdamW", {"lr": 0.1, "amsgrad": True, "maximize": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "maximize": True}),
    ("RMSprop", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.1, "weight_decay": 0.1, "maximize": True}),
]
W0 = np.random.default_rng(0).standard_normal((3, 2))


def train(lib, opt_of, steps: int = 6) -> tuple[np.ndarray, dict]:
    """`steps` steps of a loss that changes with the step (its gradients change sign, so
    amsgrad's maximum matters); the parameter and the optimizer's state after."""
    w = lib.tensor(W0, requires_grad=True)
    opt = opt_of([w])
    for t in range(steps):
        opt.zero_grad()
        target = lib.tensor(np.sin(np.arange(W0.size) * (t + 1)).reshape(W0.shape))
        (((w - target) ** 2).sum() * (3.0 if t == 1 else 1.0) + w.tanh().sum()).backward()
        opt.step()
    return w.detach().numpy(), opt.state_dict()["state"][0]


@needs_torch
@pytest.mark.parametrize(("name", "settings"), CASES, ids=str)
def test_eager_steps_and_state_match_torch(name: str, settings: dict) -> None:
    got, state = train(ge, lambda p: getattr(optim, name)(p, **settings))
    want, their_state = train(torch, lambda p: getattr(torch.optim, name)(p, **settings))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert sorted(state) == sorted(their_state)
    for key, value in their_state.items():
        np.testing.assert_allclose(state[key], value.numpy(), rtol=1e-12, err_msg=key)


@needs_torch
@pytest.mark.parametrize(("name", "settings"), [CASES[0], CASES[6]], ids=str)
def test_compiled_steps_match_torch(name: str, settings: dict) -> None:
    net = nn.Linear(3, 2, dtype="float64", generator=0)
    theirs = torch.nn.Linear(3, 2).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in net.state_dict().items()})
    opt = getattr(optim, name)(net.parameters(), **settings)
    their_opt = getattr(torch.optim, name)(theirs.parameters(), **settings)
    rng = np.random.default_rng(2)
    step = gc.compile_train_step(net, nn.MSELoss(), opt, (np.zeros((8, 3)), np.zeros((8, 2))))
    for _ in range(4):
        x, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))
        their_opt.zero_grad()
        loss = torch.nn.MSELoss()(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        their_opt.step()
        np.testing.assert_allclose(float(step(x, y)), loss.item(), rtol=1e-12)
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[key], value.numpy(), rtol=1e-10)


@needs_torch
def test_param_groups_name_torchs_settings() -> None:
    w = [ge.ones(2, requires_grad=True)]
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad"):
        ours = set(getattr(optim, name)(w).param_groups[0])
        theirs = set(
            getattr(torch.optim, name)([torch.ones(2, requires_grad=True)]).param_groups[0]
        )
        # torch's implementation switches (foreach, fused, ...) have no meaning here
        switches = {"foreach", "fused", "differentiable", "capturable"}
        assert ours == theirs - switches, name
