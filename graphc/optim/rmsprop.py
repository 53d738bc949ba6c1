"""RMSprop with torch.optim.RMSprop's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphc.ops import sqrt
from graphc.optim.optimizer import Optimizer, ascent, check_range, check_switches, like


class RMSprop(Optimizer):
    """RMSprop (Hinton) with torch.optim.RMSprop's equations; eps is added after the sqrt.

    With s the running mean of squared gradients, a the running mean of gradients
    (`centered` only) and b the momentum buffer (`momentum` > 0 only); g is the gradient,
    -g with `maximize`::

        g = g + weight_decay * p
        s = alpha * s + (1 - alpha) * g * g
        a = alpha * a + (1 - alpha) * g                  (centered)
        d = sqrt(s - a * a) + eps   if centered else   sqrt(s) + eps
        b = momentum * b + g / d;  p = p - lr * b        (momentum > 0)
        p = p - lr * g / d                               (otherwise)

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # the first step is lr / sqrt(1 - alpha) = 10 lr, whatever the gradient's size
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        hyper = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay)
        hyper.update(momentum=momentum, centered=centered, capturable=capturable)
        hyper.update(foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_switches("RMSprop", group)
        check_range("lr", group["lr"], 0.0)
        check_range("eps", group["eps"], 0.0)
        check_range("momentum", group["momentum"], 0.0)
        check_range("weight_decay", group["weight_decay"], 0.0)
        check_range("alpha", group["alpha"], 0.0)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        names = ("step", "square_avg")
        if group["momentum"] > 0:
            names += ("momentum_buffer",)
        if group["centered"]:
            names += ("grad_avg",)
        return names

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        alpha, lr = hp["alpha"], like(hp["lr"], param)
        g = ascent(grad, hp)
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        square_avg = alpha * state["square_avg"] + (1 - alpha) * (g * g)
        new_state = {"step": state["step"] + 1, "square_avg": square_avg}
        if hp["centered"]:
            grad_avg = alpha * state["grad_avg"] + (1 - alpha) * g
            new_state["grad_avg"] = grad_avg
            denom = sqrt(square_avg - grad_avg * grad_avg) + hp["eps"]
        else:
            denom = sqrt(square_avg) + hp["eps"]
        if hp["momentum"] > 0:
            buf = hp["momentum"] * state["momentum_buffer"] + g / denom
            new_state["momentum_buffer"] = buf
            return param - lr * buf, new_state
        return param - lr * (g / denom), new_state
