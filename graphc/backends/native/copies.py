"""Copies of strided views on the native backend: a `reshape` of a transposed view, and a
`slice` whose window is not C-contiguous (or that is not a view), as one C call
(csrc/strided_copy.c).

The planner makes such steps copies: every plan value is C-contiguous (plan.py), so
`reshape(transpose(a))`, which attention's heads are merged by, and `x[:, ::2]` write a
buffer of their own. numpy's kernel copies them well, but as a call from Python: a plan
with one such step could not run as one C call (entry.py), and the ONNX transformer
layer's head merge kept its whole step in Python. Here the step's source is described at
generation time: its root (the plan value under its chain of views, C-contiguous by the
plan's rule), the byte offset of its first element there, and its shape and byte
strides, merged where dims are adjacent in memory. The C walks it with a counter
(csrc/strided_walk.h, the walk unslice's kernel makes too), a memcpy per row whose
elements are adjacent.

The same call copies an elementwise step's operand that is a transposed view other than
a matrix's transpose (which the kernels read in tiles) into a buffer of the thread's,
which the step's kernel then reads (`into_buffer`): a conv weight's SGD update reads its
gradient through a 4-d transpose, and that step kept a training step's plan out of the
entry in C (the bench's LeNet step still stays out: its bias gradient sums over axes
(0, 2, 3), an order of numpy's that no kernel here reproduces).

Bits: the source's, byte for byte (a copy), for every dtype.
"""

from __future__ import annotations

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel, parallel_flag
from graphc.ops.indexing import parse_index
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import WINDOW_BASE, Step, fake_view

WALK = c_source("strided_walk.h")  # the walk strided_copy.c and unslice.c share
# after the count (elements): the root, the offset in bytes, the descriptor, out, the
# element's bytes, and whether to run on the OpenMP pool
KERNEL = Kernel(
    "gc_strided_copy", WALK + c_source("strided_copy.c"), [], ["reshape", "slice"], "pippii"
)
# bytes from which a copy runs on the OpenMP pool (a copy is a load and a store per byte;
# waking the pool costs 10-50 us here), and from which while the pool is warm
PARALLEL_BYTES = 1 << 22
WARM_BYTES = 1 << 18
MAX_DIMS = 32  # csrc/strided_walk.h's GC_WALK_DIMS


def descriptor(*views: np.ndarray) -> np.ndarray:
    """[nd, shape, then each view's strides] (strides in elements) of views of one shape
    walked together in C order (csrc/strided_walk.h), the dims of length 1 dropped and
    each dim merged into the next where every view has the two adjacent; at least one
    dim."""
    shape = views[0].shape
    merged: list[list[int]] = []
    for d, *strides in zip(shape, *(v.strides for v in views)):
        if d == 1:
            continue
        if merged and all(merged[-1][1 + k] == s * d for k, s in enumerate(strides)):
            merged[-1] = [merged[-1][0] * d, *strides]
        else:
            merged.append([d, *strides])
    if not merged:
        merged = [[1] * (1 + len(views))]
    return np.array([len(merged), *(column for part in zip(*merged) for column in part)], np.int64)


def lower(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One C call copying the step's source (a reshape's input, or a slice's window of
    its input) into its output, or None (numpy's kernel) for a symbolic shape, a slice
    of one element by integers alone, more than MAX_DIMS dims after merging, or an
    empty output."""
    found = fake_view(gen.plan, step.inputs[0])
    if found is None:
        return None
    root, view = found
    if step.node.op == "slice":  # basic indexing (parse_index): a view, or an element
        view = view[parse_index(step.attrs["index"])]
        if not isinstance(view, np.ndarray):  # one element: numpy's (a copy of a scalar)
            return None
    out_t = gen.plan.values[step.output].type
    if view.size != out_t.size:
        return None
    lines: list[str] = []
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    return _copy(gen, root, view, out_at, np.dtype(out_t.dtype), lines)


def copyable(gen: Generator, value: str) -> bool:
    """Whether `into_buffer` can copy plan value `value` (a strided view)."""
    found = fake_view(gen.plan, value)
    return found is not None and found[1].size > 0 and descriptor(found[1])[0] <= MAX_DIMS


def into_buffer(gen: Generator, value: str, name: str) -> list[str]:
    """The lines copying the strided view `value` (`copyable`), C-contiguous, into
    `name`, a buffer of this thread's made at setup, on every call. An elementwise
    kernel then reads that buffer (native/__init__.py: an operand that is a transposed
    view, other than a matrix's transpose)."""
    root, view = fake_view(gen.plan, value)  # type: ignore[misc]
    t = gen.plan.values[value].type
    empty = gen.const(np.empty, "empty")
    dtype = gen.literal(np.dtype(t.dtype), "dtype")
    gen.setup_lines.append(f"{name} = {empty}({tuple(t.shape)!r}, {dtype})")
    lines: list[str] = []
    out_at = calls.address(gen, name, True, lines)
    return _copy(gen, root, view, out_at, np.dtype(t.dtype), lines)  # type: ignore[return-value]


def _copy(
    gen: Generator, root: str, view: np.ndarray, out_at: str, dtype: np.dtype, lines: list[str]
) -> list[str] | None:
    """`lines` and the C call copying `view` (fake_view's, over plan value `root`) to
    the address `out_at`; None for an empty view or too many dims after merging."""
    if view.size == 0:
        return None
    item = dtype.itemsize
    desc = descriptor(view)
    if desc[0] > MAX_DIMS:
        return None
    nd = int(desc[0])
    desc[1 + nd :] *= item  # strides in bytes
    offset = (
        view.__array_interface__["data"][0] - WINDOW_BASE.__array_interface__["data"][0]
    ) * item
    root_at = calls.value_address(gen, root, lines)
    desc_at = calls.address(gen, gen.const(desc, "copy_desc"), True, lines)
    calls.record(gen, KERNEL)
    parallel = parallel_flag(view.size * item, PARALLEL_BYTES, WARM_BYTES)
    args = ", ".join(str(a) for a in (view.size, root_at, offset, desc_at, out_at, item, parallel))
    return [*lines, f"{KERNEL.name}({args})"]
