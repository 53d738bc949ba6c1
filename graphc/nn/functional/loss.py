"""torch.nn.functional spellings: losses.

PyTorch's names, argument names, defaults and formulas, on eager tensors and graph values
alike: `reduction` is 'mean' (the default), 'sum' or 'none' (kl_div also takes
'batchmean'). Each loss is built from graphc's ops, so its gradient is their gradient
rules' (binary_cross_entropy's alone is a custom gradient: torch's, which stays finite
where the probability is 0 or 1). Unlike torch, which warns and broadcasts, the
elementwise losses refuse a target whose shape differs from the input's (a (N, 1)
prediction against a (N,) target is the classic silent mistake).

Class-index losses (nll_loss, cross_entropy) take the classes on axis 1 of an input
(N, C, d1, ...) with an integer target (N, d1, ...), or an unbatched input (C,) with a
0-d target; a target equal to `ignore_index` (-100 by default, as torch's) adds nothing
and counts for nothing in the mean, on eager tensors and graph values alike (a padding
label of -100 in a compiled training step). Where the targets are known to hold no
ignored one (an eager tensor's), the mean is over all of them, the graph
gc.cross_entropy makes. A graph's mean over the targets not ignored divides by a count
of its labels, from one_hot's rows (its ignore_index leaves an ignored target's row
empty), so no int64 comparison enters a compiled step; graphc.distributed's
data-parallel step computes that count from the whole batch's labels before it cuts
the rows (training.py's statistics passes).

>>> import graphc.eager as ge
>>> import graphc.nn.functional as F
>>> F.l1_loss(ge.tensor([1.0, -2.0]), ge.tensor([0.0, 0.0]), reduction="none")
tensor([1., 2.])
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.nn.functional.activation import logsigmoid
from graphc.ops import (
    cast,
    equal,
    exp,
    log,
    log1p,
    log_softmax,
    maximum,
    mean,
    one_hot,
    reshape,
    take,
    transpose,
    where,
)
from graphc.ops import elementwise as E
from graphc.ops import reduce as R
from graphc.ops.custom import build_body, record_custom, value_type
from graphc.ops.nn import cross_entropy as plain_cross_entropy

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "smooth_l1_loss",
]

REDUCTIONS = ("mean", "sum", "none")
DEFAULT_IGNORE_INDEX = -100


def check_reduction(loss: str, reduction: Any, allowed: tuple[str, ...] = REDUCTIONS) -> None:
    """Refuse a `reduction` the loss does not know, naming the loss and the choices."""
    if reduction not in allowed:
        raise GraphcError(
            f"{loss}: reduction must be one of {', '.join(map(repr, allowed))}, got {reduction!r}"
        )


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "none":
        return loss
    return R.sum(loss) if reduction == "sum" else mean(loss)


def _same_shapes(loss: str, input: Any, target: Any) -> None:  # noqa: A002 - torch's names
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(
            f"{loss}: input has shape {tuple(input.shape)} but target has "
            f"{tuple(target.shape)}; they must match (no broadcasting)"
        )


def _float_input(loss: str, name: str, value: Any) -> None:
    if np.dtype(value.dtype).kind != "f":
        raise DTypeError(f"{loss}: {name} must be floating point, got dtype {value.dtype}")


# -- elementwise losses ----------------------------------------------------------------


def mse_loss(input: Any, target: Any, reduction: str = "mean") -> Any:  # noqa: A002
    """(input - target) ** 2, reduced."""
    check_reduction("mse_loss", reduction)
    _same_shapes("mse_loss", input, target)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input: Any, target: Any, reduction: str = "mean") -> Any:  # noqa: A002
    """|input - target|, reduced (its gradient at 0 is 0, as torch's sign)."""
    check_reduction("l1_loss", reduction)
    _same_shapes("l1_loss", input, target)
    return _reduce(E.abs(input - target), reduction)


def smooth_l1_loss(
    input: Any,  # noqa: A002
    target: Any,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Any:
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target);
    beta = 0 is l1_loss."""
    check_reduction("smooth_l1_loss", reduction)
    if not beta >= 0:
        raise GraphcError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    _same_shapes("smooth_l1_loss", input, target)
    diff = input - target
    size = E.abs(diff)
    if beta == 0:  # the quadratic piece would divide by 0 (nan in its unused lanes' gradient)
        return _reduce(size, reduction)
    # d * d, not |d| ** 2: its gradient d / beta needs no sign at 0
    return _reduce(where(size < beta, (0.5 / beta) * (diff * diff), size - 0.5 * beta), reduction)


def huber_loss(
    input: Any,  # noqa: A002
    target: Any,
    reduction: str = "mean",
    delta: float = 1.0,
) -> Any:
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""
    check_reduction("huber_loss", reduction)
    if not delta > 0:
        raise GraphcError(f"huber_loss: delta must be > 0, got {delta}")
    _same_shapes("huber_loss", input, target)
    diff = input - target
    size = E.abs(diff)
    return _reduce(
        where(size < delta, 0.5 * (diff * diff), delta * (size - 0.5 * delta)), reduction
    )


def kl_div(
    input: Any,  # noqa: A002
    target: Any,
    reduction: str = "mean",
    log_target: bool = False,
) -> Any:
    """target (log target - input) with `input` log-probabilities: torch's pointwise KL
    divergence, 0 where target is 0. 'batchmean' divides the sum by the batch size
    (axis 0), which is the mathematical KL divergence; 'mean' divides by every element."""
    check_reduction("kl_div", reduction, (*REDUCTIONS, "batchmean"))
    _same_shapes("kl_div", input, target)
    if log_target:
        pointwise = exp(target) * (target - input)
    else:
        zero = equal(target, 0)  # xlogy: 0 log 0 is 0 (its log reads 1 there, so no nan)
        pointwise = where(zero, 0.0, target * log(where(zero, 1.0, target))) - target * input
    if reduction == "batchmean":
        if len(input.shape) == 0:
            raise ShapeError("kl_div: reduction='batchmean' needs a batch axis, got a 0-d input")
        # the mean over the batch of each example's sum: a symbolic batch size needs no number
        rows = pointwise
        if len(input.shape) > 1:
            rows = R.sum(pointwise, axis=tuple(range(1, len(input.shape))))
        return mean(rows)
    return _reduce(pointwise, reduction)


# -- binary cross-entropy ----------------------------------------------------------------

# torch's bound on x (1 - x) in binary_cross_entropy's gradient: 1e-12 as a C float
_EPSILON = float(np.float32(1e-12))


def _logs(x: Any, floor: float) -> tuple[Any, Any]:
    """log(x) and log(1 - x), each at least `floor`, computed without a log of 0 (numpy's
    divide warning): where x is 0 (or 1) the log is `floor` itself."""
    positive, below_one = x > 0, x < 1
    log_x = where(positive, log(where(positive, x, 1.0)), floor)
    log_rest = where(below_one, log1p(-where(below_one, x, 0.0)), floor)
    return maximum(log_x, floor), maximum(log_rest, floor)


def _bce_pointwise(x: Any, y: Any) -> Any:
    # torch's kernel: the logs clamped at -100, so a probability of 0 or 1 gives 100, not inf
    log_x, log_rest = _logs(x, -100.0)
    return (y - 1.0) * log_rest - y * log_x


def _bce_backward(args: list[Any]) -> list[Any]:
    x, y, _, ct = args
    # torch's gradients: (x - y) / max(x (1 - x), eps) for x; for y the logs' difference,
    # unclamped (as torch's: infinite where x is 0 or 1)
    grad_x = ct * (x - y) / maximum((1.0 - x) * x, _EPSILON)
    log_x, log_rest = _logs(x, -np.inf)
    return [grad_x, ct * (log_rest - log_x)]


@functools.lru_cache(maxsize=64)
def _bce_bodies(input_type: TensorType, target_type: TensorType) -> tuple[Graph, Graph]:
    """The custom node's forward and backward bodies, built once per pair of types."""
    spec = [("input", input_type), ("target", target_type)]
    forward = build_body("binary_cross_entropy_forward", spec, lambda xs: [_bce_pointwise(*xs)])
    backward = build_body(
        "binary_cross_entropy_backward",
        spec + [("out", input_type), ("ct", input_type)],
        _bce_backward,
        ["ct_input", "ct_target"],
    )
    return forward, backward


def binary_cross_entropy(
    input: Any,  # noqa: A002
    target: Any,
    weight: Any = None,
    reduction: str = "mean",
) -> Any:
    """-(target log(input) + (1 - target) log(1 - input)) of probabilities, each log
    clamped at -100 as torch's, times `weight` (broadcast), reduced. The gradient is
    torch's: (input - target) / max(input (1 - input), 1e-12), finite at 0 and 1."""
    check_reduction("binary_cross_entropy", reduction)
    _float_input("binary_cross_entropy", "input", input)
    _same_shapes("binary_cross_entropy", input, target)
    if np.dtype(target.dtype) != np.dtype(input.dtype):
        target = cast(target, input.dtype)
    forward, backward = _bce_bodies(value_type(input), value_type(target))
    loss = record_custom("binary_cross_entropy", [input, target], forward, backward)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(
    input: Any,  # noqa: A002
    target: Any,
    weight: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Any:
    """binary_cross_entropy of sigmoid(input), computed from the logits without overflow
    as torch does: (1 - target) input - (1 + (pos_weight - 1) target) logsigmoid(input).
    `pos_weight` (broadcast along the last axis: one per class) weighs the positive term;
    `weight` each element."""
    check_reduction("binary_cross_entropy_with_logits", reduction)
    _float_input("binary_cross_entropy_with_logits", "input", input)
    _same_shapes("binary_cross_entropy_with_logits", input, target)
    log_sigmoid = logsigmoid(input)
    if pos_weight is not None:
        log_sigmoid = ((pos_weight - 1.0) * target + 1.0) * log_sigmoid
    loss = (1.0 - target) * input - log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# -- class-index losses ------------------------------------------------------------------


def _class_axis(loss: str, input: Any, target: Any, integer_target: bool) -> int:
    rank = len(input.shape)
    if rank == 0:
        raise ShapeError(f"{loss}: input must have a class axis, got a 0-d input")
    axis = 1 if rank >= 2 else 0
    want = tuple(input.shape[:axis]) + tuple(input.shape[axis + 1 :])
    if integer_target and tuple(target.shape) != want:
        raise ShapeError(
            f"{loss}: expected input (N, C, d1, ...) or (C,) and target (N, d1, ...) or (), "
            f"got input {tuple(input.shape)} and target {tuple(target.shape)} "
            f"(target must have shape {want})"
        )
    return axis


def _at_labels(
    labels: Any, classes: int, axis: int, rank: int, ignore_index: int | None = None
) -> Any:
    """True at each label's class, none for a label equal to `ignore_index`: one_hot's
    last axis moved to the input's class axis."""
    at = one_hot(labels, num_classes=classes, dtype=np.bool_, ignore_index=ignore_index)
    if axis != rank - 1:
        order = [*range(axis), rank - 1, *range(axis, rank - 1)]
        at = transpose(at, tuple(order))
    return at


def _picked(input: Any, labels: Any, classes: int, axis: int) -> Any:  # noqa: A002
    """Each label's entry of `input` along the class axis, picked by a where, so a -inf
    elsewhere in a row stays out (a one-hot product would give 0 * inf = nan)."""
    at = _at_labels(labels, classes, axis, len(input.shape))
    return R.sum(where(at, input, 0.0), axis=axis)


def _kept(input: Any, target: Any, axis: int, ignore_index: int) -> tuple[Any, Any, Any]:  # noqa: A002
    """The one-hot rows of `target` on the class axis of `input`, none for an ignored
    target; each target's count in input's dtype (1 kept, 0 ignored); whether it is kept.
    One_hot's ignore_index and a sum give the mask, with no comparison of the integer
    targets: a compiled step computes it with the float and bool kernels of its head."""
    at = _at_labels(target, input.shape[axis], axis, len(input.shape), ignore_index)
    # a pick of ones (fuse_one_hot_pick's form: one read per target at a wide head, where
    # a cast of the rows would be a pass over all of them)
    one, zero = np.ones((), input.dtype), np.zeros((), input.dtype)
    counts = R.sum(where(at, one, zero), axis=axis)
    return at, counts, E.greater(counts, 0.0)


def _plain_mean(target: Any, weight: Any, ignore_index: int, reduction: str) -> bool:
    """Whether the mean is over every target: no weight, reduction 'mean' and targets
    known to hold no `ignore_index` (an eager tensor's or an array's; a graph value's
    are not known until it runs)."""
    if weight is not None or reduction != "mean":
        return False
    known = target.detach().numpy() if isinstance(target, Tensor) else target
    return isinstance(known, np.ndarray) and not (known == ignore_index).any()


def _class_weights(loss: str, weight: Any, classes: Any) -> None:
    if weight is not None and tuple(weight.shape) != (classes,):
        raise ShapeError(
            f"{loss}: weight must hold one value per class, shape ({classes},), "
            f"got {tuple(weight.shape)}"
        )


def nll_loss(
    input: Any,  # noqa: A002
    target: Any,
    weight: Any = None,
    ignore_index: int = DEFAULT_IGNORE_INDEX,
    reduction: str = "mean",
) -> Any:
    """-weight[target] * input[target] of log-probabilities along axis 1 (see the module's
    text); 'mean' divides by the summed weights of the targets not ignored (their count
    without `weight`), so it is nan when every target is ignored, as torch's."""
    check_reduction("nll_loss", reduction)
    _float_input("nll_loss", "input", input)
    if np.dtype(target.dtype).kind not in "iu":
        raise DTypeError(
            f"nll_loss: target must be integer class indices, got dtype {target.dtype}"
        )
    axis = _class_axis("nll_loss", input, target, integer_target=True)
    classes = input.shape[axis]
    _class_weights("nll_loss", weight, classes)
    if _plain_mean(target, weight, ignore_index, reduction):
        return E.neg(mean(_picked(input, target, classes, axis)))
    at, counts, kept = _kept(input, target, axis, ignore_index)
    picked = R.sum(where(at, input, 0.0), axis=axis)
    if weight is None:
        losses = where(kept, -picked, 0.0)
    else:
        at_weight = take(weight, where(kept, target, 0))  # any class where ignored
        losses = where(kept, -(at_weight * picked), 0.0)
        counts = where(kept, at_weight, 0.0)
    if reduction == "mean":
        return R.sum(losses) / R.sum(counts)
    return _reduce(losses, reduction)


def cross_entropy(
    input: Any,  # noqa: A002
    target: Any,
    weight: Any = None,
    ignore_index: int = DEFAULT_IGNORE_INDEX,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    """nll_loss of log_softmax(input) along axis 1, from unnormalized logits. `target` is
    integer class indices (see nll_loss) or class probabilities shaped like `input`;
    `label_smoothing` mixes the target with the uniform distribution, as torch's."""
    check_reduction("cross_entropy", reduction)
    _float_input("cross_entropy", "input", input)
    if not 0.0 <= label_smoothing <= 1.0:
        raise GraphcError(
            f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}"
        )
    integer_target = np.dtype(target.dtype).kind in "iu"
    axis = _class_axis("cross_entropy", input, target, integer_target)
    classes = input.shape[axis]
    _class_weights("cross_entropy", weight, classes)
    logp = log_softmax(input, axis=axis)
    weight_along = None
    if weight is not None:  # weight broadcast along the class axis
        trailing = len(input.shape) - axis - 1
        weight_along = reshape(weight, (classes,) + (1,) * trailing) if trailing else weight
    if not integer_target:
        _same_shapes("cross_entropy", input, target)
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / classes
        terms = logp * target if weight_along is None else logp * target * weight_along
        losses = -R.sum(terms, axis=axis)
        if reduction == "mean":  # over the examples (and positions), not the weights
            return mean(losses)
        return _reduce(losses, reduction)
    if not label_smoothing and _plain_mean(target, weight, ignore_index, reduction):
        return plain_cross_entropy(input, target, axis=axis)  # the graph gc.cross_entropy makes
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if not label_smoothing:
        return nll
    # torch's smoothing term: every class's log-probability (weighted), 0 where ignored
    every = logp if weight_along is None else logp * weight_along
    _, counts, kept = _kept(logp, target, axis, ignore_index)
    smooth = where(kept, -R.sum(every, axis=axis), 0.0)
    if reduction == "mean":
        if weight is not None:
            counts = where(kept, take(weight, where(kept, target, 0)), 0.0)
        smooth = R.sum(smooth) / R.sum(counts)
    else:
        smooth = _reduce(smooth, reduction)
    return (1.0 - label_smoothing) * nll + smooth * (label_smoothing / classes)
