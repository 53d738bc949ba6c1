"""Convolution and pooling layers: PyTorch's parameters, state_dict keys, initialization,
outputs and gradients given the same parameters; eager, traced and compiled agree; a
LeNet trains statically exactly as it trains eagerly."""

from __future__ import annotations

import doctest
import math
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(2)
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-5}, "float64": {"rtol": 1e-10, "atol": 1e-10}}

# (layer name, constructor args, input shape)
LAYERS = [
    ("Conv2d", (3, 4, 3), {}, (2, 3, 7, 6)),
    ("Conv2d", (4, 6, (3, 2)), {"stride": (2, 1), "padding": 1, "dilation": 2, "groups": 2}, (2, 4, 9, 8)),
    ("Conv2d", (4, 4, 3), {"padding": "same", "groups": 4, "bias": False}, (1, 4, 5, 5)),
    ("Conv2d", (2, 3, 1), {"stride": 3}, (2, 5, 5)),  # unbatched input
    ("Conv1d", (3, 5, 3), {"padding": 2, "dilation": 2, "stride": 2}, (2, 3, 11)),
    ("Conv1d", (4, 4, 4), {"padding": "same", "groups": 2}, (2, 4, 9)),
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 3, 4, 5)),
    ("ConvTranspose2d", (4, 2, (2, 3)), {"groups": 2, "dilation": (2, 1), "bias": False}, (1, 4, 3, 3)),
    ("ConvTranspose1d", (3, 2, 3), {"stride": 3, "output_padding": 2}, (2, 3, 4)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 8, 7)),
    ("MaxPool2d", (2,), {"dilation": 2}, (1, 2, 7, 7)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 8, 7)),
    ("AvgPool2d", ((2, 3),), {"ceil_mode": True, "divisor_override": 4}, (1, 2, 7, 7)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 8, 7)),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 5, 5)),
    ("Flatten", (), {}, (2, 3, 4, 5)),
    ("Flatten", (0, 2), {}, (2, 3, 4, 5)),
]  # fmt: skip
IDS = [f"{name}{args}{kwargs}".replace(" ", "") for name, args, kwargs, _ in LAYERS]


def pair(name: str, args: tuple, kwargs: dict, dtype: str) -> tuple[Any, nn.Module]:
    """The torch layer and graphc's, holding the same parameters (through state_dict)."""
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype))
    ours = getattr(nn, name)(
        *args, **kwargs, **({"dtype": dtype} if name.startswith("Conv") else {})
    )
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert sorted(state) == sorted(ours.state_dict())
    for key, value in ours.state_dict().items():
        assert value.shape == state[key].shape and value.dtype == state[key].dtype, key
    ours.load_state_dict(state)
    return theirs, ours


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAYERS, ids=IDS)
def test_layer_matches_torch_given_the_same_parameters(
    name: str, args: tuple, kwargs: dict, shape: tuple, dtype: str
) -> None:
    theirs, ours = pair(name, args, kwargs, dtype)
    x = RNG.standard_normal(shape).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    want = theirs(tx)
    ct = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    want.backward(torch.tensor(ct))
    ex = ge.tensor(x, requires_grad=True)
    got = ours(ex)
    assert got.shape == tuple(want.shape) and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype])
    got.backward(ge.tensor(ct))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), **TOL[dtype])
    grads = {k: p.grad.numpy() for k, p in theirs.named_parameters()}
    for key, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[key], **TOL[dtype], err_msg=key)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAYERS, ids=IDS)
def test_layer_traces_into_a_graph_that_runs_like_eager(
    name: str, args: tuple, kwargs: dict, shape: tuple
) -> None:
    extra = {"dtype": "float64", "generator": 0} if name.startswith("Conv") else {}
    layer = getattr(nn, name)(*args, **kwargs, **extra)
    x = RNG.standard_normal(shape)
    eager = layer(ge.tensor(x)).detach().numpy()
    g = gc.trace(layer, x)
    np.testing.assert_array_equal(gc.run(g, {g.inputs[0].name: x, **gc.lifted_feeds(g)})[0], eager)
    for level in (0, 2):
        np.testing.assert_array_equal(
            gc.compile(g, opt_level=level)(x, **gc.lifted_feeds(g)), eager
        )


