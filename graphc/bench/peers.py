"""PyTorch and JAX, imported only when a workload asks for them and only if installed.

Neither is a dependency of graphc: a missing one turns its mode into `UnavailableError`.
JAX is pinned to the CPU and to float32 so that it computes what the other modes do.
"""

from __future__ import annotations

import os
from types import ModuleType

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


def versions() -> dict[str, str | None]:
    """Installed versions of the peers (None when absent), without failing."""
    found: dict[str, str | None] = {}
    for name, load in (("torch", torch), ("jax", jax)):
        try:
            found[name] = str(load().__version__)
        except UnavailableError:
            found[name] = None
    return found
