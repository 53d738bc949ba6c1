"""Slices read in place: a column block that only native kernels read is not copied.

An LSTM step computes its four gates as one (B, 4H) product and slices it into four
(B, H) column blocks, which the gate arithmetic (one fused kernel) reads. The planner
copies each block into a buffer of its own (every plan value is C-contiguous:
plan.py, LAYOUT); at batch 1 those copies were a third of the step. Here the native
backend lowers such a slice to no code at all, and its readers' kernels read the block
where it lies, as a PITCHED operand (kernels.py): element i at
offset + (i / width) * pitch + i % width of the wide array.

A slice is read in place when all of these hold, checked at its step:

- its window is a column block: whole along every axis but the last, a step-1 range
  of at least 16 (a multiple of 16) there, so that each vector of lanes lies in one row;
- its input is C-contiguous: not a transposed view (a caller's array that is not
  C-contiguous is copied to C order by the call, as for any operand);
- its value is an arena buffer (not returned, not state), of a dtype the kernels hold;
- every reader is an elementwise step or fused group that this backend runs as one
  kernel, with the block's shape as its output's (no broadcast), the same rule deciding
  as when the reader is lowered;
- nothing writes the input's buffer from the slice to the last reader, the readers'
  outputs included (the planner frees the input at its last use, the slice, and may
  hand its buffer to a value made in between).

The slice's own buffer is then never written (the plan still counts it). The elements
are computed by the same code from the same values, so the bits are those of the
copy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.cexpr import CTYPE
from graphc.backends.numpy.chunked import transposed_view
from graphc.runtime.plan import WINDOW_BASE
from graphc.runtime.plan import window as plan_window

LANES = 16  # the widest vector of lanes (AVX-512): a width that is a multiple of it
KINDS = ("allocated", "reused")


def column_block(gen: Any, step: Any) -> tuple[str, int, int, int] | None:
    """(input, offset, width, pitch) in elements when `step` (a slice) takes a column
    block of a C-contiguous input into an arena buffer of its own, else None."""
    plan = gen.plan
    value, source = plan.values[step.output], step.inputs[0]
    if value.kind not in KINDS or np.dtype(value.type.dtype) not in CTYPE:
        return None
    if transposed_view(gen, source):
        return None
    window = plan_window(plan.values[source].type.shape, step.attrs["index"])
    if window is None or window.shape != tuple(value.type.shape):
        return None
    if window.ndim < 2 or window.size == 0 or window.strides[-1] != 1:
        return None
    width, pitch = window.shape[-1], window.strides[-2]
    if width % LANES or pitch < width:
        return None
    rows = window.strides[:-1]  # the leading axes must walk the rows in order
    if any(rows[k] != rows[k + 1] * window.shape[k + 1] for k in range(len(rows) - 1)):
        return None
    offset = window.__array_interface__["data"][0] - WINDOW_BASE.__array_interface__["data"][0]
    return source, offset, width, pitch


def untouched(gen: Any, source: str, start: int, stop: int) -> bool:
    """Whether no step in (start, stop] writes `source`'s buffer."""
    plan = gen.plan
    buffer = plan.values[source].buffer
    return not any(
        plan.values[w].buffer == buffer
        for step in plan.steps[start + 1 : stop + 1]
        for w in step.written
    )


def lower_slice(
    gen: Any, step: Any, out: str, reads_in_place: Callable[[Any, Any], bool]
) -> list[str] | None:
    """No code for a slice whose readers read it in place (the module's rules), else
    None (numpy copies it). `reads_in_place(gen, reader)`: the reader's kernel holds."""
    found = column_block(gen, step)
    if found is None:
        return None
    source = found[0]
    shape = gen.plan.values[step.output].type.shape
    readers = [s for s in gen.plan.steps if step.output in s.inputs]
    if not readers or not all(
        gen.plan.values[r.output].type.shape == shape
        and untouched(gen, source, step.index, r.index)
        and reads_in_place(gen, r)
        for r in readers
    ):
        return None
    calls.plan_state(gen).setdefault("pitched", {})[step.output] = found
    steps = ", ".join(str(r.index) for r in readers)
    gen.step_notes[step.index] = f"no copy, read in place by step {steps}"
    return [f"# {step.output}: a column block of {source}, read in place by step {steps}"]


def pitched(gen: Any) -> dict[str, tuple[str, int, int, int]]:
    """The slices of the plan being generated read in place: value -> (input, offset,
    width, pitch)."""
    return calls.plan_state(gen).get("pitched", {})
