"""Neural-network ops: softmax, log_softmax, one_hot, and the losses built on them."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, IndexRangeError
from graphc.ir.registry import REQUIRED
from graphc.ir.types import TensorType, as_dtype, normalize_axis
from graphc.ops import elementwise as E
from graphc.ops import reduce as R
from graphc.ops.defop import defop, ufunc_dtype
from graphc.ops.selection import where
from graphc.ops.shape import transpose
from graphc.ops.spelling import torch_keywords


def _axis_canon(name: str) -> Any:
    def canon(x: TensorType, axis: Any) -> dict:
        if x.rank == 0:  # PyTorch's 0 or -1: the one element, canonically axis=None
            return {"axis": None if axis is None else R.scalar_axis(axis, name)}
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise GraphcError(
                f"{name}: axis must be an int for a rank-{x.rank} input, got {axis!r}"
            )
        return {"axis": normalize_axis(int(axis), x.rank, name)}

    return canon


def _float_infer(name: str) -> Any:
    return lambda x, axis: x.with_dtype(ufunc_dtype(np.exp, name, x.dtype))


def _as_float(x: np.ndarray, op: str) -> np.ndarray:
    # ints compute in the float dtype numpy gives exp (float64), as the type rule says
    return x.astype(ufunc_dtype(np.exp, op, x.dtype), copy=False)


# np.max and np.sum are maximum.reduce and add.reduce behind Python wrappers that cost
# microseconds a call: the kernels call the reductions themselves


def _float_and_out(x: np.ndarray, out: np.ndarray | None, op: str) -> tuple:
    """x in its float dtype, and the result array (an array even when 0-d, where numpy
    would hand back a scalar that cannot be an `out=`)."""
    x = _as_float(x, op)
    return x, np.empty(x.shape, x.dtype) if out is None else out


def _softmax_kernel(
    x: np.ndarray, out: np.ndarray | None = None, axis: int | None = -1
) -> np.ndarray:
    x, out = _float_and_out(x, out, "softmax")
    if x.size == 0:  # an empty axis has no max to subtract: the result is empty as well
        return out
    shifted = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=out)
    np.exp(shifted, out=shifted)
    shifted /= np.add.reduce(shifted, axis=axis, keepdims=True)
    return shifted


def _log_softmax_kernel(
    x: np.ndarray, out: np.ndarray | None = None, axis: int | None = -1
) -> np.ndarray:
    x, out = _float_and_out(x, out, "log_softmax")
    if x.size == 0:
        return out
    shifted = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=out)
    shifted -= np.log(np.add.reduce(np.exp(shifted), axis=axis, keepdims=True))
    return shifted


# d softmax: ct_x = y * (ct - sum(ct * y))
softmax = defop(
    "softmax",
    infer=_float_infer("softmax"),
    kernel=_softmax_kernel,
    attrs={"axis": -1},
    canonicalize=_axis_canon("softmax"),
    vjp=lambda ct, out, x, needs, axis: (out * (ct - R.sum(ct * out, axis=axis, keepdims=True)),),
    cost=lambda out, x, axis: 5 * (out.size or 0),
    doc="exp(x) / sum(exp(x)) along axis, computed stably. gc.softmax(logits, axis=-1)",
    props=("non_negative",),
)

# d log_softmax: ct_x = ct - softmax(x) * sum(ct)
log_softmax = defop(
    "log_softmax",
    infer=_float_infer("log_softmax"),
    kernel=_log_softmax_kernel,
    attrs={"axis": -1},
    canonicalize=_axis_canon("log_softmax"),
    vjp=lambda ct, out, x, needs, axis: (ct - E.exp(out) * R.sum(ct, axis=axis, keepdims=True),),
    cost=lambda out, x, axis: 5 * (out.size or 0),
    doc="x - logsumexp(x) along axis, computed stably.",
)


def _one_hot_infer(
    labels: TensorType, num_classes: int, dtype: np.dtype, ignore_index: int | None = None
) -> TensorType:
    if not np.issubdtype(labels.dtype, np.integer):
        raise DTypeError(f"one_hot: labels must be integers, got {labels.dtype}")
    return TensorType(labels.shape + (num_classes,), dtype)


def _one_hot_canon(labels: TensorType, num_classes: Any, dtype: Any, ignore_index: Any) -> dict:
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise GraphcError(f"one_hot: num_classes must be an int, got {num_classes!r}")
    if num_classes < 1:
        raise GraphcError(f"one_hot: num_classes must be at least 1, got {num_classes}")
    if ignore_index is not None:
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
            raise GraphcError(f"one_hot: ignore_index must be an int or None, got {ignore_index!r}")
        info = np.iinfo(np.int64)
        if not info.min <= ignore_index <= info.max:
            raise GraphcError(f"one_hot: ignore_index must fit int64, got {ignore_index}")
        ignore_index = int(ignore_index)
    return {"num_classes": int(num_classes), "dtype": as_dtype(dtype), "ignore_index": ignore_index}


def out_of_range_label(labels: np.ndarray, num_classes: int, ignore_index: int | None) -> None:
    """Raise one_hot's error naming the first label outside [0, num_classes) that is not
    `ignore_index`, if there is one."""
    if not labels.size or (labels.min() >= 0 and labels.max() < num_classes):
        return
    bad = (labels < 0) | (labels >= num_classes)
    if ignore_index is not None:
        bad &= labels != ignore_index
    if bad.any():
        raise IndexRangeError(
            f"one_hot: label {labels[bad].flat[0]} is out of range for {num_classes} classes"
        )


def _one_hot_kernel(
    labels: np.ndarray,
    out: np.ndarray | None = None,
    num_classes: int = 0,
    dtype: Any = None,
    ignore_index: int | None = None,
) -> np.ndarray:
    # A label outside the classes would give an all-zero row, and cross_entropy a silently
    # wrong loss: reject it, as PyTorch does; a label equal to ignore_index gives that row
    # on purpose (a loss's padding target, left out of it)
    out_of_range_label(labels, num_classes, ignore_index)
    if out is None:
        out = np.empty(labels.shape + (num_classes,), dtype)
    np.equal(labels[..., None], np.arange(num_classes), out=out, casting="unsafe")
    if ignore_index is not None and 0 <= ignore_index < num_classes:
        out[..., ignore_index] = 0  # a class ignored: its ones alone are in this column
    return out


one_hot = defop(
    "one_hot",
    inputs=("labels",),
    infer=_one_hot_infer,
    kernel=_one_hot_kernel,
    attrs={"num_classes": REQUIRED, "dtype": "float32", "ignore_index": None},
    canonicalize=_one_hot_canon,
    vjp=lambda ct, out, labels, needs, **attrs: (None,),
    doc="1 at each label's position along a new last axis; a label equal to ignore_index "
    "(None: none) gives a row of zeros, any other outside the classes is an error. "
    "gc.one_hot(y, num_classes=10)",
    props=("non_negative",),
)


def mse_loss(prediction: Any, target: Any) -> Any:
    """Mean squared error: mean((prediction - target) ** 2)."""
    diff = prediction - target
    return R.mean(diff * diff)


@torch_keywords
def cross_entropy(logits: Any, labels: Any, axis: int = -1) -> Any:
    """Mean negative log-likelihood of integer `labels` (or of target probabilities).

    With integer labels each row's term is the log-probability at its label, selected
    as PyTorch's nll_loss picks it: a class masked with a -inf logit elsewhere in the
    row leaves the loss finite (a one-hot matrix times the log-probabilities would be
    nan there: 0 * -inf). Labels outside the classes are an error, as in PyTorch."""
    logp = log_softmax(logits, axis=axis)
    if np.issubdtype(
        labels.dtype if hasattr(labels, "dtype") else np.asarray(labels).dtype, np.integer
    ):
        at_label = one_hot(labels, num_classes=logits.shape[axis], dtype=np.bool_)
        rank = len(logits.shape)
        classes = normalize_axis(axis, rank, "cross_entropy")
        if classes != rank - 1:  # one_hot's classes are last: moved to the logits' axis
            order = [*range(classes), rank - 1, *range(classes, rank - 1)]
            at_label = transpose(at_label, tuple(order))
        return E.neg(R.mean(R.sum(where(at_label, logp, 0.0), axis=axis)))
    return E.neg(R.mean(R.sum(labels * logp, axis=axis)))
