"""Loss modules and their nn.functional forms against PyTorch: values and gradients for
every reduction eagerly, gradients of the traced graph, and compiled training steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(0)


def probabilities(shape: tuple[int, ...]) -> np.ndarray:
    """Probabilities with the edges torch's clamps and gradients care about: 0, 1, tiny."""
    p = 1 / (1 + np.exp(-RNG.standard_normal(shape) * 2))
    p.flat[:3] = [0.0, 1.0, 1e-300]
    return p


def log_probabilities(shape: tuple[int, ...]) -> np.ndarray:
    z = RNG.standard_normal(shape)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def labels(shape: tuple[int, ...], classes: int, ignored: int = -100) -> np.ndarray:
    y = RNG.integers(0, classes, shape)
    y.flat[1] = ignored
    return y


def regression() -> tuple[np.ndarray, np.ndarray]:
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    y[0, 0] = x[0, 0]  # d = 0: l1's gradient is sign(0) = 0
    y[1, 1] = x[1, 1] + 1.0  # |d| = beta = delta: the pieces meet
    y[2, 2] = x[2, 2] - 0.5
    return x, y


def logits_with_edges() -> np.ndarray:
    z = RNG.standard_normal((4, 3)) * 30
    z.flat[:3] = [0.0, 800.0, -800.0]  # 0, and logits whose sigmoid is 1 or 0
    return z


# name -> (module kwargs, input, target, torch's class name, target differentiable)
CASES: dict[str, tuple[dict, np.ndarray, np.ndarray, str, bool]] = {
    "l1": ({}, *regression(), "L1Loss", True),
    "mse": ({}, *regression(), "MSELoss", True),
    "smooth_l1": ({}, *regression(), "SmoothL1Loss", True),
    "smooth_l1_beta": ({"beta": 0.5}, *regression(), "SmoothL1Loss", True),
    "smooth_l1_beta0": ({"beta": 0.0}, *regression(), "SmoothL1Loss", True),
    "huber": ({"delta": 0.5}, *regression(), "HuberLoss", True),
    "kl_div": ({}, log_probabilities((4, 3)), np.exp(log_probabilities((4, 3))), "KLDivLoss", True),
    "kl_div_zero_target": (
        {},
        log_probabilities((4, 3)),
        np.eye(4, 3),  # 0 log 0 = 0
        "KLDivLoss",
        False,
    ),
    "kl_div_log_target": (
        {"log_target": True},
        log_probabilities((4, 3)),
        log_probabilities((4, 3)),
        "KLDivLoss",
        True,
    ),
    "bce": ({}, probabilities((4, 3)), (RNG.random((4, 3)) > 0.5) * 1.0, "BCELoss", True),
    "bce_soft_weight": (
        {"weight": RNG.random(3)},
        probabilities((4, 3)),
        RNG.random((4, 3)),
        "BCELoss",
        False,
    ),
    "bce_logits": ({}, logits_with_edges(), RNG.random((4, 3)), "BCEWithLogitsLoss", True),
    "bce_logits_weights": (
        {"weight": RNG.random((4, 3)), "pos_weight": RNG.random(3) * 3},
        logits_with_edges(),
        (RNG.random((4, 3)) > 0.5) * 1.0,
        "BCEWithLogitsLoss",
        True,
    ),
    "nll": ({}, log_probabilities((5, 4)), labels((5,), 4), "NLLLoss", False),
    "nll_weight_ignore": (
        {"weight": RNG.random(4), "ignore_index": 2},
        log_probabilities((5, 4)),
        labels((5,), 4, ignored=2),
        "NLLLoss",
        False,
    ),
    "cross_entropy": ({}, RNG.standard_normal((5, 4)), labels((5,), 4), "CrossEntropyLoss", False),
    "cross_entropy_spatial": (
        {"weight": RNG.random(4), "label_smoothing": 0.2},
        RNG.standard_normal((2, 4, 3, 2)),
        labels((2, 3, 2), 4),
        "CrossEntropyLoss",
        False,
    ),
    "cross_entropy_unbatched": ({}, RNG.standard_normal(4), np.array(2), "CrossEntropyLoss", False),
    "cross_entropy_probabilities": (
        {"weight": RNG.random(4), "label_smoothing": 0.1},
        RNG.standard_normal((3, 4)),
        np.exp(log_probabilities((3, 4))),
        "CrossEntropyLoss",
        True,
    ),
}


