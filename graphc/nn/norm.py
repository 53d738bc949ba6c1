"""Normalization layers: BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm, InstanceNorm1d,
InstanceNorm2d, InstanceNorm3d, LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm.

PyTorch's constructor arguments, defaults, attribute names, and `state_dict` keys
(``weight``, ``bias``, ``running_mean``, ``running_var``, ``num_batches_tracked``), so
a PyTorch `state_dict` of numpy arrays loads. Batch norm in training mode normalizes
with the batch's statistics and updates its running statistics after each forward, as
PyTorch does (eagerly in place; in `compile_train_step`, as executable state updated
by each step); in eval mode it uses them.

>>> import graphc.eager as ge
>>> from graphc import nn
>>> bn = nn.BatchNorm1d(2)
>>> list(bn.state_dict())
['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
>>> _ = bn(ge.tensor([[1.0, 2.0], [3.0, 6.0]]))
>>> bn.running_mean, bn.num_batches_tracked
(tensor([0.2000, 0.4000]), tensor(1))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphc.eager import ones, tensor, zeros
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import functional as F
from graphc.nn.module import Module, buffer_value, keeps_updates, update_buffer
from graphc.ops import cast, div, expand_dims, squeeze

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm",
    "LocalResponseNorm",
    "RMSNorm",
    "SyncBatchNorm",
]


class _BatchNorm(Module):
    """What BatchNorm1d/2d/3d share; subclasses say which input ranks they take (none
    said: any of 2 or more, as SyncBatchNorm's)."""

    ranks: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        dtype: Any = "float32",
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        dtype = as_dtype(dtype)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = ones(num_features, dtype=dtype, requires_grad=True) if affine else None
        self.bias = None
        if affine and bias:
            self.bias = zeros(num_features, dtype=dtype, requires_grad=True)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            update_buffer(
                self.running_mean, zeros(self.num_features, dtype=self.running_mean.dtype)
            )
            update_buffer(self.running_var, ones(self.num_features, dtype=self.running_var.dtype))
            update_buffer(self.num_batches_tracked, tensor(0))

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        rank = len(input.shape)
        if rank not in self.ranks and not (self.ranks == () and rank >= 2):
            expected = " or ".join(f"{r}D" for r in self.ranks) or "at least 2D"
            raise ShapeError(
                f"{type(self).__name__}: expected {expected} input, got {rank}D input of "
                f"shape {tuple(input.shape)}"
            )
        if input.shape[1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}({self.num_features}): input has {input.shape[1]} "
                f"channels (dim 1), expected {self.num_features}"
            )
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and keeps_updates(input):
            count = buffer_value(self.num_batches_tracked) + 1
            update_buffer(self.num_batches_tracked, count)
            if self.momentum is None:  # a cumulative moving average
                momentum = div(1.0, cast(count, self.running_mean.dtype))
        # in training mode the batch's statistics; else the running ones, if tracked
        use_batch = self.training or self.running_mean is None
        keep = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if keep else None,
            self.running_var if keep else None,
            self.weight,
            self.bias,
            use_batch,
            momentum,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) inputs over N (and L), per channel C."""

    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) inputs over N, H and W, per channel C.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.BatchNorm2d(3)(ge.ones(2, 3, 4, 4)).shape
    (2, 3, 4, 4)
    """

    ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm of (N, C, D, H, W) inputs over N, D, H and W, per channel C."""

    ranks = (5,)


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm as torch computes it without a process group: batch norm
    of any (N, C, ...) input with the local batch's statistics (graphc's data-parallel
    training, graphc.distributed, combines batch statistics itself). `process_group` is
    accepted and kept.

    >>> from graphc import nn
    >>> nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3)))[0]
    SyncBatchNorm(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        dtype: Any = "float32",
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype, bias=bias)
        self.process_group = process_group

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """`module` with every BatchNorm1d/2d/3d in it replaced by a SyncBatchNorm that
        shares its parameters, buffers and mode, as torch's."""
        output = module
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
            output = cls(
                module.num_features, module.eps, module.momentum, module.affine,
                module.track_running_stats, process_group, bias=module.bias is not None,
            )  # fmt: skip
            if module.affine:
                output.weight, output.bias = module.weight, module.bias
            if module.track_running_stats:
                output.running_mean, output.running_var = module.running_mean, module.running_var
                output.num_batches_tracked = module.num_batches_tracked
            output.training = module.training
        for name, child in module.named_children():
            output.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return output


