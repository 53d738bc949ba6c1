"""One SGD training step of an MLP 784-256-256-10 (ReLU, softmax cross-entropy), float32.

Every mode starts from the same parameters (torch's layout: weight (out, in)),
returns the loss of the step and updates its own copy of the parameters in place;
the check compares the loss and the parameters after the first step. graphc's modes
use `graphc.nn` and `graphc.optim`: eagerly with `backward()` and `SGD.step()`, and
statically with `gc.compile_train_step`, which compiles forward, symbolic backward and
the update into one graph whose parameters are executable state (a step copies
nothing), on the numpy backend (O0, O2) and on the native one (O2). The peers get the same advantage: `jax.jit` compiles the step with
``donate_argnums=0``, so XLA writes the new parameters into the old ones' buffers
instead of allocating (and filling) a second set every step, and PyTorch's SGD runs
its multi-tensor (``foreach``) update, one call for all six parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc import nn
from graphc.bench import peers
from graphc.bench.core import Case, Prepared, Workload, as_arrays
from graphc.bench.first_result import classifier_args, jax_first_call
from graphc.bench.modes import Classifier, not_applicable

SIZES = (784, 256, 256, 10)
NAMES = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")  # Sequential's
LR = 0.01


def initial_parameters(seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled weights and small biases, float32, the same for every mode."""
    rng = np.random.default_rng(seed)
    params = {}
    for k, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        weight = rng.standard_normal((fan_out, fan_in)) * np.sqrt(2 / fan_in)
        params[f"{2 * k}.weight"] = weight.astype(np.float32)
        params[f"{2 * k}.bias"] = (0.01 * rng.standard_normal(fan_out)).astype(np.float32)
    return params


def model() -> nn.Sequential:
    """The MLP in graphc.nn, holding `initial_parameters()`."""
    layers = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Linear(fan_in, fan_out, generator=0), nn.ReLU()]
    mlp = nn.Sequential(*layers[:-1])
    mlp.load_state_dict(initial_parameters())
    return mlp


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    batch = params["batch"]
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], batch).astype(np.int64)
    return {"args": (x, y)}


GRAPHC = Classifier(model, LR, NAMES)  # graphc's eager and compiled modes
train_step = GRAPHC.train_step


def numpy_step(x: np.ndarray, y: np.ndarray, p: dict[str, np.ndarray]) -> Any:
    """Hand-written forward, backward and in-place SGD update; returns the loss."""
    batch = x.shape[0]
    rows = np.arange(batch)
    w1, w2, w3 = p["0.weight"], p["2.weight"], p["4.weight"]
    h1 = x @ w1.T
    h1 += p["0.bias"]
    np.maximum(h1, 0, out=h1)
    h2 = h1 @ w2.T
    h2 += p["2.bias"]
    np.maximum(h2, 0, out=h2)
    z = h2 @ w3.T
    z += p["4.bias"]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    loss = np.log(total).mean() - z[rows, y].mean()
    e /= total  # d loss / d z = (softmax - onehot) / batch
    e[rows, y] -= 1.0
    e *= np.float32(1.0 / batch)
    grads = {"4.weight": e.T @ h2, "4.bias": e.sum(axis=0)}
    d2 = e @ w3
    d2[h2 <= 0] = 0
    grads["2.weight"], grads["2.bias"] = d2.T @ h1, d2.sum(axis=0)
    d1 = d2 @ w2
    d1[h1 <= 0] = 0
    grads["0.weight"], grads["0.bias"] = d1.T @ x, d1.sum(axis=0)
    for name, g in grads.items():
        g *= np.float32(LR)
        p[name] -= g
    return loss


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x, y = inputs["args"]
    p = initial_parameters()
    return Prepared(lambda: numpy_step(x, y, p), lambda loss: [loss, *(p[n] for n in NAMES)])


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    x, y = (torch.from_numpy(a) for a in inputs["args"])
    layers = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    mlp = torch.nn.Sequential(*layers[:-1])
    mlp.load_state_dict({k: torch.from_numpy(v) for k, v in initial_parameters().items()})
    optimizer = torch.optim.SGD(mlp.parameters(), lr=LR, foreach=True)
    loss_fn = torch.nn.CrossEntropyLoss()

    def call() -> Any:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(mlp(x), y)
        loss.backward()
        optimizer.step()
        return loss

    named = dict(mlp.named_parameters())
    return Prepared(call, lambda loss: as_arrays([loss, *(named[n] for n in NAMES)]), None)


def jax_train_step(jax: Any) -> Any:
    """The jitted step (weights, x, y) -> (loss, new weights), weights donated."""
    import jax.numpy as jnp

    def loss(weights: tuple, x: Any, y: Any) -> Any:
        w1, b1, w2, b2, w3, b3 = weights
        h = jax.nn.relu(x @ w1.T + b1)
        h = jax.nn.relu(h @ w2.T + b2)
        logp = jax.nn.log_softmax(h @ w3.T + b3, axis=1)
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    def step(weights: tuple, x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(weights, x, y)
        return value, tuple(w - LR * g for w, g in zip(weights, grads))

    # the old weights are dead after a step: XLA may update them in place, as graphc does
    return jax.jit(step, donate_argnums=0)


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    step = jax_train_step(jax)
    x = jnp.asarray(inputs["args"][0])
    y = jnp.asarray(inputs["args"][1].astype(np.int32))
    initial = initial_parameters()
    state = [tuple(jnp.asarray(initial[n]) for n in NAMES)]

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
        "graphc-eager": GRAPHC.eager,
        **GRAPHC.static_modes(),
        "numpy": _numpy,
        "numpy-chunked": not_applicable("only for the GELU chain"),
        "torch": _torch,
        "jax": _jax,
    },
    first_result=GRAPHC.first_results(
        jax_first_call(
            lambda jax, params: jax_train_step(jax), classifier_args(initial_parameters, NAMES)
        )
    ),
)
