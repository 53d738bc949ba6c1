"""nn.Conv3d and F.conv3d (a sum of conv2d's over the kernel's depth taps) against torch
2.13: values and the gradients of input, weight and bias for strides, paddings (ints,
'same', a padding_mode), dilations and groups, an unbatched input, a traced symbolic
batch and a compiled training step."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(22)

CASES = [
    ({"in_channels": 2, "out_channels": 4, "kernel_size": 3}, (2, 2, 5, 6, 7)),
    ({"in_channels": 4, "out_channels": 6, "kernel_size": (2, 3, 1), "stride": (2, 1, 2),
      "padding": (1, 0, 1), "dilation": (2, 1, 1), "groups": 2}, (2, 4, 7, 5, 6)),
    ({"in_channels": 3, "out_channels": 2, "kernel_size": (3, 2, 2), "padding": "same",
      "dilation": 2, "bias": False}, (1, 3, 6, 5, 5)),
    ({"in_channels": 2, "out_channels": 3, "kernel_size": 3, "padding": 1,
      "padding_mode": "reflect"}, (2, 4, 4, 5)),  # no batch dim
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize(("options", "shape"), CASES, ids=str)
def test_conv3d_matches_torch(options: dict, shape: tuple) -> None:
    theirs = torch.nn.Conv3d(**options).double()
    ours = nn.Conv3d(**options, dtype="float64")
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal(shape)
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = ours(a), theirs(b)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)
    seed = RNG.standard_normal(tuple(want.shape))
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-12)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-11, err_msg=name)
    if len(shape) == 5:
        g = gc.trace(ours, gc.TensorSpec(("B", *shape[1:]), "float64"))
        traced = g(x, **gc.lifted_feeds(g))
        np.testing.assert_allclose(traced, want.detach().numpy(), atol=1e-12)


@needs_torch
def test_conv3d_trains_as_torch_in_a_compiled_step() -> None:
    ours = nn.Sequential(
        nn.Conv3d(1, 2, 3, generator=0), nn.Flatten(), nn.Linear(16, 1, generator=1)
    )
    theirs = torch.nn.Sequential(
        torch.nn.Conv3d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(16, 1)
    )
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    x = RNG.standard_normal((4, 1, 4, 4, 4)).astype(np.float32)
    y = RNG.standard_normal((4, 1)).astype(np.float32)
    step = gc.compile_train_step(ours, nn.MSELoss(), optim.SGD(ours.parameters(), lr=0.05), (x, y))
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.05)
    for _ in range(3):
        loss = float(step(x, y))
        their_opt.zero_grad()
        want = torch.nn.functional.mse_loss(theirs(torch.tensor(x)), torch.tensor(y))
        want.backward()
        their_opt.step()
        np.testing.assert_allclose(loss, want.item(), rtol=1e-5)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(step.parameters()[key], value.numpy(), atol=1e-5, err_msg=key)


def test_conv3d_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="padding='same' is not supported for strided"):
        nn.functional.conv3d(
            ge.ones(1, 1, 4, 4, 4), ge.ones(1, 1, 3, 3, 3), stride=2, padding="same"
        )
    with pytest.raises(gc.ShapeError, match="conv3d: the kernel"):
        nn.functional.conv3d(ge.ones(1, 1, 2, 4, 4), ge.ones(1, 1, 3, 3, 3))
    with pytest.raises(gc.GraphcError, match="conv3d: expected a 4-D"):
        nn.functional.conv3d(ge.ones(1, 4, 4), ge.ones(1, 1, 3, 3, 3))
