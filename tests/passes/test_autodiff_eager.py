"""Static gradients against the eager tape: an MLP, and an eager model traced to a graph."""

from __future__ import annotations

import numpy as np

import graphc as gc
import graphc.eager as ge

F64 = "float64"
SIZES = (20, 16, 5)  # inputs, hidden units, classes
BATCH = 8


def mlp(x, labels, w1, b1, w2, b2):
    hidden = gc.relu(x @ w1 + b1)
    return gc.cross_entropy(hidden @ w2 + b2, labels)


def mlp_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_in, n_hidden, n_out = SIZES
    return {
        "x": rng.standard_normal((BATCH, n_in)),
        "labels": rng.integers(0, n_out, BATCH),
        "w1": rng.standard_normal((n_in, n_hidden)) * 0.3,
        "b1": rng.standard_normal(n_hidden) * 0.1,
        "w2": rng.standard_normal((n_hidden, n_out)) * 0.3,
        "b2": rng.standard_normal(n_out) * 0.1,
    }


PARAMS = ["w1", "b1", "w2", "b2"]


def eager_mlp_grads(arrays: dict[str, np.ndarray]) -> tuple[float, list[np.ndarray]]:
    tensors = {k: ge.tensor(v, requires_grad=k in PARAMS) for k, v in arrays.items()}
    loss = mlp(**tensors)
    loss.backward()
    return loss.item(), [tensors[k].grad.numpy() for k in PARAMS]


def assert_rel_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max(), err_msg=what)


def test_mlp_gradients_are_the_same_statically_and_eagerly() -> None:
    arrays = mlp_arrays()
    g = gc.trace(mlp, *arrays.values())
    eager_loss, eager_grads = eager_mlp_grads(arrays)

    joint = gc.run(gc.gradients(g, wrt=PARAMS), arrays)
    assert abs(float(joint[0]) - eager_loss) <= 1e-12 * abs(eager_loss)
    for name, got, want in zip(PARAMS, joint[1:], eager_grads):
        assert_rel_close(got, want, f"gradients: {name}")

    fwd, bwd = gc.split_backward(g, wrt=PARAMS)
    outs = gc.run(fwd, arrays)
    grads = bwd(*outs[len(g.outputs) :], np.float64(1.0))
    for name, got, want in zip(PARAMS, grads, eager_grads):
        assert_rel_close(got, want, f"split_backward: {name}")


class TwoLayer:
    """An eager model: its parameters are eager tensors, its forward uses graphc ops."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        n_in, n_hidden, n_out = SIZES
        self.w1 = ge.tensor(rng.standard_normal((n_hidden, n_in)) * 0.3, requires_grad=True)
        self.b1 = ge.tensor(np.zeros(n_hidden), requires_grad=True)
        self.w2 = ge.tensor(rng.standard_normal((n_out, n_hidden)) * 0.3, requires_grad=True)

    def named_parameters(self) -> list[tuple[str, ge.Tensor]]:
        return [("w1", self.w1), ("b1", self.b1), ("w2", self.w2)]

    def __call__(self, x, labels):
        hidden = gc.tanh(x @ self.w1.T + self.b1)  # w1.T: recorded while tracing
        return gc.cross_entropy(hidden @ self.w2.T, labels)


def test_traced_eager_model_gradients_equal_eager_backward() -> None:
    model = TwoLayer(seed=1)
    arrays = mlp_arrays(seed=2)
    x, labels = arrays["x"], arrays["labels"]

    loss = model(ge.tensor(x), ge.tensor(labels))
    loss.backward()
    eager_grads = {name: t.grad.numpy() for name, t in model.named_parameters()}

    g = gc.trace(model, x, labels)
    assert [p.name for p in g.inputs] == ["x", "labels", "w1", "b1", "w2"]
    names = list(eager_grads)
    results = gc.gradients(g, wrt=names)(x, labels, **gc.lifted_feeds(g))
    assert abs(float(results[0]) - loss.item()) <= 1e-12
    for name, got in zip(names, results[1:]):
        assert_rel_close(got, eager_grads[name], name)
