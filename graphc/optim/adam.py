"""Adam and AdamW with torch.optim's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.ops import cast, maximum, sqrt
from graphc.optim.optimizer import Optimizer, ascent, check_adam_like, like


class Adam(Optimizer):
    """Adam (Kingma and Ba) with torch.optim.Adam's equations; eps is added after the sqrt.
    torch's `foreach`, `fused` and `capturable` choose its implementation, not the
    numbers: accepted, and the same equations run.

    With t the step count (from 1), m and v the moment estimates, g the gradient (-g
    with `maximize`)::

        g = g + weight_decay * p   (p = p * (1 - lr * weight_decay) if decoupled)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)   (amsgrad: v_max replaces v below)
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
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        hyper = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        hyper.update(amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable)
        hyper.update(differentiable=differentiable, fused=fused)
        hyper.update(decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_adam_like(type(self).__name__, group)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        names = ("step", "exp_avg", "exp_avg_sq")
        return names + ("max_exp_avg_sq",) if group["amsgrad"] else names

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        g = ascent(grad, hp)
        if hp["weight_decay"] and hp["decoupled_weight_decay"]:
            param = param * like(1 - hp["lr"] * hp["weight_decay"], param)
        elif hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        return adam_step(param, g, state, hp)


def adam_step(
    param: Any, g: Any, state: dict[str, Any], hp: Mapping[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """Adam's moments and step from the gradient `g` (any weight decay already applied);
    with amsgrad the step divides by the largest second moment so far, as torch's."""
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
    new_state = {"step": step, "exp_avg": m, "exp_avg_sq": v}
    if hp["amsgrad"]:
        v = new_state["max_exp_avg_sq"] = maximum(state["max_exp_avg_sq"], v)
    denom = sqrt(v) / correction + hp["eps"]
    new_param = param - step_size * (m / denom)
    return new_param, new_state


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), torch.optim.AdamW's
    equations (torch's Adam with decoupled_weight_decay=True): the parameter shrinks by
    lr * weight_decay of itself, then takes Adam's step from the gradient alone::

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
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
            capturable=capturable, differentiable=differentiable, fused=fused,
            decoupled_weight_decay=True,
        )  # fmt: skip
