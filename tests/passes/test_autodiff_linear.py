"""The gradient of a weight used transposed (``x @ w.T``, a Linear layer) is computed in
the weight's own layout, ct^T x, in both engines: right (finite differences, float64),
the same bits eagerly and compiled, and read in order by the weight's update."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.graph import OP
from tests.edge_values import bits_differ
from tests.passes.test_autodiff import numeric_grad

F64 = "float64"


def loss(x, w, v):
    return gc.sum(gc.tanh(x @ gc.transpose(w)) * v)


@pytest.mark.parametrize("x_shape", [(4, 3), (2, 4, 3), (0, 3)])
def test_the_weight_gradient_matches_finite_differences(x_shape: tuple) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(x_shape), rng.standard_normal((5, 3))
    v = rng.standard_normal((*x_shape[:-1], 5))
    g = gc.trace(loss, *(gc.TensorSpec(a.shape, F64) for a in (x, w, v)))
    grads = gc.run(gc.gradients(g, wrt=["x", "w"]), {"x": x, "w": w, "v": v})
    for k, got in enumerate(grads[1:]):
        want = numeric_grad(lambda *a: g(*a), [x, w, v], k)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_the_backward_graph_computes_ct_transposed_times_x_with_no_transpose_after() -> None:
    g = gc.trace(loss, *(gc.TensorSpec(s, F64) for s in [("B", 3), (5, 3), ("B", 5)]))
    grad = gc.optimize(gc.gradients(g, wrt=["w"]), level=1)
    (out,) = [o for o in grad.outputs if o.name == "grad_w"]
    node = out.inputs[0]
    assert node.kind == OP and node.op == "matmul", grad
    ct, x = node.inputs
    assert ct.op == "transpose" and x.name == "x"


@pytest.mark.parametrize("x_shape", [(6, 3), (2, 6, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eager_and_compiled_gradients_of_a_linear_layer_are_the_same_bits(
    x_shape: tuple, dtype: str
) -> None:
    rng = np.random.default_rng(1)
    layer = gc.nn.Linear(3, 5, generator=0)
    layer.load_state_dict(
        {
            "weight": rng.standard_normal((5, 3)).astype(dtype),
            "bias": rng.standard_normal(5).astype(dtype),
        }
    )
    x = rng.standard_normal(x_shape).astype(dtype)
    out = layer(ge.from_numpy(x))
    (out * out).sum().backward()
    g = gc.trace(lambda x: gc.sum(layer(x) ** 2), gc.TensorSpec(x.shape, dtype))
    lifted = gc.lifted_feeds(g)
    (weight,) = [n for n, v in lifted.items() if v.shape == (5, 3)]
    _, grad_w = gc.compile(gc.gradients(g, wrt=[weight]), opt_level=2)(x=x, **lifted)
    assert bits_differ(grad_w, layer.weight.grad.numpy()) is None


def test_eager_tensors_say_which_op_made_them() -> None:
    w = ge.from_numpy(np.ones((3, 4), np.float32))
    assert w.made_by is None
    w.requires_grad = True
    assert w.T.made_by == "transpose" and (w * 2.0).made_by == "mul"
    with ge.no_grad():
        assert w.T.made_by is None  # nothing recorded: the engines see no transpose
