"""Loss modules with torch.nn's names, arguments and defaults, over nn.functional's losses.

Each module keeps its settings and calls the function of the same name in
graphc/nn/functional/loss.py (which says what each computes). A `reduction` the loss
does not know is refused when the module is made. Per-class weights (`weight`,
`pos_weight`) are buffers, as in torch: saved in `state_dict`, not trained.

>>> import graphc.eager as ge
>>> from graphc import nn
>>> nn.SmoothL1Loss(reduction="sum")(ge.tensor([0.5, 3.0]), ge.tensor([0.0, 0.0]))
tensor(2.6250)
"""

from __future__ import annotations

from typing import Any

from graphc.eager import Tensor, tensor
from graphc.nn import functional as F
from graphc.nn.functional.loss import REDUCTIONS, check_reduction
from graphc.nn.module import Module

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
]


class _Loss(Module):
    """A loss with a `reduction`, checked against the ones `allowed`."""

    allowed: tuple[str, ...] = REDUCTIONS

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        check_reduction(type(self).__name__, reduction, self.allowed)
        self.reduction = reduction

    def _buffer(self, name: str, value: Any) -> None:
        """`value` (None, an array or a tensor) as the buffer `name`, as torch keeps it."""
        if value is None:
            setattr(self, name, None)
        else:
            self.register_buffer(name, value if isinstance(value, Tensor) else tensor(value))

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class L1Loss(_Loss):
    """|input - target|, reduced."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002 - torch's names
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """(input - target) ** 2, reduced; input and target must have the same shape."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below `beta`, linear above (see F.smooth_l1_loss)."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below `delta`, linear with slope delta above (see F.huber_loss)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities `input` from `target` (see F.kl_div); use
    reduction='batchmean' for the divergence itself (torch's default 'mean' divides by
    every element)."""

    allowed = (*REDUCTIONS, "batchmean")

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities, logs clamped at -100 (see
    F.binary_cross_entropy); `weight` scales each element (broadcast)."""

    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self._buffer("weight", weight)

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of sigmoid(input), from the logits without overflow (see
    F.binary_cross_entropy_with_logits); `pos_weight` weighs the positives per class.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> loss = nn.BCEWithLogitsLoss()(ge.zeros(2, 3), ge.ones(2, 3))
    >>> round(loss.item(), 4)   # log(2): logits of 0 are probabilities of one half
    0.6931
    """

    def __init__(self, weight: Any = None, reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(reduction)
        self._buffer("weight", weight)
        self._buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, self.reduction, self.pos_weight
        )


class NLLLoss(_Loss):
    """Negative log-likelihood of integer class targets from log-probabilities along axis
    1 (see F.nll_loss): per-class `weight`, targets equal to `ignore_index` left out."""

    def __init__(
        self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean"
    ) -> None:
        super().__init__(reduction)
        self._buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross-entropy of unnormalized logits (classes on axis 1) against integer class
    targets or class probabilities (see F.cross_entropy).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> loss = nn.CrossEntropyLoss()(ge.zeros(2, 4), ge.tensor([0, 3]))
    >>> round(loss.item(), 4)   # log(4): uniform logits
    1.3863
    """

    def __init__(
        self,
        weight: Any = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(reduction)
        self._buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.cross_entropy(
            input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing
        )
