"""torch.nn.functional spellings: the margin and embedding losses (margin_ranking_loss,
hinge_embedding_loss, soft_margin_loss, multilabel_soft_margin_loss, multi_margin_loss,
cosine_embedding_loss, triplet_margin_loss, triplet_margin_with_distance_loss) and the likelihood losses of a predicted
distribution (poisson_nll_loss, gaussian_nll_loss), with torch's formulas, arguments
and `reduction`, built from graphc's ops (their gradients are those ops').

Targets of the sign losses are -1 and 1, as torch's; a value that is neither counts
as torch counts it (hinge_embedding_loss adds both of its terms for it, the cosine one
neither).

>>> import graphc.eager as ge
>>> import graphc.nn.functional as F
>>> F.margin_ranking_loss(ge.tensor([1.0, 2.0]), ge.tensor([2.0, 0.0]), ge.tensor([1.0, 1.0]))
tensor(0.5000)
"""

from __future__ import annotations

import math
from typing import Any

from graphc.eager import Tensor
from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn.functional.activation import logsigmoid
from graphc.nn.functional.distance import pairwise_distance
from graphc.nn.functional.loss import _reduce, check_reduction
from graphc.ops import (
    cast,
    exp,
    expand_dims,
    full_like,
    log,
    log1p,
    maximum,
    minimum,
    one_hot,
    sqrt,
    take,
    take_along_axis,
    where,
)
from graphc.ops import sum as total
from graphc.ops.custom import stopped

__all__ = [
    "cosine_embedding_loss",
    "gaussian_nll_loss",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "multi_margin_loss",
    "multilabel_soft_margin_loss",
    "poisson_nll_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]


def _hinge(x: Any) -> Any:
    return maximum(x, 0.0)


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                        reduction: str = "mean") -> Any:  # fmt: skip
    """max(0, -target * (input1 - input2) + margin): input1 should rank above input2
    where the target is 1, below where it is -1."""
    check_reduction("margin_ranking_loss", reduction)
    if not len(input1.shape) == len(input2.shape) == len(target.shape):
        raise ShapeError(
            "margin_ranking_loss: input1, input2 and target must have the same rank, got "
            f"shapes {tuple(input1.shape)}, {tuple(input2.shape)} and {tuple(target.shape)}"
        )
    return _reduce(_hinge(-target * (input1 - input2) + margin), reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0,  # noqa: A002
                         reduction: str = "mean") -> Any:  # fmt: skip
    """input where the target is 1, max(0, margin - input) where it is -1 (for a
    distance `input` between two embeddings that should be near or apart)."""
    check_reduction("hinge_embedding_loss", reduction)
    apart = where(target != 1, _hinge(margin - input), 0.0)
    near = where(target != -1, input, 0.0)
    return _reduce(apart + near, reduction)


