"""NAdam with torch.optim.NAdam's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ops import cast, sqrt
from graphc.optim.optimizer import Optimizer, ascent, check_adam_like, check_range, like


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), torch.optim.NAdam's equations. With t the
    step count (from 1), m and v the moments, g the gradient (-g with `maximize`) and
    psi = momentum_decay::

        g = g + weight_decay * p   (p = p * (1 - lr * weight_decay) if decoupled)
        mu_t = beta1 * (1 - 0.96 ** (t * psi) / 2);  prod_t = mu_1 * ... * mu_t
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - prod_t) * g / d
              - lr * mu_{t+1} / (1 - prod_t * mu_{t+1}) * m / d

    The product of the mu (`mu_product`, a state) is a float32 scalar, as torch keeps it;
    the other factors of t are computed in float64, as torch's from Python floats.

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 3) for v in w.tolist()]   # about lr a step, as Adam's
    [0.894, -1.894]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        hyper = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        hyper.update(momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay)
        hyper.update(maximize=maximize, foreach=foreach, capturable=capturable)
        hyper.update(differentiable=differentiable)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_adam_like("NAdam", group)
        check_range("momentum_decay", group["momentum_decay"], 0.0)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "mu_product", "exp_avg", "exp_avg_sq")

    def state_shape(self, name: str, param: Tensor) -> tuple[int, ...]:
        return () if name == "mu_product" else super().state_shape(name, param)

    def state_dtype(self, name: str, param: Tensor) -> np.dtype:
        return np.dtype(np.float32) if name == "mu_product" else super().state_dtype(name, param)

    def init_state(self, param: Tensor, group: Mapping[str, Any] | None = None) -> dict:
        state = super().init_state(param, group)
        state["mu_product"] = np.ones((), np.float32)
        return state

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        beta1, beta2 = hp["betas"]
        lr, decay = hp["lr"], hp["momentum_decay"]
        g = ascent(grad, hp)
        if hp["weight_decay"] and hp["decoupled_weight_decay"]:
            param = param * like(1 - lr * hp["weight_decay"], param)
        elif hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        step = state["step"] + 1
        t = cast(step, np.float64)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * decay))
        mu_product = state["mu_product"] * cast(mu, np.float32)
        product = cast(mu_product, np.float64)
        m = beta1 * state["exp_avg"] + (1 - beta1) * g
        v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
        denom = sqrt(v / cast(1 - beta2**t, param.dtype)) + hp["eps"]
        grad_scale = cast(-lr * (1.0 - mu) / (1.0 - product), param.dtype)
        momentum_scale = cast(-lr * mu_next / (1.0 - product * mu_next), param.dtype)
        new_param = param + grad_scale * (g / denom) + momentum_scale * (m / denom)
        new_state = {"step": step, "mu_product": mu_product, "exp_avg": m, "exp_avg_sq": v}
        return new_param, new_state
