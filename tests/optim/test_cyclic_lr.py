"""lr_scheduler.CyclicLR against torch 2.13: the rates and momenta of every step for each
mode, a custom scale function, several param groups; its state_dict; and a compiled
training step that reads the cycled rate (and refuses a cycled momentum it holds as a
constant)."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

CASES = [  # (optimizer, settings, CyclicLR arguments)
    ("SGD", {"momentum": 0.9}, {"base_lr": 0.1, "max_lr": 1.0, "step_size_up": 3}),
    ("SGD", {"momentum": 0.9}, {"base_lr": [0.1, 0.2], "max_lr": [1.0, 0.5], "step_size_up": 2,
                                "step_size_down": 4, "mode": "triangular2"}),
    ("Adam", {}, {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "mode": "exp_range",
                  "gamma": 0.9, "base_momentum": 0.7, "max_momentum": 0.95}),
    ("SGD", {}, {"base_lr": 0.1, "max_lr": 0.4, "step_size_up": 2, "cycle_momentum": False,
                 "scale_fn": lambda x: 1.0 / (1.0 + x), "scale_mode": "iterations"}),
]  # fmt: skip


def schedule(lib, name: str, settings: dict, arguments: dict, steps: int = 14) -> list:
    params = [lib.ones(2, requires_grad=True) for _ in range(2)]
    opt = getattr(lib.optim if lib is torch else optim, name)(
        [{"params": [p]} for p in params], lr=0.5, **settings
    )
    sched = (lib.optim if lib is torch else optim).lr_scheduler.CyclicLR(opt, **arguments)
    seen = []
    for _ in range(steps):
        momenta = [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]
        seen.append((sched.get_last_lr(), momenta))
        opt.step()
        sched.step()
    return seen, sched


@needs_torch
@pytest.mark.parametrize(("name", "settings", "arguments"), CASES, ids=str)
def test_cyclic_schedules_match_torch(name: str, settings: dict, arguments: dict) -> None:
    ours, our_schedule = schedule(ge, name, settings, arguments)
    theirs, their_schedule = schedule(torch, name, settings, arguments)
    np.testing.assert_allclose(
        np.array([lr for lr, _ in ours]), np.array([lr for lr, _ in theirs]), rtol=1e-13
    )
    if arguments.get("cycle_momentum", True):
        np.testing.assert_allclose(
            np.array([m for _, m in ours]), np.array([m for _, m in theirs]), rtol=1e-13
        )
    state, their_state = our_schedule.state_dict(), their_schedule.state_dict()
    assert state["last_epoch"] == their_state["last_epoch"]
    assert state["scale_fn_custom"] is None and their_state["_scale_fn_custom"] is None


def test_a_compiled_step_follows_the_cycle_and_refuses_a_cycled_momentum() -> None:
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32)
    for cycle_momentum in (False, True):
        model = nn.Linear(3, 1, generator=0)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        cyclic = optim.lr_scheduler.CyclicLR(
            opt, 0.0, 0.2, step_size_up=1, cycle_momentum=cycle_momentum
        )
        step = gc.compile_train_step(model, nn.MSELoss(), opt, (x, y))
        before = step.parameters()["weight"]
        step(x, y)  # the rate is base_lr = 0: nothing moves
        np.testing.assert_array_equal(step.parameters()["weight"], before)
        cyclic.step()
        if cycle_momentum:
            with pytest.raises(optim.StaleTrainStepError, match="momentum"):
                step(x, y)
        else:
            step(x, y)
            assert not np.array_equal(step.parameters()["weight"], before)


def test_bad_settings_are_named_errors() -> None:
    opt = optim.Adagrad([ge.ones(2, requires_grad=True)])
    with pytest.raises(gc.GraphcError, match="CyclicLR: cycle_momentum needs an optimizer"):
        optim.lr_scheduler.CyclicLR(opt, 0.1, 1.0)
    with pytest.raises(gc.GraphcError, match="CyclicLR: mode must be"):
        optim.lr_scheduler.CyclicLR(opt, 0.1, 1.0, mode="sawtooth", cycle_momentum=False)
    with pytest.raises(gc.GraphcError, match="expected 1 values for max_lr"):
        optim.lr_scheduler.CyclicLR(opt, 0.1, [1.0, 2.0], cycle_momentum=False)
