"""The constant op: a node holding a (read-only) array."""

from __future__ import annotations

import numpy as np

from graphc.ir.types import TensorType
from graphc.ops.defop import defop, into

# a constant has no inputs, so nothing to differentiate
constant_op = defop(
    "constant",
    inputs=(),
    infer=lambda value: TensorType.of(value),
    kernel=lambda out=None, value=None: value if out is None else into(out, value),
    attrs={"value": np.zeros(())},
    doc="A fixed array. Declare constants with gc.constant(array, name=...).",
)
