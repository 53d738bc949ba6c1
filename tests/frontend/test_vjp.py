"""`gc.vjp`, as `jax.vjp`: on arrays (forward once, the backward per call), on eager
tensors, on graph values (inside gc.jit, under grad), with pytrees, has_aux, integer
primals and results; against central finite differences in float64, against jacrev
and jvp on random graphs, and against jax.vjp where jax is installed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
import graphc.eager as ge
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs

RNG = np.random.default_rng(7)
X = RNG.uniform(-1, 1, 3)
P = {"a": RNG.uniform(-1, 1, (2, 3)), "b": np.array(0.7)}


def model(lib: Any) -> Any:
    """The same function on graphc's and jax's numpy-like namespaces."""

    def fn(x: Any, p: dict) -> dict:
        h = lib.tanh(p["a"] @ x) * p["b"]
        return {"h": h, "s": (h * h).sum()}

    return fn


@pytest.fixture
def jax() -> Iterator[Any]:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def _np_model(x: np.ndarray, a: np.ndarray, b: float) -> tuple[np.ndarray, float]:
    h = np.tanh(a @ x) * b
    return h, float((h * h).sum())


def test_against_finite_differences_in_float64() -> None:
    (y, f_vjp) = gc.vjp(model(gc), X, P)
    h, s = _np_model(X, P["a"], P["b"])
    np.testing.assert_allclose(y["h"], h)
    np.testing.assert_allclose(y["s"], s)
    ct = {"h": RNG.uniform(-1, 1, 2), "s": np.array(0.3)}
    gx, gp = f_vjp(ct)

    def scalar(x: np.ndarray, a: np.ndarray, b: float) -> float:
        h, s = _np_model(x, a, b)
        return float(ct["h"] @ h + ct["s"] * s)

    eps = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        fd = (scalar(X + e, P["a"], P["b"]) - scalar(X - e, P["a"], P["b"])) / (2 * eps)
        np.testing.assert_allclose(gx[k], fd, rtol=1e-6)
    for i in np.ndindex(2, 3):
        e = np.zeros((2, 3))
        e[i] = eps
        fd = (scalar(X, P["a"] + e, P["b"]) - scalar(X, P["a"] - e, P["b"])) / (2 * eps)
        np.testing.assert_allclose(gp["a"][i], fd, rtol=1e-6)
    fd = (scalar(X, P["a"], P["b"] + eps) - scalar(X, P["a"], P["b"] - eps)) / (2 * eps)
    np.testing.assert_allclose(gp["b"], fd, rtol=1e-6)
    assert gp["b"].shape == () and gx.dtype == np.float64


def test_against_jax_vjp(jax: Any) -> None:
    y, f_vjp = gc.vjp(model(gc), X, P)
    yj, f_vjp_j = jax.vjp(model(jax.numpy), X, P)
    np.testing.assert_allclose(y["h"], yj["h"], rtol=1e-12)
    for ct in ({"h": np.array([1.0, -2.0]), "s": np.array(0.5)}, {"h": np.zeros(2), "s": 1.0}):
        ours, theirs = f_vjp(ct), f_vjp_j(ct)
        for a, b in zip(gc.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-15)
    # has_aux: (value, f_vjp, aux), as jax
    fn = lambda x: (gc.sin(x) * 2.0, {"m": gc.mean(x)})  # noqa: E731
    fj = lambda x: (jax.numpy.sin(x) * 2.0, {"m": jax.numpy.mean(x)})  # noqa: E731
    y, f_vjp, aux = gc.vjp(fn, X, has_aux=True)
    yj, f_vjp_j, auxj = jax.vjp(fj, X, has_aux=True)
    np.testing.assert_allclose(aux["m"], auxj["m"])
    np.testing.assert_allclose(f_vjp(X)[0], f_vjp_j(X)[0], rtol=1e-12)


def test_the_forward_runs_once_and_the_backward_per_call() -> None:
    traces = []

    def f(x: Any) -> Any:
        traces.append(1)
        return gc.exp(x) * 3.0

    y, f_vjp = gc.vjp(f, X)
    for ct in (np.ones(3), np.arange(3.0)):
        (g,) = f_vjp(ct)
        np.testing.assert_allclose(g, np.exp(X) * 3.0 * ct)
    assert len(traces) == 1
    np.testing.assert_array_equal(y, np.exp(X) * 3.0)


def test_integer_primals_get_zeros_and_integer_results_take_no_cotangent() -> None:
    def f(x: Any, n: Any) -> Any:
        return x * n, gc.argmax(x)

    n = np.array(3)
    (y, i), f_vjp = gc.vjp(f, X, n)
    gx, gn = f_vjp((np.ones(3), np.array(0)))
    np.testing.assert_array_equal(gx, np.full(3, 3.0))
    assert gn.dtype == n.dtype and gn.shape == () and gn == 0
    assert i == np.argmax(X)


def test_wrong_cotangents_are_named_errors() -> None:
    _, f_vjp = gc.vjp(lambda x: x * 2.0, X)
    with pytest.raises(gc.ShapeError, match="cotangent for 'out'.*output's shape"):
        f_vjp(np.ones(2))
    with pytest.raises(gc.DTypeError, match="cotangent for 'out' is float32"):
        f_vjp(np.ones(3, np.float32))
    with pytest.raises(gc.GraphcError, match="structure of f's result"):
        f_vjp([np.ones(3)])
    with pytest.raises(gc.GraphcError, match="give the primals"):
        gc.vjp(lambda: 1.0)
    with pytest.raises(gc.AutodiffError, match="pair"):
        gc.vjp(lambda x: x, X, has_aux=True)


def test_on_eager_tensors_the_results_are_new_tensors() -> None:
    t = ge.tensor(X, requires_grad=True)
    y, f_vjp = gc.vjp(gc.sin, t)
    (g,) = f_vjp(ge.tensor(np.ones(3)))
    assert isinstance(y, ge.Tensor) and isinstance(g, ge.Tensor)
    assert g.grad_fn is None
    np.testing.assert_allclose(g.numpy(), np.cos(X))
    # the eager tape's own gradient agrees
    ge.sin(t).backward(ge.tensor(np.ones(3)))
    np.testing.assert_allclose(t.grad.numpy(), g.numpy())


def test_on_graph_values_inside_jit_and_under_grad() -> None:
    # inside jit: the gradient ops are recorded into the traced graph
    @gc.jit
    def pulled(x: Any) -> Any:
        _, f_vjp = gc.vjp(gc.sin, x)
        return f_vjp(gc.cos(x))[0]

    np.testing.assert_allclose(pulled(X), np.cos(X) ** 2)
    graph = pulled.graph_for(X)
    assert any(n.op == "cos" for n in graph.op_nodes)
    # differentiating through f_vjp: d/dx sum(x cos x) = cos x - x sin x
    g = gc.grad(lambda x: gc.sum(gc.vjp(gc.sin, x)[1](x)[0]))(X)
    np.testing.assert_allclose(g, np.cos(X) - X * np.sin(X), rtol=1e-12)
    # pytrees and a Python number as a cotangent on graph values
    out = gc.jit(lambda x, p: gc.vjp(model(gc), x, p)[1]({"h": x[:2], "s": 1.0}))(X, P)
    eager = gc.vjp(model(gc), X, P)[1]({"h": X[:2], "s": 1.0})
    for a, b in zip(gc.tree_leaves(out), gc.tree_leaves(eager)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_edges_zero_d_empty_nan() -> None:
    y, f_vjp = gc.vjp(lambda x: x * x, np.float64(-0.0))
    assert np.signbit(f_vjp(1.0)[0])  # 2 * -0.0 * 1
    _, f_vjp = gc.vjp(lambda x: gc.exp(x), np.zeros(0))
    assert f_vjp(np.zeros(0))[0].shape == (0,)
    _, f_vjp = gc.vjp(lambda x: gc.sqrt(x), np.array([np.nan, 4.0, np.inf]))
    g = f_vjp(np.ones(3))[0]
    assert np.isnan(g[0]) and g[1] == 0.25 and g[2] == 0.0


@settings(max_examples=draws(20), deadline=None)
@given(random_graphs(min_ops=3, max_ops=10), st.integers(0, 2**16))
def test_vjp_against_jacrev_and_jvp_on_random_graphs(g: gc.Graph, seed: int) -> None:
    feeds = list(random_feeds(g, seed).values())
    rng = np.random.default_rng(seed + 1)
    outs, f_vjp = gc.vjp(g, *feeds)
    outs = outs if isinstance(outs, tuple) else (outs,)
    cts = tuple(rng.uniform(-1, 1, np.shape(o)).astype(np.asarray(o).dtype) for o in outs)
    pulled = f_vjp(cts if len(outs) > 1 else cts[0])
    jacobians = gc.jacrev(g, argnums=tuple(range(len(feeds))))(*feeds)
    jacobians = jacobians if len(g.outputs) > 1 else (jacobians,)
    for k, got in enumerate(pulled):
        expected = sum(
            np.tensordot(ct, per_input[k], axes=np.ndim(ct))
            for ct, per_input in zip(cts, jacobians)
        )
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=str(g))
    # <ct, J t> = <J^T ct, t>
    tangents = tuple(rng.uniform(-1, 1, np.shape(v)) for v in feeds)
    _, jt = gc.jvp(g, tuple(feeds), tangents)
    jt = jt if isinstance(jt, tuple) else (jt,)
    left = sum(float(np.sum(c * t)) for c, t in zip(cts, jt))
    right = sum(float(np.sum(p * t)) for p, t in zip(pulled, tangents))
    np.testing.assert_allclose(left, right, rtol=1e-9, atol=1e-9, err_msg=str(g))
