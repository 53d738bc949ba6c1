"""The tutorials' tiny graph y = (x + w)(w + 1): forward and both gradients per call.

Shape (1,), float32. Every mode returns (y, dy/dx, dy/dw) with y summed to a scalar
(the gradient of a one-element output), so this measures per-call overhead.

graphc's plan runs a graph whose every value has one element on numpy scalars
(backends/numpy/scalar.py), so the hand-written numpy baseline does too: an expert holding
one number per variable writes `np.float32` scalars, not 1-element arrays (each op on
an array is a ufunc call with broadcasting and an output allocation; on scalars it is
scalar arithmetic). graphc's call still takes and returns (1,) arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc.bench import peers
from graphc.bench.core import Case, Prepared, Workload
from graphc.bench.first_result import graph_starts, jax_jitted
from graphc.bench.modes import graph_modes, jax_jit, plain


def tiny(x: Any, w: Any) -> Any:
    """The tutorials' graph, summed to a scalar: one function for every library."""
    return ((x + w) * (w + 1)).sum()


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    x = np.array([2.0], np.float32)
    w = np.array([1.0], np.float32)
    return {"args": (x, w)}


def _graph(inputs: dict[str, Any]) -> gc.Graph:
    x, w = inputs["args"]
    g = gc.trace(tiny, gc.TensorSpec(x.shape), gc.TensorSpec(w.shape))
    return gc.gradients(g, wrt=["x", "w"])


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x, w = (ge.tensor(a, requires_grad=True) for a in inputs["args"])

    def call() -> Any:
        y = tiny(x, w)
        return (y, *ge.autograd.grad(y, [x, w]))

    return plain(call)


ONE = np.float32(1.0)  # made once: constructing a numpy scalar costs more than adding


def numpy_tiny(x: np.float32, w: np.float32) -> tuple[np.float32, np.float32, np.float32]:
    """Hand-written y, dy/dx = w + 1 and dy/dw = (w + 1) + (x + w) on numpy scalars."""
    a = x + w
    b = w + ONE
    return a * b, b, a + b


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x, w = (a[0] for a in inputs["args"])  # np.float32 scalars, taken once outside timing
    return plain(lambda: numpy_tiny(x, w))


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    x, w = (torch.tensor(a, requires_grad=True) for a in inputs["args"])

    def call() -> Any:
        y = tiny(x, w)
        return (y, *torch.autograd.grad(y, [x, w]))

    return Prepared(call, resident_bytes=None)


def _jax_fn(jnp: Any) -> Any:
    import jax

    return jax.value_and_grad(tiny, argnums=(0, 1))


WORKLOAD = Workload(
    name="tiny",
    description="y=(x+w)(w+1), shape (1,), forward + dy/dx + dy/dw per call",
    unit="call",
    cases=[Case("(1,)", {})],
    make_inputs=_inputs,
    builders=graph_modes(_graph, eager=_eager, numpy=_numpy, torch=_torch, jax=jax_jit(_jax_fn)),
    first_result=graph_starts(_graph, jax=jax_jitted(_jax_fn)),
)
