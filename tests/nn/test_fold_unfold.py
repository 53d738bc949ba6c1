"""F.unfold / F.fold and nn.Unfold / nn.Fold against torch 2.13: values and gradients
for kernels, dilations, paddings and strides that leave a remainder, batched and not,
traced with a symbolic batch; fold inverts unfold up to each position's window count."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(18)

SETTINGS = [
    ((2, 3, 5, 6), {"kernel_size": (2, 3)}),
    ((2, 3, 7, 6), {"kernel_size": 3, "dilation": (2, 1), "padding": 1, "stride": 2}),
    ((3, 5, 5), {"kernel_size": 2, "stride": (1, 2), "padding": (1, 0)}),  # unbatched
]


@needs_torch
@pytest.mark.parametrize(("shape", "options"), SETTINGS, ids=str)
def test_unfold_and_fold_match_torch(shape: tuple, options: dict) -> None:
    x = RNG.standard_normal(shape)
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = nn.Unfold(**options), torch.nn.Unfold(**options)
    assert repr(ours) == repr(theirs)
    columns, want = ours(a), theirs(b)
    np.testing.assert_array_equal(columns.detach().numpy(), want.detach().numpy())
    seed = RNG.standard_normal(tuple(want.shape))
    (columns * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
    # fold: the adjoint, columns summed back
    cols = RNG.standard_normal(tuple(want.shape))
    c, d = ge.tensor(cols, requires_grad=True), torch.tensor(cols, requires_grad=True)
    folder, their_folder = nn.Fold(shape[-2:], **options), torch.nn.Fold(shape[-2:], **options)
    assert repr(folder) == repr(their_folder)
    image, their_image = folder(c), their_folder(d)
    np.testing.assert_allclose(image.detach().numpy(), their_image.detach().numpy(), rtol=1e-12)
    seed = RNG.standard_normal(shape)
    (image * ge.tensor(seed)).sum().backward()
    (their_image * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), d.grad.numpy(), rtol=1e-12)
    if len(shape) == 4:
        g = gc.trace(ours, gc.TensorSpec(("B", *shape[1:]), "float64"))
        np.testing.assert_array_equal(g(x), want.detach().numpy())


def test_unfold_copies_infinities_and_mistakes_are_named() -> None:
    x = np.arange(12.0).reshape(1, 1, 3, 4)
    x[0, 0, 1, 1] = np.inf
    columns = F.unfold(ge.tensor(x), 2).numpy()
    assert np.isinf(columns).sum() == 4 and not np.isnan(columns).any()
    with pytest.raises(gc.ShapeError, match=r"unfold: the kernel \(5, 5\)"):
        F.unfold(ge.ones(1, 1, 3, 3), 5)
    with pytest.raises(gc.ShapeError, match=r"fold: expected \(N, C \* 4, 6\) columns"):
        F.fold(ge.ones(1, 5, 6), (3, 4), 2)
