"""F.interpolate's linear modes ('linear', 'bilinear', 'bicubic', with and without
align_corners) and 'area', and nn.UpsamplingBilinear2d / UpsamplingNearest2d, against
torch 2.13: values and gradients in float32 and float64, traced."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(15)

RESIZES = [
    ((2, 3, 5), {"size": 8, "mode": "linear"}),
    ((2, 3, 5), {"scale_factor": 1.7, "mode": "linear", "align_corners": True}),
    ((2, 3, 5, 7), {"size": (9, 4), "mode": "bilinear"}),
    ((2, 3, 5, 7), {"scale_factor": (0.6, 1.5), "mode": "bilinear"}),
    ((2, 3, 5, 7), {"scale_factor": 2, "mode": "bilinear", "align_corners": True}),
    ((2, 3, 5, 7), {"scale_factor": 1.3, "mode": "bilinear", "recompute_scale_factor": True}),
    ((1, 2, 4, 4), {"size": (7, 9), "mode": "bicubic"}),
    ((1, 2, 4, 6), {"scale_factor": 2.5, "mode": "bicubic", "align_corners": True}),
    ((1, 2, 6, 6), {"size": (4, 3), "mode": "area"}),
    ((1, 2, 9), {"size": 4, "mode": "area"}),
]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "options"), RESIZES, ids=str)
def test_linear_modes_match_torch(shape: tuple, options: dict, dtype: str) -> None:
    x = RNG.standard_normal(shape).astype(dtype)
    mine, theirs = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = F.interpolate(mine, **options)
    want = torch.nn.functional.interpolate(theirs, **options)
    # float32: a few steps of the values' size (bicubic's 16 taps sum in another order
    # than torch's; inputs vary with the tests run before, RNG being the module's)
    rtol, atol = (1e-5, 2e-6) if dtype == "float32" else (1e-12, 1e-13)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    seed = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=rtol, atol=atol)
    if dtype == "float64":
        traced = gc.jit(lambda v: F.interpolate(v, **options))(x)
        np.testing.assert_allclose(traced, want.detach().numpy(), rtol=rtol, atol=atol)


@needs_torch
@pytest.mark.parametrize("kind", ["UpsamplingBilinear2d", "UpsamplingNearest2d"])
def test_upsampling_layers_match_torch(kind: str) -> None:
    x = RNG.standard_normal((2, 3, 4, 5))
    ours, theirs = getattr(nn, kind)(scale_factor=2), getattr(torch.nn, kind)(scale_factor=2)
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(
        ours(ge.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), atol=1e-13
    )


def test_interpolate_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.ShapeError, match="interpolate: mode 'bilinear' takes a 4-D input"):
        F.interpolate(ge.ones(1, 2, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(gc.GraphcError, match="align_corners is for the modes linear"):
        F.interpolate(ge.ones(1, 2, 3), scale_factor=2, align_corners=True)
    with pytest.raises(gc.GraphcError, match="antialias=True is not supported"):
        F.interpolate(ge.ones(1, 2, 4, 4), size=2, mode="bilinear", antialias=True)
