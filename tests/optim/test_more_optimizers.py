"""NAdam, RAdam, Adamax, Adadelta and Rprop against torch.optim 2.13: parameters and state
after several eager steps (float64 to rounding, float32 closely), the compiled training
step, torch's state_dict loaded mid-run, and torch's param group keys."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

W0 = np.random.default_rng(6).standard_normal((3, 2))

CASES = [
    ("NAdam", {"lr": 0.1}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "momentum_decay": 0.01, "maximize": True}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.1, "betas": (0.9, 0.8)}),  # rectified from the sixth step on
    ("RAdam", {"lr": 0.1, "weight_decay": 0.1, "maximize": True}),  # never rectified
    (
        "RAdam",
        {"lr": 0.1, "betas": (0.8, 0.7), "weight_decay": 0.2, "decoupled_weight_decay": True},
    ),
    ("Adamax", {"lr": 0.1}),
    ("Adamax", {"lr": 0.1, "weight_decay": 0.1, "maximize": True, "foreach": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.5, "weight_decay": 0.1, "maximize": True}),
    ("Rprop", {"lr": 0.1}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (0.01, 0.2), "maximize": True}),
]


def train(lib, opt, w, start: int, count: int) -> None:
    for t in range(start, start + count):
        opt.zero_grad()
        target = np.sin(np.arange(W0.size) * (t + 1)).reshape(W0.shape).astype(W0.dtype)
        loss = ((w - lib.tensor(target).to(w.dtype)) ** 2).sum() * (3.0 if t == 1 else 1.0)
        (loss + w.tanh().sum()).backward()
        opt.step()


@needs_torch
@pytest.mark.parametrize(("name", "settings"), CASES, ids=str)
def test_eager_steps_state_and_resuming_match_torch(name: str, settings: dict) -> None:
    for dtype, rtol in (("float64", 1e-12), ("float32", 2e-5)):
        w = ge.tensor(W0.astype(dtype), requires_grad=True)
        v = torch.tensor(W0.astype(dtype), requires_grad=True)
        ours, theirs = (
            getattr(optim, name)([w], **settings),
            getattr(torch.optim, name)([v], **settings),
        )
        assert list(ours.param_groups[0]) == list(theirs.param_groups[0])
        train(ge, ours, w, 0, 7)
        train(torch, theirs, v, 0, 7)
        np.testing.assert_allclose(w.detach().numpy(), v.detach().numpy(), rtol=rtol, atol=rtol)
        state, their_state = ours.state_dict()["state"][0], theirs.state_dict()["state"][0]
        assert sorted(state) == sorted(their_state)
        for key, value in their_state.items():
            assert state[key].dtype == value.numpy().dtype or key == "step", key
            np.testing.assert_allclose(state[key], value.numpy(), rtol=rtol, atol=rtol, err_msg=key)
    # torch's state_dict into a fresh optimizer: both go on alike
    w2 = ge.tensor(v.detach().numpy(), requires_grad=True)
    resumed = getattr(optim, name)([w2], **settings)
    their_dict = theirs.state_dict()
    resumed.load_state_dict(
        {
            "state": {0: {k: t.numpy() for k, t in their_dict["state"][0].items()}},
            "param_groups": their_dict["param_groups"],
        }
    )
    train(ge, resumed, w2, 7, 3)
    train(torch, theirs, v, 7, 3)
    np.testing.assert_allclose(w2.detach().numpy(), v.detach().numpy(), rtol=2e-5, atol=2e-5)


@needs_torch
@pytest.mark.parametrize(
    ("name", "settings"), [CASES[1], CASES[3], CASES[7], CASES[9], CASES[11]], ids=str
)
def test_compiled_steps_match_torch(name: str, settings: dict) -> None:
    net = nn.Linear(3, 2, dtype="float64", generator=0)
    theirs = torch.nn.Linear(3, 2).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in net.state_dict().items()})
    opt = getattr(optim, name)(net.parameters(), **settings)
    their_opt = getattr(torch.optim, name)(theirs.parameters(), **settings)
    rng = np.random.default_rng(8)
    step = gc.compile_train_step(net, nn.MSELoss(), opt, (np.zeros((8, 3)), np.zeros((8, 2))))
    for _ in range(7):
        x, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))
        their_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        their_opt.step()
        np.testing.assert_allclose(float(step(x, y)), loss.item(), rtol=1e-11)
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[key], value.numpy(), rtol=1e-11, err_msg=key)


def test_bad_settings_are_named_errors() -> None:
    w = [ge.ones(2, requires_grad=True)]
    with pytest.raises(gc.GraphcError, match="invalid momentum_decay"):
        optim.NAdam(w, momentum_decay=-1.0)
    with pytest.raises(gc.GraphcError, match="invalid beta2"):
        optim.RAdam(w, betas=(0.9, 1.0))
    with pytest.raises(gc.GraphcError, match="Adamax: betas must be a pair"):
        optim.Adamax(w, betas=(0.9,))
    with pytest.raises(gc.GraphcError, match="invalid rho"):
        optim.Adadelta(w, rho=1.5)
    with pytest.raises(gc.GraphcError, match="Rprop: etas must be"):
        optim.Rprop(w, etas=(1.5, 0.5))
    with pytest.raises(gc.GraphcError, match="NAdam: differentiable=True"):
        optim.NAdam(w, differentiable=True)
