"""AdaptiveMaxPool1d/2d and F.adaptive_max_pool1d/2d against PyTorch, for sizes that do
not divide (PyTorch's bins of floor(i * n / out) up to ceil((i + 1) * n / out), which may
overlap) and sizes that do: values, indices, gradients, eagerly and traced."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(3)


@needs_torch
@pytest.mark.parametrize(
    "shape, size",
    [
        ((2, 3, 7, 9), (3, 4)),  # neither divides
        ((2, 3, 4, 5), (5, 7)),  # larger than the input: bins repeat positions
        ((3, 6, 10), (4, None)),  # no batch dim; None keeps W
        ((2, 1, 8, 6), (4, 3)),  # both divide: max_pool2d's windows
        ((1, 2, 5, 5), 1),
    ],
)
def test_adaptive_max_pool2d_matches_torch(shape: tuple, size: object) -> None:
    x = RNG.normal(size=shape).astype(np.float32)
    x[..., 0, 1] = x[..., 0, 0]  # a tie: the first maximum in row-major order wins
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (values, where) = nn.AdaptiveMaxPool2d(size, return_indices=True)(a)
    (want, want_where) = torch.nn.AdaptiveMaxPool2d(size, return_indices=True)(b)
    np.testing.assert_array_equal(values.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(where.numpy(), want_where.numpy())
    seed = RNG.normal(size=want.shape).astype(np.float32)
    (values * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    # traced with a symbolic batch, the same numbers
    if len(shape) == 4:
        g = gc.trace(
            lambda t: F.adaptive_max_pool2d(t, size, True), gc.TensorSpec(("B", *shape[1:]))
        )
        traced, traced_where = g(x)
        np.testing.assert_array_equal(traced, want.detach().numpy())
        np.testing.assert_array_equal(traced_where, want_where.numpy())


@needs_torch
@pytest.mark.parametrize("shape, size", [((2, 3, 7), 3), ((3, 10), 4), ((2, 2, 8), 4)])
def test_adaptive_max_pool1d_matches_torch(shape: tuple, size: int) -> None:
    x = RNG.normal(size=shape).astype(np.float32)
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    values, where = F.adaptive_max_pool1d(a, size, return_indices=True)
    want, want_where = torch.nn.functional.adaptive_max_pool1d(b, size, return_indices=True)
    np.testing.assert_array_equal(values.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(where.numpy(), want_where.numpy())
    values.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    assert repr(nn.AdaptiveMaxPool1d(size)) == repr(torch.nn.AdaptiveMaxPool1d(size))
    np.testing.assert_array_equal(nn.AdaptiveMaxPool1d(size)(ge.tensor(x)).numpy(), want.detach())


def test_adaptive_max_pool_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="adaptive_max_pool2d: expected a 3-D"):
        F.adaptive_max_pool2d(ge.ones(2, 3), 2)
    with pytest.raises(gc.GraphcError, match="adaptive_max_pool2d: output_size"):
        F.adaptive_max_pool2d(ge.ones(1, 2, 3, 3), (1, 2, 3))
    with pytest.raises(gc.GraphcError, match="adaptive_max_pool2d: expected a non-empty"):
        F.adaptive_max_pool2d(ge.ones(1, 2, 0, 3), 2)
    with pytest.raises(gc.GraphcError, match="adaptive_max_pool1d: output_size must be one int"):
        F.adaptive_max_pool1d(ge.ones(1, 2, 5), (2, 2))
