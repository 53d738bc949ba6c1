"""ONNX handlers: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (torch's
F.nll_loss and F.cross_entropy), with graphc's ops.

For input (N, C, d1, ...) and targets (N, d1, ...), each element's loss is minus the
input at its target class, times that class's weight (1 without weights); a target equal
to ignore_index counts nothing, its loss 0 and its weight 0. `mean` divides the sum by
the weights' sum over the elements counted (their number without weights), `sum` sums,
`none` keeps each. SoftmaxCrossEntropyLoss is that over log_softmax(scores) along the
classes, which is its second output. A target out of range (and not ignored) is take's
error, as in onnxruntime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.onnx.importer import Context, Value, handler
from graphc.ops import elementwise as E
from graphc.ops import reduce as R
from graphc.ops import selection
from graphc.ops.along_axis import take_along_axis
from graphc.ops.indexing import take
from graphc.ops.nn import log_softmax
from graphc.ops.shape import reshape


@handler("NegativeLogLikelihoodLoss", since=12)
def _nll(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    weight = inputs[2] if len(inputs) > 2 else None
    return [_loss(ctx, inputs[0], inputs[1], weight, attrs)]


@handler("SoftmaxCrossEntropyLoss", since=12)
def _softmax_cross_entropy(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    scores, labels = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    if len(scores.shape) < 2:
        raise ctx.error(f"scores of shape {scores.shape} have no class axis (N, C, ...)")
    log_prob = log_softmax(scores, axis=1)
    return [_loss(ctx, log_prob, labels, weight, attrs), log_prob]


def _loss(ctx: Context, x: Value, target: Value, weight: Any, attrs: dict) -> Value:
    shape = tuple(x.shape)
    if len(shape) < 2 or tuple(target.shape) != shape[:1] + shape[2:]:
        raise ctx.error(
            f"targets of shape {tuple(target.shape)} do not label input of shape {shape} "
            "(N, C, d1, ...) with (N, d1, ...)"
        )
    dtype = np.dtype(x.dtype)
    target = selection.cast(target, np.int64)
    counted = None
    if "ignore_index" in attrs:
        counted = selection.ne(target, np.int64(attrs["ignore_index"]))
        target = selection.where(counted, target, np.int64(0))  # a class in range
    classes = reshape(target, (shape[0], 1, *shape[2:]))
    picked = reshape(take_along_axis(x, classes, axis=1), tuple(target.shape))
    weights = None if weight is None else take(weight, target, axis=0)
    if counted is not None:
        mask = selection.cast(counted, dtype)
        weights = mask if weights is None else E.mul(weights, mask)
    loss = E.neg(picked) if weights is None else E.neg(E.mul(picked, weights))
    if counted is not None:  # (an ignored element's input may be -inf: 0, not nan)
        loss = selection.where(counted, loss, np.zeros((), dtype))
    reduction = attrs.get("reduction", "mean")
    if reduction == "none":
        return loss
    total = R.sum(loss)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ctx.error(f"reduction '{reduction}' is not one of none, sum and mean")
    if weights is None:  # every element counted, weighing 1
        return R.mean(loss)
    return E.div(total, R.sum(weights))


__all__: list[str] = []
