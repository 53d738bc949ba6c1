"""The logical ops: logical_and, logical_or, logical_xor and logical_not, elementwise
on truth values (nonzero as true), with bool results and no gradient.

One block per op, as in elementwise.py; the comparisons, the other ops with bool
results, are in selection.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ops.defop import defop, elementwise_cost, ufunc_infer, ufunc_kernel

__all__ = ["logical_and", "logical_not", "logical_or", "logical_xor"]


def _logical(name: str, ufunc: np.ufunc, doc: str) -> Any:
    return defop(
        name,
        inputs=("x", "y") if ufunc.nin == 2 else ("x",),
        infer=ufunc_infer(ufunc, name),
        kernel=ufunc_kernel(ufunc),
        elementwise=True,
        cost=elementwise_cost,
        doc=doc,
    )


logical_and = _logical("logical_and", np.logical_and, "x and y, elementwise, nonzero as true.")
logical_or = _logical("logical_or", np.logical_or, "x or y, elementwise, nonzero as true.")
logical_xor = _logical("logical_xor", np.logical_xor, "x xor y, elementwise, nonzero as true.")
logical_not = _logical("logical_not", np.logical_not, "not x, elementwise (x == 0).")
