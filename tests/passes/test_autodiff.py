"""Symbolic differentiation: the joint graph, split forward/backward, and their errors."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import OP
from tests.finite_differences import numeric_grad

F64 = "float64"


def tutorial_declared() -> gc.Graph:
    g = gc.Graph("tutorial")
    with g:
        x = gc.placeholder("x", shape=(), dtype=F64)
        w = gc.placeholder("w", shape=(), dtype=F64)
        gc.output((x + w) * (w + 1), name="y")
    return g


def tutorial_traced() -> gc.Graph:
    return gc.trace(lambda x, w: (x + w) * (w + 1), gc.TensorSpec((), F64), gc.TensorSpec((), F64))


@pytest.mark.parametrize("build", [tutorial_declared, tutorial_traced], ids=["declared", "traced"])
def test_tutorial_graph_gives_the_tutorial_gradients(build) -> None:
    g = build()
    gg = gc.gradients(g, wrt=["w", "x"])
    assert [o.name for o in gg.outputs] == [g.outputs[0].name, "grad_w", "grad_x"]
    y, dw, dx = gg(x=np.float64(2.0), w=np.float64(1.0))
    assert (float(y), float(dw), float(dx)) == (6.0, 5.0, 2.0)


def test_square_then_its_second_derivative() -> None:
    spec = gc.TensorSpec((), F64)
    gg = gc.gradients(gc.trace(lambda x: x * x, spec), wrt=["x"])
    assert float(gg(np.float64(3.0))[1]) == 6.0
    ggg = gc.gradients(gc.trace(lambda v: gc.sum(gg(v)[-1]), spec), wrt=["v"])
    assert float(ggg(np.float64(3.0))[1]) == 2.0


def test_gradient_of_a_vector_function_matches_finite_differences() -> None:
    def f(x, w):
        return gc.sum(gc.tanh(x @ w) * gc.exp(-w[0]))

    xs = [np.random.default_rng(0).standard_normal(s) for s in [(4, 3), (3, 2)]]
    g = gc.trace(f, *xs)
    gg = gc.gradients(g, wrt=["x", "w"])
    _, dx, dw = gg(*xs)
    np.testing.assert_allclose(dx, numeric_grad(lambda *a: g(*a), xs, 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, numeric_grad(lambda *a: g(*a), xs, 1), rtol=1e-6, atol=1e-8)


def test_unused_wrt_gets_zeros_of_its_type() -> None:
    g = gc.trace(lambda x, u: gc.sum(x * x), gc.TensorSpec((3,), F64), gc.TensorSpec((2, 2), F64))
    _, grad_u = gc.run(gc.gradients(g, wrt=["u"]), {"x": np.ones(3), "u": np.ones((2, 2))})
    assert grad_u.shape == (2, 2) and grad_u.dtype == np.float64
    assert not grad_u.any()


def test_unused_wrt_with_symbolic_dims_gets_zeros_of_the_fed_shape() -> None:
    g = gc.trace(lambda x, u: gc.sum(x), gc.TensorSpec((3,), F64), gc.TensorSpec((None, 2), F64))
    _, grad_u = gc.gradients(g, wrt=["u"])(np.ones(3), np.ones((5, 2)))
    assert grad_u.shape == (5, 2) and not grad_u.any()


def test_integer_paths_carry_no_gradient() -> None:
    def f(x):
        whole = gc.cast(gc.cast(x, "int64"), F64)  # piecewise constant: no gradient
        return gc.sum(x * whole)

    g = gc.trace(f, gc.TensorSpec((4,), F64))
    gg = gc.gradients(g, wrt=["x"])
    casts = {n.name for n in g.nodes if n.op == "cast"}
    assert not any(n.meta.get("grad_of") in casts for n in gg.nodes)
    x = np.array([0.3, 1.7, -2.4, 3.1])
    np.testing.assert_allclose(gg(x)[1], numeric_grad(lambda v: g(v), [x], 0), atol=1e-8)


def test_a_value_used_many_times_accumulates_in_one_add_chain() -> None:
    g = gc.trace(lambda x: gc.sum(x * 2.0 + gc.exp(x) + gc.sin(x)), gc.TensorSpec((3,), F64))
    gg = gc.gradients(g, wrt=["x"])
    adds = [n for n in gg.nodes if n.op == "add" and n.meta.get("grad_of") == "x"]
    assert len(adds) == 2  # three contributions, two adds
    assert adds[0] in adds[1].inputs
    assert gg.node("grad_x").inputs[0] is adds[1]
    x = np.array([0.1, -0.5, 2.0])
    np.testing.assert_allclose(gg(x)[1], 2 + np.exp(x) + np.cos(x))


def test_backward_nodes_name_their_forward_node_and_keep_its_location() -> None:
    g = gc.trace(lambda x, w: gc.mean(gc.relu(x @ w)), gc.TensorSpec((2, 3)), gc.TensorSpec((3, 4)))
    gg = gc.gradients(g, wrt=["w"])
    forward = {n.name: n for n in g.nodes}
    backward = [n for n in gg.nodes if n.kind == OP and n.name not in forward]
    assert backward
    for n in backward:
        origin = forward[n.meta["grad_of"]]
        assert n.meta["loc"] == origin.meta["loc"]
    assert {n.meta["grad_of"] for n in backward} >= {"matmul", "relu", "mean"}


def test_seeds_add_one_cotangent_placeholder_per_output() -> None:
    g = gc.trace(lambda x: (x * x, gc.sin(x)), gc.TensorSpec((3,), F64))
    gg = gc.gradients(g, wrt=["x"], seeds=True)
    assert [p.name for p in gg.inputs] == ["x", "ct_out", "ct_out_1"]
    x, a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.5, 2.0]), np.array([3.0, 1.0, 0.0])
    *_, dx = gg(x, a, b)
    np.testing.assert_allclose(dx, a * 2 * x + b * np.cos(x))


def test_outputs_picks_which_outputs_are_differentiated() -> None:
    g = gc.trace(lambda x: {"loss": gc.sum(x * x), "pred": x * 3}, gc.TensorSpec((2,), F64))
    gg = gc.gradients(g, wrt=["x"], outputs=["loss"])
    loss, pred, dx = gg(np.array([1.0, 2.0]))
    np.testing.assert_allclose(dx, [2.0, 4.0])
    np.testing.assert_allclose(pred, [3.0, 6.0])


def test_non_scalar_output_without_seeds_names_the_output_and_its_shape() -> None:
    g = gc.trace(lambda x: {"pred": x * 3}, gc.TensorSpec((None, 2), F64))
    with pytest.raises(gc.AutodiffError, match=r"output 'pred' has shape \(x_0, 2\)") as info:
        gc.gradients(g, wrt=["x"])
    assert "seeds=True" in str(info.value)


def test_a_one_element_output_needs_no_seed_as_in_pytorch() -> None:
    g = gc.trace(lambda x, w: (x + w) * (w + 1), gc.TensorSpec((1,), F64), gc.TensorSpec((1,), F64))
    y, dw, dx = gc.gradients(g, wrt=["w", "x"])(np.array([2.0]), np.array([1.0]))
    np.testing.assert_array_equal(y, [6.0])
    np.testing.assert_array_equal(dw, [5.0])
    np.testing.assert_array_equal(dx, [2.0])


def test_unknown_wrt_is_named_with_the_placeholders() -> None:
    with pytest.raises(gc.AutodiffError, match=r"'v' is not a placeholder.*\['x', 'w'\]"):
        gc.gradients(tutorial_traced(), wrt=["v"])


def test_a_function_instead_of_a_graph_is_refused() -> None:
    for differentiate in (gc.gradients, gc.split_backward):
        with pytest.raises(gc.GraphcError, match="expected a gc.Graph, got function.*gc.trace"):
            differentiate(lambda x: gc.sum(x * x), wrt=["x"])  # type: ignore[arg-type]


def test_integer_wrt_is_refused() -> None:
    g = gc.trace(lambda x, n: gc.sum(x * n), gc.TensorSpec((2,), F64), gc.TensorSpec((2,), "int64"))
    with pytest.raises(gc.AutodiffError, match="'n' has dtype int64"):
        gc.gradients(g, wrt=["n"])


def test_unknown_output_is_named() -> None:
    with pytest.raises(gc.AutodiffError, match="no output 'z'"):
        gc.gradients(tutorial_traced(), wrt=["x"], outputs=["z"])


# -- split_backward ------------------------------------------------------------------


def mlp_loss(x, labels, w1, b1, w2, b2):
    hidden = gc.tanh(x @ w1 + b1)
    return gc.cross_entropy(hidden @ w2 + b2, labels)


def mlp_graph(batch="B") -> gc.Graph:
    specs = [
        gc.TensorSpec((batch, 6), F64),
        gc.TensorSpec((batch,), "int64"),
        gc.TensorSpec((6, 5), F64),
        gc.TensorSpec((5,), F64),
        gc.TensorSpec((5, 3), F64),
        gc.TensorSpec((3,), F64),
    ]
    return gc.trace(mlp_loss, *specs)


def mlp_feeds(batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    shapes = {"x": (batch, 6), "w1": (6, 5), "b1": (5,), "w2": (5, 3), "b2": (3,)}
    feeds = {k: rng.standard_normal(s) for k, s in shapes.items()}
    feeds["labels"] = rng.integers(0, 3, batch)
    return feeds


PARAMS = ["w1", "b1", "w2", "b2"]


def test_split_backward_saves_exactly_what_the_backward_reads() -> None:
    g = mlp_graph()
    fwd, bwd = gc.split_backward(g, wrt=PARAMS)
    saved = fwd.outputs[len(g.outputs) :]
    assert [o.name for o in saved] == [f"saved_{p.name}" for p in bwd.inputs[:-1]]
    assert bwd.inputs[-1].name == "ct_out"
    read = {x.name for n in bwd.nodes for x in n.inputs}
    for p in bwd.inputs[:-1]:
        assert p.name in read, f"{p.name} is saved but the backward never reads it"
    assert not any(g.node(p.name).is_constant for p in bwd.inputs[:-1])  # copied, not saved
    assert [o.name for o in bwd.outputs] == [f"grad_{p}" for p in PARAMS]


@pytest.mark.parametrize("batch", [4, 7])
def test_split_backward_agrees_with_the_joint_graph(batch: int) -> None:
    g = mlp_graph()
    feeds = mlp_feeds(batch)
    joint = gc.run(gc.gradients(g, wrt=PARAMS), feeds)
    fwd, bwd = gc.split_backward(g, wrt=PARAMS)
    outs = gc.run(fwd, feeds)
    np.testing.assert_allclose(outs[0], joint[0])
    grads = bwd(*outs[len(g.outputs) :], np.float64(1.0))
    for got, want in zip(grads, joint[1:]):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_joint_gradients_of_the_mlp_match_finite_differences() -> None:
    g = mlp_graph(batch=3)
    feeds = mlp_feeds(3)
    results = gc.run(gc.gradients(g, wrt=PARAMS), feeds)
    names = [p.name for p in g.inputs]
    xs = [feeds[n] for n in names]
    for name, got in zip(PARAMS, results[1:]):
        want = numeric_grad(lambda *a: g(*a), xs, names.index(name))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_backward_graph_is_an_ordinary_graph() -> None:
    g = mlp_graph()
    fwd, bwd = gc.split_backward(g, wrt=PARAMS)
    for graph in (fwd, bwd):
        gc.verify(graph)
        assert str(gc.parse(str(graph))) == str(graph)
        assert str(gc.from_json(gc.to_json(graph))) == str(graph)
    restored = gc.from_json(gc.to_json(bwd))
    assert [n.meta.get("grad_of") for n in restored.nodes] == [
        n.meta.get("grad_of") for n in bwd.nodes
    ]


def test_backward_graph_differentiates_again() -> None:
    g = gc.trace(lambda x: gc.sum(gc.sin(x) * x), gc.TensorSpec((3,), F64))
    fwd, bwd = gc.split_backward(g, wrt=["x"])
    # the backward maps (saved values, ct) -> dx; pull a cotangent of dx back to x
    assert [p.name for p in bwd.inputs] == ["x", "sin", "ct_out"]
    second = gc.gradients(bwd, wrt=["x"], seeds=True)
    gc.verify(second)
    x = np.array([0.2, 1.0, -1.5])
    v = np.array([1.0, -2.0, 0.5])
    dx, d_dx = second(x, np.sin(x), np.float64(1.0), v)
    np.testing.assert_allclose(dx, np.cos(x) * x + np.sin(x))
    # holding the saved sin(x) fixed, d/dx of (cos(x) x + sin(x)) is cos(x) - x sin(x)
    np.testing.assert_allclose(d_dx, v * (np.cos(x) - x * np.sin(x)))


def test_split_backward_saves_a_placeholder_to_bind_a_symbolic_dim() -> None:
    g = gc.trace(lambda x: gc.sum(x * 3.0), gc.TensorSpec((None, 2), F64))
    fwd, bwd = gc.split_backward(g, wrt=["x"])
    assert [p.name for p in bwd.inputs] == ["x", "ct_out"]
    (saved,) = fwd(np.ones((5, 2)))[1:]
    (dx,) = (bwd(saved, np.float64(1.0)),)
    np.testing.assert_allclose(dx, np.full((5, 2), 3.0))


@pytest.mark.parametrize("opt_level", [0, 2])
def test_gradient_graphs_compile_and_agree_with_the_reference(opt_level: int) -> None:
    g = mlp_graph()
    feeds = mlp_feeds(5)
    joint = gc.gradients(g, wrt=PARAMS)
    want = gc.run(joint, feeds)
    got = gc.compile(joint, opt_level=opt_level)(**feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    fwd, bwd = gc.split_backward(g, wrt=PARAMS)
    outs = gc.compile(fwd, opt_level=opt_level)(**feeds)
    grads = gc.compile(bwd, opt_level=opt_level)(*outs[len(g.outputs) :], np.float64(1.0))
    for a, b in zip(grads, want[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