def lenet(dtype: str = "float32", seed: int = 0) -> nn.Module:
    """LeNet-5 for 1x28x28 images, PyTorch's usual spelling."""
    rng = np.random.default_rng(seed)
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2, dtype=dtype, generator=rng), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5, dtype=dtype, generator=rng), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(400, 120, dtype=dtype, generator=rng), nn.ReLU(),
        nn.Linear(120, 10, dtype=dtype, generator=rng),
    )  # fmt: skip


@needs_torch
def test_lenet_with_torch_parameters_gives_torch_outputs_and_gradients() -> None:
    ours = lenet("float64")
    theirs = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 10),
    ).double()  # fmt: skip
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x, labels = RNG.standard_normal((8, 1, 28, 28)), RNG.integers(0, 10, 8)
    want = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(labels))
    want.backward()
    got = nn.CrossEntropyLoss()(ours(ge.tensor(x)), ge.tensor(labels))
    got.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    grads = {k: p.grad.numpy() for k, p in theirs.named_parameters()}
    for key, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[key], rtol=1e-9, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("opt_level", [0, 2])
def test_lenet_trains_statically_exactly_as_eagerly(opt_level: int) -> None:
    # Its own generator: with the module's, the data (and whether five steps lower the
    # loss) depended on which tests ran before in the shard.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((24, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 24)
    eager_model, static_model = lenet(), lenet()
    loss_fn = nn.CrossEntropyLoss()
    eager_opt = optim.SGD(eager_model.parameters(), lr=0.05, momentum=0.9)
    static_opt = optim.SGD(static_model.parameters(), lr=0.05, momentum=0.9)
    step = gc.compile_train_step(static_model, loss_fn, static_opt, (x[:8], y[:8]), opt_level)
    eager_losses, static_losses = [], []
    for start in (0, 8, 16, 0, 8):
        xb, yb = x[start : start + 8], y[start : start + 8]
        eager_opt.zero_grad()
        loss = loss_fn(eager_model(ge.from_numpy(xb)), ge.from_numpy(yb))
        loss.backward()
        eager_opt.step()
        eager_losses.append(loss.item())
        static_losses.append(float(step.step(xb, yb)))
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-5)
    assert static_losses[3] < static_losses[0] and static_losses[4] < static_losses[1]  # seen again
    step.sync_to_model()
    eager_params = dict(eager_model.named_parameters())
    for key, p in static_model.named_parameters():
        np.testing.assert_allclose(
            p.detach().numpy(), eager_params[key].detach().numpy(), rtol=1e-4, atol=1e-6
        )


