"""Registration order under re-assignment, container slices and Dropout(inplace=True),
as torch.nn has them."""

from __future__ import annotations

import numpy as np
import pytest

import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch


def test_reassigning_a_parameter_keeps_its_place() -> None:
    layer = nn.Linear(2, 2, generator=0)
    layer.weight = ge.zeros(2, 2, requires_grad=True)  # re-initialized by assignment
    assert list(layer.state_dict()) == ["weight", "bias"]
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    assert not layer.weight.detach().numpy().any()
    layer.bias = None  # an empty slot, listed nowhere
    assert list(layer.state_dict()) == ["weight"]
    layer.bias = ge.ones(2, requires_grad=True)  # and filled again in its place
    assert list(layer.state_dict()) == ["weight", "bias"]


def test_tying_a_weight_keeps_the_order_and_lists_it_once() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(2, 2, generator=0)
            self.b = nn.Linear(2, 2, generator=1)
            self.b.weight = self.a.weight

    tied = Tied()
    assert list(tied.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert [name for name, _ in tied.named_parameters()] == ["a.weight", "a.bias", "b.bias"]


def test_a_buffer_registered_again_keeps_its_place() -> None:
    bn = nn.BatchNorm1d(2)
    bn.register_buffer("running_mean", ge.ones(2))
    bn.running_var = ge.zeros(2)  # assigned: still a buffer, in place
    assert list(bn.state_dict()) == [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]


@needs_torch
def test_registration_order_after_reassignment_matches_torch() -> None:
    ours = nn.Linear(2, 2)
    ours.weight = ge.zeros(2, 2, requires_grad=True)
    theirs = torch.nn.Linear(2, 2)
    theirs.weight = torch.nn.Parameter(torch.zeros(2, 2))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_a_slice_of_a_sequential_is_a_sequential_under_the_same_names() -> None:
    model = nn.Sequential(nn.Linear(3, 4, generator=0), nn.ReLU(), nn.Linear(4, 2, generator=1))
    head = model[0:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2
    assert head[0] is model[0] and head[1] is model[1]
    x = ge.ones(1, 3)
    np.testing.assert_array_equal(head(x).detach().numpy(), model[1](model[0](x)).detach().numpy())
    assert [n for n, _ in model[1:].named_parameters()] == ["2.weight", "2.bias"]
    assert list(model[::-1].state_dict())[:2] == ["2.weight", "2.bias"]
    named = nn.Sequential({"encode": nn.Linear(3, 4), "act": nn.ReLU()})
    assert [n for n, _ in named.named_parameters()] == ["encode.weight", "encode.bias"]
    blocks = nn.ModuleList([nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)])
    tail = blocks[1:]
    assert isinstance(tail, nn.ModuleList) and tail[1] is blocks[2]
    assert [n for n, _ in tail.named_parameters()] == ["1.weight", "1.bias"]


@needs_torch
def test_sequential_slices_are_named_as_torchs() -> None:
    ours = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.Tanh())
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2), torch.nn.Tanh()
    )
    for index in (slice(0, 2), slice(1, None), slice(None, None, 2), slice(None, None, -1)):
        assert list(ours[index].state_dict()) == list(theirs[index].state_dict())
        assert type(ours[index]).__name__ == type(theirs[index]).__name__


def test_dropout_inplace_computes_out_of_place_as_the_activations() -> None:
    layer = nn.Dropout(0.5, inplace=True)
    assert repr(layer) == "Dropout(p=0.5, inplace=True)"
    x = ge.ones(1000)
    ge.manual_seed(0)
    y = layer(x)
    ge.manual_seed(0)
    want = nn.Dropout(0.5)(x)
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    assert set(np.unique(y.numpy())) == {0.0, 2.0}
    np.testing.assert_array_equal(x.numpy(), np.ones(1000))  # the input keeps its values
    assert layer.eval()(x) is x
    with pytest.raises(Exception, match="p must be between 0 and 1"):
        nn.Dropout(1.5, inplace=True)
