"""torch.optim.swa_utils: averaged copies of a model's weights (stochastic weight
averaging, and the exponential moving averages many training scripts keep), the SWALR
schedule, and update_bn, which recomputes batch-norm statistics for averaged weights.

`AveragedModel(model)` holds a deep copy; `update_parameters(model)` folds the model's
current parameters into it after an optimizer step: the running mean by default,
or an EMA with `multi_avg_fn=get_ema_multi_avg_fn(decay)`. It is an nn.Module, so it
runs, traces and saves (`n_averaged`, then `module.*`) as torch's.

>>> import graphc.eager as ge
>>> from graphc import nn, optim
>>> model = nn.Linear(1, 1, bias=False, generator=0)
>>> average = optim.swa_utils.AveragedModel(model)
>>> for value in (1.0, 2.0, 6.0):
...     with ge.no_grad():
...         _ = model.weight.fill_(value)
...     average.update_parameters(model)
>>> average.module.weight.tolist(), average.n_averaged.item()
([[3.0]], 3)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from graphc.eager import Tensor, no_grad, tensor
from graphc.ir.errors import GraphcError
from graphc.nn.module import Module
from graphc.nn.norm import _BatchNorm, _InstanceNorm
from graphc.optim.lr_scheduler import LRScheduler, _per_group
from graphc.optim.optimizer import Optimizer

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def _lerp_into(averaged: Tensor, current: Tensor, weight: float) -> None:
    averaged.copy_(averaged + (current - averaged) * weight)


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[..., None]:
    """The in-place update of a list of averaged tensors towards the current ones by
    an exponential moving average: avg = decay * avg + (1 - decay) * current."""
    if not 0.0 <= decay <= 1.0:
        raise GraphcError(f"get_ema_multi_avg_fn: decay must be in [0, 1], got {decay}")

    def ema_update(averaged: Sequence[Tensor], current: Sequence[Tensor], _: Any) -> None:
        with no_grad():
            for a, c in zip(averaged, current):
                _lerp_into(a, c, 1 - decay)

    return ema_update


def get_swa_multi_avg_fn() -> Callable[..., None]:
    """The in-place update of a list of averaged tensors to the running mean of the
    current ones: avg = avg + (current - avg) / (n + 1), n averaged so far."""

    def swa_update(averaged: Sequence[Tensor], current: Sequence[Tensor], n: Any) -> None:
        weight = 1.0 / (float(n.item() if isinstance(n, Tensor) else n) + 1)
        with no_grad():
            for a, c in zip(averaged, current):
                _lerp_into(a, c, weight)

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """decay * averaged + (1 - decay) * current, of one tensor (avg_fn's form)."""
    if not 0.0 <= decay <= 1.0:
        raise GraphcError(f"get_ema_avg_fn: decay must be in [0, 1], got {decay}")
    return lambda averaged, current, n: decay * averaged + (1 - decay) * current


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Any], Tensor]:
    """averaged + (current - averaged) / (n + 1), of one tensor (avg_fn's form)."""
    return lambda averaged, current, n: averaged + (current - averaged) / (n + 1)


class AveragedModel(Module):
    """A deep copy of `model` whose parameters (and buffers, with `use_buffers`) are
    averages of `model`'s over the calls of `update_parameters`: their running mean, or
    what `avg_fn` (one tensor at a time) or `multi_avg_fn` (lists, in place) make.
    Without `use_buffers` the buffers are copied from the model at each update, as
    torch's. `device` is accepted (graphc has the CPU only)."""

    def __init__(
        self,
        model: Module,
        device: Any = None,
        avg_fn: Callable[[Tensor, Tensor, Any], Tensor] | None = None,
        multi_avg_fn: Callable[..., None] | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise GraphcError("AveragedModel: give avg_fn or multi_avg_fn, not both")
        self.module = copy.deepcopy(model)
        self.register_buffer("n_averaged", tensor(0))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def _averaged(self, module: Module) -> list[Tensor]:
        tensors = list(module.parameters())
        return tensors + list(module.buffers()) if self.use_buffers else tensors

    def update_parameters(self, model: Module) -> None:
        """Fold `model`'s current values into the averages (the first call copies them)."""
        ours = [t.detach() for t in self._averaged(self.module)]
        theirs = [t.detach() for t in self._averaged(model)]
        if len(ours) != len(theirs):
            raise GraphcError(
                f"AveragedModel.update_parameters: the model has {len(theirs)} tensors to "
                f"average, the averaged copy {len(ours)}"
            )
        count = int(self.n_averaged.item())
        with no_grad():
            if count == 0:
                for a, c in zip(ours, theirs):
                    a.copy_(c)
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(ours, theirs, self.n_averaged)
            elif self.avg_fn is not None:
                for a, c in zip(ours, theirs):
                    a.copy_(self.avg_fn(a, c, self.n_averaged))
            else:
                get_swa_multi_avg_fn()(ours, theirs, count)
            if not self.use_buffers:  # the buffers follow the model's
                for a, c in zip(self.module.buffers(), model.buffers()):
                    a.copy_(c.detach())
            self.n_averaged.add_(1)


class SWALR(LRScheduler):
    """The learning rate of each group annealed from its current value to `swa_lr` over
    `anneal_epochs` epochs (along a cosine or a line), then held, as torch's SWALR."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | list[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        for group, lr in zip(
            optimizer.param_groups, _per_group("swa_lr", swa_lr, optimizer.param_groups)
        ):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise GraphcError(
                f"SWALR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise GraphcError(f"SWALR: anneal_epochs must be an int >= 0, got {anneal_epochs!r}")
        self.anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return t if self.anneal_strategy == "linear" else (1 - math.cos(math.pi * t)) / 2

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        before = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        now = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        rates = []
        for group in self.optimizer.param_groups:
            # the rate the annealing started from, recovered from the current one
            if before == 1:
                start = group["swa_lr"]
            else:
                start = (group["lr"] - before * group["swa_lr"]) / (1 - before)
            rates.append(group["swa_lr"] * now + start * (1 - now))
        return rates


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running statistics of `model`'s batch norms over `loader` (each
    item an input, or a tuple or list whose first entry is), as the cumulative average
    of every batch, as torch's: for a model whose weights were averaged. Instance norms
    keep theirs, as torch's update_bn leaves them."""
    norms = [
        m
        for m in model.modules()
        if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm) and m.track_running_stats
    ]
    if not norms:
        return
    momenta = {}
    for norm in norms:
        norm.reset_running_stats()
        momenta[norm] = norm.momentum
        norm.momentum = None
    was_training = model.training
    model.train()
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            model(batch if isinstance(batch, Tensor) else tensor(np.asarray(batch)))
    for norm, momentum in momenta.items():
        norm.momentum = momentum
    model.train(was_training)