def ours(name: str, reduction: str) -> nn.Module:
    kwargs, *_, cls, _ = CASES[name]
    return getattr(nn, cls)(reduction=reduction, **kwargs)


def theirs(name: str, reduction: str) -> Any:
    kwargs, *_, cls, _ = CASES[name]
    given = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    return getattr(torch.nn, cls)(reduction=reduction, **given)


def reductions(name: str) -> list[str]:
    return ["mean", "sum", "none"] + (["batchmean"] if name.startswith("kl_div") else [])


def value_and_grads(loss_fn: Callable, lib: Any, x: np.ndarray, y: np.ndarray, wrt_y: bool):
    """The loss, and the gradients of sum(loss * w) for a fixed random w (x, then y)."""
    xt = lib.tensor(x, requires_grad=True)
    yt = lib.tensor(y, requires_grad=wrt_y)
    loss = loss_fn(xt, yt)
    w = np.random.default_rng(1).standard_normal(tuple(loss.shape))
    (loss * lib.tensor(w)).sum().backward()
    grads = [xt.grad.numpy()] + ([yt.grad.numpy()] if wrt_y else [])
    return loss.detach().numpy(), grads


def assert_close(got: Any, want: Any, what: str) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13, err_msg=what)


@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # torch's kl_div advice
@pytest.mark.filterwarnings("error::RuntimeWarning")  # no numpy warning torch does not give
@pytest.mark.parametrize("name", list(CASES))
def test_eager_losses_and_gradients_match_torch(name: str) -> None:
    _, x, y, _, wrt_y = CASES[name]
    for reduction in reductions(name):
        got, got_grads = value_and_grads(ours(name, reduction), ge, x, y, wrt_y)
        want, want_grads = value_and_grads(theirs(name, reduction), torch, x, y, wrt_y)
        assert_close(got, want, f"{name}, reduction={reduction}")
        for g, w in zip(got_grads, want_grads):
            assert_close(g, w, f"{name}, reduction={reduction}: gradient")


@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # torch's kl_div advice
@pytest.mark.parametrize("name", list(CASES))
def test_traced_losses_and_gradients_match_torch(name: str) -> None:
    """Traced, differentiated and compiled (numpy and native backends), every reduction:
    the class losses' targets hold an ignored label (-100 with the defaults)."""
    _, x, y, _, _ = CASES[name]
    for reduction in reductions(name):
        g = gc.trace(ours(name, reduction), x, y)
        if g.outputs[0].type.rank:  # reduction 'none': the gradient of its sum, as torch's
            g = gc.trace(lambda a, b, f=g: gc.sum(f(a, b, **gc.lifted_feeds(f))), x, y)
        joint = gc.gradients(g, wrt=[g.inputs[0].name])
        xt = torch.tensor(x, requires_grad=True)
        want = theirs(name, reduction)(xt, torch.tensor(y))
        want.sum().backward()
        for backend in ("numpy", "native"):
            exe = gc.compile(joint, backend=backend)
            got, grad = exe(x, y, **gc.lifted_feeds(g))
            what = f"{name}, reduction={reduction}, {backend}"
            assert_close(got, want.sum().detach().numpy(), what)
            assert_close(grad, xt.grad.numpy(), f"{what}: gradient")


