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
        # torch's implementation switches (foreach, fused, ...) too: kept, computing alike
        assert ours == theirs, name


def schedule(lib, make, groups: int, steps: int, metrics=None) -> list:
    """The (lr, momentum or beta1) of every group before each of `steps` epochs of a
    scheduler `make(optimizer)` stepped after the optimizer (with `metrics[t]` if given)."""
    scheduler_lib = lib.optim.lr_scheduler if lib is torch else optim.lr_scheduler
    params = [lib.ones(2, requires_grad=True) for _ in range(groups)]
    opt_class, settings = make[0]
    opt = getattr(lib.optim if lib is torch else optim, opt_class)(
        [{"params": [p], "lr": 0.1 * (k + 1)} for k, p in enumerate(params)], **settings
    )
    scheduler = make[1](scheduler_lib, opt)
    seen = []
    for t in range(steps):
        momenta = [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]
        seen.append((scheduler.get_last_lr(), [g["lr"] for g in opt.param_groups], momenta))
        opt.step()
        scheduler.step(*([] if metrics is None else [metrics[t]]))
    return seen


SCHEDULES = [  # (optimizer, scheduler, epochs)
    (("SGD", {"momentum": 0.9}), lambda s, o: s.OneCycleLR(o, [1.0, 2.0], total_steps=10), 10),
    (("Adam", {}), lambda s, o: s.OneCycleLR(o, 0.5, epochs=3, steps_per_epoch=4, pct_start=0.25,
                                             anneal_strategy="linear", three_phase=True), 12),
    (("SGD", {}), lambda s, o: s.OneCycleLR(o, 1.0, total_steps=7, cycle_momentum=False), 7),
    (("SGD", {}), lambda s, o: s.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=4), 7),
    (("SGD", {}), lambda s, o: s.ExponentialLR(o, 0.5, last_epoch=2), 4),
    (("SGD", {}), lambda s, o: s.CosineAnnealingLR(o, 5, 0.01, last_epoch=3), 9),
    (("SGD", {}), lambda s, o: s.ConstantLR(o, factor=0.25, total_iters=3), 6),
    (("SGD", {}), lambda s, o: s.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 1 / (e + 1)]), 6),
    (("SGD", {}), lambda s, o: s.PolynomialLR(o, total_iters=4, power=2.0), 7),
    (("SGD", {}), lambda s, o: s.CosineAnnealingWarmRestarts(o, 3, T_mult=2, eta_min=0.01), 12),
    (("SGD", {}), lambda s, o: s.CosineAnnealingWarmRestarts(o, 4, last_epoch=5), 9),
    (("SGD", {}), lambda s, o: s.SequentialLR(o, [s.LinearLR(o, 0.1, total_iters=3),
                                                  s.CosineAnnealingLR(o, 4, 0.01),
                                                  s.MultiStepLR(o, [1, 3], 0.5)], [3, 7]), 12),
    (("SGD", {}), lambda s, o: s.SequentialLR(o, [s.ConstantLR(o, 0.5, 2), s.PolynomialLR(o, 3),
                                                  s.StepLR(o, 2, 0.5)], [2, 5]), 10),
    (("SGD", {}), lambda s, o: s.ChainedScheduler([s.ConstantLR(o, 0.5, 3), s.ExponentialLR(o, 0.9)]), 6),
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize(("optimizer", "make", "epochs"), SCHEDULES)
def test_schedules_match_torch(optimizer: tuple, make, epochs: int) -> None:
    def resumable(lib, opt):
        for g in opt.param_groups:  # a resumed schedule (last_epoch >= 0) needs these
            g["initial_lr"] = g["lr"]
        return make(lib, opt)

    def numbers(seen: list) -> np.ndarray:
        return np.array([[r for part in row for r in part if r is not None] for row in seen])

    got = schedule(ge, (optimizer, resumable), 2, epochs)
    want = schedule(torch, (optimizer, resumable), 2, epochs)
    np.testing.assert_allclose(numbers(got), numbers(want), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize(
    "settings",
    [
        {"factor": 0.5, "patience": 1, "cooldown": 1, "min_lr": [0.03, 0.0]},
        {"mode": "max", "threshold_mode": "abs", "threshold": 0.1, "patience": 0},
        {"mode": "max", "patience": 2, "eps": 0.05},
    ],
    ids=str,
)
def test_reduce_on_plateau_matches_torch(settings: dict) -> None:
    metrics = [3.0, 2.0, 2.0, 1.99995, 2.5, 2.05, 2.1, 1.0, 1.0, 1.0, 1.0, 3.0, 3.2, 3.2, 3.2]

    def make(lib, opt):
        return lib.ReduceLROnPlateau(opt, **settings)

    got = schedule(ge, (("SGD", {}), make), 2, len(metrics), metrics)
    want = schedule(torch, (("SGD", {}), make), 2, len(metrics), metrics)
    assert [row[:2] for row in got] == [row[:2] for row in want]


@needs_torch
def test_step_with_a_closure_as_torch() -> None:
    """step(closure) was a TypeError; torch calls the closure with gradients on (even
    under no_grad) and returns its loss."""

    def run(lib, opt_class):
        w = lib.tensor(W0, requires_grad=True)
        opt = opt_class([w], lr=0.1, momentum=0.5)

        def closure():
            opt.zero_grad()
            loss = ((w - 1.0) ** 2).sum()
            loss.backward()
            return loss

        with lib.no_grad():
            losses = [float(opt.step(closure)) for _ in range(3)]
        return losses, w.detach().numpy()

    ours, theirs = run(ge, optim.SGD), run(torch, torch.optim.SGD)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)


