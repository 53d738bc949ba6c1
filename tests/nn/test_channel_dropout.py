"""Dropout1d/2d/3d, AlphaDropout and FeatureAlphaDropout against PyTorch: not random
bits but what the masks share (the dims along which a mask is constant), the values a
kept and a dropped entry take, the fraction kept, gradients, eval mode, and the masks
drawn inside gc.jit and a compiled training step."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch


def constant_dims(y: np.ndarray) -> tuple[int, ...]:
    """The dims along which every slice of y holds one value (a mask shared along them)."""
    return tuple(d for d in range(y.ndim) if (y == y.take([0], axis=d)).all())


CHANNEL_CASES = [
    ("Dropout1d", (40, 50, 6)),
    ("Dropout1d", (400, 6)),  # no batch dim: one mask entry per channel
    ("Dropout2d", (40, 50, 3, 2)),
    ("Dropout2d", (40, 50, 6)),  # torch takes a 3-D input as (N, C, L)
    ("Dropout3d", (40, 50, 2, 2, 2)),
    ("Dropout3d", (400, 2, 2, 2)),  # no batch dim
]


@needs_torch
@pytest.mark.parametrize("kind, shape", CHANNEL_CASES)
def test_channel_dropout_masks_whole_channels_as_torch(kind: str, shape: tuple) -> None:
    p = 0.3
    ge.manual_seed(0)
    ours, theirs = getattr(nn, kind)(p), getattr(torch.nn, kind)(p)
    assert repr(ours) == repr(theirs)
    x = ge.ones(*shape, requires_grad=True)
    y = ours(x)
    with (
        pytest.warns(UserWarning)
        if kind == "Dropout2d" and len(shape) == 3
        else contextlib.nullcontext()
    ):
        want = theirs(torch.ones(shape)).numpy()
    out = y.detach().numpy()
    assert constant_dims(out) == constant_dims(want) and constant_dims(out)  # the same sharing
    np.testing.assert_allclose(np.unique(out), np.unique(want))  # 0 and 1 / (1 - p)
    kept = (out != 0).mean()
    assert abs(kept - (1 - p)) < 0.05 and abs(kept - (want != 0).mean()) < 0.07
    y.sum().backward()  # the gradient is the mask, scaled
    np.testing.assert_array_equal(x.grad.numpy(), out)
    ours.eval()
    assert ours(x) is x


@needs_torch
@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_mean_and_variance_as_torch(feature: bool) -> None:
    kind = "FeatureAlphaDropout" if feature else "AlphaDropout"
    shape = (200, 300, 4) if feature else (240000,)
    ge.manual_seed(1)
    torch.manual_seed(1)
    ours, theirs = getattr(nn, kind)(0.2), getattr(torch.nn, kind)(0.2)
    assert repr(ours) == repr(theirs)
    # on zeros a kept entry becomes b, a dropped one a * alpha' + b: torch's two values
    zeros = ours(ge.zeros(*shape)).numpy()
    np.testing.assert_allclose(np.unique(zeros), np.unique(theirs(torch.zeros(shape)).numpy()))
    if feature:
        assert constant_dims(zeros) == (2,)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    out, want = ours(ge.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy()
    for stat in (np.mean, np.std):  # about 0 and 1, as the input's
        assert abs(stat(out) - stat(want)) < 0.03
    ours.eval()
    np.testing.assert_array_equal(ours(ge.tensor(x)).numpy(), x)


def test_dropout2d_draws_new_masks_in_jit_and_in_a_compiled_step() -> None:
    p, shape = 0.25, (8, 64, 3, 3)
    layer = nn.Dropout2d(p)
    jitted = gc.jit(lambda t: layer(t))
    x = np.ones(shape, np.float32)
    first, second = jitted(x), jitted(x)
    assert not np.array_equal(first, second)
    for out in (first, second):
        assert constant_dims(out) == (2, 3)
        assert abs((out != 0).mean() - (1 - p)) < 0.1
    # the loss mean(w * dropout2d(ones)) with w = 1 is the kept fraction of the 8 x 64
    # channels over (1 - p): a whole number of channels, different each step
    scale = nn.Parameter(ge.ones(1))
    model = nn.Sequential(layer)
    step = gc.compile_train_step(
        model, lambda out, y: (out * scale).mean(), optim.SGD([scale], lr=0.0), (x, x)
    )
    counts = [float(step(x, x)) * (1 - p) * 8 * 64 for _ in range(4)]
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-3)
    assert len(set(np.round(counts))) > 1
    assert all(abs(c / 512 - (1 - p)) < 0.1 for c in counts)


def test_dropout_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="Dropout2d: p must be between 0 and 1"):
        nn.Dropout2d(1.5)
    with pytest.raises(gc.GraphcError, match="alpha_dropout: p must be between 0 and 1"):
        F.alpha_dropout(ge.ones(3), -0.1, True)
    with pytest.raises(
        gc.ShapeError, match=r"dropout1d: expected a 2D .* got shape \(1, 2, 3, 4\)"
    ):
        F.dropout1d(ge.ones(1, 2, 3, 4))
    # p = 1 drops everything, as torch's
    assert F.dropout3d(ge.ones(2, 2, 2, 2, 2), 1.0).abs().sum().item() == 0.0
    assert F.alpha_dropout(ge.ones(4), 1.0, True).tolist() == [0.0] * 4
