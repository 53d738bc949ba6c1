"""gc.grad, value_and_grad, jvp, linearize, jacfwd, jacrev, hessian: on arrays, eager
tensors and graph values (inside trace, jit, scan and cond bodies), nested, against
finite differences in float64, against jax and torch.func where installed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
import graphc.eager as ge
from graphc.ops.pytree import flatten
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs

needs_dicts = pytest.mark.skipif(
    flatten({"a": 1})[0] != [1], reason="dicts are no pytrees yet (graphc/ops/pytree.py)"
)
RNG = np.random.default_rng(0)
X = RNG.uniform(-1, 1, (4, 3))
W = RNG.uniform(-1, 1, (3, 2))


def loss(w, x):
    return gc.sum(gc.tanh(x @ w) ** 2)


def vector(x):
    return gc.sin(x) * gc.sum(x * x)


def _fd_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of scalar f (on numpy arrays) at x."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def _fd_jac(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    y_shape = np.shape(cols[0])
    return np.stack(cols, axis=-1).reshape(*y_shape, *x.shape)


def _np_loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def _np_vector(x):
    return np.sin(x) * np.sum(x * x)


# -- on arrays ----------------------------------------------------------------------------


def test_grad_against_finite_differences() -> None:
    np.testing.assert_allclose(
        gc.grad(loss)(W, X), _fd_grad(lambda w: _np_loss(w, X), W), rtol=1e-6
    )
    gw, gx = gc.grad(loss, argnums=(0, 1))(W, X)
    np.testing.assert_allclose(gx, _fd_grad(lambda x: _np_loss(W, x), X), rtol=1e-6)
    np.testing.assert_allclose(gw, gc.grad(loss)(W, X))


def test_value_and_grad_and_aux() -> None:
    value, gw = gc.value_and_grad(loss)(W, X)
    np.testing.assert_allclose(value, _np_loss(W, X))

    def with_aux(w, x):
        return loss(w, x), [x @ w, (gc.sum(x),)]

    (value, aux), gw_aux = gc.value_and_grad(with_aux, has_aux=True)(W, X)
    np.testing.assert_allclose(aux[0], X @ W)
    np.testing.assert_allclose(gw_aux, gw)
    grads, aux = gc.grad(with_aux, has_aux=True)(W, X)
    np.testing.assert_allclose(grads, gw)
    np.testing.assert_allclose(aux[1][0], X.sum())


def test_python_scalars_are_weakly_typed_inputs_when_differentiated() -> None:
    d = gc.grad(lambda x, n: x**n)(2.0, 3)  # x an input (float32), n static
    assert d.dtype == np.float32 and d == 12.0
    assert gc.grad(gc.grad(lambda x: x * x * x))(2.0) == 12.0


def test_pytree_arguments() -> None:
    params = (W, [np.ones(2), (np.zeros(2),)])

    def f(p, x):
        return gc.sum(gc.tanh(x @ p[0] + p[1][0] * p[1][1][0]))

    grads = gc.grad(f)(params, X)
    assert isinstance(grads, tuple) and isinstance(grads[1], list)
    assert isinstance(grads[1][1], tuple)
    np.testing.assert_allclose(grads[1][0], np.zeros(2))  # times zeros
    np.testing.assert_allclose(grads[0], _fd_grad(lambda w: np.sum(np.tanh(X @ w)), W), rtol=1e-6)


@needs_dicts
def test_dict_arguments_and_results() -> None:
    params = {"w": W, "b": [np.ones(2)]}

    def f(p, x):
        out = gc.sum(gc.tanh(x @ p["w"] + p["b"][0]))
        return out, {"h": x @ p["w"]}

    grads, aux = gc.grad(f, has_aux=True)(params, X)
    assert set(grads) == {"w", "b"} and isinstance(grads["b"], list)
    np.testing.assert_allclose(aux["h"], X @ W)
    fd = _fd_grad(lambda b: np.sum(np.tanh(X @ W + b)), np.ones(2))
    np.testing.assert_allclose(grads["b"][0], fd, rtol=1e-6)
    j = gc.jacrev(lambda p: {"y": p["w"] * 2.0})(params)
    assert j["y"]["w"].shape == (3, 2, 3, 2) and j["y"]["b"][0].shape == (3, 2, 2)


def test_jvp_and_linearize_against_finite_differences() -> None:
    x, t = RNG.uniform(-1, 1, 5), RNG.uniform(-1, 1, 5)
    y, ty = gc.jvp(vector, (x,), (t,))
    np.testing.assert_allclose(y, _np_vector(x))
    eps = 1e-6
    np.testing.assert_allclose(
        ty, (_np_vector(x + eps * t) - _np_vector(x - eps * t)) / (2 * eps), rtol=1e-6
    )
    y2, f_jvp = gc.linearize(vector, x)
    np.testing.assert_allclose(y2, y)
    np.testing.assert_allclose(f_jvp(t), ty)
    np.testing.assert_allclose(f_jvp(2 * t), 2 * ty)


def test_linearize_runs_the_primal_part_once() -> None:
    traces = []

    def f(x, k):
        traces.append(x)
        return gc.exp(x) * k, gc.argmax(x)

    x, k = np.array([0.0, 1.0]), np.array([2, 3])
    (y, i), f_jvp = gc.linearize(f, x, k)
    np.testing.assert_allclose(y, np.exp(x) * k)
    for t in (np.array([1.0, 1.0]), np.array([2.0, -1.0])):
        ty, ti = f_jvp(t, k)
        np.testing.assert_allclose(ty, np.exp(x) * k * t)
        assert ti == 0
    assert len(traces) == 1  # f_jvp runs the compiled linear graph on the residuals
    with pytest.raises(gc.ShapeError, match="tangent for 'x'.*f64\\[2\\]"):
        f_jvp(np.ones(3), k)
    with pytest.raises(gc.GraphcError, match="primals' structure"):
        f_jvp(np.ones(2))


def test_jvp_with_integer_inputs_and_outputs() -> None:
    def f(x, k):
        return x * k, gc.argmax(x)

    x, k = np.array([1.0, 3.0]), np.array([2, 5])
    (y, i), (ty, ti) = gc.jvp(f, (x, k), (np.ones(2), k))
    np.testing.assert_allclose(ty, [2.0, 5.0])
    assert i == 1 and ti == 0


def test_jacobians_and_hessian_against_finite_differences() -> None:
    x = RNG.uniform(-1, 1, (2, 3))
    expected = _fd_jac(_np_vector, x)
    np.testing.assert_allclose(gc.jacfwd(vector)(x), expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gc.jacrev(vector)(x), expected, rtol=1e-6, atol=1e-9)
    h = gc.hessian(lambda x: gc.sum(vector(x)))(x)
    assert h.shape == (2, 3, 2, 3)
    fd = _fd_jac(lambda v: _fd_grad(lambda u: np.sum(_np_vector(u)), v, 1e-5), x, 1e-5)
    np.testing.assert_allclose(h, fd, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(h.reshape(6, 6), h.reshape(6, 6).T, rtol=1e-12)


def test_jacobians_of_several_arguments_and_results() -> None:
    def f(w, x):
        return x @ w, [gc.sum(w)]

    for jac in (gc.jacfwd, gc.jacrev):
        h, (s,) = jac(f, argnums=(0, 1))(W, X)
        assert h[0].shape == (4, 2, 3, 2) and h[1].shape == (4, 2, 4, 3)
        assert s[0].shape == (3, 2) and s[1].shape == (4, 3)
        np.testing.assert_allclose(h[1], _fd_jac(lambda x: x @ W, X), atol=1e-8)
        np.testing.assert_allclose(s[0], np.ones((3, 2)))
        np.testing.assert_allclose(s[1], np.zeros((4, 3)))


@pytest.mark.parametrize("jac", [gc.jacfwd, gc.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobians_at_edges(jac) -> None:
    assert jac(lambda x: x * x)(np.float64(3.0)) == 6.0  # 0-d
    assert jac(lambda x: x * 2.0)(np.zeros((0, 2))).shape == (0, 2, 0, 2)  # empty
    assert jac(lambda x: gc.sum(x))(np.zeros((0,))).shape == (0,)


def test_nested_transformations() -> None:
    x = RNG.uniform(-1, 1, 3)
    # jvp of grad: a Hessian-vector product
    t = np.array([1.0, 0.0, -1.0])
    _, hvp = gc.jvp(gc.grad(lambda v: gc.sum(vector(v))), (x,), (t,))
    h = gc.hessian(lambda v: gc.sum(vector(v)))(x)
    np.testing.assert_allclose(hvp, h @ t, rtol=1e-10)
    # grad of jvp, grad of grad of a scalar
    d = gc.grad(lambda v: gc.sum(gc.jvp(vector, (v,), (t,))[1]))(x)
    np.testing.assert_allclose(d, t @ h, rtol=1e-10)
    third = gc.grad(gc.grad(gc.grad(lambda s: s**4)))(np.float64(2.0))
    assert third == 48.0
    # a third derivative through hessian's nested scans: d/dx sum(H) of sum(x sin x)
    d3 = gc.grad(lambda v: gc.sum(gc.hessian(lambda u: gc.sum(gc.sin(u) * u))(v)))(x)
    np.testing.assert_allclose(d3, -3 * np.sin(x) - x * np.cos(x), rtol=1e-10)
    np.testing.assert_allclose(gc.jit(gc.hessian(lambda v: gc.sum(vector(v))))(x), h)


def test_a_jacobian_in_a_scan_body() -> None:
    def body(c, xi):
        return c + gc.sum(gc.jacrev(lambda v: gc.sin(v) * xi)(c), axis=1), gc.sum(c)

    spec = (gc.TensorSpec((2,), "float64"), gc.TensorSpec((3, 2), "float64"))
    g = gc.trace(lambda c0, xs: gc.scan(body, c0, xs), *spec)
    c = np.array([0.3, 0.7])
    expected = c.copy()
    for _ in range(3):
        expected = expected + np.cos(expected)
    np.testing.assert_allclose(g(c, np.ones((3, 2)))[0], expected, rtol=1e-12)


def test_on_eager_tensors_the_results_are_new_tensors() -> None:
    ge = pytest.importorskip("graphc.eager")
    w = ge.tensor(W, requires_grad=True)
    gw = gc.grad(loss)(w, X)
    assert isinstance(gw, ge.Tensor) and not gw.requires_grad
    np.testing.assert_allclose(gw.numpy(), gc.grad(loss)(W, X))
    # the eager tape agrees
    ge_loss = (ge.tanh(ge.tensor(X) @ w) ** 2).sum()
    ge_loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), gw.numpy(), rtol=1e-12)


def test_a_signature_is_traced_once() -> None:
    traces = []

    def counted(w, x):
        traces.append(w)
        return loss(w, x)

    df = gc.grad(counted)
    first = df(W, X)
    np.testing.assert_allclose(df(W + 1.0, X), gc.grad(loss)(W + 1.0, X))
    assert len(traces) == 1
    np.testing.assert_allclose(df(W, X), first)
    df(W[:2], X[:, :2])  # another shape: another trace
    assert len(traces) == 2


def test_keyword_arguments_pass_through_and_negative_argnums() -> None:
    def f(x, y, scale=1.0, mask=None):
        return gc.sum(x * y * scale * (1.0 if mask is None else mask))

    x, y = np.ones(2), np.arange(2.0)
    df = gc.grad(f)
    np.testing.assert_array_equal(df(x, y, scale=3.0), [0.0, 3.0])
    np.testing.assert_array_equal(df(x, y, scale=2.0), [0.0, 2.0])  # a static: retraced
    np.testing.assert_array_equal(df(x, y, scale=2.0, mask=np.array([0.0, 1.0])), [0.0, 2.0])
    np.testing.assert_array_equal(df(x, y, scale=2.0, mask=np.array([1.0, 0.0])), [0.0, 0.0])
    np.testing.assert_array_equal(gc.grad(f, argnums=-1)(x, y, scale=2.0), [2.0, 2.0])
    assert gc.grad(lambda a, b: a * b, argnums=-1)(2.0, 5.0) == 2.0  # b: a weak float input
    j = gc.jacrev(f, argnums=(0, 1))(x, y, scale=3.0)
    np.testing.assert_array_equal(j[1], [3.0, 3.0])


def test_jvp_keeps_its_compiled_graphs_only_while_the_function_lives() -> None:
    import gc as garbage

    from graphc.frontend import transforms

    def f(x):
        return x * 2.0

    import weakref

    gc.jvp(f, (np.ones(2),), (np.ones(2),))
    assert f in transforms._JVP_RUNNERS
    gone = []
    for _ in range(3):  # a new function per call: nothing keeps it alive
        g = lambda x: x * 3.0  # noqa: E731 - one new function object each time
        gc.jvp(g, (np.ones(2),), (np.ones(2),))
        assert g in transforms._JVP_RUNNERS
        gone.append(weakref.ref(g))
        del g
    garbage.collect()
    # (the count would also drop as other tests' functions die: weak references tell)
    assert all(ref() is None for ref in gone) and f in transforms._JVP_RUNNERS


def test_static_arguments_and_a_result_structure_per_signature() -> None:
    def f(x, mode):
        return gc.sum(x * x) if mode == "square" else gc.sum(x)

    df = gc.grad(f)
    np.testing.assert_array_equal(df(np.ones(2), "square"), [2.0, 2.0])
    np.testing.assert_array_equal(df(np.ones(2), "plain"), [1.0, 1.0])

    def g(x):  # aux has one entry per row: its structure follows the shape
        return gc.sum(x), [x[i] for i in range(x.shape[0])]

    vg = gc.value_and_grad(g, has_aux=True)
    assert len(vg(np.ones(1))[0][1]) == 1
    assert len(vg(np.ones(2))[0][1]) == 2
    assert len(vg(np.ones(1))[0][1]) == 1


def test_edges_zero_d_empty_nan_and_inf() -> None:
    assert gc.grad(lambda x: x * x)(np.float64(3.0)) == 6.0
    assert gc.grad(lambda x: gc.sum(x * x))(np.zeros((0, 3))).shape == (0, 3)
    y, ty = gc.jvp(lambda x: x * 2.0, (np.zeros((0,)),), (np.zeros((0,)),))
    assert y.shape == ty.shape == (0,)
    x = np.array([0.0, np.inf, np.nan, 4.0])
    with np.errstate(divide="ignore"):
        g = gc.grad(lambda v: gc.sum(gc.sqrt(v)))(x)
        _, t = gc.jvp(gc.sqrt, (x,), (np.ones(4),))
    np.testing.assert_array_equal(g, [np.inf, 0.0, np.nan, 0.25])
    np.testing.assert_array_equal(t, g)  # as torch.func.jvp(torch.sqrt, ...) gives


def test_jvp_on_eager_tensors_and_a_closed_over_parameter() -> None:
    ge = pytest.importorskip("graphc.eager")
    y, ty = gc.jvp(lambda x: x * x, (ge.tensor([1.0, 2.0]),), (ge.tensor([1.0, 1.0]),))
    assert isinstance(ty, ge.Tensor)
    np.testing.assert_array_equal(ty.numpy(), [2.0, 4.0])
    w = ge.tensor(W, requires_grad=True)  # read by closure: a lifted placeholder
    gx = gc.grad(lambda x: loss(w, x))(X)
    np.testing.assert_allclose(gx, gc.grad(loss, argnums=1)(W, X))


# -- on graph values ------------------------------------------------------------------------


def test_inside_trace_records_ordinary_ops() -> None:
    g = gc.trace(
        lambda w, x: gc.grad(loss)(w, x) * 2.0,
        gc.TensorSpec((3, 2), "float64"),
        gc.TensorSpec((None, 3), "float64"),  # a symbolic dim stays symbolic
    )
    assert str(g.outputs[0].type) == "f64[3,2]"
    assert {n.op for n in g.op_nodes} <= set(gc.ops.__all__) | {"constant", "sum_to"}
    assert not any(n.op in ("cond", "scan") for n in g.op_nodes)
    np.testing.assert_allclose(g(W, X), 2 * gc.grad(loss)(W, X))
    gc.verify(g)
    # and the traced gradient graph can be differentiated again
    gg = gc.gradients(gc.trace(lambda w, x: gc.sum(gc.grad(loss)(w, x)), W, X), wrt=["w"])
    fd = _fd_grad(lambda w: np.sum(gc.grad(loss)(w, X)), W)
    np.testing.assert_allclose(gg(W, X)[1], fd, rtol=1e-5)


def test_inside_jit() -> None:
    f = gc.jit(lambda w, x: gc.grad(loss, argnums=1)(w, x))
    np.testing.assert_allclose(f(W, X), gc.grad(loss, argnums=1)(W, X))
    jv = gc.jit(lambda x, t: gc.jvp(vector, (x,), (t,))[1])
    x, t = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, 3)
    np.testing.assert_allclose(jv(x, t), gc.jvp(vector, (x,), (t,))[1])


def test_grad_in_a_scan_body() -> None:
    def sgd(w, xs):
        def step(w, x):
            g = gc.grad(loss)(w, x[None, :])
            return w - 0.1 * g, loss(w, x[None, :])

        return gc.scan(step, w, xs)

    g = gc.trace(sgd, gc.TensorSpec((3, 2), "float64"), gc.TensorSpec((4, 3), "float64"))
    w_final, losses = g(W, X)
    w = W.copy()
    for k in range(4):
        np.testing.assert_allclose(losses[k], _np_loss(w, X[k : k + 1]))
        w = w - 0.1 * gc.grad(loss)(w, X[k : k + 1])
    np.testing.assert_allclose(w_final, w, rtol=1e-12)
    # and the whole loop differentiates (a second derivative through the scan)
    total = gc.grad(lambda w: gc.sum(sgd(w, X)[1]))(W)
    fd = _fd_grad(lambda w: np.sum(g(w, X)[1]), W)
    np.testing.assert_allclose(total, fd, rtol=1e-5)


def test_grad_in_cond_branches() -> None:
    def f(w, x):
        return gc.cond(gc.sum(x) > 0, lambda a: gc.grad(loss)(a, x), lambda a: -a, w)

    g = gc.trace(f, gc.TensorSpec((3, 2), "float64"), gc.TensorSpec((4, 3), "float64"))
    np.testing.assert_allclose(g(W, np.abs(X)), gc.grad(loss)(W, np.abs(X)))
    np.testing.assert_allclose(g(W, -np.abs(X)), -W)


def test_grad_in_a_while_loop_body_and_forward_mode_inside_trace() -> None:
    def climb(x):
        step = gc.grad(lambda v: gc.sum(v * v))
        return gc.while_loop(lambda c: gc.sum(c) < 10.0, lambda c: c + step(c), x)

    g = gc.trace(climb, gc.TensorSpec((2,), "float64"))
    np.testing.assert_array_equal(g(np.ones(2)), [9.0, 9.0])  # 1 -> 3 -> 9
    jac = gc.trace(lambda x: gc.jacfwd(lambda v: v * gc.sum(v))(x), gc.TensorSpec((2,), "float64"))
    np.testing.assert_array_equal(jac(np.array([1.0, 2.0])), [[4.0, 1.0], [2.0, 5.0]])
    tangent = gc.trace(
        lambda x: gc.jvp(gc.sin, (x,), (gc.ones_like(x),))[1], gc.TensorSpec((None,), "float64")
    )
    np.testing.assert_allclose(tangent(np.array([0.0, 1.0])), np.cos([0.0, 1.0]))


def test_a_captured_outer_value_is_differentiated_by_an_outer_grad() -> None:
    # d/dy of (d/dx x*x*y at x) = 2x, through the inner grad's capture of y
    def outer(y, x):
        return gc.grad(lambda v: v * v * y)(x)

    assert gc.grad(outer)(np.float64(3.0), np.float64(5.0)) == 10.0


# -- errors -----------------------------------------------------------------------------------


def test_grad_of_a_non_scalar_names_the_shape() -> None:
    with pytest.raises(gc.AutodiffError, match=r"must return a floating point scalar.*f64\[3\]"):
        gc.grad(lambda x: x * 2.0)(np.ones(3))


def test_grad_of_an_integer_input_names_the_argument() -> None:
    with pytest.raises(gc.AutodiffError, match=r"argument 1 \('k'\).*int64"):
        gc.grad(lambda x, k: gc.sum(x * k), argnums=1)(np.ones(2), np.array([1, 2]))


def test_argnums_out_of_range() -> None:
    with pytest.raises(gc.GraphcError, match="argnums 2 is out of range.*2 positional"):
        gc.grad(loss, argnums=2)(W, X)
    with pytest.raises(gc.GraphcError, match="argnums 3 is out of range"):
        gc.jacfwd(loss, argnums=(0, 3))(W, X)


def test_jvp_refuses_mismatched_tangents() -> None:
    with pytest.raises(gc.ShapeError, match="tangent for 'x'.*f64\\[3\\]"):
        gc.jvp(vector, (np.ones(3),), (np.ones(2),))
    with pytest.raises(gc.GraphcError, match="structure of primals"):
        gc.jvp(vector, (np.ones(3),), (np.ones(3), np.ones(3)))


def test_has_aux_needs_a_pair() -> None:
    with pytest.raises(gc.AutodiffError, match="pair"):
        gc.grad(lambda x: gc.sum(x), has_aux=True)(np.ones(2))


def test_a_jacobian_of_a_symbolic_shape_is_refused() -> None:
    with pytest.raises(gc.ShapeError, match="'x'.*symbolic shape"):
        gc.trace(lambda x: gc.jacfwd(vector)(x), gc.TensorSpec((None,), "float64"))


# -- against jax and torch.func --------------------------------------------------------------


def test_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def j_vector(x):
        return jnp.sin(x) * jnp.sum(x * x)

    def j_scalar(x):
        return jnp.sum(j_vector(x))

    def scalar(x):
        return gc.sum(vector(x))

    x, t = RNG.uniform(-1, 1, 4), RNG.uniform(-1, 1, 4)
    with jax.enable_x64(True):  # float64 here only: other tests keep jax's defaults
        np.testing.assert_allclose(gc.grad(scalar)(x), jax.grad(j_scalar)(x), rtol=1e-12)
        value, g = gc.value_and_grad(scalar)(x)
        j_value, j_g = jax.value_and_grad(j_scalar)(x)
        np.testing.assert_allclose((value, *g), (j_value, *j_g), rtol=1e-12)
        y, ty = gc.jvp(vector, (x,), (t,))
        jy, jty = jax.jvp(j_vector, (x,), (t,))
        np.testing.assert_allclose(y, jy)
        np.testing.assert_allclose(ty, jty, rtol=1e-12)
        _, hvp = gc.jvp(gc.grad(scalar), (x,), (t,))
        np.testing.assert_allclose(hvp, jax.jvp(jax.grad(j_scalar), (x,), (t,))[1], rtol=1e-10)
        np.testing.assert_allclose(gc.jacfwd(vector)(x), jax.jacfwd(j_vector)(x), rtol=1e-12)
        np.testing.assert_allclose(gc.jacrev(vector)(x), jax.jacrev(j_vector)(x), rtol=1e-12)
        np.testing.assert_allclose(gc.hessian(scalar)(x), jax.hessian(j_scalar)(x), rtol=1e-10)
        _, f_jvp = gc.linearize(vector, x)
        _, j_f_jvp = jax.linearize(j_vector, x)
        np.testing.assert_allclose(f_jvp(t), j_f_jvp(t), rtol=1e-12)


def test_against_torch_func() -> None:
    torch = pytest.importorskip("torch")
    from torch import func

    def t_vector(x):
        return torch.sin(x) * torch.sum(x * x)

    x, t = RNG.uniform(-1, 1, 4), RNG.uniform(-1, 1, 4)
    tx, tt = torch.tensor(x), torch.tensor(t)
    np.testing.assert_allclose(gc.jvp(vector, (x,), (t,))[1], func.jvp(t_vector, (tx,), (tt,))[1])
    np.testing.assert_allclose(gc.jacrev(vector)(x), func.jacrev(t_vector)(tx), rtol=1e-12)
    np.testing.assert_allclose(
        gc.hessian(lambda v: gc.sum(vector(v)))(x),
        func.hessian(lambda v: torch.sum(t_vector(v)))(tx),
        rtol=1e-10,
    )


# -- jvp against jacrev on random graphs ------------------------------------------------------


@settings(max_examples=draws(40), deadline=None, derandomize=True)
@given(random_graphs(min_ops=3, max_ops=10), st.integers(0, 2**16))
def test_jvp_against_jacrev_on_random_graphs(g: gc.Graph, seed: int) -> None:
    feeds = list(random_feeds(g, seed).values())
    rng = np.random.default_rng(seed + 1)
    tangents = [rng.uniform(-1, 1, np.shape(v)) for v in feeds]
    argnums = tuple(range(len(feeds)))
    _, jt = gc.jvp(g, tuple(feeds), tuple(tangents))
    jacobians = gc.jacrev(g, argnums=argnums)(*feeds)
    jt = jt if isinstance(jt, tuple) else (jt,)
    jacobians = jacobians if len(g.outputs) > 1 else (jacobians,)
    for out_jt, per_input in zip(jt, jacobians):
        expected = sum(np.tensordot(j, t, axes=np.ndim(t)) for j, t in zip(per_input, tangents))
        np.testing.assert_allclose(out_jt, expected, rtol=1e-9, atol=1e-9, err_msg=str(g))


def test_numpy_integer_argnums_as_jax() -> None:
    x, y = np.ones(3), np.arange(3.0)
    f = lambda a, b: gc.sum(a * b * a)  # noqa: E731
    np.testing.assert_array_equal(gc.grad(f, argnums=np.int64(1))(x, y), x * x)
    both = gc.value_and_grad(f, argnums=(np.int32(0), 1))(x, y)[1]
    np.testing.assert_array_equal(both[0], 2 * x * y)
    np.testing.assert_array_equal(gc.jacrev(f, argnums=np.int64(0))(x, y), 2 * x * y)
    assert gc.hessian(f, argnums=(np.int64(0), 1))(x, y)[0][1].shape == (3, 3)


def test_holomorphic_is_a_named_refusal() -> None:
    for transform in (gc.grad, gc.value_and_grad):
        with pytest.raises(gc.DTypeError, match="holomorphic=True .* no complex dtype"):
            transform(lambda a: a, holomorphic=True)


def test_linearize_takes_python_number_tangents_as_jvp_does() -> None:
    y, f_jvp = gc.linearize(lambda x: x * x, 3.0)
    tangent = f_jvp(1.0)
    assert tangent.dtype == np.float32 and tangent == 6.0
    assert gc.jvp(lambda x: x * x, (3.0,), (1.0,))[1] == tangent


def test_an_integer_primals_tangent_must_have_its_shape() -> None:
    i, x = np.array([1, 2, 3]), np.ones(3)
    f = lambda i, x: x * i  # noqa: E731
    np.testing.assert_array_equal(gc.jvp(f, (i, x), (np.zeros(3), x))[1], i)
    with pytest.raises(gc.ShapeError, match=r"tangent for 'i' has shape \(7, 7\)"):
        gc.jvp(f, (i, x), (np.zeros((7, 7)), x))


def test_stop_gradient_in_every_mode() -> None:
    x = np.array([1.0, 2.0, -0.5])
    f = lambda x: gc.sum(gc.stop_gradient(x) * x)  # noqa: E731
    np.testing.assert_array_equal(gc.grad(f)(x), x)  # d/dx (c x) with c = x held
    np.testing.assert_array_equal(gc.hessian(f)(x), np.zeros((3, 3)))
    # forward mode through it: the tangent is c t, as jax.jvp gives
    _, t = gc.jvp(lambda x: gc.stop_gradient(x) * x, (x,), (np.ones(3),))
    np.testing.assert_array_equal(t, x)
    np.testing.assert_array_equal(gc.vmap(gc.grad(f))(np.stack([x, 2 * x])), [x, 2 * x])
    # pytrees; integer leaves and Python numbers pass through
    held = gc.stop_gradient({"a": x, "n": 3})
    assert held["n"] == 3 and held["a"] is x
    g = gc.grad(lambda x: gc.sum(gc.stop_gradient(gc.argmax(x)) * x))(x)
    np.testing.assert_array_equal(g, np.ones(3))
    # an eager tensor is detached, as in PyTorch
    t = ge.tensor(x, requires_grad=True)
    assert not gc.stop_gradient(t).requires_grad


def test_stop_gradient_against_jax() -> None:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        jnp, lax = jax.numpy, jax.lax
        x = RNG.uniform(-1, 1, 4)

        def ours(x):
            return gc.sum(gc.sin(x) * gc.stop_gradient(gc.exp(x) * x) + x**2)

        def theirs(x):
            return jnp.sum(jnp.sin(x) * lax.stop_gradient(jnp.exp(x) * x) + x**2)

        np.testing.assert_allclose(gc.grad(ours)(x), jax.grad(theirs)(x), rtol=1e-12)
        np.testing.assert_allclose(gc.hessian(ours)(x), jax.hessian(theirs)(x), rtol=1e-12)


def test_eval_shape_traces_without_running() -> None:
    ran = []

    def f(x, p, scale):
        ran.append(type(x).__name__)
        h = gc.tanh(x @ p["w"]) * scale
        return {"h": h, "best": gc.argmax(h, axis=1)}

    w = np.ones((3, 2), np.float32)
    shapes = gc.eval_shape(f, gc.TensorSpec((None, 3)), {"w": w}, 2)
    assert shapes["h"] == gc.TensorSpec(("x_0", 2), "float32")  # a Python 2 stays weak
    assert shapes["best"] == gc.TensorSpec(("x_0",), "int64")
    assert ran == ["Symbol"]  # traced once, on graph values, never on data
    t = ge.tensor(np.ones((4, 3), np.float32))
    assert gc.eval_shape(lambda x: x.sum(0), x=t) == gc.TensorSpec((3,), "float32")
    with pytest.raises(gc.ShapeError):
        gc.eval_shape(lambda x, y: x @ y, np.ones((2, 3)), np.ones((2, 3)))


def test_eval_shape_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def body(lib):
        return lambda x, y: (lib.concatenate([x, y], axis=0) * 2, (x * 1.5).sum(axis=1))

    x, y = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32)
    ours = gc.eval_shape(body(gc), x, y)
    theirs = jax.eval_shape(body(jnp), x, y)
    assert [(s.shape, s.dtype) for s in ours] == [(s.shape, s.dtype) for s in theirs]


def test_jacrev_of_an_integer_output_is_refused_as_jax_refuses() -> None:
    """jax.jacrev raises for an integer output (reverse mode needs a float cotangent);
    gc.jacrev gave a Jacobian of zeros. jacfwd gives the zeros, as jax's does."""
    x = np.array([1.0, 3.0, 2.0])
    with pytest.raises(gc.AutodiffError, match="output 0 of 'f' has dtype int64"):
        gc.jacrev(gc.argmax)(x)
    np.testing.assert_array_equal(gc.jacfwd(gc.argmax)(x), np.zeros(3))
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError, match="real-valued outputs"):
        jax.jacrev(jax.numpy.argmax)(x)