@needs_torch
def test_torchs_sgd_state_with_dampening_loads() -> None:
    """torch's SGD keeps no step count (its momentum buffer says the first step is done):
    loading its state with dampening was refused for lacking 'step'."""
    settings = {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}
    w_t = torch.tensor(W0, requires_grad=True)
    theirs = torch.optim.SGD([w_t], **settings)
    w = ge.tensor(W0, requires_grad=True)
    ours = optim.SGD([w], **settings)
    for t in range(5):
        if t == 2:  # hand over: torch's parameter and state
            with ge.no_grad():
                w.copy_(ge.tensor(w_t.detach().numpy()))
            ours.load_state_dict(theirs.state_dict())
        for p, lib, opt in ((w_t, torch, theirs), (w, ge, ours)):
            opt.zero_grad()
            (p * lib.tensor(np.cos(np.arange(6) + t).reshape(3, 2))).exp().sum().backward()
            opt.step()
    np.testing.assert_allclose(w.detach().numpy(), w_t.detach().numpy(), rtol=1e-12)


def test_betas_that_are_no_pair_are_a_named_error() -> None:
    with pytest.raises(gc.GraphcError, match=r"Adam: betas must be a pair .* got \(0.9,\)"):
        optim.Adam([ge.ones(2, requires_grad=True)], betas=(0.9,))


@needs_torch
def test_warm_restarts_at_fractional_epochs_match_torch() -> None:
    """CosineAnnealingWarmRestarts.step(epoch), stepped within epochs as torch's docs do."""
    rates = []
    for lib, scheduler_lib in ((ge, optim.lr_scheduler), (torch, torch.optim.lr_scheduler)):
        w = lib.ones(2, requires_grad=True)
        opt = (optim if lib is ge else torch.optim).SGD([w], lr=0.5)
        sgdr = scheduler_lib.CosineAnnealingWarmRestarts(opt, 2, T_mult=3, eta_min=0.05)
        seen = []
        for epoch in np.arange(0, 12, 0.4):
            opt.step()
            sgdr.step(float(epoch))
            seen.append(sgdr.get_last_lr()[0])
        rates.append(seen)
    np.testing.assert_allclose(rates[0], rates[1], rtol=1e-12)


@needs_torch
def test_state_is_read_by_parameter_as_torch() -> None:
    """optimizer.state[p] was a TypeError (a list read by position only)."""

    def run(lib, opt_class):
        w, b = lib.tensor(W0, requires_grad=True), lib.tensor(W0[0], requires_grad=True)
        opt = opt_class([w, b], lr=0.1, amsgrad=True)
        before = w in opt.state
        for _ in range(2):
            opt.zero_grad()
            (w * w).sum().backward()  # b gets no gradient: no state
            opt.step()
        return opt, w, b, before

    ours, w, b, before = run(ge, optim.Adam)
    theirs, w_t, b_t, their_before = run(torch, torch.optim.Adam)
    assert (before, w in ours.state, b in ours.state) == (
        their_before,
        w_t in theirs.state,
        b_t in theirs.state,
    )
    for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
        np.testing.assert_allclose(
            ours.state[w][key].numpy(), theirs.state[w_t][key].numpy(), rtol=1e-12
        )
    assert ours.state[0] is ours.state[w]
    with pytest.raises(KeyError, match="no parameter"):
        ours.state[ge.ones(2)]


@needs_torch
def test_named_parameters_are_taken_as_torch() -> None:
    """torch 2.13's optimizers take model.named_parameters() and keep the names in the
    group ('param_names'); graphc refused the pairs as "not an eager tensor"."""
    ours_model = nn.Linear(2, 3, dtype="float64", generator=0)
    theirs_model = torch.nn.Linear(2, 3).double()
    theirs_model.load_state_dict({k: torch.tensor(v) for k, v in ours_model.state_dict().items()})
    ours = optim.SGD(ours_model.named_parameters(), lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD(theirs_model.named_parameters(), lr=0.1, momentum=0.9)
    for model, opt, lib in ((ours_model, ours, ge), (theirs_model, theirs, torch)):
        for _ in range(2):
            opt.zero_grad()
            (model(lib.tensor(np.ones((4, 2)))) ** 2).sum().backward()
            opt.step()
    assert ours.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    assert (
        ours.state_dict()["param_groups"][0]["param_names"]
        == theirs.state_dict()["param_groups"][0]["param_names"]
    )
    np.testing.assert_allclose(
        ours_model.weight.detach().numpy(), theirs_model.weight.detach().numpy(), rtol=1e-12
    )
    with pytest.raises(gc.GraphcError, match="pairs or parameters, not both"):
        optim.SGD([("w", ge.ones(1, requires_grad=True)), ge.ones(1, requires_grad=True)])
