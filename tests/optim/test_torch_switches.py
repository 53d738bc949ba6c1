"""torch's implementation switches, `foreach`, `fused`, `capturable` and
`differentiable`: accepted where torch has them, kept in the param groups under torch's
keys, the same numbers as torch's with the same switches (eagerly, compiled, and across a
state_dict round trip), and the combinations torch refuses are named errors."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

W0 = np.random.default_rng(4).standard_normal((3, 2))

# torch 2.13 on CPU runs each of these (capturable is CUDA's: graphc's numbers are the
# plain ones, compared with torch's plain step)
CASES = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "fused": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "foreach": True}),
    ("Adam", {"lr": 0.1, "amsgrad": True, "fused": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.1, "foreach": False, "maximize": True}),
    ("Adam", {"lr": 0.1, "capturable": True}),
    ("AdamW", {"lr": 0.1, "fused": True}),
    ("AdamW", {"lr": 0.1, "foreach": True, "capturable": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "foreach": True}),
    ("RMSprop", {"lr": 0.01, "capturable": True}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.1, "fused": True}),
    ("Adagrad", {"lr": 0.1, "foreach": True}),
]


def steps(lib, opt, w, start: int, count: int) -> None:
    for t in range(start, start + count):
        opt.zero_grad()
        target = lib.tensor(np.cos(np.arange(W0.size) * (t + 1)).reshape(W0.shape))
        (((w - target) ** 2).sum() + w.tanh().sum()).backward()
        opt.step()


@needs_torch
@pytest.mark.parametrize(("name", "settings"), CASES, ids=str)
def test_switches_compute_torchs_numbers_and_round_trip(name: str, settings: dict) -> None:
    theirs_settings = {k: v for k, v in settings.items() if k != "capturable"}
    w, v = ge.tensor(W0, requires_grad=True), torch.tensor(W0, requires_grad=True)
    ours = getattr(optim, name)([w], **settings)
    theirs = getattr(torch.optim, name)([v], **theirs_settings)
    mine_group, their_group = ours.param_groups[0], theirs.param_groups[0]
    assert set(mine_group) == set(their_group)
    assert all(mine_group[k] == their_group[k] for k in theirs_settings)
    steps(ge, ours, w, 0, 3)
    steps(torch, theirs, v, 0, 3)
    np.testing.assert_allclose(w.detach().numpy(), v.detach().numpy(), rtol=1e-10)
    # torch's state into a fresh graphc optimizer, then on together
    w2 = ge.tensor(v.detach().numpy(), requires_grad=True)
    resumed = getattr(optim, name)([w2], **settings)
    state = theirs.state_dict()
    resumed.load_state_dict(
        {
            "state": {k: {n: t.numpy() for n, t in e.items()} for k, e in state["state"].items()},
            "param_groups": state["param_groups"],
        }
    )
    assert resumed.param_groups[0]["fused" if "fused" in settings else "foreach"] == (
        settings.get("fused", settings.get("foreach"))
    )
    steps(ge, resumed, w2, 3, 2)
    steps(torch, theirs, v, 3, 2)
    np.testing.assert_allclose(w2.detach().numpy(), v.detach().numpy(), rtol=1e-10)


@needs_torch
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_optimizers_in_a_compiled_step_match_torchs_fused(name: str) -> None:
    settings = {"lr": 0.05, "fused": True, **({"momentum": 0.9} if name == "SGD" else {})}
    net = nn.Linear(3, 2, dtype="float64", generator=0)
    theirs = torch.nn.Linear(3, 2).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in net.state_dict().items()})
    opt = getattr(optim, name)(net.parameters(), **settings)
    their_opt = getattr(torch.optim, name)(theirs.parameters(), **settings)
    rng = np.random.default_rng(5)
    step = gc.compile_train_step(net, nn.MSELoss(), opt, (np.zeros((8, 3)), np.zeros((8, 2))))
    for _ in range(3):
        x, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))
        their_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        their_opt.step()
        np.testing.assert_allclose(float(step(x, y)), loss.item(), rtol=1e-10)
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[key], value.numpy(), rtol=1e-10)


@needs_torch
def test_switch_combinations_torch_refuses_are_named_errors() -> None:
    w = [ge.ones(2, requires_grad=True)]
    for name in ("SGD", "Adam", "AdamW", "Adagrad"):
        with pytest.raises(gc.GraphcError, match=f"{name}: `fused` and `foreach` cannot be"):
            getattr(optim, name)(w, fused=True, foreach=True)
        with pytest.raises(gc.GraphcError, match=f"{name}: `fused` does not support"):
            getattr(optim, name)(w, fused=True, differentiable=True)
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad"):
        with pytest.raises(gc.GraphcError, match=f"{name}: differentiable=True .* leaf"):
            getattr(optim, name)(w, differentiable=True)
        # torch refuses it too, for a leaf parameter, when it steps
        v = torch.ones(2, requires_grad=True)
        their_opt = getattr(torch.optim, name)([v], differentiable=True)
        v.grad = torch.ones(2)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            their_opt.step()
    opt = optim.Adam(w, fused=True)  # a group's setting is checked when it changes too
    with pytest.raises(gc.GraphcError, match="cannot be `True` together"):
        opt.foreach = True
    assert opt.param_groups[0]["foreach"] is None
    for name, keyword in (("RMSprop", "fused"), ("SGD", "capturable"), ("Adagrad", "capturable")):
        with pytest.raises(TypeError, match=keyword):  # torch has no such keyword either
            getattr(optim, name)(w, **{keyword: True})
