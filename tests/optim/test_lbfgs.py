"""optim.LBFGS against torch 2.13 (without a line search): parameters, losses and the
iteration counters after several steps of a Rosenbrock-like problem (float64; float32
on a short run), a short history, torch's state_dict resumed, and the uses torch's
LBFGS has that graphc's refuses by name."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch


def problem(lib, dtype: str, **settings):
    w = lib.tensor(np.array([-1.5, 2.0, 0.5], dtype), requires_grad=True)
    v = lib.tensor(np.array([[0.3, -0.2]], dtype), requires_grad=True)
    opt = (torch.optim if lib is torch else optim).LBFGS([w, v], **settings)

    def closure():
        opt.zero_grad()
        rosenbrock = (100 * (w[1:] - w[:-1] ** 2) ** 2 + (1 - w[:-1]) ** 2).sum()
        loss = rosenbrock + ((v - 0.5) ** 4).sum() + (v * w[:2]).sum()
        loss.backward()
        return loss

    return w, v, opt, closure


@needs_torch
@pytest.mark.parametrize(
    ("dtype", "settings", "steps"),
    [
        ("float64", {}, 3),
        ("float64", {"history_size": 3, "max_iter": 7}, 3),
        ("float32", {"lr": 0.5, "max_iter": 4}, 3),
    ],
    ids=str,
)
def test_lbfgs_steps_match_torch(dtype: str, settings: dict, steps: int) -> None:
    *ours, opt, closure = problem(ge, dtype, **settings)
    *theirs, their_opt, their_closure = problem(torch, dtype, **settings)
    tolerance = 1e-7 if dtype == "float64" else 1e-5
    for _ in range(steps):
        loss, want = opt.step(closure), their_opt.step(their_closure)
        np.testing.assert_allclose(loss.item(), want.item(), rtol=tolerance)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=tolerance)
    state, their_state = opt.state_dict()["state"][0], their_opt.state_dict()["state"][0]
    assert sorted(state) == sorted(their_state)
    assert (state["n_iter"], state["func_evals"]) == (
        their_state["n_iter"],
        their_state["func_evals"],
    )
    assert len(state["old_dirs"]) == len(their_state["old_dirs"])


@needs_torch
def test_lbfgs_resumes_from_torchs_state() -> None:
    *_, their_opt, their_closure = problem(torch, "float64", history_size=4, max_iter=5)
    their_w, their_v = their_opt.param_groups[0]["params"]
    for _ in range(2):
        their_opt.step(their_closure)
    w, v, opt, closure = problem(ge, "float64", history_size=4, max_iter=5)
    with ge.no_grad():
        w.copy_(ge.tensor(their_w.detach().numpy()))
        v.copy_(ge.tensor(their_v.detach().numpy()))
    opt.load_state_dict(their_opt.state_dict())
    opt.step(closure)
    their_opt.step(their_closure)
    np.testing.assert_allclose(w.detach().numpy(), their_w.detach().numpy(), atol=1e-9)
    assert opt.state_dict()["state"][0]["n_iter"] == their_opt.state_dict()["state"][0]["n_iter"]


def test_lbfgs_refusals_are_named() -> None:
    w = ge.ones(2, requires_grad=True)
    with pytest.raises(gc.GraphcError, match="line_search_fn='strong_wolfe' is not supported"):
        optim.LBFGS([w], line_search_fn="strong_wolfe")
    with pytest.raises(gc.GraphcError, match="LBFGS.step needs a closure"):
        optim.LBFGS([w]).step()
    with pytest.raises(gc.GraphcError, match="several param groups"):
        optim.LBFGS([{"params": [w]}, {"params": [ge.ones(2, requires_grad=True)]}])
    model = nn.Linear(2, 1, generator=0)
    x, y = np.ones((4, 2), np.float32), np.zeros((4, 1), np.float32)
    with pytest.raises(gc.GraphcError, match="LBFGS: its step calls a closure"):
        gc.compile_train_step(model, nn.MSELoss(), optim.LBFGS(model.parameters()), (x, y))
