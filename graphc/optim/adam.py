"""Adam and AdamW with torch.optim's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.ops import cast, sqrt
from graphc.optim.optimizer import Optimizer, check_range, like


class Adam(Optimizer):
    """Adam (Kingma and Ba) with torch.optim.Adam's equations; eps is added after the sqrt.

    With t the step count (from 1), m and v the moment estimates::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    The bias corrections (the terms with t) are computed in float64 whatever the
    parameter's dtype, as torch computes them from the step as a Python float.

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # the first Adam step moves each weight by about lr
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        hyper = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_range("lr", group["lr"], 0.0)
        check_range("eps", group["eps"], 0.0)
        check_range("beta1", group["betas"][0], 0.0, 1.0)
        check_range("beta2", group["betas"][1], 0.0, 1.0)
        check_range("weight_decay", group["weight_decay"], 0.0)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "exp_avg", "exp_avg_sq")

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        g = grad
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        return adam_step(param, g, state, hp)


def adam_step(
    param: Any, g: Any, state: dict[str, Any], hp: Mapping[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """Adam's moments and step from the gradient `g` (any weight decay already applied)."""
    beta1, beta2 = hp["betas"]
    step = state["step"] + 1
    m = beta1 * state["exp_avg"] + (1 - beta1) * g
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
    # torch takes the step as a Python float: the bias corrections are doubles, rounded
    # to the parameter's dtype only where they scale it (in float32, beta2**t computed
    # in float32 drifts from torch by ~1e-6 within a hundred steps)
    t = cast(step, np.float64)
    step_size = cast(hp["lr"] / (1 - beta1**t), param.dtype)
    correction = cast(sqrt(1 - beta2**t), param.dtype)
    denom = sqrt(v) / correction + hp["eps"]
    new_param = param - step_size * (m / denom)
    return new_param, {"step": step, "exp_avg": m, "exp_avg_sq": v}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), torch.optim.AdamW's
    equations: the parameter shrinks by lr * weight_decay of itself, then takes Adam's
    step from the gradient alone::

        p = p * (1 - lr * weight_decay)
        (m, v and the step as Adam's, with g the gradient)

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # shrunk by 5%, then Adam's first step of about lr
    tensor([ 0.8500, -1.8000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        if hp["weight_decay"]:
            param = param * like(1 - hp["lr"] * hp["weight_decay"], param)
        return adam_step(param, grad, state, hp)