class _InstanceNorm(_BatchNorm):
    """What InstanceNorm1d/2d/3d share: batch norm's parameters, buffers and repr, with
    torch's other defaults (no affine, no running statistics), and inputs with or without
    their batch dim (`spatial` positional dims after the channel)."""

    spatial = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        dtype: Any = "float32",
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype, bias=bias)

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        name, rank, unbatched = type(self).__name__, len(input.shape), self.spatial + 1
        if rank not in (unbatched, unbatched + 1):
            raise ShapeError(
                f"{name}: expected {unbatched}D or {unbatched + 1}D input, got {rank}D input of "
                f"shape {tuple(input.shape)}"
            )
        channels = input.shape[rank - unbatched]
        # torch lets a layer without per-channel state take any channel count (it warns)
        per_channel = self.affine or self.track_running_stats
        if per_channel and channels != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}): input has {channels} channels (dim "
                f"{rank - unbatched}), expected {self.num_features}"
            )
        x = expand_dims(input, 0) if rank == unbatched else input
        # torch: a momentum of None leaves the running statistics as they are
        momentum = 0.0 if self.momentum is None else self.momentum
        y = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            momentum,
            self.eps,
        )
        return squeeze(y, 0) if rank == unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) or (C, L) inputs: each channel of each example
    normalized over L (torch.nn.InstanceNorm1d; affine and running statistics off by
    default). With `track_running_stats`, eval mode normalizes with the running ones.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.InstanceNorm1d(2, eps=0.0)(ge.tensor([[1.0, 3.0], [2.0, 0.0]]))
    tensor([[-1.,  1.],
            [ 1., -1.]])
    """

    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) or (C, H, W) inputs over H and W, per example and
    channel (torch.nn.InstanceNorm2d).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.InstanceNorm2d(3, affine=True)(ge.ones(2, 3, 4, 4)).shape
    (2, 3, 4, 4)
    """

    spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of (N, C, D, H, W) or (C, D, H, W) inputs over D, H and W, per
    example and channel (torch.nn.InstanceNorm3d)."""

    spatial = 3


class LayerNorm(Module):
    """Normalize over the trailing dims `normalized_shape`, then scale and shift
    elementwise (weight ones, bias zeros).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.LayerNorm(2, eps=0.0)(ge.tensor([[1.0, 3.0]]))
    tensor([[-1.,  1.]], grad_fn=<LayerNormBackward0>)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype: Any = "float32",
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        dtype = as_dtype(dtype)
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = ones(*self.normalized_shape, dtype=dtype, requires_grad=True)
            if bias:
                self.bias = zeros(*self.normalized_shape, dtype=dtype, requires_grad=True)

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """Divide by the root mean square over the trailing dims `normalized_shape`, then
    scale elementwise (weight ones): torch.nn.RMSNorm (eps None: the dtype's epsilon).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.RMSNorm(2)(ge.tensor([[3.0, 4.0]])).shape
    (1, 2)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        dtype: Any = "float32",
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = None
        if elementwise_affine:
            self.weight = ones(*self.normalized_shape, dtype=as_dtype(dtype), requires_grad=True)

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class GroupNorm(Module):
    """Normalize groups of channels of (N, C, ...) inputs, then scale and shift per channel.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.GroupNorm(2, 4)(ge.ones(3, 4, 5)).shape
    (3, 4, 5)
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        dtype: Any = "float32",
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise GraphcError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine,
        )  # fmt: skip
        dtype = as_dtype(dtype)
        self.weight = ones(num_channels, dtype=dtype, requires_grad=True) if affine else None
        self.bias = None
        if affine and bias:
            self.bias = zeros(num_channels, dtype=dtype, requires_grad=True)

    def forward(self, input: Any) -> Any:  # noqa: A002
        if len(input.shape) < 2 or input.shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm: expected an input (N, {self.num_channels}, ...), got shape "
                f"{tuple(input.shape)}"
            )
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class LocalResponseNorm(Module):
    """Divide by (k + alpha * the mean square of `size` neighbouring channels) ** beta:
    torch.nn.LocalResponseNorm (see F.local_response_norm).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.LocalResponseNorm(2)(ge.ones(2, 4, 3, 3)).shape
    (2, 4, 3, 3)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
