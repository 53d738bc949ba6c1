"""torch.nn.utils' weight_norm and spectral_norm (the forward-pre-hook forms, and their
remove_* inverses): a layer's weight recomputed before every forward from parameters
registered in its place, so eager steps, traces and compiled training steps all see it.

weight_norm: weight = g * v / |v|, the norm over every dim but `dim` (parameters
`weight_g`, `weight_v`). spectral_norm: weight = weight_orig / sigma, sigma the largest
singular value of weight_orig as a matrix (dim `dim` first), estimated by power iteration
on the buffers `weight_u` and `weight_v`, which training-mode forwards advance (through
`update_buffer`, so a compiled training step keeps them as state).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager import Tensor, no_grad, tensor
from graphc.ir.errors import GraphcError
from graphc.nn.functional.distance import normalize
from graphc.nn.module import Module, buffer_value, keeps_updates, update_buffer
from graphc.nn.parameter import Parameter
from graphc.ops import matmul, moveaxis, reshape, sqrt
from graphc.ops import sum as total
from graphc.ops.custom import stopped

__all__ = ["remove_spectral_norm", "remove_weight_norm", "spectral_norm", "weight_norm"]


def _norm_except(v: Any, dim: int | None) -> Any:
    """The 2-norm of v over every dim but `dim` (all of them for None), kept as size-1
    dims so that it broadcasts against v."""
    if dim is None:
        return sqrt(total(v * v))
    axes = tuple(a for a in range(len(v.shape)) if a != dim % len(v.shape))
    return sqrt(total(v * v, axis=axes, keepdims=True))


class _WeightNorm:
    def __init__(self, name: str, dim: int | None) -> None:
        self.name, self.dim = name, dim

    def compute(self, module: Module) -> Any:
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except(v, self.dim))

    def __call__(self, module: Module, args: tuple) -> None:
        object.__setattr__(module, self.name, self.compute(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize `module.<name>` as g * v / |v| (torch.nn.utils.weight_norm): the
    parameter is replaced by `<name>_g` (its norms) and `<name>_v` (its direction).

    >>> from graphc import nn
    >>> layer = nn.utils.weight_norm(nn.Linear(3, 2, generator=0))
    >>> [name for name, _ in layer.named_parameters()]
    ['bias', 'weight_g', 'weight_v']
    """
    weight = _parameter(module, name, "weight_norm")
    hook = _WeightNorm(name, dim)
    with no_grad():
        g = _norm_except(weight.detach(), dim)
    module._unregister(name)
    module.register_parameter(name + "_g", Parameter(g))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    object.__setattr__(module, name, hook.compute(module))
    _hooks(module)[name] = ("weight_norm", module.register_forward_pre_hook(hook), hook)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo weight_norm: `<name>` a parameter again, holding g * v / |v|."""
    hook = _take_hook(module, name, "weight_norm")
    with no_grad():
        weight = hook.compute(module).detach()
    for suffix in ("_g", "_v"):
        delattr(module, name + suffix)
    module.register_parameter(name, Parameter(weight))
    return module


class _SpectralNorm:
    def __init__(self, name: str, iterations: int, eps: float, dim: int) -> None:
        self.name, self.iterations, self.eps, self.dim = name, iterations, eps, dim

    def matrix(self, weight: Any) -> Any:
        w = moveaxis(weight, self.dim, 0) if self.dim != 0 else weight
        return reshape(w, (w.shape[0], -1))

    def compute(self, module: Module, power_iteration: bool) -> Any:
        weight = getattr(module, self.name + "_orig")
        u_buffer, v_buffer = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        u, v = buffer_value(u_buffer), buffer_value(v_buffer)
        matrix = self.matrix(weight)
        if power_iteration and self.iterations > 0:
            fixed = matrix.detach() if isinstance(matrix, Tensor) else stopped(matrix)
            for _ in range(self.iterations):
                v = normalize(matmul(u, fixed), dim=0, eps=self.eps)
                u = normalize(matmul(fixed, v), dim=0, eps=self.eps)
            if keeps_updates(u):
                update_buffer(u_buffer, u)
                update_buffer(v_buffer, v)
        sigma = total(u * matmul(matrix, v))
        return weight / sigma

    def __call__(self, module: Module, args: tuple) -> None:
        object.__setattr__(module, self.name, self.compute(module, module.training))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:  # fmt: skip
    """Divide `module.<name>` by its spectral norm before every forward
    (torch.nn.utils.spectral_norm): parameter `<name>_orig`, power-iteration buffers
    `<name>_u` and `<name>_v` (random unit vectors to start; load torch's state_dict for
    its). `dim` defaults to 0, or 1 for transposed convolutions, as torch's.

    >>> from graphc import nn
    >>> layer = nn.utils.spectral_norm(nn.Linear(3, 2, generator=0))
    >>> list(layer.state_dict())
    ['bias', 'weight_orig', 'weight_u', 'weight_v']
    """
    if n_power_iterations <= 0:
        raise GraphcError(
            f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}"
        )
    weight = _parameter(module, name, "spectral_norm")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    hook = _SpectralNorm(name, n_power_iterations, eps, dim)
    values = weight.detach().numpy()
    matrix = np.moveaxis(values, dim, 0).reshape(values.shape[dim], -1)
    rng = np.random.default_rng()
    start = [rng.standard_normal(n) for n in matrix.shape]
    u, v = (s / max(np.linalg.norm(s), eps) for s in start)
    module._unregister(name)
    module.register_parameter(name + "_orig", weight)
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", tensor(u.astype(values.dtype)))
    module.register_buffer(name + "_v", tensor(v.astype(values.dtype)))
    _hooks(module)[name] = ("spectral_norm", module.register_forward_pre_hook(hook), hook)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo spectral_norm: `<name>` a parameter again, holding the normalized weight."""
    hook = _take_hook(module, name, "spectral_norm")
    with no_grad():
        weight = hook.compute(module, power_iteration=False).detach()
    for suffix in ("_orig", "_u", "_v"):
        delattr(module, name + suffix)
    module.register_parameter(name, Parameter(weight))
    return module


def _parameter(module: Module, name: str, op: str) -> Tensor:
    if name in _hooks(module):
        raise GraphcError(
            f"{op}: {type(module).__name__}.{name} already has {_hooks(module)[name][0]}"
        )
    weight = module._registry("_parameters").get(name)
    if weight is None:
        raise GraphcError(f"{op}: {type(module).__name__} has no parameter {name!r}")
    return weight


def _hooks(module: Module) -> dict[str, tuple]:
    return module.__dict__.setdefault("_weight_norm_hooks", {})


def _take_hook(module: Module, name: str, kind: str) -> Any:
    entry = _hooks(module).get(name)
    if entry is None or entry[0] != kind:
        raise GraphcError(f"remove_{kind}: {kind} of {name!r} not found in {type(module).__name__}")
    _hooks(module).pop(name)
    entry[1].remove()
    return entry[2]
