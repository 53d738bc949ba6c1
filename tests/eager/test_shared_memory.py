"""from_numpy (and torch.Tensor(float32 array)) share memory with the array both ways, also
through views, in-place ops, `.numpy()`, `.detach()` and optimizer steps; tensor() copies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc.eager as ge
from graphc import optim

# each write goes through the tensor side; the array must see it (and the reverse below)
WRITES: dict[str, Callable[[Any, Any], Any]] = {
    "add_": lambda lib, t: t.add_(1),
    "+=": lambda lib, t: t.__iadd__(1),
    "setitem": lambda lib, t: t.__setitem__((0, 1), 9),
    "row view fill_": lambda lib, t: t[0].fill_(4),
    "column view mul_": lambda lib, t: t[:, 1].mul_(3),
    "view setitem": lambda lib, t: t.view(6).__setitem__(5, 7),
    "t add_": lambda lib, t: t.t().add_(2),
    "view of view": lambda lib, t: t[1][1:].sub_(5),
    "detach": lambda lib, t: t.detach().mul_(2),
    "numpy": lambda lib, t: t.numpy().__setitem__((1, 2), -1),
    "zero_": lambda lib, t: t[1].zero_(),
    "copy_": lambda lib, t: t.copy_(lib.ones(2, 3)),
    "clamp_": lambda lib, t: t.clamp_(1, 3),
    "Tensor alias": lambda lib, t: lib.Tensor(t).add_(1),
}


def _write(lib: Any, name: str) -> tuple[list, list]:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = lib.from_numpy(a)
    WRITES[name](lib, t)
    return a.tolist(), t.tolist()


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_through_the_tensor_reach_the_array(name: str) -> None:
    array, tensor = _write(ge, name)
    assert array == tensor and array != np.arange(6.0).reshape(2, 3).tolist()


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_match_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    assert _write(ge, name) == _write(torch, name)


def test_writes_through_the_array_reach_tensors_and_views() -> None:
    a = np.zeros((2, 3), np.float32)
    t = ge.from_numpy(a)
    row, flat, col, alias = t[1], t.view(-1), t.t()[2], ge.Tensor(a)
    a[1, 2] = 5
    assert row.tolist() == [0, 0, 5] and flat.tolist()[5] == 5 and col.tolist() == [0, 5]
    assert alias.tolist() == t.tolist() and t.numpy() is a
    assert np.asarray(t) is a


def test_tensor_copies_and_float64_tensor_ctor_copies() -> None:
    a = np.zeros(3, np.float32)
    copied = ge.tensor(a)
    other = ge.Tensor(np.zeros(3))  # not the default dtype: a copy, as torch
    a[0] = 1
    assert copied.tolist() == [0, 0, 0] and other.tolist() == [0, 0, 0]


def test_parameter_from_numpy_is_updated_in_place_by_optimizers() -> None:
    for make_opt in (lambda p: optim.SGD([p], lr=0.5), lambda p: optim.Adam([p], lr=0.5)):
        a = np.ones(3, np.float32)
        p = ge.from_numpy(a).requires_grad_()
        (p * p).sum().backward()
        make_opt(p).step()
        assert np.shares_memory(p.detach().numpy(), a) and a.tolist() == p.tolist()
        assert a.tolist() != [1.0, 1.0, 1.0]
