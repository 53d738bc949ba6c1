"""Differences from torch 2.13 a tester found in graphc.eager, one section each.

Every case asserts graphc's values directly, and where torch is installed runs the same
code on torch and asserts the two agree (the torch half skips without torch).
"""

from __future__ import annotations

from typing import Any

import pytest

import graphc.eager as ge
from graphc.ir.errors import AutodiffError


def _torch() -> Any:
    return pytest.importorskip("torch")


def _values(t: Any) -> Any:
    return t.detach().tolist()


# -- ctx.mark_dirty ----------------------------------------------------------------------------


def _dirty_function(lib: Any) -> Any:
    class AddOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            a.add_(1)
            ctx.mark_dirty(a)
            ctx.save_for_backward(a)
            return a, b * 2

        @staticmethod
        def backward(ctx: Any, g: Any, gb: Any) -> Any:
            (a,) = ctx.saved_tensors  # the written values, at the bumped version
            return g * 2, gb * a

    return AddOne


def _mark_dirty(lib: Any) -> dict[str, Any]:
    add_one = _dirty_function(lib)
    m = lib.tensor([1.0, 2.0], requires_grad=True)
    n = m * 1
    r, s = add_one.apply(n, m)
    seen: dict[str, Any] = {
        "same object": r is n,
        "version": n._version,
        "grad_fn": n.grad_fn.name(),
        "values": _values(n),
    }
    (n.sum() + s.sum()).backward()
    seen["grad"] = _values(m.grad)
    try:
        add_one.apply(lib.tensor([1.0], requires_grad=True), m)
        seen["leaf"] = "no error"
    except RuntimeError as exc:
        seen["leaf"] = "a leaf Variable that requires grad" in str(exc)
    base = m * 1
    view = base[0:1]
    add_one_alone = _single_dirty_function(lib)
    add_one_alone.apply(view)
    seen["base"] = _values(base)
    base.sum().backward()
    seen["grad through a view"] = _values(m.grad)
    return seen


def _single_dirty_function(lib: Any) -> Any:
    class AddOneAlone(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            a.add_(1)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    return AddOneAlone


def test_mark_dirty_rebases_the_input_onto_the_function() -> None:
    seen = _mark_dirty(ge)
    assert seen == {
        "same object": True,
        "version": 2,  # add_ in forward, and the bump of mark_dirty
        "grad_fn": "AddOneBackward",
        "values": [2.0, 3.0],
        "grad": [2.0 + 2.0, 2.0 + 3.0],  # through AddOne's backward: 2, plus 1 * a
        "leaf": True,
        "base": [2.0, 2.0],
        "grad through a view": [4.0 + 2.0, 5.0 + 1.0],  # accumulated onto the first
    }


def test_mark_dirty_matches_torch() -> None:
    assert _mark_dirty(ge) == _mark_dirty(_torch())


def test_mark_dirty_of_an_input_not_returned_is_an_error() -> None:
    class Doubled(ge.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            ctx.mark_dirty(a)
            return a * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    with pytest.raises(AutodiffError, match="marked as dirty"):
        Doubled.apply(ge.tensor([1.0], requires_grad=True) * 1)


def test_mark_dirty_of_a_leaf_under_no_grad_is_fine() -> None:
    leaf = ge.tensor([1.0], requires_grad=True)
    with ge.no_grad():
        _single_dirty_function(ge).apply(leaf)
    assert leaf.tolist() == [2.0] and leaf.grad_fn is None
