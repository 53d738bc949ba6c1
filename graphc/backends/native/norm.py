"""layer_norm and layer_norm_grad as C row kernels on the native backend (float32).

numpy's kernels (ops/norm.py) make ten to fourteen passes over the rows, each a ufunc
call with its temporaries: 124 us for a layer norm over (16, 64, 128) and 182 us for its
gradient, where the data is 0.5 MB. Here each row stays in cache for its three passes:
the mean (numpy's pairwise sum, so numpy's bits), the centered row and its sum of
squares, then the scaled (and weighted, and shifted) row; the gradient adds g's sum and
the dot product of g with the centered row.

Every step is numpy's kernel's, operation for operation, but one: numpy computes the sum
of squared deviations (and the gradient's dot product of g with them) with `vecdot`,
which is BLAS's sdot (its results equal `np.dot`'s, checked), while this kernel adds the products in lanes of GC_W and the lanes
in a tree. So the two are declared inexact on native: `tests/backends/test_native_norm.py`
holds them within a bound of numpy's that it states (the sums' roundings carried
through), and every level gives the same bits. Like numpy's, the kernel skips the multiplication by a weight of one element equal to 1 and
the addition of a bias of one element equal to 0 (a -0.0 then stays -0.0), so
`layer_norm(x, 1, 0) * g` and `layer_norm(x, g, 0)` agree bit for bit, as the passes
that absorb the affine step assume.
"""

from __future__ import annotations

import math

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel
from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

# elements from which the rows run on the OpenMP pool (waking a cold pool costs 10-50 us
# here; after a product's parallel region it is awake): the ONNX transformer layer at
# batch 64 normalizes 2048 rows of 128 twice, 2603 -> 2479 us with 2**16 against 2**21
PARALLEL_WORK = 1 << 16
SKIP, ONE, ROW = 0, 1, 2  # an affine operand: skipped, one value, one per row element

SHARED = c_source("layer_norm.h")

FORWARD = c_source("layer_norm.c")

GRADIENT = c_source("layer_norm_grad.c")

LAYER_NORM = Kernel("gc_layer_norm_f32", SHARED + FORWARD, [], ["layer_norm"], "ipppp" + "i" * 4)
LAYER_NORM_GRAD = Kernel(
    "gc_layer_norm_grad_f32", SHARED + GRADIENT, [], ["layer_norm_grad"], "ippp" + "ii", True
)


def affine_mode(a: np.ndarray, identity: float) -> int:
    """How the kernel takes a weight (identity 1) or bias (identity 0): skipped when it
    is one element equal to the identity (as numpy's kernel skips it), else one value or
    a row."""
    if a.size == 1:
        return SKIP if a.reshape(()) == identity else ONE
    return ROW


def lower_layer_norm(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the row kernel, or None (numpy's kernel) when a value is not float32,
    a shape is symbolic or empty, or a weight or bias is not one value or one per row
    element."""
    plan = gen.plan
    types = [plan.values[v].type for v in (*step.inputs, step.output)]
    rows_n = _rows(types, step.attrs["axis"])
    if rows_n is None:
        return _declined(gen, step, "float32 values of static, non-empty shapes")
    rows, n = rows_n
    lines: list[str] = []
    args = [str(rows), str(n), calls.value_address(gen, step.output, lines, out)]
    args.append(calls.value_address(gen, step.inputs[0], lines))
    if step.node.op == "layer_norm_grad":
        kernel = LAYER_NORM_GRAD
        args.append(calls.value_address(gen, step.inputs[1], lines))
    else:
        kernel = LAYER_NORM
        modes = []
        for value, t, identity in zip(step.inputs[1:], types[1:3], (1.0, 0.0)):
            if t.size not in (1, n):
                return _declined(gen, step, "a weight or bias of one value or one per element")
            args.append(calls.value_address(gen, value, lines))
            if value in plan.constants:
                modes.append(str(affine_mode(np.asarray(plan.nodes[value].value), identity)))
            elif t.size != 1:  # a row whatever its values: no look at them per call
                modes.append(str(ROW))
            else:
                modes.append(
                    f"{gen.const(affine_mode, 'affine_mode')}({gen.array(value)}, {identity!r})"
                )
        args += modes
    eps = int(np.float32(step.attrs["eps"]).view(np.int32))
    args += [str(eps), str(int(rows * n >= PARALLEL_WORK))]
    calls.record(gen, kernel)
    call = f"{kernel.name}({', '.join(args)})"
    return [*lines, *(calls.checked(gen, call, step.node.op) if kernel.status else [call])]


def _rows(types: list[TensorType], axis: int) -> tuple[int, int] | None:
    """(rows, row length) of a float32 layer norm over dims `axis` on, or None."""
    if any(t.dtype != np.float32 for t in types):
        return None
    shape = types[0].shape
    if not all(isinstance(d, int) for d in shape) or not math.prod(shape):  # type: ignore[arg-type]
        return None
    return math.prod(shape[:axis]), math.prod(shape[axis:])  # type: ignore[arg-type]


def _declined(gen: Generator, step: Step, needs: str) -> None:
    calls.plan_state(gen)["declined"][step.index] = f"{step.node.op} in C: needs {needs}"
    return None