def test_traced_lenet_gradients_are_the_same_bits_at_every_level() -> None:
    model = lenet("float64", seed=3)
    x = RNG.standard_normal((4, 1, 28, 28))
    g = gc.trace(lambda v: gc.sum(gc.tanh(model(v))), gc.TensorSpec((None, 1, 28, 28), "float64"))
    gg = gc.gradients(g, wrt=[p.name for p in g.inputs])
    feeds = {"v": x, **gc.lifted_feeds(g)}
    want = gc.run(gg, feeds)
    for level in (0, 1, 2):
        for a, b in zip(gc.compile(gg, opt_level=level)(**feeds), want):
            np.testing.assert_array_equal(a, b)
    lifted = gc.lifted_tensors(g)
    ge.tanh(model(ge.tensor(x))).sum().backward()
    for p, grad in zip(g.inputs[1:], want[2:]):
        np.testing.assert_allclose(grad, lifted[p.name].grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("layer", "fan_in"),
    [(nn.Conv2d(6, 16, 5, dtype="float64", generator=5), 150),
     (nn.Conv2d(8, 4, (3, 2), groups=4, dtype="float64", generator=5), 12),
     (nn.Conv1d(3, 8, 7, dtype="float64", generator=5), 21),
     (nn.ConvTranspose2d(6, 8, 3, groups=2, dtype="float64", generator=5), 36)],
)  # fmt: skip
def test_initialization_follows_torch_bounds_and_seeds(layer: nn.Module, fan_in: int) -> None:
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)): 1/sqrt(fan_in), as the bias
    for p in (layer.weight, layer.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.75 * bound
    again = type(layer)(layer.in_channels, layer.out_channels, layer.kernel_size, groups=layer.groups,
                        dtype="float64", generator=5)  # fmt: skip
    np.testing.assert_array_equal(again.weight.detach().numpy(), layer.weight.detach().numpy())
    ge.manual_seed(7)
    first = nn.Conv2d(2, 3, 3).weight.detach().numpy().copy()
    ge.manual_seed(7)
    np.testing.assert_array_equal(nn.Conv2d(2, 3, 3).weight.detach().numpy(), first)


def test_conv_transpose_output_size_picks_the_output_padding() -> None:
    up = nn.ConvTranspose2d(2, 2, 3, stride=3, padding=1, generator=0)
    x = ge.ones(1, 2, 4, 4)
    assert up(x).shape == (1, 2, 10, 10)
    assert up(x, output_size=(12, 11)).shape == (1, 2, 12, 11)
    assert up(x, output_size=(1, 2, 11, 10)).shape == (1, 2, 11, 10)
    with pytest.raises(gc.ShapeError, match="valid sizes along dim 0 range from 10 to 12"):
        up(x, output_size=(13, 10))


@needs_torch
def test_conv_transpose_output_size_matches_torch() -> None:
    theirs, ours = pair("ConvTranspose2d", (2, 3, 3), {"stride": 3, "padding": 1}, "float64")
    x = RNG.standard_normal((1, 2, 4, 4))
    want = theirs(torch.tensor(x), output_size=[12, 11])
    got = ours(ge.tensor(x), output_size=(12, 11))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: nn.Conv2d(3, 4, 3, groups=2), "divisible by groups"),
        (lambda: nn.Conv2d(2, 4, 3, padding_mode="mirror"), "Conv2d: padding_mode must be one of"),
        (lambda: nn.Conv2d(2, 4, 3, stride=2, padding="same"), "not supported for strided"),
        (lambda: nn.ConvTranspose2d(2, 4, 3, padding="same"), "padding 'same' is not supported"),
        (lambda: nn.Conv2d(2, 4, (3, 3, 3)), "Conv2d: kernel_size must be one int or 2 ints"),
    ],
)
def test_layer_mistakes_raise_graphc_errors(make: Any, message: str) -> None:
    with pytest.raises(gc.GraphcError, match=message):
        make()


def test_flatten_keeps_a_symbolic_batch_and_follows_torch_dims() -> None:
    g = gc.trace(nn.Flatten(), gc.TensorSpec((None, 3, 4, 5)))
    assert g.outputs[0].type.shape[1] == 60
    assert nn.Flatten(0, -1)(ge.ones(2, 3, 4)).shape == (24,)
    assert nn.Flatten(-2)(ge.ones(2, 3, 4)).shape == (2, 12)
    assert nn.Flatten()(ge.tensor(3.0)).shape == (1,)
    with pytest.raises(gc.ShapeError, match="Flatten: start_dim 2 comes after end_dim 1"):
        nn.Flatten(2, 1)(ge.ones(2, 3, 4))


def test_docstring_examples() -> None:
    import graphc.nn.conv

    result = doctest.testmod(graphc.nn.conv)
    assert result.attempted > 0 and result.failed == 0
