"""Hardshrink, Softshrink, Softmax2d, RReLU, PixelShuffle, PixelUnshuffle and
ChannelShuffle against torch: repr, values and gradients, traced with a symbolic batch,
and RReLU's random slopes by their range, not their bits."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(9)

LAYERS = [
    ("Hardshrink", (), (3, 8)),
    ("Softshrink", (0.3,), (3, 8)),
    ("Softmax2d", (), (2, 3, 4, 5)),
    ("RReLU", (0.1, 0.4), (3, 8)),  # eval mode: the mean slope
    ("PixelShuffle", (2,), (2, 8, 3, 5)),
    ("PixelShuffle", (3,), (2, 3, 9, 2, 3)),  # two leading dims
    ("PixelUnshuffle", (2,), (2, 3, 4, 6)),
    ("ChannelShuffle", (3,), (2, 6, 4, 5)),
]


@needs_torch
@pytest.mark.parametrize(("kind", "args", "shape"), LAYERS, ids=str)
def test_layers_match_torch(kind: str, args: tuple, shape: tuple) -> None:
    ours, theirs = getattr(nn, kind)(*args).eval(), getattr(torch.nn, kind)(*args).eval()
    assert repr(ours) == repr(theirs)
    x = RNG.standard_normal(shape)
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = ours(a), theirs(b)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    seed = RNG.standard_normal(want.shape)
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-15)
    g = gc.trace(ours, gc.TensorSpec(("B", *shape[1:]), "float64"))
    np.testing.assert_allclose(g(x, **gc.lifted_feeds(g)), want.detach().numpy(), rtol=1e-12)


def test_shuffles_invert_each_other() -> None:
    x = ge.tensor(RNG.standard_normal((2, 12, 4, 6)))
    back = nn.PixelShuffle(2)(nn.PixelUnshuffle(2)(x))
    np.testing.assert_array_equal(back.numpy(), x.numpy())


def test_rrelu_draws_slopes_in_its_range_while_training() -> None:
    ge.manual_seed(3)
    layer = nn.RReLU(0.1, 0.3)
    x = ge.full((4000,), -2.0, requires_grad=True)
    out = layer(x)
    slopes = out.detach().numpy() / -2.0
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and len(np.unique(slopes)) > 3000
    assert abs(slopes.mean() - 0.2) < 0.005  # uniform on [0.1, 0.3]
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-6)  # d(a x)/dx = a
    np.testing.assert_array_equal(layer(ge.tensor([3.0])).numpy(), [3.0])


def test_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.ShapeError, match=r"pixel_shuffle: the channels .* square"):
        nn.PixelShuffle(2)(ge.ones(1, 6, 2, 2))
    with pytest.raises(gc.ShapeError, match="pixel_unshuffle: the width"):
        nn.PixelUnshuffle(2)(ge.ones(1, 1, 2, 3))
    with pytest.raises(gc.GraphcError, match="pixel_shuffle: upscale_factor must be"):
        nn.PixelShuffle(0)(ge.ones(1, 4, 2, 2))
    with pytest.raises(gc.ShapeError, match="channel_shuffle: the channels"):
        nn.ChannelShuffle(4)(ge.ones(1, 6, 2))
    with pytest.raises(gc.GraphcError, match="Softmax2d: expected a 3D or 4D input"):
        nn.Softmax2d()(ge.ones(2, 3))
    with pytest.raises(gc.GraphcError, match="softshrink: lambd must be at least 0"):
        nn.Softshrink(-1.0)(ge.ones(2))
