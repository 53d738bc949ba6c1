"""An elementwise chain: GELU in its tanh form with ``x**3``, float32, forward only.

graphc traces ``x**3``, and its `pow` with exponent 3 computes ``(x*x)*x`` (exact: part
of pow's meaning, as in jax's ``integer_pow``). The numpy baselines are what an expert
writes, computing the cube as ``x*x*x`` too (numpy's float32 ``x**3`` calls ``pow``
and costs ~50 ms per 1e6 elements here, ~20x the rest of the chain): the one-liner
(one whole-array temporary per operation, bit-identical to graphc's exact levels), and
the best hand-written version — the polynomial rearranged to eight in-place passes
over cache-sized chunks, with scratch and output buffers allocated once, the chunk size
picked by measurement when the mode is built (the rearrangement changes the last bits,
as fast_math may). A floor, not a baseline: `np.copyto` of the same array into a
preallocated output (one read and one write of every element, what any elementwise
pass must at least move; it computes no GELU, so its result is not checked), so that
"within 1.5x of a memory copy" (issue 17) reads off one run. The peers use their own fused GELU: PyTorch's
``F.gelu(x, approximate="tanh")`` (one kernel) and ``jax.nn.gelu(x, approximate=True)``
under ``jax.jit`` (XLA fuses the chain into one loop).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc.bench import peers
from graphc.bench.core import Case, Prepared, Workload
from graphc.bench.first_result import graph_starts, jax_jitted
from graphc.bench.modes import graph_modes, jax_jit, plain
from graphc.runtime.backend import line_aligned_empty

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CHUNKS = (8192, 16384, 32768, 65536)


def gelu(x: Any, tanh: Any) -> Any:
    """GELU, tanh form, for any library given its `tanh`."""
    return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    x = np.random.default_rng(0).standard_normal(params["n"], dtype=np.float32)
    return {"args": (x,)}


def _graph(inputs: dict[str, Any]) -> gc.Graph:
    (x,) = inputs["args"]
    return gc.trace(lambda x: gelu(x, gc.tanh), gc.TensorSpec(x.shape))


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x = ge.from_numpy(inputs["args"][0])
    return plain(lambda: gelu(x, ge.tanh))


def numpy_gelu(x: np.ndarray) -> np.ndarray:
    """The numpy one-liner, with the cube as ``x*x*x`` as an expert writes it."""
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    (x,) = inputs["args"]
    return plain(lambda: numpy_gelu(x))


def chunked_gelu(x: np.ndarray, chunk: int) -> tuple[Any, int]:
    """A call computing GELU of `x` into one preallocated output, and its buffer bytes."""
    out = np.empty_like(x)
    scratch = np.empty(min(chunk, x.size), x.dtype)
    cubic = np.float32(SQRT_2_OVER_PI * 0.044715)
    linear = np.float32(SQRT_2_OVER_PI)

    def call() -> np.ndarray:
        for start in range(0, x.size, chunk):
            xs = x[start : start + chunk]
            t = scratch[: xs.size]
            # 0.5 x (1 + tanh(x (a + b x^2))): eight passes, all in cache
            np.multiply(xs, xs, out=t)
            t *= cubic
            t += linear
            t *= xs
            np.tanh(t, out=t)
            t += 1.0
            t *= xs
            np.multiply(t, np.float32(0.5), out=out[start : start + chunk])
        return out

    return call, out.nbytes + scratch.nbytes


def _numpy_chunked(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    (x,) = inputs["args"]
    best: tuple[float, int] | None = None
    for chunk in CHUNKS:
        call, _ = chunked_gelu(x, chunk)
        call()
        start = time.perf_counter()
        for _ in range(3):
            call()
        elapsed = time.perf_counter() - start
        if best is None or elapsed < best[0]:
            best = (elapsed, chunk)
    assert best is not None
    call, resident = chunked_gelu(x, best[1])
    prepared = plain(call, resident)
    prepared.note = f"chunk {best[1]}"
    return prepared


def _copyto(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    (x,) = inputs["args"]
    out = line_aligned_empty(x.shape, x.dtype)  # on a cache line, as graphc's outputs

    def call() -> np.ndarray:
        np.copyto(out, x)
        return out

    note = (
        "np.copyto(out, x) into a preallocated out on a cache line: the memory floor, "
        "not GELU (unchecked)"
    )
    return Prepared(call, resident_bytes=out.nbytes, note=note, checked=False)


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    x = torch.from_numpy(inputs["args"][0])
    fused = torch.nn.functional.gelu
    return Prepared(lambda: fused(x, approximate="tanh"), resident_bytes=None)


def jax_gelu(jnp: Any) -> Any:
    """jax's own tanh-form GELU (jitted by the caller)."""
    import jax

    return lambda x: jax.nn.gelu(x, approximate=True)


WORKLOAD = Workload(
    name="gelu",
    description="GELU chain 0.5x(1+tanh(c(x+0.044715x**3))), float32, forward",
    unit="call",
    cases=[
        Case("1e5", {"n": 100_000}),
        Case("1e6", {"n": 1_000_000}, quick=False),
        Case("1e7", {"n": 10_000_000}, quick=False),
    ],
    make_inputs=_inputs,
    builders=graph_modes(
        _graph,
        eager=_eager,
        numpy=_numpy,
        numpy_chunked=_numpy_chunked,
        numpy_copyto=_copyto,
        torch=_torch,
        jax=jax_jit(jax_gelu),
    ),
    first_result=graph_starts(_graph, jax=jax_jitted(jax_gelu)),
)
