"""Per-example gradients of the digits MLP (64-64-10, ReLU, cross-entropy), float32.

Two cases of the same batch of 256 examples. "per-example": the gradient of each
example's loss with respect to the four parameters, `(256, 64, 64)`, `(256, 64)`,
`(256, 64, 10)` and `(256, 10)`: in graphc `gc.vmap(gc.grad(loss), in_axes=(None, 0, 0))`
traced into one graph (what differentially private SGD clips); in jax
`jax.jit(jax.vmap(jax.grad(loss)))`; in PyTorch `torch.func.vmap(torch.func.grad(...))`.
"batched": the gradient of the batch's mean loss, the same parameters, which every
framework computes with matrix products: issue 35's goal bounds the per-example
case by it (vmap(grad) within 1.3x of the plain batched gradient's time). So that its
ratio comes from one set of rounds, the per-example case also times the batch gradient
on the default backend ("graphc-O2 batch gradient (default)", the goal's denominator;
not checked, as it computes the other case's result): the two cases run a minute apart,
and this machine's speed moves by up to 1.5x for seconds at a time, both programs alike.

The hand-written numpy baseline is what an expert writes for each: the batched
forward, then the per-example weight gradients as outer products, one einsum per
weight (per-example), or the transposed products (batched).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import peers
from graphc.bench.core import BATCH_GRADIENT, Case, NotApplicableError, Prepared, Workload
from graphc.bench.modes import (
    AUTO,
    compile_static,
    not_applicable,
    plain,
    static_mode,
    static_modes,
)

SIZES = (64, 64, 10)  # the digits images' 8 x 8 pixels, a hidden layer, ten classes
NAMES = ("w1", "b1", "w2", "b2")


def initial_parameters(seed: int = 0) -> tuple[np.ndarray, ...]:
    """w1 (64, 64), b1 (64,), w2 (64, 10), b2 (10,), float32, scaled as nn.Linear's."""
    rng = np.random.default_rng(seed)
    n_in, hidden, n_out = SIZES
    w1 = rng.uniform(-1, 1, (n_in, hidden)) / np.sqrt(n_in)
    w2 = rng.uniform(-1, 1, (hidden, n_out)) / np.sqrt(hidden)
    b1 = 0.01 * rng.standard_normal(hidden)
    b2 = 0.01 * rng.standard_normal(n_out)
    return tuple(a.astype(np.float32) for a in (w1, b1, w2, b2))


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    batch = params["batch"]
    x = rng.uniform(0, 1, (batch, SIZES[0])).astype(np.float32)  # pixels in [0, 1]
    y = rng.integers(0, SIZES[-1], batch).astype(np.int64)
    return {"args": (*initial_parameters(), x, y)}


def loss(params: Any, x: Any, y: Any) -> Any:
    """The cross-entropy of one example (x of shape (64,), y a label), or the mean over
    a batch (x of shape (B, 64)): one function for graphc, jax and torch alike."""
    w1, b1, w2, b2 = params
    logits = gc.relu(x @ w1 + b1) @ w2 + b2
    return gc.cross_entropy(logits, y)


