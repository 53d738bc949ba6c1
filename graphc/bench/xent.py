"""Softmax cross-entropy from logits and integer labels: the mean loss and its gradient.

Every mode returns (loss, d loss / d logits) for float32 logits (N, C).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc.bench import peers
from graphc.bench.core import Case, Prepared, Workload
from graphc.bench.first_result import graph_starts, jax_jitted
from graphc.bench.modes import graph_modes, jax_jit, onnxruntime_of, plain


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    n, c = params["n"], params["c"]
    logits = (2.0 * rng.standard_normal((n, c))).astype(np.float32)
    labels = rng.integers(0, c, n).astype(np.int64)
    return {"args": (logits, labels)}


def _graph(inputs: dict[str, Any]) -> gc.Graph:
    logits, labels = inputs["args"]
    g = gc.trace(
        gc.cross_entropy, gc.TensorSpec(logits.shape), gc.TensorSpec(labels.shape, "int64")
    )
    return gc.gradients(g, wrt=[g.inputs[0].name])


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    logits = ge.tensor(inputs["args"][0], requires_grad=True)
    labels = ge.from_numpy(inputs["args"][1])

    def call() -> Any:
        loss = ge.cross_entropy(logits, labels)
        return (loss, *ge.autograd.grad(loss, [logits]))

    return plain(call)


def numpy_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[Any, np.ndarray]:
    """Hand-written loss and gradient: one exp pass, the gradient built in place."""
    n = logits.shape[0]
    rows = np.arange(n)
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(axis=1, keepdims=True)
    loss = np.log(total).mean() - shifted[rows, labels].mean()
    e /= total
    e[rows, labels] -= 1.0
    e *= np.float32(1.0 / n)
    return loss, e


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    logits, labels = inputs["args"]
    return plain(lambda: numpy_cross_entropy(logits, labels))


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    logits = torch.tensor(inputs["args"][0], requires_grad=True)
    labels = torch.from_numpy(inputs["args"][1])

    def call() -> Any:
        loss = torch.nn.functional.cross_entropy(logits, labels)
        return (loss, *torch.autograd.grad(loss, [logits]))

    return Prepared(call, resident_bytes=None)


def _jax_fn(jnp: Any) -> Any:
    import jax

    def loss(logits: Any, labels: Any) -> Any:
        logp = jax.nn.log_softmax(logits, axis=1)
        return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()

    return jax.value_and_grad(loss)


WORKLOAD = Workload(
    name="xent",
    description="softmax cross-entropy (N, C), float32: loss + d loss/d logits",
    unit="call",
    cases=[
        Case("512x10", {"n": 512, "c": 10}),
        Case("4096x1000", {"n": 4096, "c": 1000}, quick=False),
    ],
    make_inputs=_inputs,
    builders={
        **graph_modes(_graph, eager=_eager, numpy=_numpy, torch=_torch, jax=jax_jit(_jax_fn)),
        "onnxruntime-1thread": onnxruntime_of(_graph, threads=1),
        "onnxruntime": onnxruntime_of(_graph),
    },
    first_result=graph_starts(_graph, jax=jax_jitted(_jax_fn)),
)
