"""nn.init.dirac_ and sparse_ against torch: dirac_'s exact weights (and a convolution
with them passing its input through), sparse_'s zeros per column and the spread of the
rest (statistics, not bits)."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.nn import functional as F
from graphc.nn import init
from tests.conftest import needs_torch, torch


@needs_torch
@pytest.mark.parametrize(
    ("shape", "groups"),
    [((6, 4, 3), 1), ((4, 6, 3, 3), 2), ((2, 2, 3, 3, 3), 1), ((6, 2, 2, 4), 3)],
)
def test_dirac_matches_torch(shape: tuple, groups: int) -> None:
    ours = init.dirac_(ge.zeros(*shape), groups).numpy()
    np.testing.assert_array_equal(ours, torch.nn.init.dirac_(torch.zeros(shape), groups).numpy())


def test_a_dirac_convolution_passes_its_input_through() -> None:
    x = ge.tensor(np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32))
    weight = init.dirac_(ge.zeros(3, 3, 3, 3))
    np.testing.assert_array_equal(F.conv2d(x, weight, padding=1).numpy(), x.numpy())


@needs_torch
def test_sparse_zeroes_each_column_as_torch() -> None:
    ours = init.sparse_(ge.zeros(200, 50, dtype="float64"), 0.25, std=0.5, generator=0).numpy()
    theirs = torch.nn.init.sparse_(torch.zeros(200, 50, dtype=torch.float64), 0.25, std=0.5)
    np.testing.assert_array_equal((ours == 0).sum(0), (theirs == 0).sum(0).numpy())  # 50 each
    kept = ours[ours != 0]
    assert abs(kept.std() / 0.5 - 1) < 0.03 and abs(kept.mean()) < 0.02
    assert len({tuple(np.flatnonzero(ours[:, c] == 0)) for c in range(50)}) > 45  # random rows


def test_structured_initializer_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.GraphcError, match="dirac_: needs a tensor of 3, 4 or 5 dims"):
        init.dirac_(ge.zeros(3, 3))
    with pytest.raises(gc.GraphcError, match=r"dirac_: dim 0 \(3\) must be divisible by groups"):
        init.dirac_(ge.zeros(3, 3, 3), groups=2)
    with pytest.raises(gc.GraphcError, match="sparse_: needs a 2-D tensor"):
        init.sparse_(ge.zeros(3), 0.5)
