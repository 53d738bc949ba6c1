"""Convolution and pooling layers: Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
MaxPool1d/2d/3d, AvgPool1d/2d/3d, LPPool1d/2d, AdaptiveAvgPool1d/2d/3d, AdaptiveMaxPool1d/2d,
Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, Flatten and Unflatten.

PyTorch's constructor arguments, defaults, attribute names, parameter names and shapes
(`weight` is (out, in/groups, *kernel) for a convolution and (in, out/groups, *kernel)
for a transposed one; `bias` is (out,)), so a PyTorch `state_dict` of numpy arrays
loads. Parameters are initialized as PyTorch does (kaiming-uniform with a = sqrt(5),
bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in))), drawn from `generator`. Forwards call
graphc.nn.functional, so they run eagerly and trace into graphs.
"""

from __future__ import annotations

import math
from typing import Any

from graphc.eager import zeros
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype, normalize_axis
from graphc.nn import functional as F
from graphc.nn import init
from graphc.nn.module import Module
from graphc.ops import reshape

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "LPPool1d",
    "LPPool2d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Flatten",
    "Unflatten",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
]


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value: Any, dims: int, layer: str = "", name: str = "") -> tuple:
    """One int per spatial dim from one int or `dims` of them; else an error naming the
    layer and argument."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
    if len(items) != dims:
        raise GraphcError(f"{layer}: {name} must be one int or {dims} ints, got {value!r}")
    return items


class _ConvNd(Module):
    """What every convolution layer shares: checks, parameters, initialization, repr."""

    transposed = False
    dims = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        groups: int,
        bias: bool,
        padding_mode: str,
        output_padding: Any,
        dtype: Any,
        generator: init.Generator,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise GraphcError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must "
                f"be divisible by groups ({groups})"
            )
        if padding_mode not in _PADDING_MODES:
            raise GraphcError(
                f"{name}: padding_mode must be one of {', '.join(map(repr, _PADDING_MODES))}, "
                f"got {padding_mode!r}"
            )
        if self.transposed and padding_mode != "zeros":
            raise GraphcError(f"{name}: only padding_mode='zeros' is supported, as in torch")
        if isinstance(padding, str) and (self.transposed or padding not in ("same", "valid")):
            raise GraphcError(f"{name}: padding {padding!r} is not supported")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _tuple(kernel_size, self.dims, name, "kernel_size")
        self.stride = _tuple(stride, self.dims, name, "stride")
        if not isinstance(padding, str):
            padding = _tuple(padding, self.dims, name, "padding")
        self.padding = padding
        self.dilation = _tuple(dilation, self.dims, name, "dilation")
        self.output_padding = _tuple(output_padding, self.dims, name, "output_padding")
        self.groups, self.padding_mode = groups, padding_mode
        if isinstance(padding, str) and padding == "same" and any(s != 1 for s in self.stride):
            raise GraphcError(f"{name}: padding='same' is not supported for strided convolutions")
        dtype = as_dtype(dtype)
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = zeros(*shape, dtype=dtype, requires_grad=True)
        self.bias = zeros(out_channels, dtype=dtype, requires_grad=True) if bias else None
        self.reset_parameters(generator)

    def reset_parameters(self, generator: init.Generator = None) -> None:
        """PyTorch's initialization, from `generator` (a seed, a numpy Generator, or None
        for graphc.eager's global generator)."""
        rng = init.as_generator(generator)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=rng)
        if self.bias is not None:
            fan_in, _ = init.calculate_fan_in_and_fan_out(self.weight)
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound, generator=rng)

    def extra_repr(self) -> str:
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * self.dims:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self.dims:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.dims:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) (or (C, H, W)): torch.nn.Conv2d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> conv = nn.Conv2d(1, 6, 5, generator=0)
    >>> conv
    Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1))
    >>> conv(ge.ones(2, 1, 28, 28)).shape, sorted(conv.state_dict())
    ((2, 6, 24, 24), ['bias', 'weight'])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, 0, dtype, generator,
        )  # fmt: skip

    def forward(self, input: Any) -> Any:
        padding = self.padding
        if self.padding_mode != "zeros":  # padded by F.pad in that mode, then convolved unpadded
            input = F.pad(input, self._pad_pairs(), mode=self.padding_mode)
            padding = 0
        return self.convolve(
            input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups
        )

    def _pad_pairs(self) -> tuple[int, ...]:
        """F.pad's list (before, after, ...) from the last dim back: torch's padding
        for a padding_mode, 'same' putting the odd one after."""
        pairs = []
        for d in range(self.dims):
            if self.padding == "valid":
                pairs.append((0, 0))
            elif self.padding == "same":
                total = self.dilation[d] * (self.kernel_size[d] - 1)
                pairs.append((total // 2, total - total // 2))
            else:
                pairs.append((self.padding[d], self.padding[d]))
        return tuple(p for pair in reversed(pairs) for p in pair)

    convolve = staticmethod(F.conv2d)


class Conv1d(Conv2d):
    """1-D convolution over (N, C, L) (or (C, L)): torch.nn.Conv1d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Conv1d(4, 8, 3, padding=1, generator=0)(ge.ones(2, 4, 10)).shape
    (2, 8, 10)
    """

    dims = 1
    convolve = staticmethod(F.conv1d)


class Conv3d(Conv2d):
    """3-D convolution over (N, C, D, H, W) (or (C, D, H, W)): torch.nn.Conv3d (computed
    as conv2d's over the kernel's depth taps, see F.conv3d).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Conv3d(2, 4, 3, padding=1, generator=0)(ge.ones(1, 2, 4, 6, 6)).shape
    (1, 4, 4, 6, 6)
    """

    dims = 3
    convolve = staticmethod(F.conv3d)


def _output_padding(layer: _ConvNd, input: Any, output_size: Any) -> tuple:
    """The output_padding that makes a transposed convolution's output `output_size`
    (its last dims count), as PyTorch's ConvTranspose*d.forward(input, output_size)."""
    if output_size is None:
        return layer.output_padding
    sizes = tuple(output_size)[-layer.dims :]
    extras = []
    for d in range(layer.dims):
        size = input.shape[len(input.shape) - layer.dims + d]
        pad = layer.padding[d]
        least = (
            (size - 1) * layer.stride[d]
            - 2 * pad
            + layer.dilation[d] * (layer.kernel_size[d] - 1)
            + 1
        )
        if not least <= sizes[d] < least + max(layer.stride[d], layer.dilation[d]):
            raise ShapeError(
                f"{type(layer).__name__}: requested an output size of {tuple(output_size)}, but "
                f"valid sizes along dim {d} range from {least} to "
                f"{least + max(layer.stride[d], layer.dilation[d]) - 1}"
            )
        extras.append(sizes[d] - least)
    return tuple(extras)


class ConvTranspose2d(_ConvNd):
    """2-D transposed convolution over (N, C, H, W): torch.nn.ConvTranspose2d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> up = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, generator=0)
    >>> up(ge.ones(1, 4, 5, 5)).shape, up(ge.ones(1, 4, 5, 5), output_size=(10, 10)).shape
    ((1, 2, 9, 9), (1, 2, 10, 10))
    """

    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, output_padding, dtype, generator,
        )  # fmt: skip

    def forward(self, input: Any, output_size: Any = None) -> Any:
        extra = _output_padding(self, input, output_size)
        return self.convolve(
            input, self.weight, self.bias, self.stride, self.padding, extra, self.groups,
            self.dilation,
        )  # fmt: skip

    convolve = staticmethod(F.conv_transpose2d)


class ConvTranspose1d(ConvTranspose2d):
    """1-D transposed convolution over (N, C, L): torch.nn.ConvTranspose1d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.ConvTranspose1d(4, 2, 3, stride=2, generator=0)(ge.ones(1, 4, 5)).shape
    (1, 2, 11)
    """

    dims = 1
    convolve = staticmethod(F.conv_transpose1d)


class MaxPool2d(Module):
    """The maximum of each window: torch.nn.MaxPool2d (stride defaults to kernel_size).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.MaxPool2d(2)(ge.ones(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Any) -> Any:
        return F.max_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool3d(MaxPool2d):
    """The maximum of each window of (N, C, D, H, W) or (C, D, H, W): torch.nn.MaxPool3d
    (return_indices is not supported).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.MaxPool3d(2)(ge.ones(1, 3, 4, 4, 4)).shape
    (1, 3, 2, 2, 2)
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.max_pool3d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip


class AvgPool2d(Module):
    """The mean of each window: torch.nn.AvgPool2d (stride defaults to kernel_size).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AvgPool2d(2)(ge.ones(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Any) -> Any:
        return F.avg_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class LPPool2d(Module):
    """The p-norm of each window: torch.nn.LPPool2d (stride defaults to kernel_size).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.LPPool2d(2, 2)(ge.ones(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
    """

    pool = staticmethod(F.lp_pool2d)

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.norm_type, self.kernel_size, self.stride = norm_type, kernel_size, stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return self.pool(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(LPPool2d):
    """The p-norm of each window along L: torch.nn.LPPool1d."""

    pool = staticmethod(F.lp_pool1d)


class AvgPool3d(AvgPool2d):
    """The mean of each window of (N, C, D, H, W) or (C, D, H, W): torch.nn.AvgPool3d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AvgPool3d(2)(ge.ones(1, 3, 4, 4, 4)).shape
    (1, 3, 2, 2, 2)
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.avg_pool3d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size: torch.nn.AdaptiveAvgPool2d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AdaptiveAvgPool2d((1, 1))(ge.ones(2, 8, 7, 7)).shape
    (2, 8, 1, 1)
    """

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Any) -> Any:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Max pooling to a fixed output size: torch.nn.AdaptiveMaxPool2d (output_size one
    int, or (h, w) where None keeps that dim), PyTorch's bins; `return_indices` as in
    graphc.nn.functional.adaptive_max_pool2d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AdaptiveMaxPool2d((3, 2))(ge.ones(2, 8, 7, 5)).shape
    (2, 8, 3, 2)
    """

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Max pooling along L to a fixed length: torch.nn.AdaptiveMaxPool1d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AdaptiveMaxPool1d(3)(ge.ones(2, 8, 7)).shape
    (2, 8, 3)
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    """Average pooling to a fixed (D, H, W): torch.nn.AdaptiveAvgPool3d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AdaptiveAvgPool3d(1)(ge.ones(2, 8, 3, 5, 5)).shape
    (2, 8, 1, 1, 1)
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_avg_pool3d(input, self.output_size)


class MaxPool1d(MaxPool2d):
    """The maximum of each window along L of (N, C, L) or (C, L): torch.nn.MaxPool1d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.MaxPool1d(2)(ge.ones(1, 3, 8)).shape
    (1, 3, 4)
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.max_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip


class AvgPool1d(AvgPool2d):
    """The mean of each window along L of (N, C, L) or (C, L): torch.nn.AvgPool1d (which
    keeps its sizes as 1-tuples).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AvgPool1d(2)(ge.ones(1, 3, 8)).shape
    (1, 3, 4)
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        one = _tuple(kernel_size, 1, "AvgPool1d", "kernel_size")
        stride = one if stride is None else _tuple(stride, 1, "AvgPool1d", "stride")
        super().__init__(one, stride, _tuple(padding, 1, "AvgPool1d", "padding"))
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.avg_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad,
        )  # fmt: skip


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Average pooling along L to a fixed length: torch.nn.AdaptiveAvgPool1d.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.AdaptiveAvgPool1d(1)(ge.ones(2, 8, 7)).shape
    (2, 8, 1)
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_avg_pool1d(input, self.output_size)


class Flatten(Module):
    """Dims start_dim..end_dim joined into one: torch.nn.Flatten (from dim 1 by default).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Flatten()(ge.ones(2, 16, 5, 5)).shape
    (2, 400)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Any) -> Any:
        shape = tuple(input.shape)
        if not shape:  # a 0-d input flattens to one element, as in PyTorch
            return reshape(input, (1,))
        start = normalize_axis(self.start_dim, len(shape), "Flatten")
        end = normalize_axis(self.end_dim, len(shape), "Flatten")
        if start > end:
            raise ShapeError(
                f"Flatten: start_dim {self.start_dim} comes after end_dim {self.end_dim}"
            )
        joined = shape[start : end + 1]
        known = [d for d in joined if not isinstance(d, str)]
        symbols = [d for d in joined if isinstance(d, str)]
        # a product holding a symbol is a symbol only when the other dims are ones
        size = symbols[0] if len(symbols) == 1 and math.prod(known) == 1 else -1
        if not symbols:
            size = math.prod(known)
        return reshape(input, shape[:start] + (size,) + shape[end + 1 :])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dim `dim` split into `unflattened_size` (one entry may be -1): torch.nn.Unflatten.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Unflatten(1, (2, 5))(ge.ones(3, 10)).shape
    (3, 2, 5)
    """

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        shape = tuple(input.shape)
        axis = normalize_axis(self.dim, len(shape), "Unflatten")
        sizes = self.unflattened_size
        known = math.prod(d for d in sizes if d != -1)
        if sizes.count(-1) > 1 or (
            not isinstance(shape[axis], str)
            and (shape[axis] != known if -1 not in sizes else known == 0 or shape[axis] % known)
        ):
            raise ShapeError(
                f"Unflatten: dim {self.dim} of size {shape[axis]} cannot be split into "
                f"{sizes} (input of shape {shape})"
            )
        return reshape(input, shape[:axis] + sizes + shape[axis + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Upsample(Module):
    """Resize (N, C, L) or (N, C, H, W) to `size` or by `scale_factor` (F.interpolate's
    modes: nearest, linear, bilinear, bicubic, area): torch.nn.Upsample.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Upsample(scale_factor=2)(ge.ones(1, 3, 4, 5)).shape
    (1, 3, 8, 10)
    """

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = None if scale_factor is None else float(scale_factor)
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return F.interpolate(
            input, self.size, self.scale_factor, self.mode, self.align_corners,
            self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        given = (
            f"scale_factor={self.scale_factor!r}" if self.size is None else f"size={self.size!r}"
        )
        return f"{given}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """torch.nn.UpsamplingNearest2d: Upsample in mode 'nearest'."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """torch.nn.UpsamplingBilinear2d: Upsample in mode 'bilinear' with align_corners.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.UpsamplingBilinear2d(scale_factor=2)(ge.tensor([[[[0.0, 3.0]]]])).tolist()
    [[[[0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]]]]
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
