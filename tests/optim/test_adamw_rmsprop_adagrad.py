"""AdamW, RMSprop and Adagrad against torch.optim: eager steps with param groups, the
state dict both ways, and the compiled training step."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

SETTINGS = {
    "AdamW": [{}, {"lr": 0.05, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.3}],
    "RMSprop": [
        {},
        {"lr": 0.02, "alpha": 0.9, "weight_decay": 0.1},
        {"lr": 0.01, "momentum": 0.8, "centered": True, "eps": 1e-6},
    ],
    "Adagrad": [
        {},
        {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.3},
    ],
}
CASES = [(name, s) for name, settings in SETTINGS.items() for s in settings]
W0 = np.random.default_rng(0).standard_normal((3, 2))
B0 = np.random.default_rng(1).standard_normal(2)


def train(lib, make, groups_of, steps: int = 6) -> list[np.ndarray]:
    """`steps` steps of a loss that changes with the step, on two parameters given to
    the optimizer as `groups_of(w, b)` says; their values after."""
    w, b = lib.tensor(W0, requires_grad=True), lib.tensor(B0, requires_grad=True)
    opt = make(groups_of(w, b))
    for t in range(steps):
        opt.zero_grad()
        target = lib.tensor(np.sin(np.arange(W0.size) + t).reshape(W0.shape))
        (((w - target) ** 2).sum() + (w.sum(0) * b).tanh().sum()).backward()
        opt.step()
    return [w.detach().numpy(), b.detach().numpy()]


@needs_torch
@pytest.mark.parametrize(("name", "settings"), CASES, ids=str)
def test_eager_steps_match_torch(name: str, settings: dict) -> None:
    def one_group(w, b):
        return [w, b]

    got = train(ge, lambda p: getattr(optim, name)(p, **settings), one_group)
    want = train(torch, lambda p: getattr(torch.optim, name)(p, **settings), one_group)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("name", list(SETTINGS))
def test_param_groups_keep_their_own_settings_as_torch(name: str) -> None:
    first, second = SETTINGS[name][0], SETTINGS[name][-1]

    def groups(w, b):
        return [{"params": [w]}, {"params": [b], **second}]

    got = train(ge, lambda p: getattr(optim, name)(p, **first), groups)
    want = train(torch, lambda p: getattr(torch.optim, name)(p, **first), groups)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@needs_torch
@pytest.mark.parametrize(("name", "settings"), [CASES[1], CASES[4], CASES[6]], ids=str)
def test_state_dicts_cross_between_graphc_and_torch(name: str, settings: dict) -> None:
    """torch's state after three steps, loaded into ours, continues as torch continues;
    and ours has torch's state names."""
    w_t = torch.tensor(W0, requires_grad=True)
    theirs = getattr(torch.optim, name)([w_t], **settings)
    w = ge.tensor(W0, requires_grad=True)
    ours = getattr(optim, name)([w], **settings)
    for t in range(6):
        if t == 3:  # hand over: torch's parameter and state
            with ge.no_grad():
                w.copy_(ge.tensor(w_t.detach().numpy()))
            ours.load_state_dict(theirs.state_dict())
        for p, lib, opt in ((w_t, torch, theirs), (w, ge, ours)):
            if lib is ge and t < 3:
                continue
            opt.zero_grad()
            (p * lib.tensor(np.cos(np.arange(6) + t).reshape(3, 2))).exp().sum().backward()
            opt.step()
    np.testing.assert_allclose(w.detach().numpy(), w_t.detach().numpy(), rtol=1e-12)
    assert sorted(ours.state_dict()["state"][0]) == sorted(theirs.state_dict()["state"][0])


@needs_torch
@pytest.mark.parametrize(("name", "settings"), [CASES[1], CASES[4], CASES[6]], ids=str)
def test_compiled_steps_match_torch(name: str, settings: dict) -> None:
    net = nn.Sequential(
        nn.Linear(3, 4, dtype="float64", generator=0),
        nn.Tanh(),
        nn.Linear(4, 2, dtype="float64", generator=1),
    )
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in net.state_dict().items()})
    opt = getattr(optim, name)(net.parameters(), **settings)
    their_opt = getattr(torch.optim, name)(theirs.parameters(), **settings)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))
    step = gc.compile_train_step(net, nn.MSELoss(), opt, (x, y))
    for _ in range(4):
        their_opt.zero_grad()
        loss = torch.nn.MSELoss()(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        their_opt.step()
        np.testing.assert_allclose(float(step(x, y)), loss.item(), rtol=1e-12)
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[key], value.numpy(), rtol=1e-10)
    state = opt.state_dict()["state"][0]
    their_state = their_opt.state_dict()["state"][0]
    for key, value in their_state.items():
        np.testing.assert_allclose(state[key], value.numpy(), rtol=1e-10, err_msg=key)


def test_bad_settings_are_named_errors() -> None:
    w = [ge.ones(2, requires_grad=True)]
    with pytest.raises(gc.GraphcError, match="invalid weight_decay: -0.1"):
        optim.AdamW(w, weight_decay=-0.1)
    with pytest.raises(gc.GraphcError, match="invalid alpha: -1"):
        optim.RMSprop(w, alpha=-1)
    with pytest.raises(gc.GraphcError, match="invalid lr_decay: -1"):
        optim.Adagrad(w, lr_decay=-1)


@pytest.mark.parametrize(
    "name", ["graphc.optim.adam", "graphc.optim.rmsprop", "graphc.optim.adagrad"]
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
