"""Tracing code that uses eager tensors: parameters become named placeholders."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge


def test_eager_tensors_become_placeholders_after_the_inputs() -> None:
    w = ge.ones((3, 2), requires_grad=True)
    b = ge.zeros(2)
    g = gc.trace(lambda x: x @ w + b, gc.TensorSpec(("B", 3)))
    assert [p.name for p in g.inputs] == ["x", "param", "param_1"]
    assert [str(p.type) for p in g.inputs] == ["f32[B,3]", "f32[3,2]", "f32[2]"]
    assert gc.lifted_tensors(g) == {"param": w, "param_1": b}
    gc.verify(g)


def test_params_name_the_placeholders() -> None:
    w, b = ge.ones((3, 2)), ge.zeros(2)
    g = gc.trace(lambda x: x @ w + b, gc.TensorSpec((4, 3)), params={"weight": w, "bias": b})
    assert [p.name for p in g.inputs] == ["x", "weight", "bias"]


def test_dotted_parameter_names_are_kept_as_node_names() -> None:
    w = ge.ones(3)
    g = gc.trace(lambda x: x * w, gc.TensorSpec((3,)), params={"layer.weight": w})
    assert [p.name for p in g.inputs] == ["x", "layer.weight"]
    assert gc.parse(str(g)).inputs[1].name == "layer.weight"  # the text form keeps it
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(gc.compile(g)(x, **gc.lifted_feeds(g)), x)


def test_the_same_tensor_met_twice_is_one_placeholder() -> None:
    w = ge.full((2,), 3.0)
    g = gc.trace(lambda x: x * w + w * w, gc.TensorSpec((2,)))
    assert [p.name for p in g.inputs] == ["x", "param"]
    np.testing.assert_array_equal(g(np.ones(2, np.float32), **gc.lifted_feeds(g)), [12.0, 12.0])


def test_ops_among_eager_tensors_alone_are_recorded() -> None:
    w = ge.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    g = gc.trace(lambda x: x @ (w.T * 2), gc.TensorSpec((1, 3), "float64"))
    transpose = next(n for n in g.nodes if n.op == "transpose")
    assert transpose.inputs[0].name == "param"
    assert w.grad is None and w.grad_fn is None  # nothing ran eagerly
    x = np.ones((1, 3))
    np.testing.assert_array_equal(g(x, **gc.lifted_feeds(g)), x @ (w.detach().numpy().T * 2))


def test_eager_ops_compute_again_after_tracing() -> None:
    w = ge.ones(2, requires_grad=True)
    gc.trace(lambda x: x * w.sum(), gc.TensorSpec((2,)))
    y = w * 2
    assert isinstance(y, ge.Tensor) and y.grad_fn is not None


def test_a_traced_model_runs_with_its_current_parameter_values() -> None:
    w = ge.ones(2)
    g = gc.trace(lambda x: x * w, gc.TensorSpec((2,)))
    x = np.array([1.0, 2.0], np.float32)
    w.mul_(3)  # an in-place update after tracing is seen by lifted_feeds
    np.testing.assert_array_equal(g(x, **gc.lifted_feeds(g)), [3.0, 6.0])


def test_an_eager_tensor_in_a_declared_graph_is_refused() -> None:
    w = ge.ones(2)
    g = gc.Graph("declared")
    with g, pytest.raises(gc.TracingError, match="declared, not traced"):
        x = gc.placeholder("x", shape=(2,))
        _ = x * w


# -- jit with eager parameters --------------------------------------------------------


class Scale:
    def __init__(self) -> None:
        self.w = ge.full((2,), 2.0)

    def named_parameters(self) -> list[tuple[str, ge.Tensor]]:
        return [("w", self.w)]

    def __call__(self, x):
        return x * self.w


def test_jit_feeds_the_current_value_of_lifted_parameters() -> None:
    model = Scale()
    jf = gc.jit(model)
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(jf(x), [2.0, 2.0])
    model.w.add_(1)  # an optimizer step: same tensor, new values
    np.testing.assert_array_equal(jf(x), [3.0, 3.0])
    assert jf.cache_info().misses == 1


def test_jit_retraces_when_a_named_parameter_is_replaced() -> None:
    model = Scale()
    jf = gc.jit(model)
    x = np.ones(2, np.float32)
    jf(x)
    model.w = ge.full((2,), 5.0)  # a new tensor object: a new signature
    np.testing.assert_array_equal(jf(x), [5.0, 5.0])
    assert jf.cache_info().misses == 2
    assert [p.name for p in jf.graph_for(x).inputs] == ["x", "w"]


def test_jit_accepts_eager_tensors_as_arguments() -> None:
    jf = gc.jit(lambda x: gc.exp(x))
    np.testing.assert_allclose(jf(ge.zeros(3)), np.ones(3, np.float32))