def test_functional_forms_are_the_modules() -> None:
    x, y = regression()
    for module, function in [
        (nn.SmoothL1Loss(beta=0.5, reduction="none"), lambda a, b: F.smooth_l1_loss(a, b, "none", 0.5)),
        (nn.L1Loss(reduction="sum"), lambda a, b: F.l1_loss(a, b, reduction="sum")),
    ]:  # fmt: skip
        np.testing.assert_array_equal(
            module(ge.tensor(x), ge.tensor(y)).numpy(), function(ge.tensor(x), ge.tensor(y)).numpy()
        )
    weighted = nn.CrossEntropyLoss(weight=np.ones(3))
    assert list(weighted.state_dict()) == ["weight"]  # a buffer, as torch's
    assert list(nn.CrossEntropyLoss().state_dict()) == []


def test_a_graph_ignores_minus_100_targets_by_default_as_torch() -> None:
    """A padding label of -100 adds nothing and counts for nothing in a graph's mean, as
    in torch and on eager tensors (a graph used to divide by every target and refuse
    -100 as out of range when it ran); the gradient leaves the ignored rows at zero."""
    logits, y = RNG.standard_normal((4, 3)), np.array([0, -100, 2, 1])
    kept = [0, 2, 3]
    want = F.cross_entropy(ge.tensor(logits[kept]), ge.tensor(y[kept])).item()
    for loss in (nn.CrossEntropyLoss(), lambda a, b: F.nll_loss(F.log_softmax(a, 1), b)):
        traced = gc.trace(loss, logits, y)
        np.testing.assert_allclose(traced(logits, y), want, rtol=1e-12)
        eager = ge.tensor(logits, requires_grad=True)
        loss(eager, ge.tensor(y)).backward()
        value, grad = gc.compile(gc.gradients(traced, wrt=[traced.inputs[0].name]))(logits, y)
        np.testing.assert_allclose(value, want, rtol=1e-12)
        np.testing.assert_allclose(grad, eager.grad.numpy(), rtol=1e-12, atol=1e-15)
        assert not grad[1].any()
    every = np.full(4, -100)
    with np.errstate(invalid="ignore"):
        assert np.isnan(gc.trace(nn.CrossEntropyLoss(), logits, every)(logits, every))


def test_every_target_ignored_gives_nan_as_torch() -> None:
    with np.errstate(invalid="ignore"):
        loss = F.cross_entropy(ge.zeros(2, 3), ge.tensor([-100, -100]))
    assert np.isnan(loss.item())
    assert F.cross_entropy(ge.zeros(2, 3), ge.tensor([-100, -100]), reduction="sum").item() == 0


def model() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(3, 4, dtype="float64", generator=0),
        nn.Tanh(),
        nn.Linear(4, 3, dtype="float64", generator=1),
    )


TRAINED = {
    "cross_entropy": lambda y: labels(y.shape[:1], 3),
    "bce_logits_weights": lambda y: (RNG.random((8, 3)) > 0.5) * 1.0,
    "huber": lambda y: y,
}


@needs_torch
@pytest.mark.parametrize("name", list(TRAINED))
def test_compiled_training_steps_with_the_loss_match_torch(name: str) -> None:
    kwargs = dict(CASES[name][0])
    if name == "bce_logits_weights":
        kwargs["weight"] = RNG.random(3)
    if name == "cross_entropy":
        kwargs.update(weight=RNG.random(3), label_smoothing=0.1)
    loss = getattr(nn, CASES[name][3])(**kwargs)
    given = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    their_loss = getattr(torch.nn, CASES[name][3])(**given)
    net = model()
    their_net = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)
    ).double()
    their_net.load_state_dict({k: torch.tensor(v) for k, v in net.state_dict().items()})
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    their_opt = torch.optim.SGD(their_net.parameters(), lr=0.1, momentum=0.9)
    x = RNG.standard_normal((8, 3))
    y = TRAINED[name](RNG.standard_normal((8, 3)))
    step = gc.compile_train_step(net, loss, opt, (x, y))
    for _ in range(3):
        their_opt.zero_grad()
        want = their_loss(their_net(torch.tensor(x)), torch.tensor(y))
        want.backward()
        their_opt.step()
        np.testing.assert_allclose(float(step(x, y)), want.item(), rtol=1e-12)
    step.sync_to_model()
    for key, value in their_net.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[key], value.numpy(), rtol=1e-10)
