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
from graphc.ir.errors import GraphcError
from graphc.nn import functional as F
from graphc.nn.distance import PairwiseDistance
from graphc.nn.functional.loss import REDUCTIONS, check_reduction
from graphc.nn.module import Module

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CosineEmbeddingLoss",
    "CrossEntropyLoss",
    "GaussianNLLLoss",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "MarginRankingLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "NLLLoss",
    "PoissonNLLLoss",
    "SmoothL1Loss",
    "SoftMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
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
        return ""  # torch's losses print no settings: MSELoss(), whatever the reduction


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


class MarginRankingLoss(_Loss):
    """max(0, -target * (input1 - input2) + margin), reduced."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return F.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_Loss):
    """input where the target is 1, max(0, margin - input) where it is -1, reduced."""

    def __init__(self, margin: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLoss(_Loss):
    """log(1 + exp(-target * input)), reduced."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.soft_margin_loss(input, target, self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """Each label's binary cross entropy of sigmoid(input), averaged over the labels
    (weighted per class by the buffer `weight`), reduced over the examples."""

    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self._buffer("weight", weight)

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class MultiMarginLoss(_Loss):
    """The multi-class hinge of scores against class indices (see F.multi_margin_loss)."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Any = None,
                 reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(reduction)
        if p not in (1, 2):
            raise GraphcError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p}")
        self.p, self.margin = p, margin
        self._buffer("weight", weight)

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight, self.reduction)


class CosineEmbeddingLoss(_Loss):
    """1 - cos(input1, input2) where the target is 1, max(0, cos - margin) where it is
    -1, reduced."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return F.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class TripletMarginLoss(_Loss):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), reduced (see
    F.triplet_margin_loss).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.TripletMarginLoss(margin=1.0, eps=0.0)(
    ...     ge.tensor([[0.0, 0.0]]), ge.tensor([[3.0, 4.0]]), ge.tensor([[0.0, 1.0]]))
    tensor(5.)
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return F.triplet_margin_loss(
            anchor, positive, negative, self.margin, self.p, self.eps, self.swap, self.reduction
        )


class PoissonNLLLoss(_Loss):
    """The Poisson negative log likelihood of counts (see F.poisson_nll_loss)."""

    def __init__(self, log_input: bool = True, full: bool = False, eps: float = 1e-8,
                 reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Any, target: Any) -> Any:
        return F.poisson_nll_loss(
            log_input, target, self.log_input, self.full, self.eps, self.reduction
        )


class GaussianNLLLoss(_Loss):
    """The Gaussian negative log likelihood of a target under a predicted mean and
    variance (see F.gaussian_nll_loss)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Any, target: Any, var: Any) -> Any:  # noqa: A002
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """The triplet margin loss with any distance function (see
    F.triplet_margin_with_distance_loss)."""

    def __init__(self, *, distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(reduction)
        if margin <= 0:
            raise GraphcError(
                f"TripletMarginWithDistanceLoss: margin must be greater than 0, got {margin}"
            )
        # torch's default is a PairwiseDistance module (a child, in the repr)
        if distance_function is None:
            distance_function = PairwiseDistance()
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip
