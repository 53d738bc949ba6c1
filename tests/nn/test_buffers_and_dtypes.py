"""nn.Buffer (torch 2.5's spelling of register_buffer by assignment) and Module.half()
and bfloat16() against torch: which tensors are buffers, which are saved, and the
values of a half-precision forward."""

from __future__ import annotations

import numpy as np
import pytest

import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch


def build(lib, make):
    class Net(lib.nn.Module if lib is torch else nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.seen = (lib.nn.Buffer if lib is torch else nn.Buffer)(make(lib, 2))
            self.scratch = (lib.nn.Buffer if lib is torch else nn.Buffer)(
                make(lib, 3), persistent=False
            )
            self.linear = (lib.nn.Linear if lib is torch else nn.Linear)(2, 2)

    return Net()


@needs_torch
def test_buffers_assigned_as_nn_buffer_register_as_torch() -> None:
    def make(lib, n):
        return lib.ones(n, requires_grad=True)

    ours, theirs = build(ge, make), build(torch, make)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert ours.seen.requires_grad == theirs.seen.requires_grad  # the data's flag, kept
    ours.seen = ge.zeros(2)  # a plain tensor in a buffer's slot stays a buffer
    theirs.seen = torch.zeros(2)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() * 3 for k, v in theirs.state_dict().items()})
    np.testing.assert_array_equal(ours.seen.numpy(), [0.0, 0.0])


@needs_torch
def test_half_precision_modules_compute_as_torch() -> None:
    ours, theirs = nn.Linear(4, 3, generator=0), torch.nn.Linear(4, 3)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    ours.half()
    theirs.half()
    assert ours.weight.dtype == np.float16
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float16)
    out = ours(ge.tensor(x)).detach().numpy()
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, theirs(torch.tensor(x)).detach().numpy(), rtol=2e-3, atol=2e-3)


@needs_torch
def test_bfloat16_modules_keep_integer_buffers() -> None:
    pytest.importorskip("ml_dtypes")
    ours, theirs = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    ours.bfloat16()
    theirs.bfloat16()
    for key, value in theirs.state_dict().items():
        assert str(ours.state_dict()[key].dtype) == str(value.dtype).replace("torch.", ""), key
