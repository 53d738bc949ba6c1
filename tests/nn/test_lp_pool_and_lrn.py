"""LPPool1d/2d and LocalResponseNorm (with their F.* spellings) against torch 2.13:
values and gradients, reprs, traced with a symbolic batch."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(16)

CASES = [
    ("LPPool2d", (2, 3), (2, 3, 7, 8), True),
    ("LPPool2d", (1.5, (2, 3), (1, 2), True), (2, 3, 7, 8), True),  # positive inputs for p = 1.5
    ("LPPool2d", (float("inf"), 2), (2, 3, 6, 6), False),
    ("LPPool1d", (3, 2), (2, 3, 9), False),
    ("LPPool1d", (2.0, 3, 2), (3, 10), True),
    ("LocalResponseNorm", (3,), (2, 5, 4), False),
    ("LocalResponseNorm", (4, 0.01, 0.5, 2.0), (2, 6, 3, 4), False),
    ("LocalResponseNorm", (2,), (2, 3, 2, 2, 3), False),
]


@needs_torch
@pytest.mark.parametrize(("kind", "args", "shape", "positive"), CASES, ids=str)
def test_layers_match_torch(kind: str, args: tuple, shape: tuple, positive: bool) -> None:
    ours, theirs = getattr(nn, kind)(*args), getattr(torch.nn, kind)(*args)
    assert repr(ours) == repr(theirs)
    x = RNG.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.1
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = ours(a), theirs(b)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    seed = RNG.standard_normal(tuple(want.shape))
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    g = gc.trace(ours, gc.TensorSpec(("B", *shape[1:]), "float64"))
    np.testing.assert_allclose(g(x), want.detach().numpy(), rtol=1e-12)


def test_local_response_norm_needs_channels() -> None:
    with pytest.raises(gc.ShapeError, match="local_response_norm: expected an input of 3"):
        nn.LocalResponseNorm(2)(ge.ones(3, 4))
