"""The autograd engine's rules: accumulation, retain_graph, hooks, grad(), in-place
checks, higher order, long chains and memory release.
"""

from __future__ import annotations

import gc as garbage
import weakref

import numpy as np
import pytest

import graphc.eager as ge
from graphc.eager.autograd import gradcheck, gradgradcheck
from graphc.ir.errors import AutodiffError, DTypeError, ShapeError


def test_non_scalar_backward_needs_a_gradient() -> None:
    x = ge.ones(3, requires_grad=True)
    with pytest.raises(AutodiffError, match=r"scalar outputs.*shape \(3,\)"):
        (x * 2).backward()
    with pytest.raises(ShapeError, match="gradient"):
        (x * 2).backward(ge.ones(2))


def test_backward_on_a_tensor_without_grad_fails_clearly() -> None:
    with pytest.raises(AutodiffError, match="does not require grad"):
        ge.ones(2).sum().backward()


def test_backward_through_a_leaf_itself() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    x.backward(ge.tensor([3.0, 4.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])


def test_grad_does_not_touch_dot_grad_and_checks_unused_inputs() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    unused = ge.tensor([1.0], requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(AutodiffError, match="allow_unused"):
        ge.autograd.grad(y, [x, unused], retain_graph=True)
    gx, gu = ge.autograd.grad(y, [x, unused], allow_unused=True)
    np.testing.assert_array_equal(gx.numpy(), [2.0, 4.0])
    assert gu is None and x.grad is None and not gx.requires_grad


def test_grad_of_a_non_leaf_and_backward_inputs() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    w = ge.tensor([3.0, 4.0], requires_grad=True)
    h = x * w
    y = (h * h).sum()
    (gh,) = ge.autograd.grad(y, h, retain_graph=True)
    np.testing.assert_array_equal(gh.numpy(), 2 * h.detach().numpy())
    y.backward(inputs=[w])
    assert x.grad is None
    np.testing.assert_array_equal(w.grad.numpy(), 2 * h.detach().numpy() * x.detach().numpy())


def test_multiple_roots_with_autograd_backward() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    y0 = (x * 3).sum()
    y1 = (x * x).sum()
    ge.autograd.backward([y0, y1])
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])


def test_hooks_can_replace_the_gradient_and_be_removed() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    leaf_hook = x.register_hook(lambda g: g * 10)
    h = x * 2
    h.register_hook(lambda g: g + 1)
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [40.0, 40.0])  # (1 + 1) * 2 * 10
    leaf_hook.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    with pytest.raises(AutodiffError, match="hook"):
        ge.ones(1).register_hook(print)


def test_retain_grad_accumulates_and_non_leaf_grad_stays_none_otherwise() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    other = x * 3
    h.retain_grad()
    y = (h * other).sum()
    y.backward(retain_graph=True)
    np.testing.assert_array_equal(h.grad.numpy(), other.detach().numpy())
    y.backward()
    np.testing.assert_array_equal(h.grad.numpy(), 2 * other.detach().numpy())
    assert other.grad is None and h.retains_grad


def test_create_graph_builds_higher_order_gradients() -> None:
    x = ge.tensor([0.5, -1.0], dtype="float64", requires_grad=True)
    y = (ge.sin(x) * x).sum()
    (g,) = ge.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    (gg,) = ge.autograd.grad(g.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(gg.numpy(), 2 * np.cos(xv) - xv * np.sin(xv))
    z = (x**3).sum()
    z.backward(create_graph=True)
    assert x.grad.requires_grad
    first = x.grad
    x.grad = None
    first.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * xv)


def test_third_derivative_of_exp_through_its_saved_output() -> None:
    x = ge.tensor([0.3], dtype="float64", requires_grad=True)
    g = ge.exp(x * 2)
    for _ in range(3):
        (g,) = ge.autograd.grad(g, x, create_graph=True)
    np.testing.assert_allclose(g.numpy() if not g.requires_grad else g.detach().numpy(),
                               8 * np.exp(0.6))  # fmt: skip


