"""PyTorch, JAX, onnx and onnxruntime, imported only when a workload asks for them and
only if installed.

None is a dependency of graphc: a missing one turns its mode into `UnavailableError`.
JAX is pinned to the CPU and to float32 so that it computes what the other modes do.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from graphc.bench.core import UnavailableError


def _imported(name: str, install: str) -> ModuleType:
    """The module `name`, or `UnavailableError` saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UnavailableError(f"{name} is not installed ({install})") from exc


def torch() -> ModuleType:
    """The `torch` module, or `UnavailableError`."""
    return _imported("torch", "pip install torch==2.13.0")


def jax() -> ModuleType:
    """The `jax` module (CPU), or `UnavailableError`."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return _imported("jax", "pip install jax jaxlib")


def onnx_module() -> ModuleType:
    """The `onnx` module, or `UnavailableError`."""
    return _imported("onnx", "pip install onnx")


def onnxruntime_module() -> ModuleType:
    """The `onnxruntime` module, or `UnavailableError`."""
    return _imported("onnxruntime", "pip install onnxruntime")


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


def onnxruntime_session(model: bytes, threads: int | None) -> tuple[Callable[[], Any], str]:
    """A maker of onnxruntime sessions of `model` on the CPU, with `session_options`, and
    the note naming them."""
    ort = onnxruntime_module()
    options = session_options(ort, threads)
    threading = f"{threads} thread" if threads else "default threads"
    note = f"onnxruntime {ort.__version__}, ORT_ENABLE_ALL, {threading}"
    return lambda: ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]), note


def versions() -> dict[str, str | None]:
    """Installed versions of the peers (None when absent), without failing."""
    found: dict[str, str | None] = {}
    for name, load in (("torch", torch), ("jax", jax)):
        try:
            found[name] = str(load().__version__)
        except UnavailableError:
            found[name] = None
    return found
