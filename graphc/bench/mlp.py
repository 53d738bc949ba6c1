"""One SGD training step of an MLP 784-256-256-10 (ReLU, softmax cross-entropy), float32.

Every mode starts from the same parameters, returns the loss of the step and updates
its own copy of the parameters in place; the check compares the loss and the
parameters after the first step. The static modes compile forward, symbolic backward
and the update as one graph whose parameters are executable state (`updates=`), so a
step copies nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc.bench import peers
from graphc.bench.core import Case, Prepared, Workload, as_arrays
from graphc.bench.modes import compile_static, not_applicable

SIZES = (784, 256, 256, 10)
NAMES = ("W1", "b1", "W2", "b2", "W3", "b3")
LR = 0.01


def initial_parameters(seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled weights and small biases, float32, the same for every mode."""
    rng = np.random.default_rng(seed)
    params = {}
    for k, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
        params[f"W{k}"] = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2 / fan_in)).astype(
            np.float32
        )
        params[f"b{k}"] = (0.01 * rng.standard_normal(fan_out)).astype(np.float32)
    return params


def loss_of(x: Any, y: Any, W1: Any, b1: Any, W2: Any, b2: Any, W3: Any, b3: Any) -> Any:  # noqa: N803
    """The model and loss in graphc ops (graph values or eager tensors)."""
    h = gc.relu(x @ W1 + b1)
    h = gc.relu(h @ W2 + b2)
    return gc.cross_entropy(h @ W3 + b3, y)


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    batch = params["batch"]
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], batch).astype(np.int64)
    return {"args": (x, y), "params": initial_parameters()}


def train_step_graph(batch: int) -> gc.Graph:
    """Forward, gradients and SGD update as one graph with outputs loss, W1_new, ..."""
    specs = [gc.TensorSpec((batch, SIZES[0])), gc.TensorSpec((batch,), "int64")]
    specs += [gc.TensorSpec(p.shape) for p in initial_parameters().values()]
    joint = gc.gradients(gc.trace(loss_of, *specs), wrt=list(NAMES))

    def step(x: Any, y: Any, W1: Any, b1: Any, W2: Any, b2: Any, W3: Any, b3: Any) -> Any:  # noqa: N803
        loss, *grads = joint(x, y, W1, b1, W2, b2, W3, b3)
        updated = {
            f"{n}_new": p - LR * g for n, p, g in zip(NAMES, (W1, b1, W2, b2, W3, b3), grads)
        }
        return {"loss": loss, **updated}

    return gc.trace(step, *specs)


def _static(opt_level: int) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        graph = train_step_graph(params["batch"])
        updates = {n: f"{n}_new" for n in NAMES}
        exe, prepared = compile_static(
            graph, opt_level, inputs["args"], updates=updates, state=inputs["params"]
        )
        prepared.arrays = lambda loss: [loss, *(exe.state[n] for n in NAMES)]
        return prepared

    return build


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x, y = (ge.from_numpy(a) for a in inputs["args"])
    weights = [ge.tensor(inputs["params"][n], requires_grad=True) for n in NAMES]

    def call() -> Any:
        loss = loss_of(x, y, *weights)
        loss.backward()
        with ge.no_grad():
            for w in weights:
                w.sub_(LR * w.grad)
                w.grad = None
        return loss

    return Prepared(call, lambda loss: as_arrays([loss, *weights]))


def numpy_step(x: np.ndarray, y: np.ndarray, p: dict[str, np.ndarray]) -> Any:
    """Hand-written forward, backward and in-place SGD update; returns the loss."""
    batch = x.shape[0]
    rows = np.arange(batch)
    h1 = x @ p["W1"]
    h1 += p["b1"]
    np.maximum(h1, 0, out=h1)
    h2 = h1 @ p["W2"]
    h2 += p["b2"]
    np.maximum(h2, 0, out=h2)
    z = h2 @ p["W3"]
    z += p["b3"]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    loss = np.log(total).mean() - z[rows, y].mean()
    e /= total  # d loss / d z = (softmax - onehot) / batch
    e[rows, y] -= 1.0
    e *= np.float32(1.0 / batch)
    grads = {"W3": h2.T @ e, "b3": e.sum(axis=0)}
    d2 = e @ p["W3"].T
    d2[h2 <= 0] = 0
    grads["W2"], grads["b2"] = h1.T @ d2, d2.sum(axis=0)
    d1 = d2 @ p["W2"].T
    d1[h1 <= 0] = 0
    grads["W1"], grads["b1"] = x.T @ d1, d1.sum(axis=0)
    for name, g in grads.items():
        g *= np.float32(LR)
        p[name] -= g
    return loss


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x, y = inputs["args"]
    p = {n: a.copy() for n, a in inputs["params"].items()}
    return Prepared(lambda: numpy_step(x, y, p), lambda loss: [loss, *(p[n] for n in NAMES)])


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    functional = torch.nn.functional
    x, y = (torch.from_numpy(a) for a in inputs["args"])
    weights = [torch.tensor(inputs["params"][n], requires_grad=True) for n in NAMES]
    optimizer = torch.optim.SGD(weights, lr=LR)
    w1, b1, w2, b2, w3, b3 = weights

    def call() -> Any:
        optimizer.zero_grad(set_to_none=True)
        h = functional.relu(x @ w1 + b1)
        h = functional.relu(h @ w2 + b2)
        loss = functional.cross_entropy(h @ w3 + b3, y)
        loss.backward()
        optimizer.step()
        return loss

    def arrays(loss: Any) -> list[np.ndarray]:
        return [loss.detach().numpy(), *(w.detach().numpy() for w in weights)]

    return Prepared(call, arrays, resident_bytes=None)


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    def loss(weights: tuple, x: Any, y: Any) -> Any:
        w1, b1, w2, b2, w3, b3 = weights
        h = jax.nn.relu(x @ w1 + b1)
        h = jax.nn.relu(h @ w2 + b2)
        logp = jax.nn.log_softmax(h @ w3 + b3, axis=1)
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    @jax.jit
    def step(weights: tuple, x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(weights, x, y)
        return value, tuple(w - LR * g for w, g in zip(weights, grads))

    x = jnp.asarray(inputs["args"][0])
    y = jnp.asarray(inputs["args"][1].astype(np.int32))
    state = [tuple(jnp.asarray(inputs["params"][n]) for n in NAMES)]

    def call() -> Any:
        value, state[0] = jax.block_until_ready(step(state[0], x, y))
        return value

    return Prepared(call, lambda value: [np.asarray(value), *map(np.asarray, state[0])], None)


WORKLOAD = Workload(
    name="mlp",
    description="MLP 784-256-256-10 training step (ReLU, softmax CE, SGD lr 0.01), float32",
    unit="step",
    cases=[Case("batch 32", {"batch": 32}), Case("batch 512", {"batch": 512}, quick=False)],
    make_inputs=_inputs,
    builders={
        "graphc-eager": _eager,
        "graphc-O0": _static(0),
        "graphc-O2": _static(2),
        "numpy": _numpy,
        "numpy-chunked": not_applicable("only for the GELU chain"),
        "torch": _torch,
        "jax": _jax,
    },
)