def test_gradgradcheck_catches_a_backward_that_is_not_differentiable() -> None:
    class Square(ge.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            (x,) = ctx.saved_tensors
            return grad * 2 * x.detach()  # right values, but cut from the tape

    x = ge.randn(3, dtype="float64", requires_grad=True)
    assert gradcheck(Square.apply, (x,))
    assert gradgradcheck(Square.apply, (x,), raise_exception=False) is False


def test_in_place_on_a_saved_value_is_caught_and_names_the_op() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    y = ge.exp(h)
    y.add_(1)  # exp's rule uses its output
    with pytest.raises(AutodiffError, match="ExpBackward0.*version 1; expected version 0"):
        y.sum().backward()


def test_in_place_on_a_value_only_its_shape_is_needed_is_fine() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h += 1  # MulBackward0 saved h's input x, not h; the add rule needs no values
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    assert h.grad_fn.name() == "AddBackward0" and h._version_number == 1


def test_in_place_on_non_leaf_is_recorded() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    h.mul_(3)
    h.add_(x)  # h = 3 x + x, in place
    assert h.grad_fn.name() == "AddBackward0" and h.grad_fn.next_functions[0][0].name() == (
        "MulBackward0"
    )
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    g = x * 1
    g.mul_(x)  # the rule for d/dx needs g's old value: kept, as torch's original_self
    g.sum().backward()  # d (x * x) / dx = 2x, added to the 4s above, as in torch
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 8.0])


def test_leaf_updates_under_no_grad_and_in_place_dtype_errors() -> None:
    w = ge.tensor([1.0, 2.0], requires_grad=True)
    with ge.no_grad():
        w.sub_(ge.tensor([0.5, 0.5]))
        w.mul_(2)
        w.clamp_(max=2.5)
        w.copy_(w + 1)
    np.testing.assert_array_equal(w.detach().numpy(), [2.0, 3.5])
    assert w.is_leaf and w.requires_grad
    n = ge.tensor([1, 2])
    with pytest.raises(DTypeError, match="can't be cast"):
        n.add_(0.5)
    with pytest.raises(ShapeError):
        ge.zeros(2).add_(ge.ones(3, 2))
    with pytest.raises(ShapeError, match="copy_"):
        ge.zeros(2).copy_(ge.ones(3))
    for method in ("zero_", "fill_"):
        with pytest.raises(AutodiffError, match="leaf"):
            getattr(w, method)(*(() if method == "zero_" else (1.0,)))


def test_setitem_is_differentiable_on_non_leaves() -> None:
    x = ge.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = ge.tensor([5.0], requires_grad=True)
    h = x * 2
    h[1:2] = v * 3
    h.sum().backward()
    np.testing.assert_array_equal(h.detach().numpy(), [2.0, 15.0, 6.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])
    np.testing.assert_array_equal(v.grad.numpy(), [3.0])


def test_copy_and_fill_record_their_own_node() -> None:
    w = ge.tensor([1.0, 2.0], requires_grad=True)
    x = ge.zeros(2)
    x.copy_(w)  # a leaf source: x joins the tape
    (x * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])

    a = ge.tensor([1.0, 2.0], requires_grad=True)
    y = ge.exp(a)
    x = ge.zeros(2)
    x.copy_(y)
    assert x.grad_fn is not y.grad_fn
    x.mul_(2)  # modifies the copy, not exp's saved output
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)

    b = ge.tensor([1.0, 2.0], requires_grad=True)
    z = b * 1
    z.copy_(ge.zeros(2))  # z no longer depends on b
    z.sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 0.0])

    v = ge.tensor(2.0, requires_grad=True)
    f = ge.zeros(3)
    f.fill_(v)  # fill_ takes the same path: a value that requires grad gets one
    f.sum().backward()
    assert v.grad.item() == 3.0


def test_detach_shares_memory_and_version_counter() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    y = ge.exp(x)
    d = y.detach()
    d.zero_()
    assert y._version_number == 1 and float(y.detach().sum()) == 0.0
    with pytest.raises(AutodiffError, match="in-place"):
        y.sum().backward()


def test_requires_grad_rules() -> None:
    with pytest.raises(DTypeError, match="floating point"):
        ge.tensor([1, 2], requires_grad=True)
    y = ge.ones(2, requires_grad=True) * 2
    with pytest.raises(AutodiffError, match="leaf"):
        y.requires_grad = False
    assert ge.ones(2).requires_grad_().requires_grad
    assert not (ge.ones(2, requires_grad=True) > 0).requires_grad  # comparisons have no grad


