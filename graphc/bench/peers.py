"""PyTorch, JAX, onnx and onnxruntime, imported only when a workload asks for them and
only if installed.

None is a dependency of graphc: a missing one turns its mode into `UnavailableError`.
JAX is pinned to the CPU and to float32 so that it computes what the other modes do.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from graphc.bench.core import UnavailableError


def torch() -> ModuleType:
    """The `torch` module, or `UnavailableError`."""
    try:
        import torch as module
    except ImportError as exc:
        raise UnavailableError("torch is not installed (pip install torch)") from exc
    return module


def jax() -> ModuleType:
    """The `jax` module (CPU), or `UnavailableError`."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax as module
    except ImportError as exc:
        raise UnavailableError("jax is not installed (pip install jax jaxlib)") from exc
    return module


def onnx_module() -> ModuleType:
    """The `onnx` module, or `UnavailableError`."""
    try:
        import onnx as module
    except ImportError as exc:
        raise UnavailableError("onnx is not installed (pip install onnx)") from exc
    return module


def onnxruntime_module() -> ModuleType:
    """The `onnxruntime` module, or `UnavailableError`."""
    try:
        import onnxruntime as module
    except ImportError as exc:
        raise UnavailableError("onnxruntime is not installed (pip install onnxruntime)") from exc
    return module


def session_options(ort: ModuleType, threads: int | None) -> Any:
    """onnxruntime's options: every graph optimization; `threads` intra- and inter-op
    threads, or onnxruntime's defaults when None."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return options


def versions() -> dict[str, str | None]:
    """Installed versions of the peers (None when absent), without failing."""
    found: dict[str, str | None] = {}
    for name, load in (("torch", torch), ("jax", jax)):
        try:
            found[name] = str(load().__version__)
        except UnavailableError:
            found[name] = None
    return found
