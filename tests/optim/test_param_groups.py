"""Optimizers as torch.optim holds parameters: param groups with their own
hyperparameters, frozen parameters accepted and skipped, state_dict round trips."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import optim
from tests.conftest import needs_torch, torch

W0 = np.array([[0.5, -1.0], [2.0, 0.25]])
B0 = np.array([1.0, -0.5])


def train(lib, make, groups_of, steps: int = 4) -> list[np.ndarray]:
    """Four steps of `make`'s optimizer on w and b, in graphc.eager or torch (`lib`)."""
    w, b = lib.tensor(W0, requires_grad=True), lib.tensor(B0, requires_grad=True)
    opt = make(groups_of(w, b))
    for t in range(steps):
        opt.zero_grad()
        loss = 0.0
        for p in (w, b):
            target = np.sin(np.arange(p.numel()) + t).reshape(tuple(p.shape))
            loss = loss + 0.5 * ((p - lib.tensor(target)) ** 2).sum()
        loss.backward()
        opt.step()
    return [w.detach().numpy(), b.detach().numpy()]


def two_groups(w, b) -> list[dict]:
    return [{"params": [w]}, {"params": [b], "lr": 0.01, "momentum": 0.5, "weight_decay": 0.1}]


def test_param_groups_take_their_own_hyperparameters() -> None:
    w, b = ge.tensor([1.0], requires_grad=True), ge.tensor([1.0], requires_grad=True)
    opt = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.01}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["momentum"] == 0.0  # the defaults fill the rest
    ((w * w).sum() + (b * b).sum()).backward()  # both gradients are 2
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.8])  # 1 - 0.1 * 2
    np.testing.assert_allclose(b.detach().numpy(), [0.98])  # 1 - 0.01 * 2


@pytest.mark.parametrize(
    "name", ["SGD", "Adam"], ids=["SGD-groups-momentum-decay", "Adam-groups-lr-decay"]
)
@needs_torch
def test_param_groups_match_torch(name: str) -> None:
    settings = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.05)

    def groups(w, b) -> list[dict]:
        if name == "SGD":
            return two_groups(w, b)
        return [{"params": [w], "betas": (0.8, 0.99)}, {"params": [b], "weight_decay": 0.1}]

    ours = train(ge, lambda g: getattr(optim, name)(g, **settings), groups)
    theirs = train(torch, lambda g: getattr(torch.optim, name)(g, **settings), groups)
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_setting_a_hyperparameter_sets_it_in_every_group() -> None:
    w, b = ge.ones(1, requires_grad=True), ge.ones(1, requires_grad=True)
    opt = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.01}], lr=0.1)
    assert opt.momentum == 0.0  # one value in every group
    with pytest.raises(gc.GraphcError, match="lr differs between the param groups"):
        _ = opt.lr
    opt.lr = 0.5
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.5] and opt.lr == 0.5
    with pytest.raises(gc.GraphcError, match="invalid lr: -1"):
        opt.lr = -1
    assert "group 1: lr=0.5" in repr(opt)


def test_add_param_group_and_its_mistakes() -> None:
    w, b = ge.ones(2, requires_grad=True), ge.ones(3, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.01})  # one tensor, as torch allows
    assert opt.params[1] is b and opt.param_groups[1]["betas"] == (0.9, 0.999)
    ((w * w).sum() + (b * b).sum()).backward()
    opt.step()
    assert sorted(opt.state[1]) == ["exp_avg", "exp_avg_sq", "step"]
    with pytest.raises(gc.GraphcError, match="parameter 2 .* is listed twice"):
        opt.add_param_group({"params": [w]})
    with pytest.raises(gc.GraphcError, match="a param group is a dict with a 'params' key"):
        opt.add_param_group({"lr": 0.1})
    with pytest.raises(gc.GraphcError, match="invalid beta1: 1.5"):
        opt.add_param_group({"params": [ge.ones(1, requires_grad=True)], "betas": (1.5, 0.9)})
    assert len(opt.param_groups) == 2 and len(opt.state) == 2  # the refused ones left no trace


