"""SyncBatchNorm (torch's, without a process group: the local batch's statistics) and
convert_sync_batchnorm against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch


@needs_torch
def test_sync_batch_norm_matches_torch_on_any_rank() -> None:
    rng = np.random.default_rng(17)
    ours, theirs = nn.SyncBatchNorm(3, momentum=0.3), torch.nn.SyncBatchNorm(3, momentum=0.3)
    assert repr(ours) == repr(theirs)
    for shape in ((4, 3), (2, 3, 2, 2, 3)):
        x = rng.normal(1.0, 2.0, shape).astype(np.float32)
        a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, want = ours(a), theirs(b)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=2e-5)
        out.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), atol=1e-4)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-5, err_msg=key)
    with pytest.raises(gc.ShapeError, match="SyncBatchNorm: expected at least 2D input"):
        ours(ge.ones(3))


@needs_torch
def test_convert_sync_batchnorm_shares_the_layers_state() -> None:
    def build(lib):
        extra = {"generator": 0} if lib is nn else {}
        return lib.Sequential(
            lib.Conv2d(2, 3, 3, **extra),
            lib.BatchNorm2d(3),
            lib.Sequential(lib.BatchNorm1d(4, affine=False)),
            lib.InstanceNorm2d(3),
        )

    model, theirs = build(nn), build(torch.nn)
    bn = model[1]
    model.eval()
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    their_converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(theirs)
    for ours, want in ((converted[1], their_converted[1]), (converted[2][0], their_converted[2][0]),
                       (converted[3], their_converted[3])):  # fmt: skip
        assert repr(ours) == repr(want)
    assert list(converted.state_dict()) == list(their_converted.state_dict())
    assert converted[1].weight is bn.weight and converted[1].running_mean is bn.running_mean
    assert not converted[1].training
