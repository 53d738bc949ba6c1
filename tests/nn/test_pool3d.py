"""MaxPool3d, AvgPool3d and AdaptiveAvgPool3d (and their F.* spellings), built from
the 2-D pools, against torch 2.13: values and gradients (plateaus too: one element of a
window takes the gradient, as torch's), ceil_mode, padding, dilation, unbatched inputs,
torch's average divisors (count_include_pad, divisor_override), a traced symbolic
batch."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(23)

CASES = [
    ("MaxPool3d", {"kernel_size": 2}, (2, 3, 4, 6, 6)),
    ("MaxPool3d", {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": (1, 1, 0),
                   "ceil_mode": True}, (2, 2, 7, 5, 6)),
    ("MaxPool3d", {"kernel_size": 3, "stride": 2, "dilation": (2, 1, 1), "padding": 1},
     (1, 2, 9, 7, 7)),
    ("MaxPool3d", {"kernel_size": (2, 3, 3), "stride": 1}, (2, 5, 5, 5)),  # no batch dim
    ("AvgPool3d", {"kernel_size": 2}, (2, 3, 4, 6, 6)),
    ("AvgPool3d", {"kernel_size": (3, 2, 3), "stride": (2, 1, 2), "padding": (1, 1, 1),
                   "ceil_mode": True}, (2, 2, 7, 5, 6)),
    ("AvgPool3d", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                   "count_include_pad": False}, (1, 2, 6, 7, 8)),
    ("AvgPool3d", {"kernel_size": (2, 2, 3), "padding": (1, 0, 1), "divisor_override": 5},
     (2, 5, 5, 5)),  # no batch dim
    ("AdaptiveAvgPool3d", {"output_size": (2, 3, None)}, (2, 3, 5, 7, 4)),
    ("AdaptiveAvgPool3d", {"output_size": 1}, (2, 3, 4, 4, 4)),
    ("AdaptiveAvgPool3d", {"output_size": (3, 2, 5)}, (2, 7, 6, 5)),
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize(("kind", "options", "shape"), CASES, ids=str)
def test_pools_match_torch(kind: str, options: dict, shape: tuple) -> None:
    ours, theirs = getattr(nn, kind)(**options), getattr(torch.nn, kind)(**options)
    assert repr(ours) == repr(theirs)
    x = RNG.standard_normal(shape)
    x[..., :2, 0] = 0.0  # plateaus: ties within windows
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = ours(a), theirs(b)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-14)
    seed = RNG.standard_normal(tuple(want.shape))
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-13)
    if len(shape) == 5:
        g = gc.trace(ours, gc.TensorSpec(("B", *shape[1:]), "float64"))
        np.testing.assert_allclose(g(x), want.detach().numpy(), atol=1e-14)


def test_pool3d_refusals_are_named() -> None:
    with pytest.raises(gc.GraphcError, match="max_pool3d: return_indices=True is not supported"):
        nn.functional.max_pool3d(ge.ones(1, 1, 2, 2, 2), 2, return_indices=True)
    with pytest.raises(gc.GraphcError, match="max_pool3d: pad should be at most half"):
        nn.functional.max_pool3d(ge.ones(1, 1, 4, 4, 4), 2, padding=2)
