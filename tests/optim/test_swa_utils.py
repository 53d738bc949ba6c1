"""optim.swa_utils against torch 2.13: AveragedModel's running mean and EMAs (lists or
one tensor at a time, with and without buffers) over a short training run, its
state_dict, SWALR's rates and update_bn's statistics."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(14)


def make(lib):
    extra = {"generator": 0} if lib is nn else {}
    return lib.Sequential(lib.Linear(3, 4, **extra), lib.BatchNorm1d(4), lib.Linear(4, 1, **extra))


def averaging(lib, kind: str) -> dict:
    swa = torch.optim.swa_utils if lib is torch.nn else optim.swa_utils
    if kind == "ema":
        return {"multi_avg_fn": swa.get_ema_multi_avg_fn(0.8)}
    if kind == "ema one at a time":
        return {"avg_fn": swa.get_ema_avg_fn(0.7), "use_buffers": True}
    return {"use_buffers": kind == "swa with buffers"}


@needs_torch
@pytest.mark.parametrize("kind", ["swa", "swa with buffers", "ema", "ema one at a time"])
def test_averaged_models_follow_torch(kind: str) -> None:
    ours, theirs = make(nn), make(torch.nn)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    swa = optim.swa_utils.AveragedModel(ours, **averaging(nn, kind))
    their_swa = torch.optim.swa_utils.AveragedModel(theirs, **averaging(torch.nn, kind))
    opt = optim.SGD(ours.parameters(), lr=0.1)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    for _ in range(4):
        x, y = RNG.standard_normal((8, 3)).astype(np.float32), RNG.standard_normal((8, 1))
        for model, o, lib in ((ours, opt, ge), (theirs, their_opt, torch)):
            o.zero_grad()
            ((model(lib.tensor(x)) - lib.tensor(y.astype(np.float32))) ** 2).mean().backward()
            o.step()
        swa.update_parameters(ours)
        their_swa.update_parameters(theirs)
    state, their_state = swa.state_dict(), their_swa.state_dict()
    assert list(state) == list(their_state)
    for key, value in their_state.items():
        np.testing.assert_allclose(state[key], value.numpy(), rtol=1e-5, atol=1e-6, err_msg=key)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    swa.eval()
    their_swa.eval()
    np.testing.assert_allclose(
        swa(ge.tensor(x)).detach().numpy(), their_swa(torch.tensor(x)).detach().numpy(), rtol=1e-5
    )


@needs_torch
@pytest.mark.parametrize(("anneal_epochs", "strategy"), [(3, "cos"), (4, "linear"), (0, "cos")])
def test_swalr_matches_torch(anneal_epochs: int, strategy: str) -> None:
    def rates(lib, swa) -> list:
        params = [lib.ones(2, requires_grad=True) for _ in range(2)]
        opt = (torch.optim if lib is torch else optim).SGD(
            [{"params": [params[0]], "lr": 1.0}, {"params": [params[1]], "lr": 0.5}]
        )
        schedule = swa.SWALR(opt, [0.1, 0.2], anneal_epochs, strategy)
        seen = []
        for _ in range(7):
            seen.append(schedule.get_last_lr())
            opt.step()
            schedule.step()
        return seen

    np.testing.assert_allclose(
        rates(ge, optim.swa_utils), rates(torch, torch.optim.swa_utils), rtol=1e-13
    )


@needs_torch
def test_update_bn_recomputes_the_statistics_as_torch() -> None:
    ours, theirs = make(nn), make(torch.nn)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    batches = [RNG.standard_normal((n, 3)).astype(np.float32) for n in (6, 4, 5)]
    ours.eval()
    theirs.eval()
    optim.swa_utils.update_bn([(b, None) for b in batches], ours)
    torch.optim.swa_utils.update_bn([(torch.tensor(b), None) for b in batches], theirs)
    assert not ours.training and ours[1].momentum == 0.1
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-5, err_msg=key)


def test_swa_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="get_ema_multi_avg_fn: decay must be in"):
        optim.swa_utils.get_ema_multi_avg_fn(1.5)
    opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=0.1)
    with pytest.raises(gc.GraphcError, match="SWALR: anneal_strategy must be"):
        optim.swa_utils.SWALR(opt, 0.05, anneal_strategy="step")
    with pytest.raises(gc.GraphcError, match="AveragedModel.update_parameters: the model has"):
        optim.swa_utils.AveragedModel(nn.Linear(2, 2)).update_parameters(
            nn.Linear(2, 2, bias=False)
        )
