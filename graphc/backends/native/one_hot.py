"""one_hot on the native backend: the rows zeroed, then a one written at each label.

numpy's kernel (ops/nn.py) compares every label with every class, `np.equal` over the
whole (..., C) result: 2.6 ms for cross-entropy's 4096x1000 bool mask here, a third of
the head's time after its fusion (backends/numpy/fusion/one_hot_pick.py). Zeroing the
buffer is a memset (0.2 ms) and the ones are one write per label.

Bits: numpy's. Every entry is 0 but the one at its row's label, which is 1, in the
result's dtype (False and True for bool, +0.0 and 1.0 for floats), as the comparison
cast to that dtype gives; a label outside the classes raises one_hot's own error
before anything is written.
"""

from __future__ import annotations

import numpy as np

from graphc.ir.errors import IndexRangeError
from graphc.ir.registry import get_op
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

# the result's element count from which zeroing and writing the ones is the cheaper call
# (measured, bool results: 8x3 1.2 us on numpy's kernel against 3.2; 512x10 7.0 against 5.7)
FILL_FROM = 4096


def fill_one_hot(labels: np.ndarray, out: np.ndarray, num_classes: int) -> None:
    """Write one_hot(labels, num_classes) into the C-contiguous `out`."""
    if labels.size and not (labels.min() >= 0 and labels.max() < num_classes):
        bad = labels[(labels < 0) | (labels >= num_classes)].flat[0]
        raise IndexRangeError(f"one_hot: label {bad} is out of range for {num_classes} classes")
    if not out.flags.c_contiguous:  # (a plan's buffers are: never met there)
        get_op("one_hot").kernel(labels, out=out, num_classes=num_classes, dtype=out.dtype)
        return
    out.fill(0)
    rows = out.reshape(-1, num_classes)
    rows[np.arange(rows.shape[0]), labels.reshape(-1)] = 1


def lower_one_hot(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of `fill_one_hot` on the step's output buffer, or None (numpy's kernel)
    for a result of fewer than FILL_FROM elements, where numpy's comparison is cheaper."""
    size = gen.plan.values[step.output].type.size
    if size is not None and size < FILL_FROM:
        return None
    labels = gen.array(step.inputs[0])
    fill = gen.const(fill_one_hot, "fill_one_hot")
    return [f"{fill}({labels}, {out}, {step.attrs['num_classes']})"]
