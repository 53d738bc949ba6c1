"""Learning-rate schedules with torch.optim.lr_scheduler's names, arguments and numbers.

A scheduler sets ``param_groups[i]["lr"]`` of its optimizer: once when it is made (its
epoch 0: the initial learning rates) and at each `step()`, usually once an epoch, after
the optimizer's steps. Each computes the next learning rate from the group's current
one, as torch's (its "chainable" form), so two schedulers of one optimizer compose.
`get_last_lr()` gives the rates the last step set; `state_dict()` and
`load_state_dict()` carry the schedule (all but the optimizer, and a LambdaLR's
functions, as in torch).

A compiled training step (`gc.compile_train_step`) of an optimizer with a scheduler
reads each group's learning rate when it runs, so the schedule takes effect there too
without compiling again. Make the scheduler before compiling the step: a step compiled
without one has the learning rates as constants, and refuses to run once they change.

>>> import graphc.eager as ge
>>> from graphc import optim
>>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=1.0)
>>> schedule = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> rates = []
>>> for epoch in range(5):
...     rates.append(schedule.get_last_lr()[0])
...     opt.step(); schedule.step()
>>> rates
[1.0, 1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import math
import types
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from graphc.ir.errors import GraphcError
from graphc.optim.optimizer import Optimizer

__all__ = [
    "CosineAnnealingLR",
    "ExponentialLR",
    "LambdaLR",
    "LRScheduler",
    "MultiStepLR",
    "StepLR",
]


class LRScheduler:
    """Base class: the epoch counter, `step`, `get_last_lr` and the state dict. A subclass
    gives `get_lr()`, the next learning rate of each group from its current one."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise GraphcError(
                f"{type(self).__name__}: expected a graphc.optim optimizer, got "
                f"{type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            missing = [i for i, g in enumerate(optimizer.param_groups) if "initial_lr" not in g]
            if missing:
                raise GraphcError(
                    f"{type(self).__name__}: last_epoch={last_epoch} resumes a schedule, but "
                    f"param group(s) {missing} have no 'initial_lr' (load the optimizer's "
                    "state_dict first, or start from last_epoch=-1)"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        optimizer.lr_schedulers.append(self)
        self.step()

    def get_lr(self) -> list[float]:
        """The learning rate of each group at `last_epoch`."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last `step()` (or making the scheduler) set."""
        return list(self._last_lr)

    def step(self) -> None:
        """Advance one epoch and set each param group's learning rate."""
        self._step_count += 1
        self.last_epoch += 1
        rates = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, rates):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _groups_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer, as torch's (a LambdaLR leaves out its functions)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take the schedule of `state_dict` (from `state_dict()`)."""
        self.__dict__.update(state_dict)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: epoch {self.last_epoch}, lr {self.get_last_lr()}>"


class StepLR(LRScheduler):
    """Multiply the learning rate by `gamma` every `step_size` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if not isinstance(step_size, int) or step_size < 1:
            raise GraphcError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by `gamma` at each epoch in `milestones` (an epoch
    listed twice multiplies twice)."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._groups_lr()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in self._groups_lr()]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]


class CosineAnnealingLR(LRScheduler):
    """Anneal from the initial learning rate to `eta_min` along half a cosine over
    `T_max` epochs (and back up over the next T_max, as torch's), by torch's recurrence:

        lr(t) = eta_min + (lr(t-1) - eta_min) (1 + cos(pi t / T_max)) / (1 + cos(pi (t-1) / T_max))
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_max: int,  # noqa: N803 - torch's name
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not T_max > 0:
            raise GraphcError(f"CosineAnnealingLR: T_max must be positive, got {T_max!r}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        epoch, period, low = self.last_epoch, self.T_max, self.eta_min
        current = self._groups_lr()
        if epoch == 0:
            return current
        if self._step_count == 1:  # resumed at a later epoch: the closed form
            return [
                low + (base - low) * (1 + math.cos(epoch * math.pi / period)) / 2
                for base in self.base_lrs
            ]
        if (epoch - 1 - period) % (2 * period) == 0:  # the bottom of the cosine: turn up
            return [
                lr + (base - low) * (1 - math.cos(math.pi / period)) / 2
                for lr, base in zip(current, self.base_lrs)
            ]
        ratio = (1 + math.cos(math.pi * epoch / period)) / (
            1 + math.cos(math.pi * (epoch - 1) / period)
        )
        return [ratio * (lr - low) + low for lr in current]


class LambdaLR(LRScheduler):
    """The initial learning rate times `lr_lambda(epoch)`; one function for every group
    or a list of one per group."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != groups:
                raise GraphcError(
                    f"LambdaLR: {len(lr_lambda)} lr_lambda functions for {groups} param groups"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * groups
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict[str, Any]:
        """As the base's, with each lambda a plain function saved as None (torch keeps only
        callable objects' __dict__; a function's code is not state)."""
        state = super().state_dict()
        state["lr_lambdas"] = [
            None if isinstance(f, types.FunctionType) else dict(vars(f)) for f in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for f, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                vars(f).update(attrs)
