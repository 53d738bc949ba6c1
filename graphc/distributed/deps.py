"""dask is optional: `import graphc` never imports it; these do, with a clear error."""

from __future__ import annotations

import importlib
from types import ModuleType

from graphc.ir.errors import GraphcError

INSTALL = 'pip install "graphc[dask]"'


def require(module: str, what: str) -> ModuleType:
    """Import `module` (dask, dask.array, distributed) or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise GraphcError(
            f"{what} runs graphc graphs on dask, which is not installed ({exc}); "
            f"install it with: {INSTALL}"
        ) from None
