"""Eager views share storage and version counters with their base, as in PyTorch; in-place
ops through a view change the base and its gradient (CopySlices), checked against torch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc.eager as ge
from graphc.ir.errors import AutodiffError, GraphcError, ShapeError


def _writes(lib: Any) -> list[Any]:
    t = lib.zeros(2, 3)
    t[0][1] = 5
    t.view(6)[2] = 7
    t[:, 0].fill_(3)
    t.t().add_(1)
    t.narrow(1, 1, 2).mul_(2)
    t.select(0, 1).sub_(1)
    t.T[0].add_(10)
    t.unsqueeze(0)[0, 1].add_(100)
    t.reshape(3, 2)[0].mul_(-1)
    t.permute(1, 0).transpose(0, 1)[1, 2] = 9
    t.flatten()[0] = 1
    t[..., None][:, 1, 0].add_(0.5)
    return t.tolist()


def test_writes_through_views_reach_the_base() -> None:
    assert _writes(ge) == [[1.0, -11.5, 16.0], [113.0, 101.5, 9.0]]


def test_writes_through_views_match_torch() -> None:
    torch = pytest.importorskip("torch")
    assert _writes(ge) == _writes(torch)


def test_views_share_memory_and_version() -> None:
    t = ge.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    for view in (t[0], t[:, 1], t.t(), t.view(6), t.transpose(0, 1), t.narrow(0, 0, 1),
                 t.select(1, 2), t.expand(2, 2, 3), t.squeeze(), t.unsqueeze(1), t.T,
                 t.flatten(), t[None, ..., 1], t[1, 2]):  # fmt: skip
        assert np.shares_memory(view.numpy(), t.numpy())
        assert view._base is t._base or view._base is t
        before = t._version_number
        view.detach().numpy()  # reading does not bump
        assert view._version is t._version and t._version_number == before
    assert t[1, 2].shape == () and t[1, 2]._base is not None  # a 0-d view, not a copy
    assert t[0][1]._base is t  # a view of a view has the root as its base


def test_reshape_copies_only_when_it_must_and_view_raises() -> None:
    t = ge.arange(6.0).reshape(2, 3)
    assert t.t().is_contiguous() is False and t.is_contiguous() is True
    copied = t.t().reshape(6)
    assert copied._base is None and not np.shares_memory(copied.numpy(), t.numpy())
    with pytest.raises(ShapeError, match="reshape"):
        t.t().view(6)
    with pytest.raises(RuntimeError):
        t.t().view(-1)
    c = t.t().contiguous()
    assert c.is_contiguous() and c.tolist() == t.t().tolist()
    assert t.contiguous() is t


def test_inplace_on_expanded_or_readonly_raises_graphc_error() -> None:
    t = ge.ones(3)
    for write in (
        lambda: t.expand(2, 3).add_(1),
        lambda: t.expand(2, 3).fill_(0),
        lambda: t.expand(2, 3).__setitem__(0, 1.0),
        lambda: t.expand(2, 3)[0].mul_(2),
    ):
        with pytest.raises(ShapeError, match="single memory location"):
            write()
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_inplace_on_view_of_leaf_raises() -> None:
    x = ge.ones(2, 3, requires_grad=True)
    with pytest.raises(AutodiffError, match="view of a leaf"):
        x[0].mul_(2)
    with ge.no_grad():
        x[0].mul_(2)  # allowed (an optimizer step), and visible
    assert x.tolist()[0] == [2.0, 2.0, 2.0]


def test_saved_tensor_modified_through_another_view() -> None:
    x = ge.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    z = y * y  # saves y
    y[1:].add_(1)  # y's memory changes through a view
    with pytest.raises(AutodiffError, match="modified by an in-place"):
        z.sum().backward()
    a = x * 1
    b = a[0] * a[1]  # saves the views a[0], a[1]
    a.t().mul_(2)  # a different view of the same memory
    with pytest.raises(RuntimeError, match="in-place"):
        b.backward()


# each case: (leaf values) -> the tensor whose sum is differentiated; run in both libraries
CASES: dict[str, Callable[[Any, Any], Any]] = {
    "column mul_": lambda lib, w: _then(w * 1, lambda x: x[:, 0].mul_(2)),
    "row add_ tensor": lambda lib, w: _then(w * 1, lambda x: x[1].add_(w[0] * 3)),
    "transpose mul_": lambda lib, w: _then(w * 1, lambda x: x.t().mul_(w.t())),
    "view of view exp_": lambda lib, w: _then(w * 1, lambda x: x[1][1:].exp_()),
    "flat view setitem": lambda lib, w: _then(w * 1, lambda x: x.view(6).__setitem__(4, w[0, 0])),
    "fill_ window": lambda lib, w: _then(w * 2, lambda x: x[:, 1:].fill_(1.0)),
    "copy_ into window": lambda lib, w: _then(w * 1, lambda x: x[0].copy_(w[1] * w[1])),
    "sibling view sees it": lambda lib, w: _sibling(w),
    "view used after base inplace": lambda lib, w: _view_after_base(w),
    "narrow select": lambda lib, w: _then(w * 1, lambda x: x.narrow(1, 1, 2).select(0, 0).mul_(w[1, :2])),
    "zeros base gets grad": lambda lib, w: _then(lib.zeros(2, 3), lambda x: x[0].copy_(w[1] * 2)),
    "strided slice": lambda lib, w: _then(w * 1, lambda x: x[:, ::2].mul_(w[:, 1:2])),
    "two views, two writes": lambda lib, w: _two_writes(w),
    "view, base, view": lambda lib, w: _view_base_view(w),
    "copying reshape is not a view": lambda lib, w: _then(w * 1, lambda x: x.t().reshape(6).mul_(5)),
    "setitem on view with grad value": lambda lib, w: _then(w * 1, lambda x: x.t()[1].__setitem__(0, w[1, 2] * w[0, 0])),
    "unsqueeze write": lambda lib, w: _then(w * 1, lambda x: x.unsqueeze(0)[0, 1].mul_(3)),
}  # fmt: skip


def _then(x: Any, action: Callable[[Any], Any]) -> Any:
    action(x)
    return x * x  # uses x's new values and history


def _two_writes(w: Any) -> Any:
    x = w * 1
    x[0].mul_(x[1])
    x[:, 2].add_(x[:, 0] * 2)
    return x.exp()


def _view_base_view(w: Any) -> Any:
    x = w * 1
    v = x[1:]
    v.mul_(3)
    x.mul_(x)
    v.sub_(w[0])
    return v * x[0]


def _sibling(w: Any) -> Any:
    x = w * 1
    a, b = x[0], x[0, 1:]
    a.mul_(3)
    return b * b  # b's history must come from the rewritten base


def _view_after_base(w: Any) -> Any:
    x = w * 1
    v = x[:, 2]
    x.mul_(w)
    return v * 2


def _run(lib: Any, make: Any, name: str, values: np.ndarray) -> Any:
    w = make(values, requires_grad=True)
    try:
        out = CASES[name](lib, w)
        out.sum().backward()
    except RuntimeError as exc:  # a saved value overwritten: torch refuses, so must we
        return ("error", "modified by an in" in str(exc))
    return np.array(out.detach().numpy()), np.array(w.grad.numpy())


@pytest.mark.parametrize("name", sorted(CASES))
def test_view_inplace_gradients_match_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    values = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    expected = _run(torch, torch.tensor, name, values)
    got = _run(ge, ge.tensor, name, values)
    if isinstance(expected[0], str):
        assert got == ("error", True)
        return
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)


def test_base_history_is_rewritten() -> None:
    x = ge.ones(2, 2, requires_grad=True)
    y = x * 1
    v = y[0]
    v.mul_(2)
    assert y.grad_fn.name() == "CopySlices"
    assert v.grad_fn is not None and v.requires_grad and not v.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [[2.0, 2.0], [1.0, 1.0]]


def test_view_index_errors() -> None:
    t = ge.zeros(2, 3)
    with pytest.raises(IndexError):
        t.select(1, 3)
    with pytest.raises(IndexError):
        t.narrow(0, 1, 2)
    with pytest.raises(GraphcError):
        t.narrow(0, 1, 2)


def test_squeeze_keeps_dims_that_are_not_one_as_torch() -> None:
    x = ge.ones(2, 1, 3)
    assert x.squeeze(0).shape == (2, 1, 3) and x.squeeze(0)._base is x
    assert x.squeeze(1).shape == (2, 3) and x.squeeze((0, 1)).shape == (2, 3)
    assert ge.tensor(1.0).squeeze(0).shape == () and ge.tensor(1.0).squeeze(-1).shape == ()
