"""The padding layers (ZeroPad, ConstantPad, ReflectionPad, ReplicationPad, CircularPad
in 1d, 2d and 3d) against torch: repr, values and gradients, with and without the
batch dim, traced, and the input ranks torch refuses."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(5)
KINDS = ["ZeroPad", "ConstantPad", "ReflectionPad", "ReplicationPad", "CircularPad"]


@needs_torch
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_padding_layers_match_torch(kind: str, dims: int) -> None:
    padding = (2, 1, 0, 2, 1, 1)[: 2 * dims]
    args = (padding, -1.5) if kind == "ConstantPad" else (padding,)
    ours, theirs = getattr(nn, f"{kind}{dims}d")(*args), getattr(torch.nn, f"{kind}{dims}d")(*args)
    assert repr(ours) == repr(theirs)
    assert repr(getattr(nn, f"{kind}{dims}d")(1, *args[1:])) == repr(
        getattr(torch.nn, f"{kind}{dims}d")(1, *args[1:])
    )
    for shape in ((2, 3) + (4,) * dims, (3,) + (4,) * dims):  # batched and not
        x = RNG.standard_normal(shape)
        a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, want = ours(a), theirs(b)
        np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
        seed = RNG.standard_normal(want.shape)
        (out * ge.tensor(seed)).sum().backward()
        (want * torch.tensor(seed)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(gc.jit(ours)(x), want.detach().numpy())


def test_padding_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match=r"ZeroPad2d: padding must be one int or 4 ints"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(gc.ShapeError, match=r"ReflectionPad2d: expected 3D or 4D input"):
        nn.ReflectionPad2d(1)(ge.ones(1, 2, 3, 4, 5))
    with pytest.raises(gc.ShapeError, match=r"CircularPad1d: expected 2D or 3D input"):
        nn.CircularPad1d(1)(ge.ones(3))
    with pytest.raises(gc.ShapeError, match=r"ZeroPad3d: the padding .* pads 3 dims"):
        nn.ZeroPad3d(1)(ge.ones(2, 3))
