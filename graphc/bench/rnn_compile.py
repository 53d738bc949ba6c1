"""Compile time of the RNN's forward + backward graph: unrolled loop vs `gc.scan`.

The RNN of `graphc.bench.rnn` (batch 32, input 64, hidden 128) at T = 50 and
T = 1000 steps. graphc's time is `gc.compile` at O2 of the joint graph on the numpy backend (passes,
plan and code generation for its one concrete signature), as in the `compile` workload:
tracing and `gc.gradients` run once, outside timing, and the note says how long they
took and how many nodes they made. The unrolled graph grows with T; the scan graph
does not. jax's time, for reference, is `jit(value_and_grad(loss)).lower(...)
.compile()` of a freshly made `lax.scan` loss (so no cache is hit), which includes
jax's tracing. After timing, each executable runs once and the results are checked.
The native backend's build of the unrolled graph is timed by the `rnn` workload's time
to first result (default backend, cold cache).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import peers
from graphc.bench.core import BASELINE, NATIVE, O0, SCAN, Case, Prepared, Workload
from graphc.bench.modes import not_applicable
from graphc.bench.report import seconds
from graphc.bench.rnn import FULL, GRAPHS, count_nodes, jax_args, jax_loss, joint_graph
from graphc.bench.rnn import make_inputs as rnn_inputs


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    return rnn_inputs({**FULL, "steps": params["steps"]})


def _static(kind: str) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        args = inputs["args"]
        start = time.perf_counter()
        graph = joint_graph(GRAPHS[kind], args)
        built = time.perf_counter() - start
        note = f"{kind}: {count_nodes(graph)} nodes, trace + gradients {seconds(built)}"
        return Prepared(
            lambda: gc.compile(graph, opt_level=2, backend="numpy"),
            lambda exe: list(exe(*args)),
            resident_bytes=None,
            note=note,
            single_shot=True,
        )

    return build


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    args = jax_args(inputs)

    def call() -> Any:
        return jax.jit(jax.value_and_grad(jax_loss(jax))).lower(*args).compile()

    def arrays(compiled: Any) -> list[np.ndarray]:
        loss, grads = compiled(*args)
        return [np.asarray(loss), *map(np.asarray, grads)]

    return Prepared(call, arrays, resident_bytes=None, single_shot=True)


_NO_COMPILE = "no compile step"
NATIVE_NOT_TIMED = (
    "compile time is measured on the numpy backend; the unrolled graph's native build: "
    "the rnn workload's first result and background build (default backend, cold cache)"
)

WORKLOAD = Workload(
    name="rnn-compile",
    description="compile time (gc.compile O2) of the RNN's forward + backward graph, "
    "B=32 I=64 H=128; graphc-O2 = unrolled loop, graphc-O2-scan = gc.scan",
    unit="compile",
    cases=[Case("T=50", {"steps": 50}), Case("T=1000", {"steps": 1000}, quick=False)],
    make_inputs=_inputs,
    builders={
        "graphc-eager": not_applicable(_NO_COMPILE),
        O0: not_applicable("compared at O2 only"),
        BASELINE: _static("unrolled"),
        NATIVE: not_applicable(NATIVE_NOT_TIMED),
        SCAN: _static("scan"),
        "numpy": not_applicable(_NO_COMPILE),
        "numpy-chunked": not_applicable(_NO_COMPILE),
        "torch": not_applicable("eager only (torch.compile is not measured)"),
        "jax": _jax,
    },
    reference=BASELINE,
)
