"""Tracing keeps PyTorch's grad mode: a value computed under `no_grad` (or `detach()`ed)
from one that may carry a gradient is held behind gc.stop_gradient's node, so the
traced graph's gradients, and a compiled training step, skip it as torch's do."""

from __future__ import annotations

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch


def _custom_nodes(g: gc.Graph) -> int:
    return sum(1 for n in g.op_nodes if n.op == "custom_vjp")


def test_a_value_computed_under_no_grad_carries_no_gradient() -> None:
    w = ge.tensor([2.0], requires_grad=True)

    def f(x):
        with ge.no_grad():
            z = gc.exp(x * w) * 0.5 + 1.0  # a chain: held once, at its start
        return (z * w).sum()

    g = gc.trace(f, np.array([1.0]))
    assert _custom_nodes(g) == 1
    param = g.inputs[1].name
    grad = gc.gradients(g, wrt=[param])(np.array([1.0]), np.array([2.0], np.float32))[1]
    x = ge.tensor([1.0])
    f(x).backward()  # the eager tape: dw = z only
    np.testing.assert_allclose(grad, w.grad.numpy(), rtol=1e-6)  # x: f64 here, f32 there
    np.testing.assert_allclose(grad, np.exp(2.0) * 0.5 + 1.0, rtol=1e-6)


def test_outside_no_grad_and_on_constants_nothing_is_held() -> None:
    w = ge.tensor([2.0], requires_grad=True)

    def f(x):
        with ge.no_grad():
            c = gc.exp(gc.constant(np.full(2, 3.0))) * 2.0  # from a constant: nothing to hold
            n = gc.argmax(x)  # an integer: carries no gradient anyway
        with ge.enable_grad():
            y = x * w  # grad mode back on inside no_grad
        return (c * y).sum() + n

    g = gc.trace(f, np.array([1.0, 2.0]))
    assert _custom_nodes(g) == 0, g
    # traced whole under no_grad, as torch runs it: no gradient reaches the result
    with ge.no_grad():
        held = gc.trace(f, np.array([1.0, 2.0]))
    assert _custom_nodes(held) == 1, held
    feeds = (np.array([1.0, 2.0]), np.array([2.0], np.float32))
    np.testing.assert_array_equal(gc.gradients(held, wrt=["x"])(*feeds)[1], [0.0, 0.0])
    np.testing.assert_array_equal(gc.gradients(g, wrt=["x"])(*feeds)[1], [np.exp(3.0) * 4] * 2)


def test_detach_on_a_graph_value_is_stop_gradient() -> None:
    def f(x):
        return (x.detach() * x).sum() + x.argmax().detach()

    g = gc.trace(f, np.array([1.0, 3.0]))
    assert _custom_nodes(g) == 1
    np.testing.assert_array_equal(gc.gradients(g, wrt=["x"])(np.array([1.0, 3.0]))[1], [1.0, 3.0])


@needs_torch
def test_a_train_step_skips_no_grad_blocks_as_torch() -> None:
    """A target computed under no_grad from the model's own layer (a frozen copy's
    role): torch's step does not differentiate through it, nor may the compiled one."""

    def build(lib):
        class Model(lib.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.a = lib.nn.Linear(3, 2, dtype=lib.float64)
                self.b = lib.nn.Linear(3, 2, dtype=lib.float64)

            def forward(self, x):
                with torch.no_grad() if lib is torch else ge.no_grad():
                    target = self.b(x) * 2.0
                return self.a(x) * target + self.b(x)

        return Model()

    torch.manual_seed(0)
    theirs = build(torch)
    ours = build(type("graphc", (), {"nn": nn, "float64": "float64"}))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(8, 3)), rng.normal(size=(8, 2))
    opt = optim.SGD(ours.parameters(), lr=0.1)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    step = gc.compile_train_step(ours, nn.MSELoss(), opt, (x, y), backend="numpy")
    for _ in range(3):
        step(x, y)
        their_opt.zero_grad()
        torch.nn.functional.mse_loss(theirs(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        their_opt.step()
    step.sync_to_model()
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name], value.numpy(), rtol=1e-10, err_msg=name)


def test_transformations_ignore_an_outer_no_grad_as_torch_func_does() -> None:
    """gc.grad, vjp and a compiled training step differentiate the function they trace:
    an outer no_grad (an evaluation loop around them) is not the function's, as
    torch.func.grad ignores it; a no_grad inside the function still holds."""

    def f(x):
        with ge.no_grad():
            held = x * 3.0
        return gc.sum(x * x + held * x)

    x = np.array([1.0, 2.0])
    with ge.no_grad():
        g = gc.grad(f)(x)
        _, pull = gc.vjp(lambda v: v * v, x)
        pulled = pull(np.ones(2))[0]
        model = nn.Linear(2, 1, dtype="float64", generator=0)
        step = gc.compile_train_step(
            model,
            nn.MSELoss(),
            optim.SGD(model.parameters(), lr=0.1),
            (np.ones((4, 2)), np.zeros((4, 1))),
        )
    np.testing.assert_array_equal(g, 2 * x + 3 * x)  # d/dx (x^2 + c x), c = 3x held
    np.testing.assert_array_equal(pulled, 2 * x)
    assert sorted(step.trained) == ["bias", "weight"]
    before = model.weight.detach().numpy().copy()
    step(np.ones((4, 2)), np.ones((4, 1)))
    step.sync_to_model()
    assert not np.array_equal(model.weight.detach().numpy(), before)
