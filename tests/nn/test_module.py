"""Module: registration by attribute, named parameters, state dicts, modes, zero_grad."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = ge.full((3,), 2.0, requires_grad=True)
        self.shift = ge.zeros(3, requires_grad=True)
        self.note = ge.ones(3)  # does not require grad: a plain attribute
        self.register_buffer("count", ge.zeros(1))

    def forward(self, x):
        return x * self.scale + self.shift


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = Affine()
        self.second = Affine()
        self.head = nn.Linear(3, 2, generator=0)

    def forward(self, x):
        return self.head(self.second(self.first(x)))


def test_parameters_and_submodules_register_by_attribute() -> None:
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == [
        "first.scale",
        "first.shift",
        "second.scale",
        "second.shift",
        "head.weight",
        "head.bias",
    ]
    assert [p is net.first.scale for p in net.parameters()][0]
    assert [name for name, _ in net.named_children()] == ["first", "second", "head"]
    assert [name for name, _ in net.named_modules()] == ["", "first", "second", "head"]
    assert [name for name, _ in net.named_parameters(recurse=False)] == []
    assert [name for name, _ in net.named_buffers()] == ["first.count", "second.count"]


def test_a_tensor_shared_by_two_layers_is_listed_once() -> None:
    net = Net()
    net.second.scale = net.first.scale
    names = [name for name, _ in net.named_parameters()]
    assert names.count("first.scale") == 1 and "second.scale" not in names


def test_reassigning_an_attribute_updates_the_registry() -> None:
    layer = Affine()
    layer.shift = None  # no longer a parameter
    layer.scale = ge.ones(3, requires_grad=True)  # a new tensor under the same name
    assert [(n, p is layer.scale) for n, p in layer.named_parameters()] == [("scale", True)]
    del layer.scale
    assert list(layer.named_parameters()) == []
    layer.register_parameter("w", ge.ones(2))
    assert layer.w.requires_grad and [n for n, _ in layer.named_parameters()] == ["w"]


def test_assigning_before_super_init_is_a_clear_error() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            self.w = ge.ones(2, requires_grad=True)

    with pytest.raises(gc.GraphcError, match=r"super\(\).__init__\(\)"):
        Broken()


def test_state_dict_holds_copies_and_load_state_dict_writes_in_place() -> None:
    net = Net()
    state = net.state_dict()
    # PyTorch's order: each module's parameters, then its buffers, depth first
    assert list(state) == ["first.scale", "first.shift", "first.count", "second.scale",
                           "second.shift", "second.count", "head.weight", "head.bias"]  # fmt: skip
    state["head.bias"][:] = 7.0  # a copy: the model is unchanged
    assert not np.allclose(net.head.bias.detach().numpy(), 7.0)

    weight = net.head.weight
    other = Net()
    with ge.no_grad():
        other.head.weight.mul_(3.0)
    net.load_state_dict(other.state_dict())
    assert net.head.weight is weight  # same tensor, new values
    np.testing.assert_array_equal(weight.detach().numpy(), other.head.weight.detach().numpy())


def test_load_state_dict_reports_missing_unexpected_and_bad_shapes() -> None:
    net = Net()
    state = net.state_dict()
    del state["head.bias"]
    state["extra"] = np.zeros(1)
    with pytest.raises(gc.GraphcError, match=r"missing keys \['head.bias'\].*\['extra'\]"):
        net.load_state_dict(state)
    result = net.load_state_dict(state, strict=False)
    assert result.missing_keys == ["head.bias"] and result.unexpected_keys == ["extra"]
    state = net.state_dict()
    state["head.weight"] = np.zeros((3, 3))
    with pytest.raises(gc.ShapeError, match=r"'head.weight' expects shape \(2, 3\)"):
        net.load_state_dict(state)


def test_train_and_eval_set_every_submodule() -> None:
    net = Net()
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none: bool) -> None:
    net = Net()
    net(ge.ones(4, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=set_to_none)
    for p in net.parameters():
        if set_to_none:
            assert p.grad is None
        else:
            np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape))


def test_forward_is_required_and_repr_lists_children() -> None:
    with pytest.raises(NotImplementedError, match="Module does not define forward"):
        nn.Module()(ge.ones(1))
    text = repr(nn.Sequential(nn.Linear(3, 2), nn.ReLU()))
    assert text.splitlines() == [
        "Sequential(",
        "  (0): Linear(in_features=3, out_features=2, bias=True)",
        "  (1): ReLU()",
        ")",
    ]


def test_a_module_traces_with_placeholders_named_after_its_parameters() -> None:
    net = Net()
    g = gc.trace(net, gc.TensorSpec(("B", 3)))
    names = [p.name for p in g.inputs]
    assert names == [
        "x",
        "first.scale",
        "first.shift",
        "second.scale",
        "second.shift",
        "head.weight",
        "head.bias",
    ]
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    want = net(ge.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(g(x, **gc.lifted_feeds(g)), want, rtol=1e-6)
