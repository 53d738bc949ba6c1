"""Trace + compile time of a chain of K elementwise ops, from the Python function.

The same chain as the `compile` workload (tanh, *1.5, sin, +0.25, repeated), but
timed the way jax's compile time is: from the Python function to an executable ready
for its input. graphc's call is `gc.trace` of the function and `gc.compile` of the
graph on the numpy backend (passes, plan and code generation for the one concrete
signature); jax's is
`jax.jit(f).lower(x).compile()` of a freshly defined function (so no cache is hit),
where `lower` traces and `compile` runs XLA. Each mode's note splits one build into
its two halves (graphc: trace + compile; jax: trace and lower + XLA compile), measured
once when the mode is built. After timing, each executable runs once on a
1024-element vector and the results are checked.

The native backend's build is timed as a new user meets it (issue 30), in the
time-to-first-result columns (graphc.bench.first_result): trace + compile + the first
call on a cold cache, on the numpy backend, on the default backend (`backend="auto"`:
the first call runs numpy while the chain's C kernels build in the background; the
background build column is the time from that first result until `wait()` returned,
the full native build), and jax.jit's first call of a freshly defined function. At
K=5000 this is the issue's 5,000-op chain (this chain's four ops, not the issue's
"tanh, + 0.5, * 0.9": the same length, one more transcendental).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import peers
from graphc.bench.compile_chain import LENGTH, chain
from graphc.bench.core import (
    BASELINE,
    DEFAULT,
    FAST_MATH,
    NATIVE,
    O0,
    Case,
    NotApplicableError,
    Prepared,
    Workload,
)
from graphc.bench.first_result import graph_starts, jax_args, jax_first_call
from graphc.bench.modes import fast_math_same, not_applicable, same_plan
from graphc.bench.report import seconds


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    return {"args": (np.linspace(-2.0, 2.0, LENGTH, dtype=np.float32),), "k": params["k"]}


def graphc_trace(k: int, x: np.ndarray) -> gc.Graph:
    """The chain traced from Python for `x`'s (concrete) shape."""
    return gc.trace(lambda v: chain(v, k, gc), gc.TensorSpec(x.shape))


def _split(
    first: Callable[[], Any], second: Callable[[Any], Any], names: tuple[str, str]
) -> tuple[Any, str]:
    """Run `second(first())` once; the result and a note naming the two durations."""
    start = time.perf_counter()
    middle = first()
    half = time.perf_counter()
    result = second(middle)
    end = time.perf_counter()
    return result, f"{names[0]} {seconds(half - start)} + {names[1]} {seconds(end - half)}"


def _static(opt_level: int, fast_math: bool = False) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        k = params["k"]
        (x,) = inputs["args"]

        def compile_(graph: gc.Graph, fast_math: bool = fast_math) -> gc.Executable:
            return gc.compile(graph, opt_level=opt_level, fast_math=fast_math, backend="numpy")

        def call() -> gc.Executable:
            return compile_(graphc_trace(k, x))

        exe, split = _split(lambda: graphc_trace(k, x), compile_, ("trace", "compile"))
        if fast_math and same_plan(compile_(graphc_trace(k, x), False), exe, x):
            raise NotApplicableError(fast_math_same())
        return Prepared(
            call,
            lambda exe: [exe(x)],
            resident_bytes=None,
            note=split,
            single_shot=True,
        )

    return build


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    k = params["k"]
    x = jnp.asarray(inputs["args"][0])

    def lower() -> Any:
        return jax.jit(lambda v: chain(v, k, jnp)).lower(x)

    def call() -> Any:
        return lower().compile()

    _, split = _split(lower, lambda lowered: lowered.compile(), ("trace+lower", "XLA compile"))
    return Prepared(
        call,
        lambda compiled: [np.asarray(compiled(x))],
        resident_bytes=None,
        note=split,
        single_shot=True,
    )


def _jax_chain(jax: Any, params: dict[str, Any]) -> Any:
    import jax.numpy as jnp

    k = params["k"]
    return jax.jit(lambda v: chain(v, k, jnp))


_NO_COMPILE = "no compile step"
_COLD_ONLY = "a native build is timed once, cold: see the first result and background build"

WORKLOAD = Workload(
    name="trace-compile",
    description="trace + compile of a K-op elementwise chain, from the Python function",
    unit="build",
    cases=[
        Case("K=100", {"k": 100}),
        Case("K=1000", {"k": 1000}, quick=False),
        Case("K=5000", {"k": 5000}, quick=False),
    ],
    make_inputs=_inputs,
    builders={
        "graphc-eager": not_applicable(_NO_COMPILE),
        O0: _static(0),
        BASELINE: _static(2),
        FAST_MATH: _static(2, fast_math=True),
        NATIVE: not_applicable(_COLD_ONLY + f" of {DEFAULT}"),
        DEFAULT: not_applicable(_COLD_ONLY),
        "numpy": not_applicable(_NO_COMPILE),
        "numpy-chunked": not_applicable(_NO_COMPILE),
        "torch": not_applicable("eager only (torch.compile is not measured)"),
        "jax": _jax,
    },
    tolerance=1e-4,
    reference=O0,
    first_result=graph_starts(
        lambda inputs: graphc_trace(inputs["k"], inputs["args"][0]),
        jax=jax_first_call(_jax_chain, jax_args),
    ),
)
