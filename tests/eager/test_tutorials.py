"""The tutorials' worked examples (tutorials/ in shared), with `torch` -> `graphc.eager`.

Each test runs the tutorial's code and checks what the tutorial printed.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc.eager as torch
from graphc.ir.errors import AutodiffError


def _graph_of_y() -> tuple:
    w = torch.tensor([1.0], requires_grad=True)
    x = torch.tensor([2.0], requires_grad=True)
    a = torch.add(w, x)
    b = torch.add(w, 1)
    y = torch.mul(a, b)
    return w, x, a, b, y


def test_y_equals_x_plus_w_times_w_plus_1() -> None:
    w, x, a, b, y = _graph_of_y()
    y.backward()
    assert repr(w.grad) == "tensor([5.])"
    assert (w.is_leaf, x.is_leaf, a.is_leaf, b.is_leaf, y.is_leaf) == (
        True,
        True,
        False,
        False,
        False,
    )
    assert repr(x.grad) == "tensor([2.])"
    assert (a.grad, b.grad, y.grad) == (None, None, None)
    assert w.grad_fn is None and x.grad_fn is None
    assert [n.name() for n in (a.grad_fn, b.grad_fn, y.grad_fn)] == [
        "AddBackward0",
        "AddBackward0",
        "MulBackward0",
    ]
    assert repr(y.grad_fn).startswith("<MulBackward0 object at 0x")
    assert (a.requires_grad, b.requires_grad, y.requires_grad) == (True, True, True)


def test_second_backward_needs_retain_graph_then_accumulates() -> None:
    w, x, a, b, y = _graph_of_y()
    y.backward(retain_graph=True)
    assert repr(w.grad) == "tensor([5.])"
    y.backward()
    assert repr(w.grad) == "tensor([10.])"

    w, x, a, b, y = _graph_of_y()
    y.backward()
    with pytest.raises(AutodiffError, match="retain_graph=True"):
        y.backward()


def test_gradients_accumulate_over_iterations() -> None:
    w = torch.tensor([1.0], requires_grad=True)
    x = torch.tensor([2.0], requires_grad=True)
    seen = []
    for _ in range(4):
        y = torch.mul(torch.add(w, x), torch.add(w, 1))
        y.backward()
        seen.append(w.grad.item())
    assert seen == [5.0, 10.0, 15.0, 20.0]
    w.grad.zero_()
    assert w.grad.item() == 0.0


def test_grad_tensors_weighting_gives_9() -> None:
    w, x, a, b, y0 = _graph_of_y()
    y1 = torch.add(a, b)
    loss = torch.cat([y0, y1], dim=0)
    loss.backward(gradient=torch.tensor([1.0, 2.0]))
    assert repr(w.grad) == "tensor([9.])"


def test_autograd_grad_of_x_squared_6_then_2() -> None:
    x = torch.tensor([3.0], requires_grad=True)
    y = torch.pow(x, 2)
    grad_1 = torch.autograd.grad(y, x, create_graph=True)
    assert repr(grad_1) == "(tensor([6.], grad_fn=<MulBackward0>),)"
    grad_2 = torch.autograd.grad(grad_1[0], x)
    assert repr(grad_2) == "(tensor([2.]),)"


def test_mean_example_gives_4_5() -> None:
    x = torch.ones(2, 2, requires_grad=True)
    assert repr(x) == "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)"
    y = x + 2
    assert repr(y) == "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)"
    assert x.grad_fn is None and y.grad_fn.name() == "AddBackward0"
    z = y * y * 3
    out = z.mean()
    assert repr(z) == "tensor([[27., 27.],\n        [27., 27.]], grad_fn=<MulBackward0>)"
    assert repr(out) == "tensor(27., grad_fn=<MeanBackward0>)"
    out.backward()
    assert repr(x.grad) == "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])"


def test_chain_minus_30_minus_12_minus_10() -> None:
    x1 = torch.from_numpy(2 * np.ones((2, 2), dtype=np.float32))
    x1.requires_grad_(True)
    w1 = torch.from_numpy(5 * np.ones((2, 2), dtype=np.float32))
    w1.requires_grad_(True)
    x2 = x1 * w1
    w2 = torch.from_numpy(6 * np.ones((2, 2), dtype=np.float32))
    w2.requires_grad_(True)
    y = x2 * w2
    big_y = torch.from_numpy(10 * np.ones((2, 2), dtype=np.float32))
    loss = big_y - y
    assert repr(x2) == "tensor([[10., 10.],\n        [10., 10.]], grad_fn=<MulBackward0>)"
    assert repr(loss) == "tensor([[-50., -50.],\n        [-50., -50.]], grad_fn=<SubBackward0>)"
    loss.backward(torch.ones(2, 2, dtype=torch.float))
    assert repr(x1.grad) == "tensor([[-30., -30.],\n        [-30., -30.]])"
    assert repr(w1.grad) == "tensor([[-12., -12.],\n        [-12., -12.]])"
    assert repr(w2.grad) == "tensor([[-10., -10.],\n        [-10., -10.]])"


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, i):  # noqa: ANN001, ANN205 - the tutorial's code
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):  # noqa: ANN001, ANN205
        (result,) = ctx.saved_tensors
        return grad_output * result


class GradCoeff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, coeff):  # noqa: ANN001, ANN205
        ctx.coeff = coeff
        x.view_as(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):  # noqa: ANN001, ANN205
        return ctx.coeff * grad_output, None


def test_custom_exp_function() -> None:
    x = torch.tensor([1.0], requires_grad=True)
    y = Exp.apply(x)
    assert repr(y) == "tensor([2.7183], grad_fn=<ExpBackward>)"
    y.backward()
    assert repr(x.grad) == "tensor([2.7183])"


def test_custom_grad_coeff_function() -> None:
    x = torch.tensor([2.0], requires_grad=True)
    ret = GradCoeff.apply(x, -0.1)
    ret = ret**2
    assert repr(ret) == "tensor([4.], grad_fn=<PowBackward0>)"
    ret.backward()
    assert repr(x.grad) == "tensor([-0.4000])"


def _abc() -> tuple:
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([1.0, 2.0], requires_grad=True)
    c = 2 * a + 3 * b + 1
    return a, b, c


def test_autograd_backward_and_grad_listing() -> None:
    a, b, c = _abc()
    torch.autograd.backward(c, grad_tensors=torch.tensor([1.0, 1.0]))
    assert (repr(a.grad), repr(b.grad), c.grad) == ("tensor([2., 2.])", "tensor([3., 3.])", None)
    a, b, c = _abc()
    d = 2 * c + 1
    grads = torch.autograd.grad(d, (a, b, c), torch.tensor([1.0, 1.0]))
    assert repr(grads) == "(tensor([4., 4.]), tensor([6., 6.]), tensor([2., 2.]))"
    assert (a.grad, b.grad) == (None, None)
    cc = c.detach()
    assert not cc.requires_grad and repr(cc) == "tensor([ 6., 11.])"
    assert c.is_leaf is False and a.is_leaf is True


def test_detach_in_place_and_grad_function_listing() -> None:
    a, b, c = _abc()
    cc = c.detach_()
    assert cc is c and not cc.requires_grad and repr(cc) == "tensor([ 6., 11.])"


def test_hook_prints_gradient_and_retain_grad() -> None:
    a, b, c = _abc()
    d = 2 * c + 1
    printed = []
    hook = c.register_hook(lambda grad: printed.append(repr(grad)))
    d.backward(torch.tensor([1.0, 1.0]), retain_graph=True)
    assert printed == ["tensor([2., 2.])"]
    hook.remove()
    d.backward(torch.tensor([1.0, 1.0]), retain_graph=True)
    assert len(printed) == 1

    a, b, c = _abc()
    d = 2 * c + 1
    c.retain_grad()
    d.backward(torch.tensor([1.0, 1.0]))
    assert repr(c.grad) == "tensor([2., 2.])"


def test_custom_function_with_two_inputs_and_gradcheck() -> None:
    class Func(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):  # noqa: ANN001, ANN205
            expx, expy = torch.exp(x), torch.exp(y)
            ctx.save_for_backward(expx, expy)
            return 3 * x + 2 * y + expx + expy

        @staticmethod
        def backward(ctx, grad_output):  # noqa: ANN001, ANN205
            expx, expy = ctx.saved_tensors
            return grad_output * (3 + expx), grad_output * (2 + expy)

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    Func.apply(x, y).backward(torch.tensor([1.0, 1.0]))
    assert (repr(x.grad), repr(y.grad)) == (
        "tensor([ 5.7183, 10.3891])",
        "tensor([22.0855, 56.5981])",
    )
    iptx = torch.randn(20, requires_grad=True).double()
    ipty = torch.randn(20, requires_grad=True).double()
    assert torch.autograd.gradcheck(Func.apply, (iptx, ipty), atol=1e-4) is True


def test_no_grad_variants() -> None:
    x = torch.tensor([1.0], requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert y.requires_grad is False

    @torch.no_grad()
    def doubler(v: torch.Tensor) -> torch.Tensor:
        return v * 2

    assert doubler(x).requires_grad is False
    with torch.set_grad_enabled(False):
        assert (x * 2).requires_grad is False
    assert (x * 2).requires_grad is True
    torch.set_grad_enabled(False)
    try:
        assert (x * 2).requires_grad is False
    finally:
        torch.set_grad_enabled(True)
    assert (x * 2).requires_grad is True


def test_requires_grad_propagation_and_next_functions() -> None:
    x = torch.ones(1)
    b = torch.rand(1, requires_grad=True)
    w = torch.rand(1, requires_grad=True)
    y = w * x
    z = y + b
    assert (x.requires_grad, b.requires_grad, w.requires_grad, y.requires_grad) == (
        False,
        True,
        True,
        True,
    )
    assert (x.is_leaf, w.is_leaf, b.is_leaf, y.is_leaf, z.is_leaf) == (True,) * 3 + (False,) * 2
    (first, i0), (second, i1) = z.grad_fn.next_functions
    assert first is y.grad_fn and i0 == 0
    assert second.name() == "AccumulateGrad" and second.variable is b and i1 == 0
    (acc, _), (none, _) = y.grad_fn.next_functions
    assert acc.name() == "AccumulateGrad" and acc.variable is w and none is None


def test_leaf_in_place_error_and_detach_shares_data() -> None:
    w, x, a, b, y = _graph_of_y()
    with pytest.raises(AutodiffError, match="leaf"):
        w.add_(1)
    y.backward()
    w_detach = w.detach()
    w_detach.data[0] = 999
    assert repr(w) == "tensor([999.], requires_grad=True)"


def test_plus_equals_is_in_place() -> None:
    a = torch.ones((1,))
    first = id(a)
    a = a + torch.ones((1,))
    assert id(a) != first and repr(a) == "tensor([2.])"
    second = id(a)
    a += torch.ones((1,))
    assert id(a) == second and repr(a) == "tensor([3.])"


def test_x_squared_exp_matches_hand_derivative() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    y = x**2 * torch.exp(x)
    y.backward(torch.ones(y.size()))
    with torch.no_grad():
        by_hand = 2 * x * torch.exp(x) + x**2 * torch.exp(x)
    np.testing.assert_allclose(x.grad.numpy(), by_hand.numpy(), rtol=1e-5, atol=1e-6)


def test_sum_grad_accumulates_and_zeroes() -> None:
    x = torch.ones(2, 2, requires_grad=True)
    y = x.sum()
    assert repr(y) == "tensor(4., grad_fn=<SumBackward0>)"
    y.backward(retain_graph=True)
    y.backward(retain_graph=True)
    assert repr(x.grad) == "tensor([[2., 2.],\n        [2., 2.]])"
    x.grad.data.zero_()
    y.backward()
    assert repr(x.grad) == "tensor([[1., 1.],\n        [1., 1.]])"


def test_multiply_add_function_leaves_non_grad_input_alone() -> None:
    class MultiplyAdd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w, x, b):  # noqa: ANN001, ANN205
            ctx.save_for_backward(w, x)
            return w * x + b

        @staticmethod
        def backward(ctx, grad_output):  # noqa: ANN001, ANN205
            w, x = ctx.saved_tensors
            return grad_output * x, grad_output * w, grad_output * 1

    x = torch.ones(1)
    w = torch.rand(1, requires_grad=True)
    b = torch.rand(1, requires_grad=True)
    MultiplyAdd.apply(w, x, b).backward()
    assert x.grad is None
    assert repr(w.grad) == "tensor([1.])" and repr(b.grad) == "tensor([1.])"


def _fake_data(batch_size: int) -> tuple:
    """y = 2x + 3 plus noise, as in the tutorial."""
    x = torch.rand(batch_size, 1) * 5
    y = x * 2 + 3 + torch.randn(batch_size, 1)
    return x, y


def test_linear_regression_tutorial_loop_converges() -> None:
    # the tutorial's loop and spelling; its lr of 0.02 on a summed loss diverges (in torch
    # too: the curvature is about 0.5 * 32 * E[x^2] = 133), so the step is smaller here
    torch.manual_seed(1000)
    w = torch.rand(1, 1, requires_grad=True)
    b = torch.zeros(1, 1, requires_grad=True)
    lr = 0.001
    for _ in range(500):
        x, y = _fake_data(batch_size=32)
        y_pred = x.mm(w) + b.expand_as(y)
        loss = 0.5 * (y_pred - y) ** 2
        loss = loss.sum()
        loss.backward()
        w.data.sub_(lr * w.grad.data)
        b.data.sub_(lr * b.grad.data)
        w.grad.data.zero_()
        b.grad.data.zero_()
    assert abs(w.item() - 2) < 0.1 and abs(b.item() - 3) < 0.2


def test_linear_regression_with_manual_sgd_under_no_grad_converges() -> None:
    torch.manual_seed(1000)
    w = torch.rand(1, 1, requires_grad=True)
    b = torch.zeros(1, 1, requires_grad=True)
    for _ in range(1000):
        x, y = _fake_data(batch_size=32)
        loss = (0.5 * (x.mm(w) + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.05 * w.grad
            b -= 0.05 * b.grad
        w.grad = None
        b.grad.zero_()
    assert w.is_leaf and b.is_leaf and w.requires_grad and w.grad is None
    assert abs(w.item() - 2) < 0.1 and abs(b.item() - 3) < 0.2


def test_linear_regression_with_hand_written_gradients() -> None:
    # the tutorial's first version: no autograd, gradients by the chain rule, in-place updates
    device = torch.device("cpu")
    torch.manual_seed(1000)
    w = torch.rand(1, 1).to(device)
    b = torch.zeros(1, 1).to(device)
    lr = 0.01
    for _ in range(800):
        x = torch.rand(4, 1, device=device) * 5
        y = x * 2 + 3 + torch.randn(4, 1, device=device)
        y_pred = x.mm(w) + b.expand_as(y)
        dy_pred = 1 * (y_pred - y)
        w.sub_(lr * x.t().mm(dy_pred))
        b.sub_(lr * dy_pred.sum())
    assert abs(w.item() - 2) < 0.3 and abs(b.item() - 3) < 0.5
