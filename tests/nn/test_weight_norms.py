"""nn.utils.weight_norm and spectral_norm (torch's hook forms) and their remove_*
inverses against torch 2.13: parameter and buffer names, forward values and gradients,
spectral norm's power iteration over training steps (eager and compiled), eval mode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(19)


def linear(lib):
    return lib.Linear(3, 4, **({"generator": 0} if lib is nn else {}))


def conv(lib):
    return lib.Conv2d(2, 3, 3, **({"generator": 0} if lib is nn else {}))


def transposed(lib):
    return lib.ConvTranspose2d(3, 2, 3, **({"generator": 0} if lib is nn else {}))


def batch(layer) -> np.ndarray:
    if isinstance(layer, nn.Linear):
        return RNG.standard_normal((2, 3)).astype(np.float32)
    channels = 3 if isinstance(layer, nn.ConvTranspose2d) else 2
    return RNG.standard_normal((2, channels, 5, 5)).astype(np.float32)


def twins(make, wrap: str, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: weight_norm is deprecated for parametrizations
        theirs = getattr(torch.nn.utils, wrap)(make(torch.nn), **options)
    ours = getattr(nn.utils, wrap)(make(nn), **options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def compare(ours, theirs, steps: int) -> None:
    for _ in range(steps):
        x = batch(ours)
        out, want = ours(ge.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=2e-6)
        out.sum().backward()
        want.sum().backward()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), atol=2e-5, err_msg=name)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), atol=1e-6, err_msg=key)


@needs_torch
@pytest.mark.parametrize("make", [linear, conv])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(make, dim: int | None) -> None:
    ours, theirs = twins(make, "weight_norm", dim=dim)
    compare(ours, theirs, 1)
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach(), atol=1e-6)


@needs_torch
@pytest.mark.parametrize("make", [linear, conv, transposed])
def test_spectral_norm_matches_torch(make) -> None:
    ours, theirs = twins(make, "spectral_norm", n_power_iterations=2)
    compare(ours, theirs, 3)  # training: u and v advance each forward
    ours.eval()
    theirs.eval()
    x = batch(ours)
    np.testing.assert_allclose(
        ours(ge.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=2e-6
    )
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@needs_torch
def test_spectral_norm_trains_as_torch_in_a_compiled_step() -> None:
    eager, theirs = twins(linear, "spectral_norm")
    compiled, _ = twins(linear, "spectral_norm")
    compiled.load_state_dict(eager.state_dict())
    x, y = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal((6, 4))
    y = y.astype(np.float32)
    step = gc.compile_train_step(
        compiled, nn.MSELoss(), optim.SGD(compiled.parameters(), lr=0.1), (x, y)
    )
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    for _ in range(3):
        loss = float(step(x, y))
        their_opt.zero_grad()
        want = torch.nn.functional.mse_loss(theirs(torch.tensor(x)), torch.tensor(y))
        want.backward()
        their_opt.step()
        np.testing.assert_allclose(loss, want.item(), rtol=1e-5)
    state = {**step.parameters(), **step.buffers()}
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(state[key], value.numpy(), atol=1e-5, err_msg=key)


def test_weight_norm_mistakes_are_named_errors() -> None:
    layer = nn.utils.spectral_norm(nn.Linear(2, 2))
    with pytest.raises(gc.GraphcError, match="spectral_norm: Linear.weight already has"):
        nn.utils.spectral_norm(layer)
    with pytest.raises(gc.GraphcError, match="remove_weight_norm: weight_norm of 'weight' not"):
        nn.utils.remove_weight_norm(layer)
    with pytest.raises(gc.GraphcError, match="weight_norm: Linear has no parameter 'kernel'"):
        nn.utils.weight_norm(nn.Linear(2, 2), name="kernel")
