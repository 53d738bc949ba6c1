"""Rprop with torch.optim.Rprop's update equations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ir.errors import GraphcError
from graphc.ops import cast, clip, sign, where
from graphc.optim.optimizer import Optimizer, ascent, check_range, check_switches


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller and Braun), torch.optim.Rprop's equations:
    each weight has its own step size s (starting at lr), grown by etaplus while its
    gradient keeps its sign and shrunk by etaminus when the sign flips, within
    step_sizes; g is the gradient (-g with `maximize`) and g_prev the last one kept::

        f = etaplus if g * g_prev > 0, etaminus if < 0, else 1
        s = clip(s * f, *step_sizes)
        g = 0 where f == etaminus   (a flipped sign: no step, and no memory of it)
        p = p - sign(g) * s;  g_prev = g

    >>> import graphc.eager as ge
    >>> w = ge.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Rprop([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w   # the first step is lr against the gradient's sign, whatever its size
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        hyper = dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach)
        hyper.update(maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, hyper)

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_switches("Rprop", group)
        check_range("lr", group["lr"], 0.0)
        for name in ("etas", "step_sizes"):
            if len(group[name]) != 2:
                raise GraphcError(f"Rprop: {name} must be a pair, got {group[name]!r}")
        etaminus, etaplus = group["etas"]
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise GraphcError(
                f"Rprop: etas must be (etaminus, etaplus) with 0 < etaminus < 1 < etaplus, got "
                f"{group['etas']!r}"
            )

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("step", "prev", "step_size")

    def init_state(self, param: Tensor, group: Mapping[str, Any] | None = None) -> dict:
        state = super().init_state(param, group)
        lr = (self.defaults if group is None else group)["lr"]
        state["step_size"] = np.full(tuple(param.shape), lr, param.dtype)
        return state

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        hp = self.defaults if group is None else group
        etaminus, etaplus = hp["etas"]
        smallest, largest = hp["step_sizes"]
        g = ascent(grad, hp)
        agreement = g * state["prev"]
        factor = where(agreement > 0, etaplus, where(agreement < 0, etaminus, 1.0))
        factor = cast(factor, param.dtype)  # where of two Python numbers gives float64
        step_size = clip(state["step_size"] * factor, smallest, largest)
        g = where(factor == etaminus, 0.0, g)
        new_state = {"step": state["step"] + 1, "prev": g, "step_size": step_size}
        return param - sign(g) * step_size, new_state
