"""nn.EmbeddingBag and F.embedding_bag against torch 2.13: each mode over 1-D inputs with
offsets (an empty bag among them, include_last_offset) and 2-D inputs, padding_idx,
per_sample_weights, gradients of the table and the weights, and a traced 2-D input."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(21)
FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])

CASES = [
    ({"mode": "mean"}, FLAT, [0, 2, 2, 7], False),  # bag 1 is empty
    ({"mode": "sum"}, FLAT, [0, 3, 6, 10], True),  # include_last_offset
    ({"mode": "max"}, FLAT, [0, 4, 4, 8], False),
    ({"mode": "mean", "padding_idx": 0}, FLAT, [0, 5, 8], False),  # the last bag: padding only
    ({"mode": "max", "padding_idx": 4}, FLAT, [0, 3, 5], False),
    ({"mode": "sum"}, FLAT, [0, 4, 7], "weights"),
    ({"mode": "mean", "padding_idx": 2}, FLAT.reshape(2, 5), None, False),
    ({"mode": "max"}, FLAT.reshape(5, 2), None, False),
]


@needs_torch
@pytest.mark.parametrize(("options", "indices", "offsets", "extra"), CASES, ids=str)
def test_embedding_bag_matches_torch(options: dict, indices, offsets, extra) -> None:
    theirs = torch.nn.EmbeddingBag(10, 3, include_last_offset=extra is True, **options)
    ours = nn.EmbeddingBag(10, 3, include_last_offset=extra is True, **options)
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    weights = RNG.standard_normal(indices.shape) if extra == "weights" else None
    args, their_args = [ge.tensor(indices)], [torch.tensor(indices)]
    if offsets is not None:
        args.append(ge.tensor(np.array(offsets)))
        their_args.append(torch.tensor(offsets))
    kwargs, their_kwargs = {}, {}
    if weights is not None:
        kwargs = {"per_sample_weights": ge.tensor(weights.astype(np.float32), requires_grad=True)}
        their_kwargs = {
            "per_sample_weights": torch.tensor(weights.astype(np.float32), requires_grad=True)
        }
    out, want = ours(*args, **kwargs), theirs(*their_args, **their_kwargs)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-7)
    seed = RNG.standard_normal(tuple(want.shape)).astype(np.float32)
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(
        ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6
    )
    if weights is not None:
        np.testing.assert_allclose(
            kwargs["per_sample_weights"].grad.numpy(),
            their_kwargs["per_sample_weights"].grad.numpy(),
            rtol=1e-5,
            atol=1e-6,
        )
    if offsets is None:  # equal bags trace, with a symbolic batch
        g = gc.trace(ours, gc.TensorSpec(("B", indices.shape[1]), "int64"))
        traced = g(indices, **gc.lifted_feeds(g))
        np.testing.assert_allclose(traced, want.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_embedding_bag_mistakes_are_named_errors() -> None:
    weight = ge.ones(5, 2)
    with pytest.raises(gc.GraphcError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(ge.tensor([1, 2]), weight, ge.tensor([0]), per_sample_weights=ge.ones(2))
    with pytest.raises(gc.GraphcError, match="a 1-D input needs offsets"):
        F.embedding_bag(ge.tensor([1, 2]), weight)
    with pytest.raises(gc.GraphcError, match="offsets must be known numbers"):
        gc.trace(
            lambda i, o: F.embedding_bag(i, np.ones((5, 2)), o), np.array([1, 2]), np.array([0])
        )
    with pytest.raises(gc.GraphcError, match="EmbeddingBag: mode must be"):
        nn.EmbeddingBag(5, 2, mode="median")
    assert not isinstance(nn.EmbeddingBag(5, 2), nn.Embedding)  # as torch's: no subclass