def soft_margin_loss(input: Any, target: Any, reduction: str = "mean") -> Any:  # noqa: A002
    """log(1 + exp(-target * input)), a smooth two-class hinge."""
    check_reduction("soft_margin_loss", reduction)
    return _reduce(log1p(exp(-input * target)), reduction)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None,  # noqa: A002
                                reduction: str = "mean") -> Any:  # fmt: skip
    """The binary cross entropy of sigmoid(input) against each of C labels (targets 0 or
    1), weighted per class by `weight`, averaged over the classes (the last dim), then
    reduced over the examples."""
    check_reduction("multilabel_soft_margin_loss", reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    classes = input.shape[-1] if len(input.shape) else 1
    return _reduce(total(loss, axis=-1) / classes if len(input.shape) else loss, reduction)


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Any = None, reduction: str = "mean") -> Any:  # fmt: skip
    """The multi-class hinge of (N, C) scores (or (C,)) against class indices: the sum
    over the classes i other than the target y of max(0, margin - x[y] + x[i]) ** p
    (times weight[y]), divided by C."""
    check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise GraphcError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p}")
    unbatched = len(input.shape) == 1
    if unbatched:
        input, target = expand_dims(input, 0), expand_dims(target, 0)  # noqa: A001
    if len(input.shape) != 2 or tuple(target.shape) != (input.shape[0],):
        raise ShapeError(
            "multi_margin_loss: expected scores (N, C) and targets (N,), got shapes "
            f"{tuple(input.shape)} and {tuple(target.shape)}"
        )
    classes = input.shape[1]
    labels = expand_dims(cast(target, "int64"), 1)
    own = take_along_axis(input, labels, axis=1)  # (N, 1): each example's target score
    hinge = _hinge(margin - own + input)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * expand_dims(take(weight, cast(target, "int64"), axis=0), 1)
    others = 1 - one_hot(cast(target, "int64"), classes, dtype=input.dtype)
    loss = total(hinge * others, axis=1) / classes
    return _reduce(loss[0] if unbatched else loss, reduction)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                          reduction: str = "mean") -> Any:  # fmt: skip
    """1 - cos(input1, input2) where the target is 1, max(0, cos - margin) where it is
    -1; the cosine along the last dim, with torch's 1e-12 added to each squared norm."""
    check_reduction("cosine_embedding_loss", reduction)
    if tuple(input1.shape) != tuple(input2.shape):
        raise ShapeError(
            f"cosine_embedding_loss: input1 and input2 must have the same shape, got "
            f"{tuple(input1.shape)} and {tuple(input2.shape)}"
        )
    dot = total(input1 * input2, axis=-1)
    squares = (total(input1 * input1, axis=-1) + 1e-12) * (total(input2 * input2, axis=-1) + 1e-12)
    cos = dot / sqrt(squares)
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, _hinge(cos - margin), 0.0)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        reduction: str = "mean") -> Any:  # fmt: skip
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with d the p-norm
    pairwise distance (eps added to the difference, as torch's); with `swap`, the
    negative's distance is the smaller of its distances to the anchor and the positive."""
    check_reduction("triplet_margin_loss", reduction)
    ranks = {len(anchor.shape), len(positive.shape), len(negative.shape)}
    if len(ranks) != 1 or ranks.pop() not in (1, 2):
        raise ShapeError(
            "triplet_margin_loss: anchor, positive and negative must all be 1-D or all 2-D, "
            f"got shapes {tuple(anchor.shape)}, {tuple(positive.shape)} and "
            f"{tuple(negative.shape)}"
        )
    near = pairwise_distance(anchor, positive, p, eps)
    far = pairwise_distance(anchor, negative, p, eps)
    if swap:
        far = minimum(far, pairwise_distance(positive, negative, p, eps))
    return _reduce(_hinge(margin + near - far), reduction)


def triplet_margin_with_distance_loss(anchor: Any, positive: Any, negative: Any, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Any:  # fmt: skip
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with any distance
    function of two batches (pairwise_distance by default); with `swap`, the negative's
    distance is the smaller of its distances to the anchor and the positive."""
    check_reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise GraphcError(
            f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}"
        )
    distance = pairwise_distance if distance_function is None else distance_function
    near, far = distance(anchor, positive), distance(anchor, negative)
    if swap:
        far = minimum(far, distance(positive, negative))
    return _reduce(_hinge(margin + near - far), reduction)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False,  # noqa: A002
                     eps: float = 1e-8, reduction: str = "mean") -> Any:  # fmt: skip
    """The negative log likelihood of `target` counts under a Poisson of rate exp(input)
    (`log_input`) or input: exp(input) - target * input, or input - target * log(input
    + eps); with `full`, Stirling's approximation of log(target!) is added where the
    target is above 1."""
    check_reduction("poisson_nll_loss", reduction)
    if log_input:
        loss = exp(input) - target * input
    else:
        loss = input - target * log(input + eps)
    if full:
        safe = where(target > 1, target, 1.0)  # log of 0 would be nan where unused
        stirling = safe * log(safe) - safe + 0.5 * log(2 * math.pi * safe)
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False,  # noqa: A002
                      eps: float = 1e-6, reduction: str = "mean") -> Any:  # fmt: skip
    """The negative log likelihood of `target` under a Gaussian of mean `input` and
    variance `var`: (log(var) + (input - target)**2 / var) / 2, plus log(2 pi) / 2 with
    `full`. var is a float, or has input's shape, or one dim less (one variance per
    example), or input's rank with one dim of size 1 where input's differs; it is
    clamped below at eps, the gradient passing the clamp as torch's (made without
    recording it). A negative variance is refused where its values are known (a float,
    an eager tensor)."""
    check_reduction("gaussian_nll_loss", reduction)
    if isinstance(var, (int, float)):
        if var < 0:
            raise GraphcError(f"gaussian_nll_loss: var has a negative entry ({var})")
        var = full_like(input, var)
    elif isinstance(var, Tensor) and bool((var.detach() < 0).any()):
        raise GraphcError("gaussian_nll_loss: var has negative entries")
    shape, var_shape = tuple(input.shape), tuple(var.shape)
    if var_shape != shape:
        differing = [v for i, v in zip(shape, var_shape) if i != v]
        if shape[:-1] == var_shape:  # one variance per example
            var = expand_dims(var, -1)
        elif not (len(var_shape) == len(shape) and differing == [1]):
            raise ShapeError(
                f"gaussian_nll_loss: var of shape {var_shape} fits neither the input's shape "
                f"{shape}, nor it without its last dim, nor it with one dim of size 1"
            )
    clamped = var + stopped(maximum(var, eps) - var)
    loss = 0.5 * (log(clamped) + (input - target) ** 2 / clamped)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)
