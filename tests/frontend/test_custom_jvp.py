"""`gc.custom_jvp`, as `jax.custom_jvp`: the rule gives forward mode, its transpose
reverse mode (static graphs, the eager tape), both exact; against jax, finite
differences in float64, the eager side and vmap."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

X = np.array([-2.0, 0.0, 3.0, 40.0])


def _softplus_with(lib: Any, custom: Any) -> Any:
    """log(1 + exp(x)) whose derivative is the stable sigmoid: jax's docs' example."""

    @custom
    def softplus(x):
        return lib.log(1.0 + lib.exp(x))

    @softplus.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1.0 + lib.exp(-x))

    return softplus


softplus = _softplus_with(gc, gc.custom_jvp)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@pytest.fixture
def jax() -> Iterator[Any]:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def test_reverse_and_forward_mode_use_the_rule() -> None:
    big = np.array([1000.0])  # exp overflows: the function's own derivative would be nan
    np.testing.assert_array_equal(gc.grad(lambda x: gc.sum(softplus(x)))(big), [1.0])
    np.testing.assert_allclose(gc.grad(lambda x: gc.sum(softplus(x)))(X), _sigmoid(X))
    y, t = gc.jvp(softplus, (X,), (np.full(4, 2.0),))
    np.testing.assert_allclose(y, np.log1p(np.exp(X)))
    np.testing.assert_allclose(t, 2.0 * _sigmoid(X))
    # second derivatives differentiate the rule: sigmoid' = s (1 - s)
    s = _sigmoid(X)
    np.testing.assert_allclose(
        gc.hessian(lambda x: gc.sum(softplus(x)))(X), np.diag(s * (1 - s)), rtol=1e-12, atol=1e-15
    )


def test_the_rule_against_finite_differences_of_the_function() -> None:
    g = gc.trace(lambda x: gc.sum(softplus(x) * x), X)
    grad = gc.gradients(g, wrt=["x"])(X)[1]
    eps = 1e-6

    def f(x: np.ndarray) -> float:
        return float(np.sum(np.log1p(np.exp(x)) * x))

    for k in range(4):
        e = np.zeros(4)
        e[k] = eps
        np.testing.assert_allclose(grad[k], (f(X + e) - f(X - e)) / (2 * eps), rtol=1e-6)


def test_against_jax_custom_jvp(jax: Any) -> None:
    theirs = _softplus_with(jax.numpy, jax.custom_jvp)

    def ours_loss(x):
        return gc.sum(softplus(x) * gc.sin(x))

    def their_loss(x):
        return jax.numpy.sum(theirs(x) * jax.numpy.sin(x))

    np.testing.assert_allclose(gc.grad(ours_loss)(X), jax.grad(their_loss)(X), rtol=1e-12)
    np.testing.assert_allclose(gc.hessian(ours_loss)(X), jax.hessian(their_loss)(X), rtol=1e-10)
    t = np.linspace(-1, 1, 4)
    np.testing.assert_allclose(
        gc.jvp(softplus, (X,), (t,))[1], jax.jvp(theirs, (X,), (t,))[1], rtol=1e-12
    )


def test_on_the_eager_tape_and_under_vmap() -> None:
    t = ge.tensor(X, requires_grad=True)
    softplus(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), _sigmoid(X))
    batched = gc.vmap(gc.grad(lambda x: gc.sum(softplus(x))))(np.stack([X, -X]))
    np.testing.assert_allclose(batched, [_sigmoid(X), _sigmoid(-X)])


def test_integer_and_number_arguments_take_zero_tangents() -> None:
    seen = []

    @gc.custom_jvp
    def scale(x, n, c):
        return x * n * c

    @scale.defjvp
    def _(primals, tangents):
        (x, n, c), (tx, tn, tc) = primals, tangents
        seen.append((tn.dtype, tc))
        return scale(x, n, c), tx * n * c

    g = gc.grad(lambda x: gc.sum(scale(x, np.int64(3), 0.5)))(X)
    np.testing.assert_array_equal(g, np.full(4, 1.5))
    assert seen[-1] == (np.dtype(np.int64), 0.0)


def test_the_node_is_marked_linear_and_survives_the_text_format() -> None:
    g = gc.trace(lambda x: softplus(x) * 2.0, X)
    node = next(n for n in g.op_nodes if n.op == "custom_vjp")
    assert node.attrs["linear"] is True and node.attrs["function"] == "softplus"
    again = gc.parse(str(g))
    tg = gc.tangents(again, wrt=["x"])  # forward mode takes it after a round trip too
    np.testing.assert_allclose(tg(X, np.ones(4))[1], 2.0 * _sigmoid(X))


def test_mistakes_are_named() -> None:
    bare = gc.custom_jvp(lambda x: x * 2.0)
    with pytest.raises(gc.GraphcError, match="call defjvp"):
        gc.grad(lambda x: gc.sum(bare(x)))(X)
    single = gc.custom_jvp(lambda x: x * 2.0)
    single.defjvp(lambda p, t: t[0] * 2.0)
    with pytest.raises(gc.TracingError, match=r"must return \(primal_out, tangent_out\)"):
        gc.grad(lambda x: gc.sum(single(x)))(X)
    wrong = gc.custom_jvp(lambda x: x * 2.0)
    wrong.defjvp(lambda p, t: (p[0] * 2.0, gc.sum(t[0])))
    with pytest.raises(gc.AutodiffError, match="tangent_out is .*f64\\[\\]; the function's"):
        gc.grad(lambda x: gc.sum(wrong(x)))(X)
    # on plain arrays the function just runs
    np.testing.assert_array_equal(bare(X), X * 2.0)
