"""Adadelta with torch.optim.Adadelta's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphc.ir.errors import GraphcError
from graphc.ops import sqrt
from graphc.optim.optimizer import Optimizer, ascent, check_range, check_switches, like


class Adadelta(Optimizer):
    """Adadelta (Zeiler), torch.optim.Adadelta's equations. With s the running mean of
    squared gradients, a that of squared updates and g the gradient (-g with
    `maximize`)::

        g = g + weight_decay * p
        s = rho * s + (1 - rho) * g * g
        d = sqrt(a + eps) / sqrt(s + eps) * g
        a = rho * a + (1 - rho) * d * d
        p = p - lr * d

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adadelta([w])
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]   # a first step of about sqrt(eps / (1 - rho))
    [0.9968, -1.9968]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        hyper = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        hyper.update(capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_switches("Adadelta", group)
        check_range("lr", group["lr"], 0.0)
        if not 0.0 <= group["rho"] <= 1.0:
            raise GraphcError(f"invalid rho: {group['rho']} (expected [0.0, 1.0])")
        check_range("eps", group["eps"], 0.0)
        check_range("weight_decay", group["weight_decay"], 0.0)

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "square_avg", "acc_delta")

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        rho, eps = hp["rho"], hp["eps"]
        g = ascent(grad, hp)
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        square_avg = rho * state["square_avg"] + (1 - rho) * (g * g)
        delta = sqrt(state["acc_delta"] + eps) / sqrt(square_avg + eps) * g
        acc_delta = rho * state["acc_delta"] + (1 - rho) * (delta * delta)
        new_state = {"step": state["step"] + 1, "square_avg": square_avg, "acc_delta": acc_delta}
        return param - like(hp["lr"], param) * delta, new_state
