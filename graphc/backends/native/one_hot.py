"""one_hot on the native backend: the rows zeroed, then a one written at each label
(csrc/one_hot.c).

numpy's kernel (ops/nn.py) checks the labels' range with a min and a max, then compares
every label with every class, `np.equal` over the whole (..., C) result: 2.6 ms for
cross-entropy's 4096x1000 bool mask here, a third of the head's time after its fusion
(backends/numpy/fusion/one_hot_pick.py). Zeroing the buffer is a memset (0.2 ms) and
the ones are one write per label. At a training step's 32x10 the C call is also the
cheaper one, and it lets a plan whose labels are one-hot encoded run as one C call
(entry.py).

Bits: numpy's. Every entry is 0 but the one at its row's label, which is 1, in the
result's dtype (False and True for bool, +0.0 and 1.0 for floats), as the comparison
cast to that dtype gives. The kernel checks every label before it writes anything; a
label outside the classes raises one_hot's own error, naming the label, from the
generated code and from a tape (Kernel.failure) alike. A label equal to the op's
`ignore_index` keeps its row of zeros (the kernel's `ignoring` and `ignore`).
"""

from __future__ import annotations

import sys

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel
from graphc.ir.errors import IndexRangeError
from graphc.ops.nn import out_of_range_label
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

# the C kernel's code for a labels dtype: its bytes, negative when unsigned
CODES = {
    np.dtype(t): (1 if np.dtype(t).kind == "i" else -1) * np.dtype(t).itemsize
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
}
DTYPES = {code: dtype for dtype, code in CODES.items()}


def out_of_range(labels: np.ndarray, num_classes: int, ignore_index: int | None = None) -> None:
    """Raise one_hot's error for `labels`, of which one is outside the classes and not
    ignored (the kernel's nonzero status): numpy's check finds it and raises it."""
    out_of_range_label(labels, num_classes, ignore_index)
    raise IndexRangeError(f"one_hot: a label is out of range for {num_classes} classes")


def _failed(args: list[int]) -> None:
    """Kernel.failure: the failing call's labels read back from its arguments."""
    n, at, code, _, classes, _, _, ignoring, ignore = args[:9]
    labels = calls.array_at(at, (n,), DTYPES[code])
    out_of_range(labels, classes, ignore if ignoring else None)


KERNEL = Kernel(
    "gc_one_hot",
    c_source("one_hot.c"),
    [],
    ["one_hot"],
    "pipiiiii",
    status=True,
    failure=_failed,
)


def lower_one_hot(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the C kernel into the step's output buffer, or None (numpy's kernel)
    for labels of another dtype, a result whose elements are wider than 8 bytes, an
    unknown size, or a big-endian machine (the one's bytes are laid out little-endian)."""
    labels_t = gen.plan.values[step.inputs[0]].type
    out_t = gen.plan.values[step.output].type
    code = CODES.get(np.dtype(labels_t.dtype))
    size = np.dtype(out_t.dtype).itemsize
    if code is None or size > 8 or labels_t.size is None or sys.byteorder != "little":
        return None
    one = int.from_bytes(np.ones((), out_t.dtype).tobytes(), "little", signed=True)
    classes, ignore = step.attrs["num_classes"], step.attrs["ignore_index"]
    lines: list[str] = []
    labels_at = calls.value_address(gen, step.inputs[0], lines)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    calls.record(gen, KERNEL)
    ignoring = (0, 0) if ignore is None else (1, ignore)
    args = ", ".join(
        map(str, (labels_t.size, labels_at, code, out_at, classes, one, size, *ignoring))
    )
    check = gen.const(out_of_range, "one_hot_out_of_range")
    labels = gen.array(step.inputs[0])
    return [*lines, f"if {KERNEL.name}({args}):", f"    {check}({labels}, {classes}, {ignore})"]
