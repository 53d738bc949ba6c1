"""RAdam with torch.optim.RAdam's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.ops import cast, maximum, sqrt, where
from graphc.optim.optimizer import Optimizer, ascent, check_adam_like, like


class RAdam(Optimizer):
    """Rectified Adam (Liu et al.), torch.optim.RAdam's equations. With t the step count
    (from 1), m and v the moments and g the gradient (-g with `maximize`)::

        g = g + weight_decay * p   (p = p * (1 - lr * weight_decay) if decoupled)
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
        p = p - lr * m / (1 - beta1**t) * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r
                                                    (rho_t > 5: the variance is tractable)
        p = p - lr * m / (1 - beta1**t)             (otherwise: momentum alone)

    torch branches on the step in Python; here both sides are computed and `where`
    picks one, so a compiled step needs no recompiling when the branch changes.

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # the first steps are SGD with momentum: lr times the gradient
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        hyper = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        hyper.update(maximize=maximize, foreach=foreach, capturable=capturable)
        hyper.update(decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_adam_like("RAdam", group)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "exp_avg", "exp_avg_sq")

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        beta1, beta2 = hp["betas"]
        lr = hp["lr"]
        g = ascent(grad, hp)
        if hp["weight_decay"] and hp["decoupled_weight_decay"]:
            param = param * like(1 - lr * hp["weight_decay"], param)
        elif hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        step = state["step"] + 1
        m = beta1 * state["exp_avg"] + (1 - beta1) * g
        v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
        # the factors of t in float64, as torch computes them from the step as a float
        t = cast(step, np.float64)
        correction2 = 1 - beta2**t
        momentum = m / cast(1 - beta1**t, param.dtype) * like(lr, param)
        rho_inf = 2 / (1 - beta2) - 1
        if rho_inf <= 5.0:  # rho_t grows from 1 towards rho_inf: never rectified
            return param - momentum, {"step": step, "exp_avg": m, "exp_avg_sq": v}
        rho = rho_inf - 2 * t * beta2**t / correction2
        # the rectification, 0 where it is not used (its square root may be negative there)
        ratio = (rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)
        rectified = sqrt(maximum(where(rho > 5.0, ratio, 0.0), 0.0))
        adaptive = cast(sqrt(correction2), param.dtype) / (sqrt(v) + hp["eps"])
        rectified_step = momentum * adaptive * cast(rectified, param.dtype)
        new_param = param - where(rho > 5.0, rectified_step, momentum)
        return new_param, {"step": step, "exp_avg": m, "exp_avg_sq": v}
