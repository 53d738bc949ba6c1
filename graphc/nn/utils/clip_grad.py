"""torch.nn.utils.clip_grad's helpers for eager training loops: clip_grad_norm_ (and its
two halves, get_total_norm and clip_grads_with_norm_) and clip_grad_value_. They read
and write the parameters' `.grad` in place, so they belong to eager steps; a compiled
training step (`gc.compile_train_step`) never exposes its gradients.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from graphc.eager import Tensor, from_numpy, no_grad, tensor
from graphc.ir.errors import GraphcError

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _listed(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _norm(values: np.ndarray, norm_type: float) -> Any:
    if math.isinf(norm_type):
        return np.max(np.abs(values)) if values.size else values.dtype.type(0)
    return np.linalg.norm(values.ravel(), ord=norm_type)


def get_total_norm(
    tensors: Tensor | Iterable[Tensor],
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The `norm_type` norm of the norms of each tensor (torch.nn.utils.get_total_norm),
    in the dtype they promote to; `norm_type` may be "inf", as torch's float() reads it.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.utils.get_total_norm([ge.tensor([3.0]), ge.tensor([4.0])]).item()
    5.0
    """
    listed = [t for t in _listed(tensors) if t is not None]
    return _total_norm(listed, norm_type, error_if_nonfinite, "get_total_norm")


def _total_norm(listed: list[Tensor], norm_type: float | str, error_if_nonfinite: bool,
                op: str) -> Tensor:  # fmt: skip
    norm_type = float(norm_type)
    if not listed:
        return tensor(0.0)
    dtype = np.result_type(*(t.dtype for t in listed))
    norms = np.array([_norm(t.detach().numpy(), norm_type) for t in listed], dtype)
    total = dtype.type(_norm(norms, norm_type))
    if error_if_nonfinite and not np.isfinite(total):
        raise GraphcError(
            f"{op}: the total norm of order {norm_type} of the gradients is {total}, so "
            "they cannot be clipped (error_if_nonfinite=True)"
        )
    return tensor(total, dtype=dtype)


def clip_grads_with_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    total_norm: Tensor | float,
    foreach: bool | None = None,
) -> None:
    """Scale the gradients in place by min(1, max_norm / (total_norm + 1e-6)), as
    torch.nn.utils.clip_grads_with_norm_ (the second half of clip_grad_norm_)."""
    grads = [p.grad for p in _listed(parameters) if p.grad is not None]
    if not grads:
        return
    total = total_norm.item() if isinstance(total_norm, Tensor) else float(total_norm)
    dtype = np.dtype(total_norm.dtype) if isinstance(total_norm, Tensor) else np.dtype("float64")
    scale = min(dtype.type(max_norm) / (dtype.type(total) + dtype.type(1e-6)), dtype.type(1.0))
    with no_grad():
        for g in grads:
            g.mul_(float(scale))


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients in place so that their joint `norm_type` norm (of the norms
    of each) is at most `max_norm`, as torch's: each is multiplied by
    min(1, max_norm / (total + 1e-6)). Returns the total norm before clipping.
    `foreach` is accepted (torch's choice of implementation; the numbers are the same).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> w = ge.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward()          # grad (6, 8): norm 10
    >>> total = nn.utils.clip_grad_norm_([w], max_norm=5.0)
    >>> total.item(), [round(g, 4) for g in w.grad.tolist()]
    (10.0, [3.0, 4.0])
    """
    listed = _listed(parameters)
    grads = [p.grad for p in listed if p.grad is not None]
    total = _total_norm(grads, norm_type, error_if_nonfinite, "clip_grad_norm_")
    clip_grads_with_norm_(listed, max_norm, total)
    return total


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient into [-clip_value, clip_value], in place."""
    with no_grad():
        for p in _listed(parameters):
            if p.grad is not None:
                p.grad.copy_(from_numpy(np.clip(p.grad.numpy(), -clip_value, clip_value)))
