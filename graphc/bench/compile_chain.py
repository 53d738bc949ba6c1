"""Compile time of a chain of K elementwise ops (tanh, *1.5, sin, +0.25, repeated).

graphc's time is `gc.compile` of the traced graph on the numpy backend: the pass
pipeline, the plan and code generation for its one (concrete) signature. (On the
native backend, planning also builds C kernels with the system compiler, cached on
disk: that build is timed by the `trace-compile` workload's time to first result, on
the default backend and a cold cache, with the background build until `wait()`
returns.) jax's is `jit(f).lower(x).compile()`
of a freshly defined function each time, so no cache is hit. Building the graph is
not timed. After timing, each compiled chain runs once on a 1024-element vector and
the results are checked, which also shows that long chains run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import peers
from graphc.bench.core import BASELINE, NATIVE, O0, Case, Prepared, Workload
from graphc.bench.modes import not_applicable

LENGTH = 1024


def chain(x: Any, k: int, lib: Any) -> Any:
    """K elementwise ops on `x` with `lib`'s tanh and sin."""
    for i in range(k):
        step = i % 4
        if step == 0:
            x = lib.tanh(x)
        elif step == 1:
            x = x * 1.5
        elif step == 2:
            x = lib.sin(x)
        else:
            x = x + 0.25
    return x


# four ladder blocks make about 51 nodes of gradient graph (measured)
NODES_PER_FOUR_BLOCKS = 51
GRADIENT_NODES = 150_000


def ladder(blocks: int, batch: int = 4) -> gc.Graph:
    """A long mixed forward graph: `blocks` blocks cycling through a matmul with a
    broadcast bias and tanh, a keepdims reduction broadcast back, a reshape/transpose
    round trip, and an elementwise tail; the loss is the mean square of the end."""
    g = gc.Graph("ladder")
    with g:
        x = gc.placeholder("x", shape=(batch, 16))
        w = gc.placeholder("w", shape=(16, 16))
        b = gc.placeholder("b", shape=(16,))
        h = x
        for i in range(blocks):
            step = i % 4
            if step == 0:
                h = gc.tanh(h @ w + b)
            elif step == 1:
                h = h * 1.5 - gc.sum(h, axis=1, keepdims=True) * 0.0625
            elif step == 2:
                r = gc.transpose(gc.reshape(h, (batch, 4, 4)), (0, 2, 1)) * 0.5
                h = gc.reshape(r, (batch, 16)) + h
            else:
                h = gc.sin(h) + gc.exp(h * -0.5) * h
        gc.output(gc.mean(h * h), name="loss")
    return g


def gradient_ladder(nodes: int) -> gc.Graph:
    """The joint forward + backward graph (d loss / dw, db) of a ladder of about
    `nodes` nodes in all."""
    return gc.gradients(ladder(max(1, 4 * nodes // NODES_PER_FOUR_BLOCKS)), wrt=["w", "b"])


def ladder_feeds(batch: int = 4) -> dict[str, np.ndarray]:
    """Feeds for `ladder` that keep its values finite and moderate."""
    return {
        "x": np.linspace(-0.5, 0.5, batch * 16, dtype=np.float32).reshape(batch, 16),
        "w": np.eye(16, dtype=np.float32) * 0.5,
        "b": np.full(16, 0.01, np.float32),
    }


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    x = np.linspace(-2.0, 2.0, LENGTH, dtype=np.float32)
    k = params["k"]
    graph = gc.trace(lambda x: chain(x, k, gc), gc.TensorSpec(x.shape))
    return {"args": (x,), "graph": graph}


def _static(opt_level: int) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        graph = inputs["graph"]
        (x,) = inputs["args"]
        return Prepared(
            lambda: gc.compile(graph, opt_level=opt_level, backend="numpy"),
            lambda exe: [exe(x)],
            resident_bytes=None,
            single_shot=True,
        )

    return build


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    k = params["k"]
    x = jnp.asarray(inputs["args"][0])

    def call() -> Any:
        return jax.jit(lambda v: chain(v, k, jnp)).lower(x).compile()

    return Prepared(
        call, lambda compiled: [np.asarray(compiled(x))], resident_bytes=None, single_shot=True
    )


_NO_COMPILE = "no compile step"
NATIVE_NOT_TIMED = (
    "compile time is measured on the numpy backend; native kernel builds: trace-compile's "
    "first result and background build (default backend, cold cache)"
)
_JAX_SLOW = "jax.jit would take minutes at this length"

WORKLOAD = Workload(
    name="compile",
    description="compile time of a K-op elementwise chain (passes + plan + codegen)",
    unit="compile",
    cases=[
        Case("K=100", {"k": 100}),
        Case("K=1000", {"k": 1000}, quick=False),
        Case("K=5000", {"k": 5000}, quick_skip_modes={"jax": "jax compile is slow: full run"}),
        Case("K=50000", {"k": 50_000}, quick=False, skip_modes={"jax": _JAX_SLOW}),
    ],
    make_inputs=_inputs,
    builders={
        "graphc-eager": not_applicable(_NO_COMPILE),
        O0: _static(0),
        BASELINE: _static(2),
        NATIVE: not_applicable(NATIVE_NOT_TIMED),
        "numpy": not_applicable(_NO_COMPILE),
        "numpy-chunked": not_applicable(_NO_COMPILE),
        "torch": not_applicable("eager only (torch.compile is not measured)"),
        "jax": _jax,
    },
    tolerance=1e-4,
    reference=O0,
)
