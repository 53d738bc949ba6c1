"""SGD with torch.optim.SGD's update equations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graphc.eager import Tensor
from graphc.ir.errors import GraphcError
from graphc.ops import where
from graphc.optim.optimizer import Optimizer, check_range


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, weight decay and Nesterov.

    torch.optim.SGD's equations, with g the gradient and b the momentum buffer::

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

    lr: float
    momentum: float
    dampening: float
    weight_decay: float
    nesterov: bool

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        check_range("lr", lr, 0.0)
        check_range("momentum", momentum, 0.0)
        check_range("weight_decay", weight_decay, 0.0)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise GraphcError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")
        if momentum:
            # with dampening the first step differs from the rest, so it needs a counter
            self.state_names = ("momentum_buffer", "step") if dampening else ("momentum_buffer",)
        hyper = dict(lr=lr, momentum=momentum, dampening=dampening)
        hyper.update(weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, hyper)

    def update(self, param: Any, grad: Any, state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        g = grad
        if self.weight_decay:
            g = g + self.weight_decay * param
        new_state: dict[str, Any] = {}
        if self.momentum:
            buf = state["momentum_buffer"]
            if self.dampening:
                later = self.momentum * buf + (1 - self.dampening) * g
                buf = where(state["step"] > 0, later, g)
                new_state["step"] = state["step"] + 1
            else:
                buf = self.momentum * buf + g  # the first step's buffer is zeros: b = g
            new_state["momentum_buffer"] = buf
            g = g + self.momentum * buf if self.nesterov else buf
        return param - self.lr * g, new_state
