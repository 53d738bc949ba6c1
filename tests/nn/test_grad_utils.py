"""nn.utils against torch 2.13: parameters_to_vector is a result of the parameters
(a loss of it sent them no gradient), get_total_norm and clip_grads_with_norm_ (the
halves of clip_grad_norm_), "inf" as a norm_type, and the total norm's dtype when the
gradients' dtypes differ."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(11)


@needs_torch
def test_parameters_to_vector_passes_gradients_to_the_parameters() -> None:
    arrays = [RNG.standard_normal(s) for s in ((2, 3), (4,), ())]
    ours = [ge.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    weights = RNG.standard_normal(11)
    vector = nn.utils.parameters_to_vector(ours)
    their_vector = torch.nn.utils.parameters_to_vector(theirs)
    (vector * vector * ge.tensor(weights)).sum().backward()
    (their_vector * their_vector * torch.tensor(weights)).sum().backward()
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    # traced, the parameters become placeholders like any lifted tensor
    g = gc.trace(lambda x: x * nn.utils.parameters_to_vector(ours).sum(), np.ones(3))
    assert len(g.inputs) == 4
    np.testing.assert_allclose(
        g(np.ones(3), **gc.lifted_feeds(g)), np.full(3, sum(a.sum() for a in arrays))
    )


@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, "inf", 0.5])
def test_total_norm_and_clipping_halves_match_torch(norm_type: object) -> None:
    dtypes = ("float32", "float64")  # torch promotes the total norm: float64
    grads = [RNG.standard_normal(s).astype(d) * 3 for s, d in zip(((3, 2), (5,)), dtypes)]
    ours = [ge.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    theirs = [torch.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = ge.tensor(g), torch.tensor(g)
    total = nn.utils.get_total_norm([p.grad for p in ours], norm_type)
    their_total = torch.nn.utils.get_total_norm([t.grad for t in theirs], norm_type)
    assert total.dtype == their_total.numpy().dtype
    np.testing.assert_allclose(total.item(), their_total.item(), rtol=1e-6)
    nn.utils.clip_grads_with_norm_(ours, 1.5, total)
    torch.nn.utils.clip_grads_with_norm_(theirs, 1.5, their_total)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    again = nn.utils.clip_grad_norm_(ours, 0.5, norm_type, foreach=True)
    their_again = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type, foreach=True)
    np.testing.assert_allclose(again.item(), their_again.item(), rtol=1e-6)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_grad_utility_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="get_total_norm: the total norm of order 2.0"):
        nn.utils.get_total_norm([ge.tensor([np.inf])], error_if_nonfinite=True)
    with pytest.raises(gc.GraphcError, match="vector_to_parameters: expected a tensor"):
        nn.utils.vector_to_parameters(np.ones(2), [ge.ones(2)])
    with pytest.raises(gc.GraphcError, match="parameters_to_vector: got no parameters"):
        nn.utils.parameters_to_vector([])
