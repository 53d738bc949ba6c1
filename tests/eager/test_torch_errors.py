"""Every eager error a PyTorch user can hit is an instance of the builtin exception class
torch raises in the same situation (and a GraphcError): each case runs in both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import graphc.eager as ge
from graphc.ir.errors import GraphcError


def _backward_twice(lib: Any) -> None:
    x = lib.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _saved_modified(lib: Any) -> None:
    x = lib.ones(3, requires_grad=True)
    h = x * 1
    y = h * h
    h.add_(1)
    y.sum().backward()


def _saved_modified_view(lib: Any) -> None:
    x = lib.ones(2, 3, requires_grad=True)
    h = x * 1
    y = h[0] * h[0]
    h.t().mul_(2)
    y.sum().backward()


def _no_grad_view_inplace(lib: Any) -> None:
    y = lib.ones(2, 3, requires_grad=True) * 1
    with lib.no_grad():
        v = y[0]
    v.mul_(2)


def _no_grad_view_copy_of_grad_value(lib: Any) -> None:
    x = lib.zeros(2, 3)
    with lib.no_grad():
        v = x[1]
    v.copy_(lib.ones(3, requires_grad=True) * 2)


def _leaf_view_inplace(lib: Any) -> None:
    v = lib.zeros(3)[0:2]
    v.requires_grad_()
    v.mul_(2)


CASES: dict[str, Callable[[Any], Any]] = {
    "backward twice": _backward_twice,
    "inplace on leaf": lambda lib: lib.ones(3, requires_grad=True).add_(1),
    "inplace on no_grad view": _no_grad_view_inplace,
    "no_grad view gets a value needing grad": _no_grad_view_copy_of_grad_value,
    "inplace on a view that is a leaf needing grad": _leaf_view_inplace,
    "detach_ of a view": lambda lib: (lib.ones(2, requires_grad=True) * 1)[0].detach_(),
    "squeeze dim out of range on 0-d": lambda lib: lib.tensor(1.0).squeeze(1),
    "inplace on view of leaf": lambda lib: lib.ones(2, 3, requires_grad=True)[0].add_(1),
    "saved tensor modified": _saved_modified,
    "saved tensor modified through a view": _saved_modified_view,
    "numpy on requires_grad": lambda lib: lib.ones(3, requires_grad=True).numpy(),
    "requires_grad on int": lambda lib: lib.tensor([1, 2]).requires_grad_(),
    "requires_grad on int ctor": lambda lib: lib.tensor([1, 2], requires_grad=True),
    "item of many": lambda lib: lib.ones(3).item(),
    "bool of many": lambda lib: bool(lib.ones(3)),
    "float of many": lambda lib: float(lib.ones(3)),
    "len of 0-d": lambda lib: len(lib.tensor(1.0)),
    "iter of 0-d": lambda lib: iter(lib.tensor(1.0)),
    "backward of non-scalar": lambda lib: (lib.ones(3, requires_grad=True) * 2).backward(),
    "backward without grad": lambda lib: lib.ones(3).sum().backward(),
    "grad of non-scalar": lambda lib: lib.autograd.grad(lib.ones(3, requires_grad=True) * 2, []),
    "index out of range": lambda lib: lib.ones(3)[3],
    "negative index out of range": lambda lib: lib.ones(2, 3)[:, -4],
    "index select out of range": lambda lib: lib.ones(3)[lib.tensor([0, 5])],
    "float index": lambda lib: lib.ones(3)[1.5],
    "too many indices": lambda lib: lib.ones(3)[0, 0],
    "setitem out of range": lambda lib: lib.ones(3).__setitem__(5, 1.0),
    "select out of range": lambda lib: lib.ones(2, 3).select(1, 3),
    "narrow out of range": lambda lib: lib.ones(2, 3).narrow(1, 2, 2),
    "dim out of range": lambda lib: lib.ones(2, 3).sum(dim=2),
    "transpose dim out of range": lambda lib: lib.ones(2, 3).transpose(0, 2),
    "unsqueeze dim out of range": lambda lib: lib.ones(2, 3).unsqueeze(3),
    "view not viewable": lambda lib: lib.ones(2, 3).t().view(6),
    "view wrong size": lambda lib: lib.ones(2, 3).view(4),
    "reshape wrong size": lambda lib: lib.ones(2, 3).reshape(5),
    "inplace on expand": lambda lib: lib.ones(3).expand(2, 3).add_(1),
    "add shape mismatch": lambda lib: lib.ones(2) + lib.ones(3),
    "matmul shape mismatch": lambda lib: lib.ones(2, 3) @ lib.ones(2, 3),
    "mm of vectors": lambda lib: lib.ones(3).mm(lib.ones(3)),
    "t of 3-d": lambda lib: lib.ones(2, 2, 2).t(),
    "expand bad": lambda lib: lib.ones(2).expand(3),
    "retain_grad without grad": lambda lib: lib.ones(3).retain_grad(),
    "register_hook without grad": lambda lib: lib.ones(3).register_hook(lambda g: g),
    "requires_grad False on non-leaf": lambda lib: setattr(
        lib.ones(3, requires_grad=True) * 2, "requires_grad", False
    ),
    "grad unused input": lambda lib: lib.autograd.grad(
        (lib.ones(3, requires_grad=True) * 2).sum(), [lib.ones(3, requires_grad=True)]
    ),
    "grad of input not requiring grad": lambda lib: lib.autograd.grad(
        (lib.ones(3, requires_grad=True) * 2).sum(), [lib.ones(3)]
    ),
    "backward gradient shape": lambda lib: (lib.ones(3, requires_grad=True) * 2).backward(
        lib.ones(2)
    ),
    "inplace dtype": lambda lib: lib.tensor([1, 2]).add_(1.5),
    "inplace shape": lambda lib: lib.ones(3).add_(lib.ones(2, 3)),
    "cat shape": lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 2)]),
    "index of float tensor": lambda lib: [0, 1][lib.tensor(1.0)],
    "from_numpy of list": lambda lib: lib.from_numpy([1, 2]),
    "squeeze dim out of range": lambda lib: lib.ones(2, 3).squeeze(3),
    "max dim out of range": lambda lib: lib.ones(2, 3).max(dim=3),
    "softmax dim out of range": lambda lib: lib.ones(2, 3).softmax(dim=2),
    # the eager hunt's, outside graphc/eager: a reduction of a 0-d tensor over axis 1 was
    # a ShapeError (no IndexError), an integer floor division by zero a bare GraphcError
    "0-d sum dim out of range": lambda lib: lib.tensor(3.5).sum(1),
    "integer division by zero": lambda lib: lib.tensor([1, 2]) // 0,
}


def test_a_0d_tensors_one_axis_is_0_and_minus_1() -> None:
    """torch takes dims 0 and -1 of a 0-d tensor; -1 was refused (normalize_axis's
    test for rank 0 came after the general one), and swapaxes indexed an empty list."""
    torch = pytest.importorskip("torch")
    for lib in (ge, torch):
        x = lib.tensor(2.5)
        assert float(x.transpose(0, -1)) == 2.5 and float(x.sum(-1)) == 2.5
        assert float(x.softmax(-1)) == 1.0


def _builtin_class(exc: BaseException) -> type:
    """The first builtin class in exc's MRO (torch's errors are builtins or derive from them)."""
    return next(c for c in type(exc).__mro__ if c.__module__ == "builtins")


def _raised(action: Callable[[Any], Any], lib: Any) -> BaseException | None:
    try:
        action(lib)
    except Exception as exc:  # noqa: BLE001 - the point is to see what each one raises
        return exc
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_graphc_raises_what_torch_raises(name: str) -> None:
    torch = pytest.importorskip("torch")
    expected = _raised(CASES[name], torch)
    got = _raised(CASES[name], ge)
    assert expected is not None, f"torch raised nothing for {name}"
    assert isinstance(got, GraphcError), f"{name}: graphc raised {got!r}"
    assert isinstance(got, _builtin_class(expected)), (
        f"{name}: torch raised {type(expected).__name__}, graphc {type(got).__mro__}"
    )


def test_errors_without_torch() -> None:
    """The same table's classes, checked without torch installed."""
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        _backward_twice(ge)
    with pytest.raises(IndexError):
        ge.ones(3)[3]
    with pytest.raises(TypeError):
        len(ge.tensor(1.0))
    with pytest.raises(ValueError):
        float(ge.ones(3))
    with pytest.raises(IndexError):
        ge.ones(2, 3).sum(dim=2)
