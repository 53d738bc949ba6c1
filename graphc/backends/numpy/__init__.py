"""The numpy backend: the one every other falls back to, and the oracle they are tested
against. Its fused nodes (`nodes/`) are made by its fusion step (`fusion/`, the passes
gc.compile runs at O2 before planning); a step it has no lowering for calls the op's own
kernel with ``out=`` (the default of runtime/codegen.py); its lowerings are fused groups
and matmul epilogues in cache-sized chunks (`chunked.py`) and cond, scan and while_loop
with bodies planned once and run by per-thread loop objects (`control.py`); a plan whose
every value is one element runs on numpy scalars (`scalar.py`)."""

from graphc.backends.numpy import fusion, nodes, scalar
from graphc.runtime.backend import Backend, register_backend

BACKEND = register_backend(
    Backend("numpy", fallback=None, fusion=fusion.fusion, scalar_plans=scalar.PLANS)
)

from graphc.backends.numpy import chunked, control  # noqa: E402 - their lowerings need BACKEND

__all__ = ["BACKEND", "chunked", "control", "fusion", "nodes", "scalar"]
