"""autograd.Function traced into graphs keeps its own backward (one custom_vjp node).

Before, gc.trace / gc.jit recorded the forward's ops and differentiated them: the
tutorials' gradient-reversal GradCoeff gave 4 statically where eager and PyTorch
give -0.4. Every test here compares the static gradient with the eager one, and
Wrong (whose backward is deliberately not the derivative of its forward) catches a
graph that differentiates the forward instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.eager.autograd import Function


class GradCoeff(Function):
    """The tutorials' example, as written there (view_as included)."""

    @staticmethod
    def forward(ctx: Any, x: Any, coeff: float) -> Any:
        ctx.coeff = coeff
        x.view_as(x)
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        return ctx.coeff * grad_output, None


class Exp(Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        (result,) = ctx.saved_tensors
        return grad_output * result


class Wrong(Function):
    """tanh(x*x + 1) whose backward is g * h * 3 (h = x*x + 1, a saved intermediate)."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        h = x * x + 1.0
        ctx.save_for_backward(x, h)
        return h.tanh()

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        _x, h = ctx.saved_tensors
        return grad_output * h * 3.0


class Legendre(Function):
    """The tutorials' LegendrePolynomial3: saves its input."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return 0.5 * (5 * x**3 - 3 * x)

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        (x,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * x**2 - 1)


XV = np.linspace(-1.2, 1.1, 6).astype(np.float32).reshape(2, 3)


def _eager_grad(fn: Any, xv: np.ndarray) -> np.ndarray:
    x = ge.tensor(xv, requires_grad=True)
    fn(x).backward()
    return x.grad.numpy()


def _static_grad(fn: Any, xv: np.ndarray) -> np.ndarray:
    g = gc.trace(fn, gc.TensorSpec(xv.shape))
    gc.verify(g)
    return gc.gradients(g, wrt=["x"])(xv)[-1]


def test_grad_coeff_gives_minus_0_4_statically_as_eagerly() -> None:
    def fn(x: Any) -> Any:
        return (GradCoeff.apply(x, -0.1) ** 2).sum()

    xv = np.array([2.0], np.float32)
    np.testing.assert_allclose(_eager_grad(fn, xv), [-0.4], rtol=1e-6)
    g = gc.trace(fn, gc.TensorSpec((1,)))
    assert [n.op for n in g.op_nodes].count("custom_vjp") == 1
    value, grad = gc.gradients(g, wrt=["x"])(xv)
    assert value == pytest.approx(4.0)
    np.testing.assert_allclose(grad, [-0.4], rtol=1e-6)
    exe = gc.compile(gc.gradients(g, wrt=["x"]), opt_level=2)
    np.testing.assert_allclose(exe(xv)[1], [-0.4], rtol=1e-6)


def test_grad_coeff_through_jit_and_split_backward() -> None:
    def fn(x: Any) -> Any:
        return (GradCoeff.apply(x, -0.1) ** 2).sum()

    xv = np.array([2.0], np.float32)
    jitted = gc.jit(fn)
    assert jitted(xv) == pytest.approx(4.0)
    np.testing.assert_allclose(
        gc.gradients(jitted.graph_for(xv), wrt=["x"])(xv)[-1], [-0.4], rtol=1e-6
    )
    fwd, bwd = gc.split_backward(gc.trace(fn, gc.TensorSpec((1,))), wrt=["x"])
    results = fwd(xv)
    saved = results[1:] if isinstance(results, tuple) else ()
    grad = bwd(*saved, np.float32(1.0))
    np.testing.assert_allclose(grad, [-0.4], rtol=1e-6)


def test_grad_coeff_matches_pytorch() -> None:
    torch = pytest.importorskip("torch")

    class TorchGradCoeff(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, coeff: float) -> Any:
            ctx.coeff = coeff
            x.view_as(x)
            return x

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            return ctx.coeff * grad_output, None

    x = torch.tensor([2.0], requires_grad=True)
    (TorchGradCoeff.apply(x, -0.1) ** 2).backward()
    static = _static_grad(lambda x: (GradCoeff.apply(x, -0.1) ** 2).sum(), np.array([2.0], "f4"))
    np.testing.assert_allclose(static, x.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("function", [Exp, Wrong, Legendre], ids=lambda f: f.__name__)
def test_static_gradient_is_the_functions_backward(function: type[Function]) -> None:
    def fn(x: Any) -> Any:
        return (function.apply(x) * x).sum()

    eager = _eager_grad(fn, XV)
    np.testing.assert_allclose(_static_grad(fn, XV), eager, rtol=1e-5, atol=1e-6)
    g = gc.gradients(gc.trace(fn, gc.TensorSpec(XV.shape)), wrt=["x"])
    np.testing.assert_allclose(gc.compile(g, opt_level=2)(XV)[1], eager, rtol=1e-5, atol=1e-6)


def test_wrong_backward_is_not_the_forwards_derivative() -> None:
    """Guards the test above: differentiating Wrong's forward would give another value."""

    def true(x: Any) -> Any:
        return ((x * x + 1.0).tanh() * x).sum()

    def custom(x: Any) -> Any:
        return (Wrong.apply(x) * x).sum()

    assert not np.allclose(_static_grad(custom, XV), _static_grad(true, XV), rtol=1e-3)


@pytest.mark.parametrize("function", [Exp, Wrong, Legendre], ids=lambda f: f.__name__)
def test_second_derivative_matches_eager_create_graph(function: type[Function]) -> None:
    def fn(x: Any) -> Any:
        return (function.apply(x) * x).sum()

    x = ge.tensor(XV.astype(np.float64), requires_grad=True)
    (dx,) = ge.autograd.grad(fn(x), x, create_graph=True)
    (dx * dx).sum().backward()
    spec = gc.TensorSpec(XV.shape, "float64")
    gg = gc.gradients(gc.trace(fn, spec), wrt=["x"])
    second = gc.trace(lambda v: gc.sum(gg(v)[-1] * gg(v)[-1]), spec)
    static = gc.gradients(second, wrt=["v"])(XV.astype(np.float64))[-1]
    np.testing.assert_allclose(static, x.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_ctx_sees_needs_input_grad_and_attributes() -> None:
    seen: dict[str, Any] = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx: Any, x: Any, factor: float, y: Any) -> Any:
            seen["forward"] = ctx.needs_input_grad
            ctx.factor = factor
            ctx.y = y  # a graph value kept as an attribute, not saved
            return x * y * factor

        @staticmethod
        def backward(ctx: Any, ct: Any) -> Any:
            seen["backward"] = ctx.needs_input_grad
            return ct * ctx.y * ctx.factor, None, None

    g = gc.trace(
        lambda x, y: Scale.apply(x, 2.0, y).sum(), gc.TensorSpec((3,)), gc.TensorSpec((3,))
    )
    assert seen == {"forward": (True, False, True), "backward": (True, False, True)}
    xv, yv = np.arange(3, dtype=np.float32), np.full(3, 0.5, np.float32)
    _, dx, dy = gc.gradients(g, wrt=["x", "y"])(xv, yv)
    np.testing.assert_allclose(dx, yv * 2.0)
    np.testing.assert_allclose(dy, np.zeros(3))  # backward said None for y


def test_apply_while_declaring_and_on_eager_tensors_unchanged() -> None:
    g = gc.Graph("declared")
    with g:
        x = gc.placeholder("x", shape=(2,))
        gc.output(Exp.apply(x), name="y")
    assert g.op_nodes[-1].attrs["function"] == "Exp"
    np.testing.assert_allclose(g(np.zeros(2, np.float32)), [1.0, 1.0])
    t = ge.tensor([0.0, 1.0], requires_grad=True)
    assert type(Exp.apply(t).grad_fn).__name__ == "ExpBackward"  # eager path as before


def test_several_outputs_are_a_clear_tracing_error() -> None:
    class Two(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2, x * 3

        @staticmethod
        def backward(ctx: Any, a: Any, b: Any) -> Any:
            return a * 2 + b * 3

    with pytest.raises(gc.TracingError, match="one tensor only"):
        gc.trace(lambda x: Two.apply(x)[0], gc.TensorSpec((2,)))


def test_backward_with_too_many_gradients_is_an_error() -> None:
    class Bad(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, ct: Any) -> Any:
            return ct, ct

    with pytest.raises(gc.AutodiffError, match="returned 2 gradients"):
        gc.trace(lambda x: Bad.apply(x), gc.TensorSpec((2,)))
