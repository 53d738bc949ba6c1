"""`one_hot_pick`: sum(where(one_hot(labels), x, zero), axis=-1), the entry of x at each label.

Made by `fuse_one_hot_pick` (graphc.backends.numpy.fusion.one_hot_pick) from the chain
that `gc.cross_entropy` traces to (its picked log-probability) and that its gradient
makes again (the seed picked from a broadcast row). Inputs: x (broadcastable to
labels.shape + (num_classes,)), the integer labels, and the one-element constant
`zero` (+0.0 or -0.0 in x's dtype) the where fills with. Attrs: num_classes and
ignore_index (one_hot's), keepdims (of the sum).

Why it is exact: one_hot refuses a label outside the classes, so every row of the
where holds x's entry v at its label and `zero` everywhere else (a label equal to
ignore_index: `zero` everywhere, summed as a pair of them by sum's own kernel, below).
Adding signed zeros and one v, in any order and from any starting value a reduction
uses (numpy 2's sum starts from +0.0: the sum of -0.0s is +0.0), gives v when v is not
a zero (a nan stays the same nan), and a zero that is -0.0 only when every term is. So the sum of a row
is the sum of the pair (v, zero) when there are two classes or more, and of v alone
when there is one. The kernel gathers v and adds zero (v alone for one class), which
is that sum wherever the result is not a zero (whose sign depends on where the
reduction starts) nor, with one class, a nan (which a sum's add would quiet); those
rows are summed again, as pairs, by sum's own kernel: the unfused chain's bits,
without the (..., C) rows of the where. (Summing every pair, a reduction over a
length-2 axis, took 8 us for 512 rows: a third of a 512x10 head.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.ops.defop import defop
from graphc.ops.nn import out_of_range_label


def _infer(
    x: TensorType,
    labels: TensorType,
    zero: TensorType,
    num_classes: int,
    ignore_index: int | None,
    keepdims: bool,
) -> TensorType:
    try:
        hot = get_op("one_hot").infer(labels, num_classes=num_classes, dtype=np.dtype(bool))
        picked = get_op("where").infer(hot, x, zero)
    except GraphcError as exc:
        raise type(exc)(f"one_hot_pick: labels {labels}, x {x}, zero {zero}: {exc}") from None
    if picked.shape != hot.shape or picked.dtype != x.dtype or x.dtype.kind != "f":
        raise ShapeError(
            f"one_hot_pick: x {x} must be floats that broadcast to the one-hot rows {hot}, "
            f"their dtype kept by the fill {zero}"
        )
    if zero.size != 1:
        raise ShapeError(f"one_hot_pick: zero must be one element, got {zero}")
    return get_op("sum").infer(picked, axis=(hot.rank - 1,), keepdims=keepdims)


def _kernel(
    x: np.ndarray,
    labels: np.ndarray,
    zero: np.ndarray,
    out: np.ndarray | None = None,
    num_classes: int = 0,
    ignore_index: int | None = None,
    keepdims: bool = False,
) -> np.ndarray:
    # one_hot's own refusal, so the fused chain fails where the unfused one would
    out_of_range_label(labels, num_classes, ignore_index)
    ignored = None if ignore_index is None else labels == ignore_index
    if ignored is not None and ignored.any():
        labels = np.where(ignored, 0, labels)  # any class: the row is redone below
    else:
        ignored = None
    picked = _gather(x, labels, num_classes)
    if out is None:
        out = np.empty(labels.shape + (1,) * keepdims, x.dtype)
    result = out.reshape(labels.shape)
    if num_classes > 1:
        np.add(picked, np.reshape(zero, ()), out=result)  # (a nan: v's, quieted, as the sum's)
    else:
        result[...] = picked
    # a zero sum's sign depends on where the reduction starts (its identity), and one
    # class's nan on whether it adds at all: those rows take sum's own kernel on the
    # pair (v, zero), or on v alone; an ignored label's row is zeros alone: the pair
    # (zero, zero), or zero alone
    redo = None
    if np.count_nonzero(result) < result.size or (num_classes == 1 and np.isnan(result).any()):
        redo = (result == 0) | np.isnan(result)
    if ignored is not None:
        redo = ignored if redo is None else redo | ignored
    if redo is not None:
        first = np.broadcast_to(picked, labels.shape)
        if ignored is not None:
            first = np.where(ignored, np.reshape(zero, ()).astype(x.dtype), first)
        pair = np.empty((int(np.count_nonzero(redo)), min(num_classes, 2)), x.dtype)
        pair[:, 0] = first[redo]
        if num_classes > 1:
            pair[:, 1] = np.reshape(zero, ())
        result[redo] = get_op("sum").kernel(pair, axis=(1,))
    return out


def _gather(x: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """x's entry at each label, read through x's own broadcast axes (broadcast_to and
    np.indices cost more than the gather at a few hundred rows); a scalar when x has
    one entry per row at most."""
    full = labels.shape + (num_classes,)
    dims = (1,) * (len(full) - x.ndim) + x.shape
    index: list[Any] = []
    for axis, (dim, n) in enumerate(zip(dims[:-1], labels.shape)):
        if dim == 1:
            index.append(0)
        else:
            index.append(np.arange(n).reshape((n,) + (1,) * (len(labels.shape) - axis - 1)))
    index.append(labels if dims[-1] > 1 else 0)
    return x.reshape(dims)[tuple(index)]


def _cost(
    out: TensorType, x: TensorType, labels: TensorType, zero: TensorType, **attrs: Any
) -> int:
    return 2 * (out.size or 0)


one_hot_pick = defop(
    "one_hot_pick",
    inputs=("x", "labels", "zero"),
    infer=_infer,
    kernel=_kernel,
    attrs={"num_classes": 1, "ignore_index": None, "keepdims": False},
    cost=_cost,
    props=("fusion",),
    doc="sum(where(one_hot(labels), x, zero), axis=-1): x's entry at each label, without the "
    "one-hot rows; made by gc.backends.numpy.fusion.fuse_one_hot_pick.",
)
