"""Adagrad with torch.optim.Adagrad's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ops import cast, sqrt
from graphc.optim.optimizer import Optimizer, ascent, check_range, check_switches, like


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.) with torch.optim.Adagrad's equations; eps is added after
    the sqrt. With t the step count (from 1) and s the sum of squared gradients (starting
    at the constructor's `initial_accumulator_value`, as in torch, which reads no group's
    own); g is the gradient, -g with `maximize`::

        g = g + weight_decay * p
        s = s + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # the first step moves each weight by lr
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        hyper = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay)
        hyper.update(initial_accumulator_value=initial_accumulator_value, eps=eps)
        hyper.update(foreach=foreach, maximize=maximize, differentiable=differentiable)
        hyper.update(fused=fused)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_switches("Adagrad", group)
        check_range("lr", group["lr"], 0.0)
        check_range("lr_decay", group["lr_decay"], 0.0)
        check_range("weight_decay", group["weight_decay"], 0.0)
        check_range("initial_accumulator_value", group["initial_accumulator_value"], 0.0)
        check_range("eps", group["eps"], 0.0)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "sum")

    def init_state(self, param: Tensor, group: Mapping[str, Any] | None = None) -> dict:
        # torch fills every sum with the constructor's value, a group's own one unused
        state = super().init_state(param, group)
        start = self.defaults["initial_accumulator_value"]
        state["sum"] = np.full(tuple(param.shape), start, param.dtype)
        return state

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        step = state["step"] + 1
        g = ascent(grad, hp)
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        lr = like(hp["lr"], param)
        if hp["lr_decay"]:  # torch computes it from the step as a Python float: in float64
            t = cast(step, np.float64)
            lr = cast(hp["lr"] / (1 + (t - 1) * hp["lr_decay"]), param.dtype)
        total = state["sum"] + g * g
        return param - lr * (g / (sqrt(total) + hp["eps"])), {"step": step, "sum": total}