def test_a_frozen_parameter_is_accepted_and_skipped() -> None:
    w = ge.tensor([1.0, 2.0], requires_grad=True)
    frozen = ge.tensor([3.0], requires_grad=False)
    opt = optim.SGD([w, frozen], lr=0.1, momentum=0.9, weight_decay=0.5)
    ((w * w).sum() + (frozen * w).sum()).backward()
    assert frozen.grad is None
    opt.step()
    np.testing.assert_array_equal(frozen.detach().numpy(), [3.0])
    assert opt.state[1] == {}
    # w: grad 2w + 3, decay 0.5 w: 1 - 0.1 * (5 + 0.5), 2 - 0.1 * (7 + 1)
    np.testing.assert_allclose(w.detach().numpy(), [0.45, 1.2])
    frozen.requires_grad_(True)  # unfrozen later: it trains from then on
    opt.zero_grad()
    (frozen * frozen).sum().backward()
    opt.step()
    np.testing.assert_allclose(frozen.detach().numpy(), [3.0 - 0.1 * (6.0 + 1.5)])


@needs_torch
def test_a_frozen_parameter_is_skipped_as_torch_skips_it() -> None:
    def run(lib, make) -> tuple[np.ndarray, np.ndarray]:
        w = lib.tensor(W0, requires_grad=True)
        frozen = lib.tensor(B0, requires_grad=False)
        opt = make([w, frozen])
        for _ in range(3):
            opt.zero_grad()
            ((w * w).sum() + (w @ frozen).sum()).backward()
            opt.step()
        return w.detach().numpy(), frozen.detach().numpy()

    ours = run(ge, lambda p: optim.Adam(p, lr=0.1, weight_decay=0.1))
    theirs = run(torch, lambda p: torch.optim.Adam(p, lr=0.1, weight_decay=0.1))
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_array_equal(ours[1], B0)
    np.testing.assert_array_equal(theirs[1], B0)


def test_state_dict_round_trips_hyperparameters_and_state() -> None:
    def make() -> optim.SGD:
        w, b = ge.tensor(W0, requires_grad=True), ge.tensor(B0, requires_grad=True)
        return optim.SGD(two_groups(w, b), lr=0.1, momentum=0.9, dampening=0.2)

    a, b = make(), make()
    for _ in range(2):
        a.zero_grad()
        (a.params[0] ** 2).sum().backward()  # only the first parameter gets state
        a.step()
    a.param_groups[1]["lr"] = 0.02
    saved = a.state_dict()
    assert [g["params"] for g in saved["param_groups"]] == [[0], [1]]
    assert sorted(saved["state"]) == [0] and sorted(saved["state"][0]) == [
        "momentum_buffer",
        "step",
    ]
    b.load_state_dict(saved)
    assert b.param_groups[1]["lr"] == 0.02 and b.param_groups[1]["params"][0] is b.params[1]
    for key, value in saved["state"][0].items():
        np.testing.assert_array_equal(b.state_arrays(0)[key], value)
    saved["state"][0]["step"] += 1  # a copy: the optimizer's state is its own
    assert b.state_arrays(0)["step"] == 2
    del saved["state"][0]["momentum_buffer"]
    with pytest.raises(gc.GraphcError, match="state of parameter 0 lacks \\['momentum_buffer'\\]"):
        b.load_state_dict(saved)
    assert b.state_arrays(0)["step"] == 2  # the refused state_dict changed nothing
    other = optim.SGD([ge.ones(1, requires_grad=True), ge.ones(1, requires_grad=True)])
    with pytest.raises(gc.GraphcError, match="param groups of sizes \\[1, 1\\], this .* \\[2\\]"):
        other.load_state_dict(saved)


@needs_torch
def test_load_state_dict_takes_torchs_adam_state() -> None:
    w = torch.tensor(W0, requires_grad=True)
    theirs = torch.optim.Adam([w], lr=0.05)
    for _ in range(3):
        theirs.zero_grad()
        (w**3).sum().backward()
        theirs.step()
    mine = ge.tensor(w.detach().numpy(), requires_grad=True)
    ours = optim.Adam([mine], lr=0.5)
    ours.load_state_dict(theirs.state_dict())
    assert ours.lr == 0.05
    for _ in range(2):
        theirs.zero_grad()
        (w**3).sum().backward()
        theirs.step()
        ours.zero_grad()
        (mine**3).sum().backward()
        ours.step()
    np.testing.assert_allclose(mine.detach().numpy(), w.detach().numpy(), rtol=1e-12)
