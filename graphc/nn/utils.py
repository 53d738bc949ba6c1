"""torch.nn.utils' helpers for eager training loops: clip_grad_norm_, clip_grad_value_,
parameters_to_vector and vector_to_parameters. They read and write the parameters'
`.grad` (or values) in place, so they belong to eager steps; a compiled training step
(`gc.compile_train_step`) never exposes its gradients.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from graphc.eager import Tensor, from_numpy, no_grad, tensor
from graphc.ir.errors import GraphcError, ShapeError

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]


def _listed(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _norm(values: np.ndarray, norm_type: float) -> Any:
    if math.isinf(norm_type):
        return np.max(np.abs(values)) if values.size else values.dtype.type(0)
    return np.linalg.norm(values.ravel(), ord=norm_type)


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients in place so that their joint `norm_type` norm (of the norms
    of each) is at most `max_norm`, as torch's: each is multiplied by
    min(1, max_norm / (total + 1e-6)). Returns the total norm before clipping.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> w = ge.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward()          # grad (6, 8): norm 10
    >>> total = nn.utils.clip_grad_norm_([w], max_norm=5.0)
    >>> total.item(), [round(g, 4) for g in w.grad.tolist()]
    (10.0, [3.0, 4.0])
    """
    grads = [p.grad for p in _listed(parameters) if p.grad is not None]
    if not grads:
        return tensor(0.0)
    dtype = grads[0].dtype
    norms = np.array([_norm(g.numpy(), norm_type) for g in grads], dtype)
    total = dtype.type(_norm(norms, norm_type))
    if error_if_nonfinite and not np.isfinite(total):
        raise GraphcError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            f"{total}, so they cannot be clipped (error_if_nonfinite=True)"
        )
    scale = min(dtype.type(max_norm) / (total + dtype.type(1e-6)), dtype.type(1.0))
    with no_grad():
        for g in grads:
            g.mul_(float(scale))
    return tensor(total, dtype=dtype)


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient into [-clip_value, clip_value], in place."""
    with no_grad():
        for p in _listed(parameters):
            if p.grad is not None:
                p.grad.copy_(from_numpy(np.clip(p.grad.numpy(), -clip_value, clip_value)))


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Every parameter flattened and joined into one vector (a copy, off the tape)."""
    return from_numpy(np.concatenate([p.detach().numpy().ravel() for p in parameters]))


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the vector `vec` into the parameters, in order."""
    values = vec.detach().numpy()
    if values.ndim != 1:
        raise ShapeError(f"vector_to_parameters: expected a vector, got shape {values.shape}")
    start = 0
    with no_grad():
        for p in parameters:
            size = int(np.prod(p.shape))
            if start + size > values.size:
                raise ShapeError(
                    f"vector_to_parameters: the vector of {values.size} values is shorter than "
                    "the parameters"
                )
            p.copy_(from_numpy(values[start : start + size].reshape(p.shape).astype(p.dtype)))
            start += size
