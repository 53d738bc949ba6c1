"""ONNX in and out (issue 16): the imported model zoo compiled by graphc against onnxruntime.

Every zoo model (zoo_models.py: MLP, LeNet-5, transformer encoder layer, GRU, LSTM,
ResNet basic block with eval-mode batch norm, a model with If and Loop) is exported once
per case to serialized ONNX, its weights as initializers, and every mode starts from
those bytes, at batch 1 and batch 64:

- graphc-O0 / graphc-O2 (numpy backend), graphc-O2 (native backend):
  `gc.onnx.import_model` (the weights become constants), then `gc.compile` at the level
  on the backend, planned for the case's input outside timing; the fast_math modes also
  allow the value-changing rewrites (batch norm folded into
  the convolution's weight, as onnxruntime's own Conv+BatchNormalization fusion does),
  and is shown only where that changes the plan;
- onnxruntime-1thread: an `InferenceSession` with one intra-op and one inter-op thread;
- onnxruntime: an `InferenceSession` with onnxruntime's default threads (one per core);
  both with every graph optimization (`ORT_ENABLE_ALL`) on the CPU provider.

onnxruntime-1thread is the reference every other mode is checked against. There is no
graphc-eager mode: eager runs Python code, and an imported model has none.

One more case times the import itself: `gc.onnx.import_model` of a 1,000-node model's
bytes (zoo_models.chain_model), in the graphc-O2 (numpy) row (import does not depend
on the level or the backend), against onnxruntime building a session of the same bytes (loading, optimizing
and planning: its equivalent of import plus compile). Each imported graph and session
then runs once on a small batch, which checks what was imported.

The `onnx` package (for graphc's exporter and importer) and `onnxruntime` are optional:
without them the modes are unavailable.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import zoo_models
from graphc.bench.core import (
    BASELINE,
    Case,
    NotApplicableError,
    Prepared,
    Workload,
)
from graphc.bench.modes import Builder, static_mode, static_modes
from graphc.bench.peers import onnx_module, onnxruntime_module, onnxruntime_session

ORT_ONE_THREAD, ORT = "onnxruntime-1thread", "onnxruntime"
BATCHES = (1, 64)
IMPORT_CASE = f"import {zoo_models.CHAIN_NODES} nodes"
CHAIN = "chain"  # the import case's model
CHECK_BATCH = 4  # the import case runs what it imported on this batch


def case_label(model: str, batch: int) -> str:
    """The report's label of a zoo model at a batch (what the goals read)."""
    return f"{model} b{batch}"


@functools.lru_cache(maxsize=1)
def chain_bytes() -> bytes:
    """The import case's model, built once per process (building it is not timed)."""
    return zoo_models.chain_model()


def make_inputs(params: dict[str, Any]) -> dict[str, Any]:
    """The case's input; the model is exported later, by the first mode that needs it
    (make_inputs runs outside the runner's error handling, and onnx may be missing)."""
    rng = np.random.default_rng(2)
    if params["model"] == CHAIN:
        shape: tuple[int, ...] = (CHECK_BATCH, zoo_models.CHAIN_WIDTH)
    else:
        shape = (params["batch"], *zoo_models.ZOO[params["model"]][1])
    x = rng.standard_normal(shape).astype(np.float32)
    return {"args": (x,)}


def model_bytes(params: dict[str, Any], inputs: dict[str, Any]) -> tuple[bytes, str]:
    """The case's model as ONNX bytes and its input's name, exported once per case."""
    if "onnx" not in inputs:
        onnx_module()
        if params["model"] == CHAIN:
            inputs["onnx"] = chain_bytes(), "x"
        else:
            inputs["onnx"] = zoo_models.export(params["model"])
    return inputs["onnx"]


def _imported(params: dict[str, Any]) -> Callable[[dict[str, Any]], gc.Graph]:
    def graph_of(inputs: dict[str, Any]) -> gc.Graph:
        return gc.onnx.import_model(model_bytes(params, inputs)[0])

    return graph_of


def _graphc(opt_level: int, fast_math: bool = False, backend: str = "numpy") -> Builder:
    """The imported model compiled at `opt_level` on `backend`; in the import case, the
    import alone (in the graphc-O2 (numpy) row)."""

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        if params["model"] == CHAIN:
            if opt_level != 2 or fast_math or backend != "numpy":
                raise NotApplicableError(
                    f"import does not depend on the level or backend: see {BASELINE}"
                )
            return _timed_import(params, inputs)
        model_bytes(params, inputs)  # onnx missing: unavailable, before anything else
        return static_mode(_imported(params), opt_level, fast_math, backend)(params, inputs)

    return build


def _timed_import(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    data, name = model_bytes(params, inputs)
    (x,) = inputs["args"]
    graph = gc.onnx.import_model(data)
    note = f"import only: {len(graph.nodes)} graphc nodes"
    return Prepared(
        lambda: gc.onnx.import_model(data),
        lambda g: gc.run(g, {name: x}),
        resident_bytes=0,  # peak memory: what one import allocates (its constants included)
        note=note,
        single_shot=True,
    )


def _onnxruntime(threads: int | None) -> Builder:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        onnxruntime_module()
        data, name = model_bytes(params, inputs)
        feeds = {name: inputs["args"][0]}
        session, note = onnxruntime_session(data, threads)
        if params["model"] == CHAIN:
            return Prepared(
                session,
                lambda s: s.run(None, feeds),
                resident_bytes=None,
                note=f"session creation; {note}",
                single_shot=True,
            )
        ready = session()
        return Prepared(lambda: ready.run(None, feeds), resident_bytes=None, note=note)

    return build


def _cases() -> list[Case]:
    cases = [
        Case(case_label(model, batch), {"model": model, "batch": batch}, quick=batch == 1)
        for model in zoo_models.ZOO
        for batch in BATCHES
    ]
    return [*cases, Case(IMPORT_CASE, {"model": CHAIN, "batch": CHECK_BATCH})]


WORKLOAD = Workload(
    name="onnx",
    description=(
        "ONNX model zoo imported and compiled by graphc vs onnxruntime (ORT_ENABLE_ALL), "
        f"float32; and import of a {zoo_models.CHAIN_NODES}-node model"
    ),
    unit="call",
    cases=_cases(),
    make_inputs=make_inputs,
    builders={
        **static_modes(_graphc),
        ORT_ONE_THREAD: _onnxruntime(1),
        ORT: _onnxruntime(None),
    },
    reference=ORT_ONE_THREAD,
)
