"""SGD and Adam in eager mode: torch.optim's equations, step by step."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import optim

SGD_SETTINGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
    dict(lr=0.1, weight_decay=0.1),
]
ADAM_SETTINGS = [
    dict(lr=0.01),
    dict(lr=0.1, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
]


def quadratic_grads(w: np.ndarray, step: int) -> np.ndarray:
    """A gradient that changes with the point and the step (of 0.5 * |w - target|^2)."""
    return w - np.sin(np.arange(w.size) + step).reshape(w.shape)


def reference_sgd(w: np.ndarray, steps: int, lr: float, momentum: float = 0.0,
                  dampening: float = 0.0, weight_decay: float = 0.0,
                  nesterov: bool = False) -> np.ndarray:  # fmt: skip
    """torch.optim.SGD's documented algorithm, written out in numpy."""
    buf = None
    for t in range(steps):
        g = quadratic_grads(w, t) + weight_decay * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        w = w - lr * g
    return w


def reference_adam(w: np.ndarray, steps: int, lr: float, betas: tuple = (0.9, 0.999),
                   eps: float = 1e-8, weight_decay: float = 0.0) -> np.ndarray:  # fmt: skip
    """torch.optim.Adam's documented algorithm (amsgrad off), written out in numpy."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, steps + 1):
        g = quadratic_grads(w, t - 1) + weight_decay * w
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
    return w


def run_eager(make, settings: dict, steps: int, w0: np.ndarray) -> np.ndarray:
    w = ge.tensor(w0, requires_grad=True)
    opt = make([w], **settings)
    for t in range(steps):
        opt.zero_grad()
        target = ge.tensor(np.sin(np.arange(w0.size) + t).reshape(w0.shape))
        (0.5 * ((w - target) ** 2).sum()).backward()
        opt.step()
    return w.detach().numpy()


W0 = np.random.default_rng(0).standard_normal((3, 2))


@pytest.mark.parametrize("settings", SGD_SETTINGS, ids=str)
def test_sgd_follows_torch_equations(settings: dict) -> None:
    got = run_eager(optim.SGD, settings, 6, W0)
    np.testing.assert_allclose(got, reference_sgd(W0, 6, **settings), rtol=1e-12)


@pytest.mark.parametrize("settings", ADAM_SETTINGS, ids=str)
def test_adam_follows_torch_equations(settings: dict) -> None:
    got = run_eager(optim.Adam, settings, 6, W0)
    np.testing.assert_allclose(got, reference_adam(W0, 6, **settings), rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "settings"),
    [("SGD", s) for s in SGD_SETTINGS] + [("Adam", s) for s in ADAM_SETTINGS],
    ids=str,
)
def test_optimizers_match_torch(name: str, settings: dict) -> None:
    torch = pytest.importorskip("torch")
    w = torch.tensor(W0, requires_grad=True)
    opt = getattr(torch.optim, name)([w], **settings)
    for t in range(6):
        opt.zero_grad()
        target = torch.tensor(np.sin(np.arange(W0.size) + t).reshape(W0.shape))
        (0.5 * ((w - target) ** 2).sum()).backward()
        opt.step()
    got = run_eager(getattr(optim, name), settings, 6, W0)
    np.testing.assert_allclose(got, w.detach().numpy(), rtol=1e-12)


def test_state_is_per_parameter_and_made_on_the_first_step() -> None:
    a, b = ge.ones(2, requires_grad=True), ge.ones(3, requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    assert opt.state == [{}, {}]
    (a * a).sum().backward()  # b gets no gradient: it is skipped
    opt.step()
    assert sorted(opt.state[0]) == ["exp_avg", "exp_avg_sq", "step"]
    assert opt.state[0]["step"].item() == 1.0 and opt.state[1] == {}
    np.testing.assert_array_equal(b.detach().numpy(), np.ones(3))
    assert a.is_leaf and a.requires_grad  # updated in place, still a parameter
    np.testing.assert_allclose(opt.state_arrays(1)["exp_avg"], np.zeros(3))


def test_sgd_state_names_follow_its_settings() -> None:
    w = [ge.ones(2, requires_grad=True)]
    assert optim.SGD(w, lr=0.1).state_names == ()
    assert optim.SGD(w, lr=0.1, momentum=0.9).state_names == ("momentum_buffer",)
    assert optim.SGD(w, lr=0.1, momentum=0.9, dampening=0.1).state_names == (
        "momentum_buffer",
        "step",
    )


def test_a_changed_learning_rate_is_used_and_shown() -> None:
    w = ge.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    opt.lr = 0.5  # as a schedule would
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])
    assert repr(opt).startswith("SGD(lr=0.5, momentum=0.0")


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none: bool) -> None:
    w = ge.ones(2, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    (w * 3).sum().backward()
    opt.zero_grad(set_to_none=set_to_none)
    assert w.grad is None if set_to_none else not w.grad.numpy().any()


def test_bad_settings_and_parameters_are_clear_errors() -> None:
    w = ge.ones(2, requires_grad=True)
    with pytest.raises(gc.GraphcError, match="invalid lr: -1"):
        optim.SGD([w], lr=-1)
    with pytest.raises(gc.GraphcError, match="invalid beta2: 1.0"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(gc.GraphcError, match="Nesterov momentum needs momentum > 0"):
        optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(gc.GraphcError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(gc.GraphcError, match="parameter 0 .* must be a leaf tensor"):
        optim.SGD([ge.ones(2, requires_grad=True) * 2], lr=0.1)
    with pytest.raises(gc.GraphcError, match="parameter 1 .* is listed twice"):
        optim.SGD([w, w], lr=0.1)
    with pytest.raises(gc.GraphcError, match="parameter 0 is a ndarray"):
        optim.SGD([np.ones(2)], lr=0.1)


def test_update_records_the_same_equations_on_graph_values() -> None:
    opt = optim.Adam([ge.ones(2, requires_grad=True)], lr=0.1, weight_decay=0.1)
    spec = gc.TensorSpec((2,), "float64")

    def one_update(p, g, step, m, v):
        new_p, new_state = opt.update(p, g, {"step": step, "exp_avg": m, "exp_avg_sq": v})
        return new_p, new_state["step"], new_state["exp_avg"], new_state["exp_avg_sq"]

    scalar = gc.TensorSpec((), "float64")
    g = gc.trace(one_update, spec, spec, scalar, spec, spec)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(2), rng.standard_normal(2), np.array(3.0)]
    arrays += [rng.standard_normal(2), rng.random(2)]
    with ge.no_grad():
        want = one_update(*[ge.tensor(a) for a in arrays])
    for got, expected in zip(g(*arrays), want):
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-14)


@pytest.mark.parametrize("name", ["graphc.optim", "graphc.optim.sgd", "graphc.optim.adam"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
