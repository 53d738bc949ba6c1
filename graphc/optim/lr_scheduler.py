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

import bisect
import math
import types
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from graphc.ir.errors import GraphcError
from graphc.optim.optimizer import Optimizer

__all__ = [
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "ChainedScheduler",
    "CyclicLR",
    "ExponentialLR",
    "LambdaLR",
    "LinearLR",
    "LRScheduler",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
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
        # the step made here sets epoch last_epoch + 1; a schedule that changes the current
        # rate (exponential, cosine) leaves it as it is then, as torch's, so one resumed
        # from a checkpoint (last_epoch given) does not step once more than it ran
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rate of each group at `last_epoch`."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last `step()` (or making the scheduler) set."""
        return list(self._last_lr)

    def closed_form(self) -> list[float] | None:
        """The learning rate of each group at `last_epoch` from the initial ones (None: a
        schedule with no closed form, whose `get_lr` is used)."""
        return None

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch and set each param group's learning rate; or jump to `epoch`
        (torch's deprecated form, which SequentialLR uses to restart a schedule at 0)."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            rates = self.get_lr()
        else:
            self.last_epoch = epoch
            rates = self.closed_form() or self.get_lr()
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

    def closed_form(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


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

    def closed_form(self) -> list[float]:
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma**passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]

    def closed_form(self) -> list[float]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


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
        if self._is_initial:
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

    def closed_form(self) -> list[float]:
        low, turn = self.eta_min, math.cos(math.pi * self.last_epoch / self.T_max)
        return [low + (base - low) * (1 + turn) / 2 for base in self.base_lrs]


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


class LinearLR(LRScheduler):
    """Scale the initial learning rate by a factor going linearly from `start_factor` to
    `end_factor` over `total_iters` epochs (a warm-up), by torch's recurrence.

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=1.0)
    >>> warm = optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(warm.get_last_lr()[0], 4)); opt.step(); warm.step()
    >>> rates
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1:
            raise GraphcError(f"LinearLR: start_factor must be in (0, 1], got {start_factor!r}")
        if not 0 <= end_factor <= 1:
            raise GraphcError(f"LinearLR: end_factor must be in [0, 1], got {end_factor!r}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        current = self._groups_lr()
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in current]
        if self._is_initial or self.last_epoch > self.total_iters:
            return current
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [lr * ratio for lr in current]

    def closed_form(self) -> list[float]:
        span = (self.end_factor - self.start_factor) * min(self.total_iters, self.last_epoch)
        return [base * (self.start_factor + span / self.total_iters) for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith and Topin), stepped after every batch: the learning rate
    rises from max_lr / div_factor to `max_lr` over the first `pct_start` of
    `total_steps` (or epochs * steps_per_epoch), then falls to initial / final_div_factor,
    along a cosine or a line; with `cycle_momentum` the momentum (Adam's beta1) goes
    the opposite way between `max_momentum` and `base_momentum`. torch's numbers.

    A compiled training step reads the learning rate each step, but holds the momentum
    as a constant: with cycle_momentum=True it refuses to run once the momentum changed
    (StaleTrainStepError); compile it with cycle_momentum=False, or step eagerly.

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=0.1, momentum=0.9)
    >>> cycle = optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=4)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(cycle.get_last_lr()[0], 4)); opt.step(); cycle.step()
    >>> rates
    [0.04, 0.8117, 0.2831, 0.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise GraphcError(
                    f"OneCycleLR: total_steps must be a positive int, got {total_steps!r}"
                )
        elif epochs is None or steps_per_epoch is None:
            raise GraphcError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
        else:
            for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if not isinstance(value, int) or value <= 0:
                    raise GraphcError(f"OneCycleLR: {name} must be a positive int, got {value!r}")
            total_steps = epochs * steps_per_epoch
        if not 0 <= pct_start <= 1:
            raise GraphcError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise GraphcError(
                f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        # each phase: the step it ends at, and the group keys it goes from and to
        rise = float(pct_start * total_steps) - 1
        if three_phase:
            self.phases = [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * rise, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self.phases = [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        self.cycle_momentum = cycle_momentum
        self.use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
            raise GraphcError(
                f"OneCycleLR: cycle_momentum needs an optimizer with momentum or betas, "
                f"{type(optimizer).__name__} has neither (pass cycle_momentum=False)"
            )
        if last_epoch == -1:
            for group, top in zip(groups, _per_group("max_lr", max_lr, groups)):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
            if cycle_momentum:
                tops = _per_group("max_momentum", max_momentum, groups)
                bases = _per_group("base_momentum", base_momentum, groups)
                for group, top, base in zip(groups, tops, bases):
                    self._set_momentum(group, top)
                    group["max_momentum"], group["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, fraction: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * fraction) + 1)
        return (end - start) * fraction + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise GraphcError(
                f"OneCycleLR: stepped {step} times, past its total_steps ({self.total_steps})"
            )
        rates = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for index, (end, lr_from, lr_to, m_from, m_to) in enumerate(self.phases):
                if step <= end or index == len(self.phases) - 1:
                    fraction = (step - start) / (end - start)
                    rates.append(self._anneal(group[lr_from], group[lr_to], fraction))
                    if self.cycle_momentum:
                        momentum = self._anneal(group[m_from], group[m_to], fraction)
                        self._set_momentum(group, momentum)
                    break
                start = end
        return rates


def _per_group(name: str, value: Any, groups: list[dict[str, Any]]) -> list[Any]:
    """One value per param group: a list of one each, or one value for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise GraphcError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith), stepped after every batch: the rate
    goes from `base_lr` up to `max_lr` in `step_size_up` steps and back in
    `step_size_down` (the same by default), each cycle's height scaled by `mode`
    ("triangular": 1, "triangular2": halved each cycle, "exp_range": gamma**step) or
    `scale_fn` (of the cycle or of the step, by `scale_mode`); with `cycle_momentum` the
    momentum (Adam's beta1) goes the opposite way between `max_momentum` and
    `base_momentum`. torch's numbers, and its state_dict (a scale_fn that is a plain
    function is saved as None, as torch's).

    A compiled training step reads the learning rate each step but holds the momentum
    as a constant: with cycle_momentum=True it refuses to run once the momentum
    changed (StaleTrainStepError); compile it with cycle_momentum=False, or step eagerly.

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=0.1)
    >>> cyclic = optim.lr_scheduler.CyclicLR(opt, 0.1, 0.5, step_size_up=2, cycle_momentum=False)
    >>> rates = []
    >>> for _ in range(6):
    ...     rates.append(round(cyclic.get_last_lr()[0], 4)); opt.step(); cyclic.step()
    >>> rates
    [0.1, 0.3, 0.5, 0.3, 0.1, 0.3]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.8,
        max_momentum: float | list[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise GraphcError(
                f"CyclicLR: expected a graphc.optim optimizer, got {type(optimizer).__name__}"
            )
        groups = optimizer.param_groups
        base_lrs = _per_group("base_lr", base_lr, groups)
        if last_epoch == -1:
            for group, lr in zip(groups, base_lrs):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", max_lr, groups)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise GraphcError(
                f"CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' (or give "
                f"scale_fn), got {mode!r}"
            )
        self.mode, self.gamma, self.scale_fn_custom = mode, gamma, scale_fn
        # torch's modes fix their scale mode: the cycle's, or exp_range's by the step
        if scale_fn is None:
            scale_mode = "iterations" if mode == "exp_range" else "cycle"
        self.scale_mode = scale_mode
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise GraphcError(
                    f"CyclicLR: cycle_momentum needs an optimizer with momentum or betas, "
                    f"{type(optimizer).__name__} has neither (pass cycle_momentum=False)"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", base_momentum, groups)
            self.max_momentums = _per_group("max_momentum", max_momentum, groups)
            if last_epoch == -1:
                for group, top, base in zip(groups, self.max_momentums, self.base_momentums):
                    self._set_momentum(group, top)
                    group["max_momentum"], group["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def scale(self, x: float) -> float:
        """How much of the cycle's height is used at cycle or step `x`."""
        if self.scale_fn_custom is not None:
            return self.scale_fn_custom(x)
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        if self.mode == "exp_range":
            return self.gamma**x
        return 1.0

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            fraction = x / self.step_ratio
        else:
            fraction = (x - 1) / (self.step_ratio - 1)
        scale = self.scale(cycle if self.scale_mode == "cycle" else self.last_epoch)
        rates = [
            base + (top - base) * fraction * scale for base, top in zip(self.base_lrs, self.max_lrs)
        ]
        if self.cycle_momentum:
            momenta = zip(self.base_momentums, self.max_momentums)
            for group, (base, top) in zip(self.optimizer.param_groups, momenta):
                self._set_momentum(group, top - (top - base) * fraction * scale)
        return rates

    def state_dict(self) -> dict[str, Any]:
        """As the base's, with a scale_fn that is a plain function saved as None (torch
        keeps only a callable object's __dict__)."""
        state = super().state_dict()
        f = self.scale_fn_custom
        state["scale_fn_custom"] = (
            None if f is None or isinstance(f, types.FunctionType) else dict(vars(f))
        )
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("scale_fn_custom", None)
        super().load_state_dict(state)
        if saved is not None and self.scale_fn_custom is not None:
            vars(self.scale_fn_custom).update(saved)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by `factor` (not below `min_lr`) once a metric passed to
    `step(metric)` has not improved for `patience` epochs, then wait `cooldown` epochs;
    torch's rule ("better" is by more than `threshold`, relative or absolute).

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=1.0)
    >>> plateau = optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    >>> for loss in [3.0, 2.0, 2.0, 2.0, 2.0, 2.0]:
    ...     plateau.step(loss)
    >>> plateau.get_last_lr()
    [0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise GraphcError(
                f"ReduceLROnPlateau: expected a graphc.optim optimizer, got "
                f"{type(optimizer).__name__}"
            )
        if factor >= 1.0:
            raise GraphcError(f"ReduceLROnPlateau: factor must be < 1, got {factor!r}")
        if mode != "min" and mode != "max":  # (spelled out: no table of op-like names)
            raise GraphcError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise GraphcError(
                f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}"
            )
        self.optimizer = optimizer
        self.min_lrs = _per_group("min_lr", min_lr, optimizer.param_groups)
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.last_epoch = 0
        self._step_count = 0
        self._is_initial = False
        self._last_lr = self._groups_lr()
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        optimizer.lr_schedulers.append(self)

    def _is_better(self, value: float) -> bool:
        sign = 1.0 if self.mode == "min" else -1.0
        if self.threshold_mode == "rel":
            return sign * value < sign * self.best * (1.0 - sign * self.threshold)
        return sign * value < sign * self.best - self.threshold

    def step(self, metrics: Any = None) -> None:  # type: ignore[override]
        """One epoch's `metrics` (a number, or a 0-d array or tensor)."""
        if metrics is None:
            raise GraphcError("ReduceLROnPlateau.step needs the metric: step(validation_loss)")
        value = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self._step_count += 1
        self.last_epoch += 1
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:  # a change smaller than eps is not made
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._groups_lr()


class ConstantLR(LRScheduler):
    """The initial learning rate times `factor` for the first `total_iters` epochs, then
    the initial rate again.

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=1.0)
    >>> low = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(low.get_last_lr()[0]); opt.step(); low.step()
    >>> rates
    [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 <= factor <= 1:
            raise GraphcError(f"ConstantLR: factor must be in [0, 1], got {factor!r}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        current = self._groups_lr()
        if self.last_epoch == 0:
            return [lr * self.factor for lr in current]
        if self.last_epoch != self.total_iters:
            return current
        return [lr * (1.0 / self.factor) for lr in current]

    def closed_form(self) -> list[float]:
        factor = 1.0 if self.last_epoch >= self.total_iters else self.factor
        return [base * factor for base in self.base_lrs]


class MultiplicativeLR(LambdaLR):
    """Multiply the current learning rate by `lr_lambda(epoch)` every epoch (one function
    for every group, or one per group)."""

    def get_lr(self) -> list[float]:
        current = self._groups_lr()
        if self._is_initial:
            return current
        return [lr * f(self.last_epoch) for lr, f in zip(current, self.lr_lambdas)]


class PolynomialLR(LRScheduler):
    """Decay the initial learning rate to 0 over `total_iters` epochs as
    (1 - epoch / total_iters) ** power, by torch's recurrence."""

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        current = self._groups_lr()
        if self._is_initial or self.last_epoch > self.total_iters:
            return current
        epoch, total = self.last_epoch, self.total_iters
        factor = ((1.0 - epoch / total) / (1.0 - (epoch - 1) / total)) ** self.power
        return [lr * factor for lr in current]

    def closed_form(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * left**self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial rate to `eta_min` over T_0 epochs, then again
    from the top, each period `T_mult` times the one before (SGDR, Loshchilov and
    Hutter). `step(epoch)` may be given a fractional epoch, as torch's.

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=1.0)
    >>> sgdr = optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(sgdr.get_last_lr()[0], 3)); opt.step(); sgdr.step()
    >>> rates
    [1.0, 0.5, 1.0, 0.5, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,  # noqa: N803 - torch's names
        T_mult: int = 1,  # noqa: N803
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise GraphcError(
                f"CosineAnnealingWarmRestarts: T_0 must be a positive int, got {T_0!r}"
            )
        if not isinstance(T_mult, int) or T_mult < 1:
            raise GraphcError(
                f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got {T_mult!r}"
            )
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        low, fraction = self.eta_min, self.T_cur / self.T_i
        return [
            low + (base - low) * (1 + math.cos(math.pi * fraction)) / 2 for base in self.base_lrs
        ]

    def step(self, epoch: float | None = None) -> None:
        """The next epoch, or `epoch` (which may be fractional: a step within an epoch)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i *= self.T_mult
        elif epoch < 0:
            raise GraphcError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch!r}")
        elif epoch >= self.T_0 and self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        elif epoch >= self.T_0:  # which period holds `epoch`: periods grow geometrically
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self._step_count += 1
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = self._groups_lr()


def _same_optimizer(kind: str, schedulers: list[Any], optimizer: Optimizer) -> None:
    if not schedulers:
        raise GraphcError(f"{kind}: expected at least one scheduler, got none")
    for index, scheduler in enumerate(schedulers):
        if isinstance(scheduler, ReduceLROnPlateau):
            raise GraphcError(
                f"{kind}: scheduler {index} is a ReduceLROnPlateau, whose step needs a metric"
            )
        if getattr(scheduler, "optimizer", None) is not optimizer:
            raise GraphcError(
                f"{kind}: scheduler {index} ({type(scheduler).__name__}) steps another optimizer"
            )


class SequentialLR(LRScheduler):
    """Run `schedulers` one after another: the k-th from epoch milestones[k - 1] on
    (restarted at its epoch 0), as torch's.

    >>> import graphc.eager as ge
    >>> from graphc import optim
    >>> from graphc.optim import lr_scheduler as S
    >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=1.0)
    >>> warm = S.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> decay = S.ExponentialLR(opt, gamma=0.5)
    >>> both = S.SequentialLR(opt, [warm, decay], milestones=[2])
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(both.get_last_lr()[0]); opt.step(); both.step()
    >>> rates
    [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: list[LRScheduler],
        milestones: list[int],
        last_epoch: int = -1,
    ) -> None:
        _same_optimizer("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise GraphcError(
                f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} "
                f"milestones, got {len(milestones)}"
            )
        self.optimizer, self._schedulers = optimizer, list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self._step_count, self._is_initial = 0, False
        for group in optimizer.param_groups:  # back to the start, before any scheduler's step
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:
            scheduler.last_epoch -= 1
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._is_initial = True
        first._step_count = 0
        try:
            first.step()
        finally:
            first._is_initial = False
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.step(0)  # this schedule starts now, at its epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        state = dict(state_dict)
        for scheduler, saved in zip(self._schedulers, state.pop("_schedulers", [])):
            scheduler.load_state_dict(saved)
        self.__dict__.update(state)


class ChainedScheduler(SequentialLR):
    """Step every one of `schedulers` at each step, in order (their factors compose)."""

    def __init__(self, schedulers: list[LRScheduler], optimizer: Optimizer | None = None) -> None:
        optimizer = optimizer or (schedulers[0].optimizer if schedulers else None)
        _same_optimizer("ChainedScheduler", schedulers, optimizer)
        self.optimizer, self._schedulers = optimizer, list(schedulers)
        self._last_lr = self._groups_lr()

    def step(self) -> None:  # type: ignore[override]
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = self._groups_lr()
