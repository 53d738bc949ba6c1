"""F.gumbel_softmax against torch 2.13 by its distribution (not its bits): the hard
samples' class frequencies (the Gumbel-max trick: the softmax probabilities) and the
soft samples' mean, the straight-through gradient, and new draws per jit call."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

PROBABILITIES = np.array([0.2, 0.3, 0.5])


@needs_torch
def test_samples_follow_torchs_distribution() -> None:
    ge.manual_seed(0)
    torch.manual_seed(0)
    logits = np.tile(np.log(PROBABILITIES), (20000, 1))
    hard = F.gumbel_softmax(ge.tensor(logits), hard=True, dim=1).numpy()
    their_hard = torch.nn.functional.gumbel_softmax(torch.tensor(logits), hard=True).numpy()
    assert set(np.unique(hard)) == {0.0, 1.0} and (hard.sum(1) == 1).all()
    np.testing.assert_allclose(hard.mean(0), PROBABILITIES, atol=0.015)
    np.testing.assert_allclose(hard.mean(0), their_hard.mean(0), atol=0.02)
    soft = F.gumbel_softmax(ge.tensor(logits), tau=0.5).numpy()
    their_soft = torch.nn.functional.gumbel_softmax(torch.tensor(logits), tau=0.5).numpy()
    np.testing.assert_allclose(soft.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(soft.mean(0), their_soft.mean(0), atol=0.015)
    np.testing.assert_allclose(soft.std(0), their_soft.std(0), atol=0.015)


def test_hard_samples_pass_the_soft_gradient() -> None:
    logits = np.random.default_rng(1).standard_normal((5, 4))
    weights = ge.tensor(np.random.default_rng(2).standard_normal((5, 4)))
    grads = []
    for hard in (False, True):
        x = ge.tensor(logits, requires_grad=True)
        y = F.gumbel_softmax(x, tau=0.7, hard=hard, dim=0, key=np.int64(3))
        (y * weights).sum().backward()
        grads.append(x.grad.numpy())
        if hard:
            assert (y.detach().numpy().sum(0) == 1).all()  # one-hot along dim 0
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_jit_draws_new_noise_each_call() -> None:
    sample = gc.jit(lambda v: F.gumbel_softmax(v, hard=True))
    draws = [sample(np.zeros((64, 5))) for _ in range(2)]
    assert not np.array_equal(*draws)
    with pytest.raises(gc.GraphcError, match="gumbel_softmax: tau must be positive"):
        F.gumbel_softmax(ge.zeros(3), tau=0.0)
