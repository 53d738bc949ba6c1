"""nn.utils.rnn.pad_sequence against torch: shapes, values, both padding sides and
layouts, gradients back to each sequence, and the sequences torch refuses."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(13)


@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first: bool, side: str) -> None:
    arrays = [RNG.standard_normal((n, 2, 3)) for n in (3, 1, 4)]
    ours = [ge.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = nn.utils.rnn.pad_sequence(ours, batch_first, -1.5, side)
    want = torch.nn.utils.rnn.pad_sequence(theirs, batch_first, -1.5, side)
    np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
    seed = RNG.standard_normal(want.shape)
    (out * ge.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_pad_sequence_traces_and_names_mistakes() -> None:
    g = gc.trace(
        lambda a, b: nn.utils.rnn.pad_sequence([a, b], batch_first=True), np.ones(2), np.ones(3)
    )
    np.testing.assert_array_equal(g(np.ones(2), np.ones(3)), [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    with pytest.raises(gc.ShapeError, match=r"pad_sequence: sequence 1 has shape \(2, 4\)"):
        nn.utils.rnn.pad_sequence([ge.ones(2, 3), ge.ones(2, 4)])
    with pytest.raises(gc.GraphcError, match="pad_sequence: padding_side must be"):
        nn.utils.rnn.pad_sequence([ge.ones(2)], padding_side="middle")