def _graph(inputs: dict[str, Any], per_example: bool) -> gc.Graph:
    *params, x, y = inputs["args"]
    grad = gc.grad(loss)
    if per_example:
        grad = gc.vmap(grad, in_axes=(None, 0, 0))

    def gradients(w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> Any:
        return grad((w1, b1, w2, b2), x, y)

    specs = [gc.TensorSpec(a.shape, a.dtype) for a in inputs["args"]]
    return gc.trace(gradients, *specs)


def numpy_gradients(
    w1: np.ndarray,
    b1: np.ndarray,
    w2: np.ndarray,
    b2: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    per_example: bool,
) -> tuple[np.ndarray, ...]:
    """Hand-written backward of the MLP: per example (outer products, one einsum per
    weight) or of the batch's mean loss (transposed products)."""
    batch = x.shape[0]
    rows = np.arange(batch)
    pre = x @ w1
    pre += b1
    h = np.maximum(pre, 0)
    z = h @ w2
    z += b2
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    e /= e.sum(axis=1, keepdims=True)  # softmax
    e[rows, y] -= 1.0  # d loss_i / d z_i
    if not per_example:
        e *= np.float32(1.0 / batch)
    dh = e @ w2.T
    dh[pre <= 0] = 0
    if per_example:
        return np.einsum("bi,bj->bij", x, dh), dh, np.einsum("bi,bj->bij", h, e), e
    return x.T @ dh, dh.sum(axis=0), h.T @ e, e.sum(axis=0)


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    args, per_example = inputs["args"], params["per_example"]
    return plain(lambda: numpy_gradients(*args, per_example=per_example))


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    *weights, x, y = (torch.from_numpy(a) for a in inputs["args"])
    weights = tuple(weights)

    def loss_of(w: tuple, x: Any, y: Any) -> Any:
        w1, b1, w2, b2 = w
        logits = torch.relu(x @ w1 + b1) @ w2 + b2
        return torch.nn.functional.cross_entropy(logits, y)

    if params["per_example"]:
        # torch.func's vmap of grad, torch's own per-example gradients
        grads = torch.func.vmap(torch.func.grad(loss_of), in_dims=(None, 0, 0))
        return Prepared(lambda: grads(weights, x, y), resident_bytes=None)
    leaves = tuple(w.clone().requires_grad_(True) for w in weights)
    return Prepared(lambda: torch.autograd.grad(loss_of(leaves, x, y), leaves), resident_bytes=None)


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    def loss_of(w: tuple, x: Any, y: Any) -> Any:
        w1, b1, w2, b2 = w
        logp = jax.nn.log_softmax(jax.nn.relu(x @ w1 + b1) @ w2 + b2, axis=-1)
        return -(jax.nn.one_hot(y, SIZES[-1], dtype=logp.dtype) * logp).sum(-1).mean()

    grad = jax.grad(loss_of)
    fn = jax.jit(jax.vmap(grad, in_axes=(None, 0, 0)) if params["per_example"] else grad)
    *weights, x, y = inputs["args"]
    w = tuple(jnp.asarray(a) for a in weights)
    xj, yj = jnp.asarray(x), jnp.asarray(y.astype(np.int32))
    return Prepared(lambda: jax.block_until_ready(fn(w, xj, yj)), resident_bytes=None)


def _static(level: int, fast_math: bool, backend: str) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        graph_of = lambda inputs: _graph(inputs, params["per_example"])  # noqa: E731
        return static_mode(graph_of, level, fast_math, backend)(params, inputs)

    return build


def _batch_gradient(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    """The batch mean's gradient of the case's batch on the default backend, beside the
    per-example gradients (the batched case's own graphc-O2 (default) row elsewhere)."""
    if not params["per_example"]:
        raise NotApplicableError("this case's own graphc-O2 (default) row")
    _, prepared = compile_static(_graph(inputs, False), 2, inputs["args"], backend=AUTO)
    note = "the batch mean's gradient, timed in this case's rounds (the goal's denominator)"
    prepared.note = f"{note}; {prepared.note}"
    prepared.checked = False
    return prepared


PER_EXAMPLE = "per-example b256"
BATCHED = "batched b256"

WORKLOAD = Workload(
    name="per-example",
    description=(
        "digits MLP 64-64-10 gradients of 256 examples, float32: each example's "
        "(vmap of grad) and the batch mean's"
    ),
    unit="call",
    cases=[
        Case(PER_EXAMPLE, {"batch": 256, "per_example": True}),
        Case(BATCHED, {"batch": 256, "per_example": False}),
    ],
    make_inputs=_inputs,
    builders={
        "graphc-eager": not_applicable("vmap is a transformation of graphs"),
        **static_modes(_static),
        BATCH_GRADIENT: _batch_gradient,
        "numpy": _numpy,
        "numpy-chunked": not_applicable("only for the GELU chain"),
        "torch": _torch,
        "jax": _jax,
    },
)
