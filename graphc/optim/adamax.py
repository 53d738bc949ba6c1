"""Adamax with torch.optim.Adamax's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.ops import abs as absolute
from graphc.ops import cast, maximum
from graphc.optim.optimizer import Optimizer, ascent, check_adam_like


class Adamax(Optimizer):
    """Adam with the infinity norm (Kingma and Ba), torch.optim.Adamax's equations. With t
    the step count (from 1), m the first moment, u the weighted infinity norm and g the
    gradient (-g with `maximize`)::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # the first step moves each weight by about lr
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        hyper = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        hyper.update(foreach=foreach, maximize=maximize, differentiable=differentiable)
        hyper.update(capturable=capturable)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_adam_like("Adamax", group)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "exp_avg", "exp_inf")

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        beta1, beta2 = hp["betas"]
        g = ascent(grad, hp)
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        step = state["step"] + 1
        m = beta1 * state["exp_avg"] + (1 - beta1) * g
        u = maximum(state["exp_inf"] * beta2, absolute(g) + hp["eps"])
        # lr / (1 - beta1**t) in float64, as torch's from the step as a Python float
        scale = cast(-hp["lr"] / (1 - beta1 ** cast(step, np.float64)), param.dtype)
        return param + scale * (m / u), {"step": step, "exp_avg": m, "exp_inf": u}