def test_grad_mode_context_managers_and_decorators_nest() -> None:
    x = ge.ones(1, requires_grad=True)
    with ge.no_grad():
        assert not ge.is_grad_enabled()
        with ge.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad

    @ge.enable_grad()
    def doubled(v: ge.Tensor) -> ge.Tensor:
        return v * 2

    @ge.set_grad_enabled(False)
    def tripled(v: ge.Tensor) -> ge.Tensor:
        return v * 3

    assert ge.is_grad_enabled()  # the decorator did not switch the mode at definition
    with ge.no_grad():
        assert doubled(x).requires_grad
    assert not tripled(x).requires_grad
    assert ge.is_grad_enabled()


def test_ten_thousand_op_chain_backward() -> None:
    x = ge.tensor([1.0], dtype="float64", requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001**10_000], rtol=1e-9)


def _tape_saving_an_array() -> tuple:
    """y = sum(exp(x)**2), and a weak reference to exp's output, which only the tape holds."""
    h = ge.exp(ge.randn(1000, requires_grad=True))
    return (h * h).sum(), weakref.ref(h._data)


def test_saved_arrays_are_released_after_backward() -> None:
    y, probe = _tape_saving_an_array()
    garbage.collect()
    assert probe() is not None  # the tape keeps exp's output (and mul's inputs) alive
    y.backward()
    garbage.collect()
    assert probe() is None


def test_retain_graph_keeps_saved_arrays() -> None:
    y, probe = _tape_saving_an_array()
    y.backward(retain_graph=True)
    garbage.collect()
    assert probe() is not None
    y.backward()
    garbage.collect()
    assert probe() is None


def test_function_errors_and_needs_input_grad() -> None:
    seen = {}

    class Scale(ge.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):  # noqa: ANN001, ANN205
            seen["needs"] = ctx.needs_input_grad
            return x * k + y

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            return grad * 2

    x = ge.ones(2, requires_grad=True)
    out = Scale.apply(x, 2.0, ge.ones(2))
    assert seen["needs"] == (True, False, False)
    assert out.grad_fn.name() == "ScaleBackward"
    assert [e[0] is None for e in out.grad_fn.next_functions] == [False, True]
    with pytest.raises(AutodiffError, match="returned 1 gradients, forward took 3"):
        out.sum().backward()


def test_function_saved_tensors_are_freed_and_version_checked() -> None:
    class Cube(ge.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    x = ge.tensor([2.0], requires_grad=True)
    y = Cube.apply(x)
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 24.0
    with pytest.raises(AutodiffError, match="retain_graph=True"):
        y.backward()
    h = x * 1
    z = Cube.apply(h)
    with ge.no_grad():
        h.add_(1)
    with pytest.raises(AutodiffError, match="CubeBackward.*in-place"):
        z.backward()


def test_function_with_two_outputs_materializes_missing_gradients() -> None:
    received = []

    class SplitScale(ge.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g2, g3):  # noqa: ANN001, ANN205
            received.append((g2.tolist(), g3.tolist()))
            return g2 * 2 + g3 * 3

    x = ge.tensor([1.0, 2.0], requires_grad=True)
    doubled, tripled = SplitScale.apply(x)
    assert doubled.grad_fn is tripled.grad_fn and tripled._output_nr == 1
    tripled.sum().backward()
    assert received == [([0.0, 0.0], [1.0, 1.0])]
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_grad_runs_only_what_leads_to_the_inputs() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    w = ge.tensor([3.0, 4.0], requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append("w"))
    x.register_hook(lambda g: calls.append("x"))
    (gx,) = ge.autograd.grad((x * w).sum(), x)
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])
    assert calls == ["x"] and w.grad is None


class _SavedExp(ge.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: ANN001, ANN205
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        (result,) = ctx.saved_tensors
        return grad * result


def test_function_saved_output_makes_no_cycle_and_stays_twice_differentiable() -> None:
    x = ge.randn(3, dtype="float64", requires_grad=True)
    garbage.disable()
    try:
        y = _SavedExp.apply(x)
        probe = weakref.ref(y._data)
        del y
        assert probe() is None  # freed by reference counting alone
    finally:
        garbage.enable()
    assert gradgradcheck(_SavedExp.apply, (x,))
    y = _SavedExp.apply(x)
    with ge.no_grad():
        y.add_(1)
    with pytest.raises(AutodiffError, match="_SavedExpBackward: saved tensor 0 was modified"):
        y.sum().backward()
