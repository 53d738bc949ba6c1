"""gc.custom_vjp (JAX's spelling) and the custom_vjp node in every form a graph takes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge


@gc.custom_vjp
def scaled_sin(x: Any, c: float) -> Any:
    """sin(x) * c whose declared gradient is 10x the true one (so it cannot be mistaken)."""
    return gc.sin(x) * c


def _fwd(x: Any, c: float) -> tuple:
    return scaled_sin(x, c), (gc.cos(x), c)


def _bwd(residuals: tuple, ct: Any) -> tuple:
    cos_x, c = residuals
    return ct * cos_x * c * 10.0, None


scaled_sin.defvjp(_fwd, _bwd)

XV = np.array([0.5, 1.0, -2.0], np.float32)
EXPECTED = 20.0 * np.cos(XV)  # the declared gradient of sum(scaled_sin(x, 2))


def _loss(x: Any) -> Any:
    return gc.sum(scaled_sin(x, 2.0))


def _graph() -> gc.Graph:
    return gc.trace(_loss, gc.TensorSpec((3,)))


def test_declared_graph_uses_bwd() -> None:
    g = gc.Graph("declared")
    with g:
        x = gc.placeholder("x", shape=(3,))
        gc.output(_loss(x), name="y")
    gc.verify(g)
    value, grad = gc.gradients(g, wrt=["x"])(XV)
    assert value == pytest.approx(float(np.sum(2 * np.sin(XV))), rel=1e-6)
    np.testing.assert_allclose(grad, EXPECTED, rtol=1e-6)


def test_trace_jit_compile_and_split_backward_use_bwd() -> None:
    g = _graph()
    np.testing.assert_allclose(gc.gradients(g, wrt=["x"])(XV)[1], EXPECTED, rtol=1e-6)
    for level in (0, 1, 2):
        exe = gc.compile(gc.gradients(g, wrt=["x"]), opt_level=level)
        np.testing.assert_allclose(exe(XV)[1], EXPECTED, rtol=1e-6)
    jitted = gc.jit(_loss)
    assert jitted(XV) == pytest.approx(float(np.sum(2 * np.sin(XV))), rel=1e-6)
    grad = gc.gradients(jitted.graph_for(XV), wrt=["x"])(XV)[1]
    np.testing.assert_allclose(grad, EXPECTED, rtol=1e-6)
    fwd, bwd = gc.split_backward(g, wrt=["x"])
    results = fwd(XV)
    saved = results[1:] if isinstance(results, tuple) else ()
    np.testing.assert_allclose(bwd(*saved, np.float32(1.0)), EXPECTED, rtol=1e-6)


def test_on_arrays_runs_fn_and_on_tensors_attaches_bwd() -> None:
    np.testing.assert_allclose(scaled_sin(XV, 2.0), 2 * np.sin(XV), rtol=1e-6)
    x = ge.tensor(XV, requires_grad=True)
    y = scaled_sin(x, 2.0).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), EXPECTED, rtol=1e-6)


def test_second_derivative_through_bwd_matches_eager() -> None:
    x = ge.tensor(XV.astype(np.float64), requires_grad=True)
    (dx,) = ge.autograd.grad(scaled_sin(x, 2.0).sum(), x, create_graph=True)
    dx.sum().backward()  # d/dx sum(20 cos x) = -20 sin x
    np.testing.assert_allclose(x.grad.numpy(), -20 * np.sin(XV.astype(np.float64)), rtol=1e-9)
    spec = gc.TensorSpec((3,), "float64")
    gg = gc.gradients(gc.trace(_loss, spec), wrt=["x"])
    second = gc.gradients(gc.trace(lambda v: gc.sum(gg(v)[-1]), spec), wrt=["v"])
    np.testing.assert_allclose(second(XV.astype(np.float64))[-1], x.grad.numpy(), rtol=1e-9)


def _custom_node(g: gc.Graph) -> gc.Node:
    (node,) = [n for n in g.op_nodes if n.op == "custom_vjp"]
    return node


def test_text_json_networkx_round_trips_keep_the_node() -> None:
    g = _graph()
    text = str(g)
    assert 'function="scaled_sin"' in text and "backward=graph scaled_sin_backward(" in text
    for copy in (gc.parse(text), gc.from_json(gc.to_json(g)), gc.from_networkx(gc.to_networkx(g))):
        gc.verify(copy)
        assert str(copy) == text
        assert _custom_node(copy).attrs["function"] == "scaled_sin"
        np.testing.assert_allclose(gc.gradients(copy, wrt=["x"])(XV)[1], EXPECTED, rtol=1e-6)
    json.loads(gc.to_json(g))  # plain JSON, nothing pickled


def test_save_and_load(tmp_path: Any) -> None:
    g = _graph()
    path = tmp_path / "custom.json"
    gc.save(g, path)
    loaded = gc.load(path)
    assert str(loaded) == str(g)


def test_picture_names_the_function() -> None:
    pytest.importorskip("graphviz")
    source = gc.viz.to_dot(_graph()).source
    assert "custom_vjp" in source and "function=scaled_sin" in source
    pair = gc.viz.to_dot(gc.split_backward(_graph(), wrt=["x"])).source
    assert "function=scaled_sin" in pair


def test_node_is_pure_and_optimizes_like_any_op() -> None:
    g = gc.trace(lambda x: scaled_sin(x, 2.0) + scaled_sin(x, 2.0), gc.TensorSpec((3,)))
    small = gc.optimize(g, level=2)
    gc.verify(small)
    assert sum(n.op == "custom_vjp" for n in small.op_nodes) == 1  # CSE merged the twins
    np.testing.assert_allclose(small(XV), 4 * np.sin(XV), rtol=1e-6)


def test_errors_name_the_function() -> None:
    @gc.custom_vjp
    def undefined(x: Any) -> Any:
        return x * 2

    with pytest.raises(gc.GraphcError, match="defvjp"):
        gc.trace(undefined, gc.TensorSpec((2,)))

    @gc.custom_vjp
    def short(x: Any, y: Any) -> Any:
        return x * y

    short.defvjp(lambda x, y: (x * y, (x, y)), lambda res, ct: (ct * res[1],))
    with pytest.raises(gc.AutodiffError, match="short: bwd must return a tuple of 2"):
        gc.trace(short, gc.TensorSpec((2,)), gc.TensorSpec((2,)))


def test_pytree_arguments_as_jax() -> None:
    """A dict argument: its leaves are the node's inputs, bwd gives a dict cotangent;
    under grad, jit and on eager tensors (a dict of graph values once failed to trace)."""

    @gc.custom_vjp
    def h(p):
        return p["a"] * p["b"]

    h.defvjp(
        lambda p: (p["a"] * p["b"], p),
        lambda r, ct: ({"a": ct * r["b"] * 2.0, "b": ct * r["a"]},),  # a's gradient doubled
    )
    x, t = np.array([0.5, 1.0, 2.0]), np.array([1.0, -1.0, 0.5])
    grads = gc.grad(lambda p: gc.sum(h(p)))({"a": x, "b": t})
    np.testing.assert_array_equal(grads["a"], 2 * t)
    np.testing.assert_array_equal(grads["b"], x)
    np.testing.assert_array_equal(gc.jit(h)({"a": x, "b": t}), x * t)
    a, b = ge.tensor(x, requires_grad=True), ge.tensor(t, requires_grad=True)
    h({"a": a, "b": b}).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), 2 * t)
    np.testing.assert_array_equal(b.grad.numpy(), x)

    @gc.custom_vjp
    def wrong(p):
        return p["a"]

    wrong.defvjp(lambda p: (p["a"], None), lambda r, ct: ((ct,),))
    with pytest.raises(
        gc.AutodiffError, match=r"cotangent 0 has the structure \(x,\); argument 0 has \{'a': x\}"
    ):
        gc.grad(lambda p: gc.sum(wrong(p)))({"a": x})
