"""`Optimizer`: one update rule that serves eager steps and compiled training steps.

A subclass states its update once, in `update(param, grad, state)`, written with
graphc ops and operators on whatever kind of value it is given: eager tensors
(`step()` runs it under `no_grad` and writes the results back in place) or graph
values (`gc.compile_train_step` records it into the training graph, where the
runtime writes the results into the parameters' own buffers). So the eager and
the static step compute the same numbers by construction.

State is per parameter, as in torch: a dict of arrays named by `state_names`, made
lazily by `init_state` (zeros) on a parameter's first step. Hyperparameters are
Python floats, weak-typed like numpy scalars, so they keep each parameter's dtype.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from graphc.eager import Tensor, from_numpy, no_grad
from graphc.eager.autograd import zero_grads
from graphc.ir.errors import GraphcError


def check_range(name: str, value: float, low: float, high: float | None = None) -> None:
    if not (low <= value and (high is None or value < high)):
        span = f"[{low}, {high})" if high is not None else f">= {low}"
        raise GraphcError(f"invalid {name}: {value} (expected {span})")


class Optimizer:
    """Base class: holds the parameters, their state, `zero_grad` and eager `step`."""

    state_names: tuple[str, ...] = ()

    def __init__(self, params: Iterable[Tensor], hyperparameters: dict[str, Any]) -> None:
        self.params = list(params)
        if not self.params:
            raise GraphcError(f"{type(self).__name__} got an empty parameter list")
        for index, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise GraphcError(
                    f"{type(self).__name__}: parameter {index} is a {type(p).__name__}, "
                    "not an eager tensor (pass model.parameters())"
                )
            if not p.requires_grad or not p.is_leaf:
                raise GraphcError(
                    f"{type(self).__name__}: parameter {index} (shape {tuple(p.shape)}) must "
                    "be a leaf tensor that requires grad"
                )
        # attributes `update` reads (opt.lr = ... takes effect at the next step)
        self._hyperparameters = tuple(hyperparameters)
        for name, value in hyperparameters.items():
            setattr(self, name, value)
        # state per parameter index: name -> tensor; filled on each parameter's first step
        self.state: list[dict[str, Tensor]] = [{} for _ in self.params]

    def init_state(self, param: Tensor) -> dict[str, np.ndarray]:
        """A parameter's state before its first step: zeros of its shape, or scalar counters."""
        return {
            name: np.zeros(self.state_shape(name, param), param.dtype) for name in self.state_names
        }

    def state_shape(self, name: str, param: Tensor) -> tuple[int, ...]:
        """A state named "step" is a scalar counter; any other has the parameter's shape."""
        return () if name == "step" else tuple(param.shape)

    def update(self, param: Any, grad: Any, state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The new parameter and new state, from values of any kind (tensors or graph values)."""
        raise NotImplementedError

    def state_arrays(self, index: int) -> dict[str, np.ndarray]:
        """Parameter `index`'s current state as arrays (initial values before its first step)."""
        if not self.state[index]:
            return self.init_state(self.params[index])
        return {name: t.numpy() for name, t in self.state[index].items()}

    def load_state_arrays(self, index: int, arrays: dict[str, np.ndarray]) -> None:
        self.state[index] = {name: from_numpy(np.array(a)) for name, a in arrays.items()}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the accumulated gradients (set them to None, or to zeros in place)."""
        zero_grads(self.params, set_to_none)

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient, in place."""
        with no_grad():
            for index, p in enumerate(self.params):
                if p.grad is None:
                    continue
                if not self.state[index]:
                    self.load_state_arrays(index, self.init_state(p))
                new_param, new_state = self.update(p, p.grad, self.state[index])
                p.copy_(new_param)
                self.state[index] = new_state

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={getattr(self, k)}" for k in self._hyperparameters)
        return f"{type(self).__name__}({settings})"
