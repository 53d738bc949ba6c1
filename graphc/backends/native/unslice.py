"""unslice on the native backend: zeros with the cotangent put in its window, one C call
(csrc/unslice.c).

`unslice(ct, shape, index)` is the gradient of a slice: a zero array of the slice's
source shape with `ct` at [index]. A transformer's in-projection makes q, k and v as
one product and slices it three ways, so its training step puts their gradients back
into the rows of the in-projection's weight and bias with six unslices; numpy's kernel
(a fill, then an assignment through the window) kept that step's plan out of the entry
in C (entry.py). Here the step is described when the plan is generated, as a strided
copy is (copies.py): the window as a view of no memory over the output (plan.window:
its offset and strides), the cotangent as one over its root (plan.fake_view: an arena
buffer, a caller's array, or a chain of views over them), their common shape with the
dims of length 1 dropped and each dim merged into the next where both arrays have them
adjacent. A new batch size is a new descriptor, never new C.

Bits: numpy's, for every dtype. The zeros are memset's (+0.0, False, 0), as numpy's
fill(0) gives; the window's elements are the cotangent's bytes (nan payloads, -0.0).

Declined, with the reason (explain() shows it; numpy's kernel runs the step): a
symbolic shape, an index whose window does not fit the output at this size (numpy
raises unslice's error for it), a cotangent whose chain of views plan.fake_view cannot
follow, and more than MAX_DIMS dims after merging (2**33 elements at least).
"""

from __future__ import annotations

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.copies import MAX_DIMS, PARALLEL_BYTES, WALK, WARM_BYTES, descriptor
from graphc.backends.native.kernels import Kernel, parallel_flag
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import WINDOW_BASE, Step, fake_view
from graphc.runtime.plan import window as plan_window

# after the count (the window's elements): the cotangent's root, its offset in bytes,
# the descriptor, out, the window's offset in bytes, out's bytes, the element's bytes,
# and whether to run on the OpenMP pool (from as many bytes of out as a copy: copies.py)
KERNEL = Kernel("gc_unslice", WALK + c_source("unslice.c"), [], ["unslice"], "pippiiii")


def window(shape: tuple, index: str) -> np.ndarray | None:
    """x[index] of a C-contiguous x of `shape` as plan.window gives it (a view of no
    memory whose offset and strides count elements), also where the index picks one
    element (a 0-d view: with an ellipsis numpy gives a view, not a scalar); None for a
    symbolic shape or an index out of range."""
    return plan_window(shape, index if "..." in index else f"{index},...")


def reason(gen: Generator, step: Step) -> str | None:
    """None when the C kernel puts `step`'s cotangent in its window, else why not."""
    plan = gen.plan
    out_shape = tuple(plan.values[step.output].type.shape)
    ct_shape = tuple(plan.values[step.inputs[0]].type.shape)
    index = step.attrs["index"]
    if not all(isinstance(d, int) for d in (*out_shape, *ct_shape)):
        return "a symbolic shape"
    found = window(out_shape, index)
    if found is None:
        return f"the index [{index}] is out of range for shape {out_shape}"
    if found.shape != ct_shape:
        return f"the window [{index}] of {out_shape} has shape {found.shape}, not {ct_shape}"
    viewed = fake_view(plan, step.inputs[0])
    if viewed is None:
        return "the cotangent is a view plan.fake_view cannot describe"
    if descriptor(viewed[1], found)[0] > MAX_DIMS:
        return f"more than {MAX_DIMS} dims after merging"
    return None


def lower_unslice(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One C call making the step's output zeros with its cotangent in the window, no
    call for an empty output; None (numpy's kernel), the reason recorded, where
    `reason` says why not."""
    why = reason(gen, step)
    if why is not None:
        calls.plan_state(gen)["declined"][step.index] = f"unslice in C: {why}"
        return None
    out_t = gen.plan.values[step.output].type
    total = int(out_t.nbytes or 0)
    if total == 0:  # nothing to write (and no memory to point at)
        return [f"# {step.output}: an empty result, nothing to write"]
    item = np.dtype(out_t.dtype).itemsize
    found = window(tuple(out_t.shape), step.attrs["index"])
    root, source = fake_view(gen.plan, step.inputs[0])  # type: ignore[misc]
    lines: list[str] = []
    if source.size == 0:  # an empty window: only zeros, the cotangent never read
        root_at, offset = gen.const(calls.NULL, "null"), 0
    else:
        root_at = calls.value_address(gen, root, lines)
        offset = _offset(source) * item
    desc = descriptor(source, found)  # type: ignore[arg-type]
    nd = int(desc[0])
    desc[1 + nd :] *= item  # strides in bytes
    desc_at = calls.address(gen, gen.const(desc, "unslice_desc"), True, lines)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    at = _offset(found) * item  # type: ignore[arg-type]
    calls.record(gen, KERNEL)
    parallel = parallel_flag(total, PARALLEL_BYTES, WARM_BYTES)
    args = (source.size, root_at, offset, desc_at, out_at, at, total, item, parallel)
    return [*lines, f"{KERNEL.name}({', '.join(str(a) for a in args)})"]


def _offset(view: np.ndarray) -> int:
    """The element at which a view of no memory (plan.window's kind) starts."""
    return view.__array_interface__["data"][0] - WINDOW_BASE.__array_interface__["data"][0]
