"""SGD with torch.optim.SGD's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ops import where
from graphc.optim.optimizer import Optimizer, ascent, check_range, check_switches, like


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, weight decay and Nesterov.

    torch.optim.SGD's equations (whatever torch's `foreach` and `fused` choose), with g the gradient (-g with `maximize`) and b the
    momentum buffer::

        g = g + weight_decay * p
        b = g                                   (first step)
        b = momentum * b + (1 - dampening) * g  (later steps)
        g = g + momentum * b   if nesterov else   g = b
        p = p - lr * g

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = SGD([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w
    tensor([0.8000, 1.6000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        hyper = dict(lr=lr, momentum=momentum, dampening=dampening)
        hyper.update(weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        hyper.update(foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_switches("SGD", group)
        check_range("lr", group["lr"], 0.0)
        check_range("momentum", group["momentum"], 0.0)
        check_range("weight_decay", group["weight_decay"], 0.0)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise GraphcError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        if not group["momentum"]:
            return ()
        # with dampening the first step differs from the rest, so it needs a counter
        return ("momentum_buffer", "step") if group["dampening"] else ("momentum_buffer",)

    def completed_state(self, entry: Mapping[str, Any], group: Mapping[str, Any]) -> Mapping:
        # torch's SGD keeps no step count: a momentum buffer means the first step is done
        if "momentum_buffer" in entry and "step" not in entry:
            return {**entry, "step": np.array(1.0)}
        return entry

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        momentum, dampening = hp["momentum"], hp["dampening"]
        g = ascent(grad, hp)
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * param
        new_state: dict[str, Any] = {}
        if momentum:
            buf = state["momentum_buffer"]
            if dampening:
                later = momentum * buf + (1 - dampening) * g
                buf = where(state["step"] > 0, later, g)
                new_state["step"] = state["step"] + 1
            else:
                buf = momentum * buf + g  # the first step's buffer is zeros: b = g
            new_state["momentum_buffer"] = buf
            g = g + momentum * buf if hp["nesterov"] else buf
        return param - like(hp["lr"], param) * g, new_state
