"""Layers, losses and initializers: numbers vs numpy, eagerly and traced, and seeding."""

from __future__ import annotations

import doctest
import importlib
import math

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import init
from graphc.runtime.backend import available_backends

RNG = np.random.default_rng(0)


def eager_and_traced(module: nn.Module, *arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The module's result on tensors, and the traced graph's result on the same arrays."""
    eager = module(*[ge.from_numpy(a) for a in arrays]).detach().numpy()
    g = gc.trace(module, *arrays)
    return eager, g(*arrays, **gc.lifted_feeds(g))


def test_linear_matches_numpy_in_both_modes() -> None:
    layer = nn.Linear(4, 3, dtype="float64", generator=0)
    x = RNG.standard_normal((5, 4))
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    eager, traced = eager_and_traced(layer, x)
    np.testing.assert_allclose(eager, x @ w.T + b, rtol=1e-12)
    np.testing.assert_allclose(traced, x @ w.T + b, rtol=1e-12)
    no_bias = nn.Linear(4, 3, bias=False, dtype="float64", generator=0)
    assert [n for n, _ in no_bias.named_parameters()] == ["weight"]
    np.testing.assert_allclose(no_bias(ge.from_numpy(x)).detach().numpy(), x @ w.T, rtol=1e-12)


def test_linear_gradients_match_finite_differences() -> None:
    layer = nn.Linear(3, 2, dtype="float64", generator=1)
    x = ge.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    assert ge.autograd.gradcheck(
        lambda x, w, b: ge.tanh(x @ w.T + b).sum(), (x, layer.weight, layer.bias)
    )


def test_linear_initialization_follows_torch_bounds_and_seeds() -> None:
    layer = nn.Linear(64, 32, dtype="float64", generator=3)
    bound = 1 / math.sqrt(64)
    for p in (layer.weight, layer.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.9 * bound  # spread over the whole interval
    again = nn.Linear(64, 32, dtype="float64", generator=3)
    np.testing.assert_array_equal(again.weight.detach().numpy(), layer.weight.detach().numpy())
    other = nn.Linear(64, 32, dtype="float64", generator=4)
    assert not np.allclose(other.weight.detach().numpy(), layer.weight.detach().numpy())
    single = nn.Linear(64, 32, generator=3)  # float32: the same draw, rounded
    assert single.weight.dtype == np.float32
    np.testing.assert_allclose(
        single.weight.detach().numpy(), layer.weight.detach().numpy(), rtol=1e-6
    )


def test_linear_without_a_generator_follows_the_eager_manual_seed() -> None:
    ge.manual_seed(11)
    first = nn.Linear(5, 5).weight.detach().numpy()
    ge.manual_seed(11)
    np.testing.assert_array_equal(nn.Linear(5, 5).weight.detach().numpy(), first)


def test_linear_rejects_a_wrong_feature_count() -> None:
    with pytest.raises(gc.ShapeError, match="Linear\\(4, 3\\): input has 5 features"):
        nn.Linear(4, 3)(ge.ones(2, 5))


@pytest.mark.parametrize(
    ("layer", "reference"),
    [
        (nn.ReLU(), lambda x: np.maximum(x, 0)),
        (nn.Tanh(), np.tanh),
        (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    ],
    ids=["relu", "tanh", "sigmoid"],
)
def test_activations_match_numpy(layer: nn.Module, reference) -> None:
    x = RNG.standard_normal((3, 4))
    for result in eager_and_traced(layer, x):
        np.testing.assert_allclose(result, reference(x), rtol=1e-12)


def test_sequential_applies_layers_in_order() -> None:
    first, second = nn.Linear(3, 4, generator=0), nn.Linear(4, 2, generator=1)
    model = nn.Sequential(first, nn.Tanh(), second)
    assert len(model) == 3 and model[0] is first and model[-1] is second
    x = ge.randn(5, 3)
    np.testing.assert_allclose(
        model(x).detach().numpy(), second(ge.tanh(first(x))).detach().numpy(), rtol=1e-6
    )
    with pytest.raises(gc.GraphcError, match="layer 1 is a ufunc, not an nn.Module"):
        nn.Sequential(first, np.tanh)


def log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def test_losses_match_numpy_in_both_modes() -> None:
    prediction, target = RNG.standard_normal((6, 2)), RNG.standard_normal((6, 2))
    for result in eager_and_traced(nn.MSELoss(), prediction, target):
        np.testing.assert_allclose(result, np.mean((prediction - target) ** 2), rtol=1e-12)
    logits, labels = RNG.standard_normal((6, 4)) * 5, RNG.integers(0, 4, 6)
    want = -np.mean(log_softmax(logits)[np.arange(6), labels])
    for result in eager_and_traced(nn.CrossEntropyLoss(), logits, labels):
        np.testing.assert_allclose(result, want, rtol=1e-12)


def test_cross_entropy_gradient_matches_finite_differences() -> None:
    logits = ge.tensor(RNG.standard_normal((5, 3)), requires_grad=True)
    labels = ge.tensor(RNG.integers(0, 3, 5))
    assert ge.autograd.gradcheck(lambda z: nn.CrossEntropyLoss()(z, labels), (logits,))


@pytest.mark.parametrize(
    "shape, axis", [((3, 3), 0), ((2, 5, 3), 1), ((2, 5, 3), -2), ((4, 2, 3, 2), 1)]
)
def test_cross_entropy_classes_on_another_axis(shape: tuple, axis: int) -> None:
    """The labels' one-hot mask goes on the logits' class axis (one_hot puts it last: a
    square input gave a wrong loss silently, the rest a ShapeError). Against the loss
    with the classes moved last, and its gradient against softmax minus the one-hot."""
    logits = RNG.standard_normal(shape)
    last = np.moveaxis(logits, axis, -1)
    labels = RNG.integers(0, shape[axis], last.shape[:-1])
    logp = last - np.log(np.exp(last).sum(-1, keepdims=True))
    want = -np.mean(np.take_along_axis(logp, labels[..., None], -1))
    np.testing.assert_allclose(gc.cross_entropy(logits, labels, axis=axis), want, rtol=1e-12)
    g = gc.trace(lambda z, y: gc.cross_entropy(z, y, axis=axis), logits, labels)
    loss, grad = gc.compile(gc.gradients(g, wrt=["z"]))(logits, labels)
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    probs = np.exp(logp)
    np.put_along_axis(
        probs, labels[..., None], np.take_along_axis(probs, labels[..., None], -1) - 1, -1
    )
    np.testing.assert_allclose(
        grad, np.moveaxis(probs / labels.size, -1, axis), rtol=1e-10, atol=1e-15
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_picks_the_labels_log_probability_past_masked_classes(dtype: str) -> None:
    """A class masked with a -inf logit (not a row's label) leaves the loss and its
    gradient finite, as PyTorch's nll_loss picks them; a one-hot matrix times the
    log-probabilities made them nan (0 * -inf). Eager, traced graph with its gradient
    on both backends; against PyTorch where it is installed, else against numpy."""
    logits = RNG.standard_normal((5, 4)).astype(dtype) * 3
    logits[0, 2] = logits[3, 0] = logits[3, 1] = -np.inf
    labels = np.array([0, 1, 3, 2, 3])
    shifted = np.where(np.isinf(logits), -np.inf, logits - logits.max(axis=1, keepdims=True))
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    want = -np.mean(logp[np.arange(5), labels])
    grad = np.exp(logp)
    grad[np.arange(5), labels] -= 1
    grad /= 5
    tol = {"rtol": 1e-5 if dtype == "float32" else 1e-12, "atol": 1e-7}
    z = ge.tensor(logits, requires_grad=True)
    loss = ge.cross_entropy(z, ge.tensor(labels))
    loss.backward()
    np.testing.assert_allclose(loss.detach().numpy(), want, **tol)
    np.testing.assert_allclose(z.grad.numpy(), grad, **tol)
    g = gc.trace(gc.cross_entropy, gc.TensorSpec(logits.shape, dtype), gc.TensorSpec((5,), "int64"))
    both = gc.gradients(g, wrt=[g.inputs[0].name])
    for backend in available_backends():
        got_loss, got_grad = gc.compile(both, backend=backend)(logits, labels)
        np.testing.assert_allclose(got_loss, want, **tol)
        np.testing.assert_allclose(got_grad, grad, **tol)
    torch = pytest.importorskip("torch")
    t = torch.tensor(logits, requires_grad=True)
    expected = torch.nn.functional.cross_entropy(t, torch.tensor(labels))
    expected.backward()
    np.testing.assert_allclose(loss.detach().numpy(), expected.detach().numpy(), **tol)
    np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), **tol)


def test_losses_reject_mismatched_inputs() -> None:
    with pytest.raises(gc.ShapeError, match=r"mse_loss: input has shape \(4, 1\).*\(4,\)"):
        nn.MSELoss()(ge.zeros(4, 1), ge.zeros(4))
    with pytest.raises(gc.ShapeError, match=r"target must have shape \(4,\)"):
        nn.CrossEntropyLoss()(ge.zeros(4, 3), ge.zeros(5, dtype="int64"))
    with pytest.raises(gc.ShapeError, match=r"cross_entropy: input has shape \(4, 3\)"):
        nn.CrossEntropyLoss()(ge.zeros(4, 3), ge.zeros(4))  # float targets: probabilities
    with pytest.raises(gc.GraphcError, match="nll_loss: target must be integer class indices"):
        nn.NLLLoss()(ge.zeros(4, 3), ge.zeros(4))
    with pytest.raises(gc.GraphcError, match="MSELoss: reduction must be one of 'mean', 'sum'"):
        nn.MSELoss(reduction="average")
    with pytest.raises(gc.GraphcError, match="'batchmean', got 'batch'"):
        nn.KLDivLoss(reduction="batch")
    with pytest.raises(gc.ShapeError, match=r"weight must hold one value per class, shape \(3,\)"):
        nn.CrossEntropyLoss(weight=np.ones(4))(ge.zeros(2, 3), ge.tensor([0, 1]))


def test_initializers_fill_in_place_with_their_bounds() -> None:
    w = ge.zeros(200, 100, dtype="float64")
    assert init.xavier_uniform_(w, generator=0) is w
    assert np.abs(w.numpy()).max() <= math.sqrt(6 / 300)
    init.kaiming_uniform_(w, nonlinearity="relu", generator=0)
    assert np.abs(w.numpy()).max() <= math.sqrt(2) * math.sqrt(3 / 100)
    init.normal_(w, mean=1.0, std=2.0, generator=np.random.default_rng(0))
    assert abs(w.numpy().mean() - 1.0) < 0.05 and abs(w.numpy().std() - 2.0) < 0.05
    init.zeros_(w)
    assert not w.numpy().any()
    init.ones_(w)
    assert (w.numpy() == 1).all()
    assert init.calculate_fan_in_and_fan_out(ge.zeros(8, 3, 5, 5)) == (75, 200)
    with pytest.raises(gc.GraphcError, match="rank >= 2"):
        init.kaiming_uniform_(ge.zeros(3))
    with pytest.raises(gc.GraphcError, match="unknown nonlinearity 'swish'"):
        init.calculate_gain("swish")


def test_normal_from_an_int_seed_is_normal_and_repeatable() -> None:
    # both uniforms of Box-Muller come from one stream (a seed made twice repeats them)
    w = init.normal_(ge.zeros(20000, dtype="float64"), generator=0).numpy()
    assert abs(w.mean()) < 0.03 and abs(w.std() - 1.0) < 0.03
    assert abs(np.percentile(w, 1) + np.percentile(w, 99)) < 0.1  # symmetric tails
    again = init.normal_(ge.zeros(20000, dtype="float64"), generator=0).numpy()
    np.testing.assert_array_equal(w, again)


def test_initializing_a_parameter_keeps_it_a_leaf() -> None:
    w = ge.zeros(3, 3, requires_grad=True)
    init.uniform_(w, -1, 1, generator=0)
    assert w.is_leaf and w.requires_grad and w.grad_fn is None


@pytest.mark.parametrize(
    "name",
    [
        "graphc.nn",
        "graphc.nn.layers",
        "graphc.nn.containers",
        "graphc.nn.parameter",
        "graphc.nn.utils",
        "graphc.nn.distance",
        "graphc.nn.functional.distance",
        "graphc.nn.functional.resize",
        "graphc.nn.loss",
        "graphc.nn.functional.loss",
        "graphc.nn.module",
        "graphc.nn.init",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
