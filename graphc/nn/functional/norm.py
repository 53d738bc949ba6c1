"""torch.nn.functional spellings: norm (layer_norm, group_norm, batch_norm, instance_norm,
rms_norm, local_response_norm).

PyTorch's argument names and defaults, on eager tensors and graph values alike.
`batch_norm` in training mode (and `instance_norm` with `use_input_stats`) updates the
running statistics it is given, as PyTorch does: in place for tensors, or, while tracing, through `update_buffer`, which lets
`compile_train_step` keep them as executable state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn.functional.arrays import pad
from graphc.nn.functional.pool import avg_pool2d
from graphc.nn.module import buffer_value, keeps_updates, update_buffer
from graphc.nn.shape_checks import defer_shape_check
from graphc.ops import mean, reshape, rsqrt, selection, var
from graphc.ops import norm as ops_norm

__all__ = [
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "local_response_norm",
    "rms_norm",
]


def layer_norm(input: Any, normalized_shape: int | Sequence[int], weight: Any = None,  # noqa: A002
               bias: Any = None, eps: float = 1e-5) -> Any:  # fmt: skip
    """Normalize over the trailing dims `normalized_shape`, then scale and shift.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.layer_norm(ge.tensor([[1.0, 3.0]]), (2,), eps=0.0)
    tensor([[-1.,  1.]])
    """
    dims = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    shape = tuple(input.shape)
    if not dims or len(dims) > len(shape) or shape[len(shape) - len(dims) :] != dims:
        raise ShapeError(
            f"layer_norm: normalized_shape {dims} must be the trailing dims of the input, "
            f"got input of shape {shape}"
        )
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and tuple(value.shape) != dims:
            raise ShapeError(
                f"layer_norm: {name} must have the normalized shape {dims}, got "
                f"{tuple(value.shape)}"
            )
    return ops_norm.layer_norm(input, weight, bias, axis=len(shape) - len(dims), eps=eps)


def rms_norm(input: Any, normalized_shape: int | Sequence[int], weight: Any = None,  # noqa: A002
             eps: float | None = None) -> Any:  # fmt: skip
    """x / sqrt(mean(x**2 over the trailing dims normalized_shape) + eps), times weight;
    eps None is the machine epsilon of x's dtype, as torch's.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.rms_norm(ge.tensor([[3.0, 4.0]]), (2,), eps=0.0).tolist()
    [[0.8485281467437744, 1.1313709020614624]]
    """
    dims = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    shape = tuple(input.shape)
    if not dims or len(dims) > len(shape) or shape[len(shape) - len(dims) :] != dims:
        raise ShapeError(
            f"rms_norm: normalized_shape {dims} must be the trailing dims of the input, "
            f"got input of shape {shape}"
        )
    if weight is not None and tuple(weight.shape) != dims:
        raise ShapeError(
            f"rms_norm: weight must have the normalized shape {dims}, got {tuple(weight.shape)}"
        )
    if eps is None:
        eps = float(np.finfo(np.dtype(input.dtype)).eps)
    axes = tuple(range(len(shape) - len(dims), len(shape)))
    scale = rsqrt(mean(input * input, axis=axes, keepdims=True) + eps)
    out = input * scale
    return out if weight is None else out * weight


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5) -> Any:  # fmt: skip
    """Normalize each group of channels of an (N, C, ...) input, then scale and shift
    per channel.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.group_norm(ge.tensor([[[1.0], [3.0]]]), 1, eps=0.0).flatten()
    tensor([-1.,  1.])
    """
    return ops_norm.group_norm(input, num_groups, weight, bias, eps)


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, Tensor) else value


def _blend(buffer: Any, batch_value: Any, momentum: Any) -> Any:
    """(1 - momentum) running + momentum batch, in the buffer's dtype."""
    running = buffer_value(buffer)
    new = running * (1 - momentum) + _detached(batch_value) * momentum
    return new if new.dtype == buffer.dtype else selection.cast(new, buffer.dtype)


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None,  # noqa: A002
               bias: Any = None, training: bool = False, momentum: Any = 0.1,
               eps: float = 1e-5) -> Any:  # fmt: skip
    """Batch normalization per channel of an (N, C, ...) input.

    Training: normalize with the batch's mean and biased variance, and, when running
    statistics are given, update them as (1 - momentum) running + momentum batch (the
    variance unbiased), as PyTorch does. Eval: normalize with the running statistics.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> mean, var = ge.zeros(1), ge.ones(1)
    >>> F.batch_norm(ge.tensor([[1.0], [3.0]]), mean, var, training=True, eps=0.0).flatten()
    tensor([-1.,  1.])
    >>> mean, var
    (tensor([0.2000]), tensor([1.1000]))
    """
    if not training and (running_mean is None or running_var is None):
        raise GraphcError(
            "batch_norm: eval mode (training=False) needs running_mean and running_var"
        )
    channels = input.shape[1] if len(input.shape) >= 2 else None
    for name, value in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):  # fmt: skip
        if value is not None and tuple(value.shape) != (channels,):
            raise ShapeError(
                f"batch_norm: {name} must have shape ({channels},) for an input of shape "
                f"{tuple(input.shape)}, got {tuple(value.shape)}"
            )
    if not training:
        return ops_norm.batch_norm(
            input, buffer_value(running_mean), buffer_value(running_var), weight, bias,
            training=False, eps=eps,
        ).output  # fmt: skip
    # with a symbolic batch, a batch of one is refused when it comes (nn/shape_checks.py)
    defer_shape_check(tuple(input.shape), ops_norm.one_value_per_channel, ShapeError)
    # a trace nobody records buffer updates for gets no (dead) nodes for them
    keep = running_mean is not None or running_var is not None
    keep = keep and keeps_updates(input)
    output, mean, var = ops_norm.batch_norm(input, None, None, weight, bias, True, eps, keep)
    if keep:
        if running_mean is not None:
            update_buffer(running_mean, _blend(running_mean, mean, momentum))
        if running_var is not None:
            update_buffer(running_var, _blend(running_var, var, momentum))
    return output


