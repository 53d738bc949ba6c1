"""The margin, embedding and likelihood losses against torch 2.13: values and the
gradients of every floating input, each reduction, eagerly and traced."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(12)


def signs(*shape: int) -> np.ndarray:
    return np.where(RNG.random(shape) < 0.5, -1.0, 1.0)


def positive(*shape: int) -> np.ndarray:
    return RNG.random(shape) + 0.1


# (module name, how many leading inputs torch differentiates, constructor options, inputs)
CASES = [
    ("MarginRankingLoss", 2, {"margin": 0.3}, lambda: [RNG.standard_normal(6), RNG.standard_normal(6), signs(6)]),
    ("HingeEmbeddingLoss", 1, {"margin": 0.8}, lambda: [positive(4, 3), np.array([[1.0, -1.0, 0.0]] * 4)]),
    ("SoftMarginLoss", 1, {}, lambda: [RNG.standard_normal((4, 3)), signs(4, 3)]),
    ("MultiLabelSoftMarginLoss", 1, {}, lambda: [RNG.standard_normal((4, 5)), (RNG.random((4, 5)) < 0.5) * 1.0]),
    ("MultiLabelSoftMarginLoss", 1, {"weight": np.linspace(0.5, 2.0, 5)},
     lambda: [RNG.standard_normal((4, 5)), (RNG.random((4, 5)) < 0.5) * 1.0]),
    ("MultiMarginLoss", 1, {}, lambda: [RNG.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2])]),
    ("MultiMarginLoss", 1, {"p": 2, "margin": 0.5, "weight": np.array([1.0, 2.0, 0.5, 1.5])},
     lambda: [RNG.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2])]),
    ("MultiMarginLoss", 1, {}, lambda: [RNG.standard_normal(4), np.array(2)]),  # unbatched
    ("CosineEmbeddingLoss", 2, {"margin": 0.2}, lambda: [RNG.standard_normal((6, 3)), RNG.standard_normal((6, 3)), signs(6)]),
    ("TripletMarginLoss", 3, {}, lambda: [RNG.standard_normal((5, 3)) for _ in range(3)]),
    ("TripletMarginLoss", 3, {"p": 1.0, "swap": True, "margin": 2.0}, lambda: [RNG.standard_normal((5, 3)) for _ in range(3)]),
    ("TripletMarginWithDistanceLoss", 3, {"margin": 0.5, "swap": True},
     lambda: [RNG.standard_normal((5, 3)) for _ in range(3)]),
    ("PoissonNLLLoss", 1, {}, lambda: [RNG.standard_normal((4, 3)), RNG.poisson(2.0, (4, 3)) * 1.0]),
    ("PoissonNLLLoss", 1, {"log_input": False, "full": True}, lambda: [positive(4, 3), RNG.poisson(2.0, (4, 3)) * 1.0]),
    ("GaussianNLLLoss", 3, {}, lambda: [RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3)), positive(4, 3)]),
    ("GaussianNLLLoss", 3, {"full": True, "eps": 0.3}, lambda: [RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3)), positive(4)]),
    ("GaussianNLLLoss", 3, {}, lambda: [RNG.standard_normal((4, 3, 2)), RNG.standard_normal((4, 3, 2)), positive(4, 1, 2)]),
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("kind", "count", "options", "make"), CASES, ids=lambda v: str(v)[:40])
def test_losses_match_torch(kind: str, count: int, options: dict, make, reduction: str) -> None:
    arrays = make()
    their_options = {
        k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in options.items()
    }
    ours = getattr(nn, kind)(**{**options, "reduction": reduction})
    theirs = getattr(torch.nn, kind)(**{**their_options, "reduction": reduction})
    assert repr(ours) == repr(theirs)  # no settings shown, whatever the reduction
    floats = [i < count for i in range(len(arrays))]
    mine = [ge.tensor(a, requires_grad=f) for a, f in zip(arrays, floats)]
    their = [torch.tensor(a, requires_grad=f) for a, f in zip(arrays, floats)]
    out, want = ours(*mine), theirs(*their)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    seed = RNG.standard_normal(want.shape)
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    for a, b, f in zip(mine, their, floats):
        if f:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)
    if reduction == "mean":  # traced: the same number
        g = gc.trace(lambda *xs: ours(*xs), *arrays)
        np.testing.assert_allclose(
            g(*arrays, **gc.lifted_feeds(g)), want.detach().numpy(), rtol=1e-10
        )


def test_loss_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="MultiMarginLoss: only p == 1 and p == 2"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(gc.ShapeError, match="gaussian_nll_loss: var of shape"):
        nn.GaussianNLLLoss()(ge.ones(4, 3), ge.ones(4, 3), ge.ones(3, 4))
    with pytest.raises(gc.GraphcError, match="gaussian_nll_loss: var has negative entries"):
        nn.GaussianNLLLoss()(ge.ones(2), ge.ones(2), ge.tensor([1.0, -1.0]))
    with pytest.raises(gc.ShapeError, match="cosine_embedding_loss: input1 and input2"):
        nn.CosineEmbeddingLoss()(ge.ones(2, 3), ge.ones(2, 4), ge.ones(2))
    with pytest.raises(gc.ShapeError, match="triplet_margin_loss: anchor, positive and negative"):
        nn.TripletMarginLoss()(ge.ones(2, 3), ge.ones(2, 3), ge.ones(3))
    with pytest.raises(gc.GraphcError, match="SoftMarginLoss: reduction must be one of"):
        nn.SoftMarginLoss(reduction="batchmean")


@needs_torch
def test_triplet_loss_with_a_distance_function_and_pdist_match_torch() -> None:
    arrays = [RNG.standard_normal((6, 4)) for _ in range(3)]
    ours = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1 - nn.functional.cosine_similarity(a, b), margin=0.3
    )
    theirs = torch.nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1 - torch.nn.functional.cosine_similarity(a, b), margin=0.3
    )
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = ours(*mine), theirs(*their)
    np.testing.assert_allclose(out.item(), want.item(), rtol=1e-12)
    out.backward()
    want.backward()
    for a, b in zip(mine, their):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-14)
    x = np.vstack([arrays[0], arrays[0][:1]])  # a repeated row: a zero distance
    for p in (2.0, 1.0, 3.0):
        a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, want = nn.functional.pdist(a, p), torch.nn.functional.pdist(b, p)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        out.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-14)
    with pytest.raises(gc.GraphcError, match="margin must be greater than 0"):
        nn.TripletMarginWithDistanceLoss(margin=0.0)
