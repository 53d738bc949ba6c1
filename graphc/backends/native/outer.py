"""Stacked outer products on the native backend: a matmul of (..., M, 1) by (..., 1, N),
one contracted term per entry, which is how `gc.vmap` batches per-example weight
gradients (x_i^T d_i for each example i).

numpy's matmul takes about 5 ns an entry here (a (256, 64, 64) result of the digits
MLP's per-example gradients: 1.4 ms): it runs one tiny product per matrix of the
stack. This kernel writes each row of N as whole vectors (about 60 us there on two AVX2
cores, near the rate at which they can write 4 MB; the (256, 64, 10) gradient of the
last layer, 18 us).

Bits: numpy's. Its matmul computes each entry as a sum of one product started from zero,
0 + a * b (so a -0.0 product gives +0.0), through BLAS or its own loop alike; the C does
the same two operations, with no contraction (the backend's flags), in float32 and
float64.
"""

from __future__ import annotations

import math

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel, parallel_flag
from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

SOURCE = c_source("outer.c")
# after P (the stacked matrices): a, b, out; M, N, and whether to run on the OpenMP pool
PARAMS = "pppiii"
KERNELS = {
    np.dtype(np.float32): Kernel("gc_outer_f32", SOURCE, [], ["matmul"], PARAMS),
    np.dtype(np.float64): Kernel("gc_outer_f64", SOURCE, [], ["matmul"], PARAMS),
}
# entries of one call from which its rows run on the OpenMP pool: each entry is a load,
# a multiply, an add and a store, and waking the pool costs 10-50 us here; from
# WARM_WORK while the pool is warm (the digits MLP's (256, 64, 10) gradient on an AVX2
# machine of two cores: 33 us on one thread, 18 on two)
PARALLEL_WORK = 1 << 20
WARM_WORK = 1 << 16


def takes(a_t: TensorType, b_t: TensorType, out_t: TensorType) -> bool:
    """Whether a matmul of these types is a stack of outer products this kernel computes
    (where it is not empty): see `lower`."""
    if out_t.dtype not in KERNELS or not a_t.dtype == b_t.dtype == out_t.dtype:
        return False
    if a_t.rank < 3 or a_t.rank != b_t.rank or a_t.shape[-1] != 1 or b_t.shape[-2] != 1:
        return False
    if a_t.shape[:-2] != b_t.shape[:-2] or out_t.shape[:-2] != a_t.shape[:-2]:
        return False
    return all(isinstance(d, int) for d in (*a_t.shape, *b_t.shape))


def lower(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One C call for the matmul `step` when it is a stack of outer products (operands of
    one float dtype and static shapes, a (..., M, 1) by (..., 1, N) of rank 3 or more,
    the same leading dims, no broadcasting between them), else None (a matrix's outer
    product is matmul.py's product: one chain of one multiply-add, the same bits)."""
    a_t, b_t = (gen.plan.values[v].type for v in step.inputs)
    out_t = gen.plan.values[step.output].type
    if not takes(a_t, b_t, out_t):
        return None
    kernel = KERNELS[out_t.dtype]
    stack, m, n = math.prod(a_t.shape[:-2]), a_t.shape[-2], b_t.shape[-1]
    if stack * m * n == 0:  # an empty result: nothing to compute
        return None
    lines: list[str] = []
    a_at, b_at = (calls.value_address(gen, v, lines) for v in step.inputs)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    calls.record(gen, kernel)
    parallel = parallel_flag(stack * m * n, PARALLEL_WORK, WARM_WORK)
    args = ", ".join(str(v) for v in (stack, a_at, b_at, out_at, m, n, parallel))
    return [*lines, f"{kernel.name}({args})"]