def _one_value_per_instance(shape: tuple[int, ...]) -> str | None:
    """Why instance_norm refuses an input of this (concrete) shape with its own
    statistics, None if it does not: one position per channel (PyTorch's check)."""
    if math.prod(shape[2:]) != 1:
        return None
    return (
        "instance_norm: expected more than 1 spatial element when training, got input size "
        f"{list(shape)}"
    )


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None,  # noqa: A002
                  weight: Any = None, bias: Any = None, use_input_stats: bool = True,
                  momentum: Any = 0.1, eps: float = 1e-5) -> Any:  # fmt: skip
    """Normalize each channel of each example of an (N, C, ...) input over its positions,
    then scale and shift per channel (torch.nn.functional.instance_norm).

    With `use_input_stats` (the default) each (example, channel) uses its own mean and
    biased variance; running statistics, when given, are updated as PyTorch does:
    (1 - momentum) running + momentum times the batch's average of the per-example mean
    (and unbiased variance). Without, it normalizes with the running statistics.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> F.instance_norm(ge.tensor([[[1.0, 3.0], [0.0, 4.0]]]), eps=0.0)
    tensor([[[-1.,  1.],
             [-1.,  1.]]])
    """
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise ShapeError(f"instance_norm: expected an input (N, C, ...), got shape {shape}")
    channels = shape[1]
    for name, value in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):  # fmt: skip
        if value is not None and tuple(value.shape) != (channels,):
            raise ShapeError(
                f"instance_norm: {name} must have shape ({channels},) for an input of shape "
                f"{shape}, got {tuple(value.shape)}"
            )
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise GraphcError(
                "instance_norm: use_input_stats=False normalizes with the running statistics, "
                "so it needs running_mean and running_var"
            )
        return batch_norm(input, running_mean, running_var, weight, bias, False, eps=eps)
    if all(isinstance(d, int) for d in shape[2:]):  # else checked when it runs
        problem = _one_value_per_instance(shape)
        if problem is not None:
            raise ShapeError(problem)
    else:
        defer_shape_check(shape, _one_value_per_instance, ShapeError)
    # each (example, channel) normalized over its positions: layer norm from dim 2 on
    # (no reshape, so symbolic positions work beside a symbolic batch)
    output = ops_norm.layer_norm(input, axis=2, eps=eps)
    if weight is not None:
        output = output * ops_norm.channel_shaped(weight, len(shape))
    if bias is not None:
        output = output + ops_norm.channel_shaped(bias, len(shape))
    keep = running_mean is not None or running_var is not None
    if keep and keeps_updates(input):
        x = _detached(input)
        positions = tuple(range(2, len(shape)))
        if running_mean is not None:  # the batch's average of each example's mean
            batch_mean = mean(mean(x, axis=positions), axis=0)
            update_buffer(running_mean, _blend(running_mean, batch_mean, momentum))
        if running_var is not None:  # and of each example's unbiased variance
            batch_var = mean(var(x, axis=positions, ddof=1), axis=0)
            update_buffer(running_var, _blend(running_var, batch_var, momentum))
    return output


def local_response_norm(input: Any, size: int, alpha: float = 1e-4, beta: float = 0.75,  # noqa: A002
                        k: float = 1.0) -> Any:  # fmt: skip
    """Each value of an (N, C, ...) input divided by (k + alpha * the mean of the squares
    of `size` neighbouring channels) ** beta, as torch.nn.functional.local_response_norm
    (AlexNet's): the neighbours of channel c are c - size // 2 to c + (size - 1) // 2,
    those outside counted as zeros.

    >>> import graphc.eager as ge
    >>> import graphc.nn.functional as F
    >>> y = F.local_response_norm(ge.ones(1, 3, 1), 3, alpha=3.0, beta=1.0, k=0.0)
    >>> [round(v, 4) for v in y.flatten().tolist()]   # 1 / (3 * mean square): 2/3 at the edges
    [0.5, 0.3333, 0.5]
    """
    shape = tuple(input.shape)
    if len(shape) < 3:
        raise ShapeError(
            f"local_response_norm: expected an input of 3 or more dims (N, C, ...), got shape "
            f"{shape}"
        )
    rest = shape[2:]
    positions = math.prod(rest) if all(isinstance(d, int) for d in rest) else -1
    squares = reshape(input * input, (shape[0], 1, shape[1], positions))
    # zeros beyond the first and last channel, then the mean of each run of `size`
    padded = pad(squares, (0, 0, size // 2, (size - 1) // 2))
    mean = reshape(avg_pool2d(padded, (size, 1), stride=1), shape)
    return input / (mean * alpha + k) ** beta
