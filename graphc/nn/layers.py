"""Layers: `Linear`, `Bilinear`, `Identity` and the activations ReLU, Tanh, Sigmoid (containers are in
containers.py, the losses in loss.py).

Every forward is written with graphc ops, so it runs on eager tensors and records
nodes on graph values alike.
"""

from __future__ import annotations

import math
from typing import Any

from graphc.eager import zeros
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import init
from graphc.nn.functional import affine as F
from graphc.nn.module import Module
from graphc.ops import relu, sigmoid, tanh


class Linear(Module):
    """y = x @ weight.T + bias, with weight of shape (out_features, in_features).

    Initialized as torch does: weight and bias from U(-1/sqrt(in), 1/sqrt(in)),
    drawn from `generator` (a seed, a numpy Generator, or graphc.eager's global one).

    >>> from graphc import nn
    >>> import graphc.eager as ge
    >>> layer = nn.Linear(3, 2, generator=0)
    >>> layer(ge.ones(4, 3)).shape
    (4, 2)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        if in_features < 0 or out_features < 0:
            raise GraphcError(
                f"Linear: in_features and out_features must be >= 0, got {in_features} and "
                f"{out_features}"
            )
        self.in_features = in_features
        self.out_features = out_features
        dtype = as_dtype(dtype)
        rng = init.as_generator(generator)
        self.weight = zeros(out_features, in_features, dtype=dtype, requires_grad=True)
        # kaiming_uniform_(a=sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), torch's default
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=rng)
        if bias:
            self.bias = zeros(out_features, dtype=dtype, requires_grad=True)
            bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound, generator=rng)
        else:
            self.bias = None

    def forward(self, x: Any) -> Any:
        if len(x.shape) == 0:
            raise ShapeError(
                f"Linear({self.in_features}, {self.out_features}): input must have at least "
                "1 dim (the features), got a 0-d input"
            )
        if x.shape[-1] != self.in_features:
            raise ShapeError(
                f"Linear({self.in_features}, {self.out_features}): input has "
                f"{x.shape[-1]} features in its last axis, expected {self.in_features}"
            )
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Bilinear(Module):
    """y = x1^T A x2 + b for each output: torch.nn.Bilinear, weight (out, in1, in2) and
    bias (out,), both from U(-1/sqrt(in1), 1/sqrt(in1)) as torch's.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Bilinear(3, 5, 4, generator=0)(ge.ones(2, 3), ge.ones(2, 5)).shape
    (2, 4)
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        if min(in1_features, in2_features, out_features) < 0:
            raise GraphcError(
                f"Bilinear: sizes must be >= 0, got {in1_features}, {in2_features} and "
                f"{out_features}"
            )
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        dtype = as_dtype(dtype)
        rng = init.as_generator(generator)
        bound = 1.0 / math.sqrt(in1_features) if in1_features > 0 else 0.0
        shape = (out_features, in1_features, in2_features)
        self.weight = init.uniform_(
            zeros(*shape, dtype=dtype, requires_grad=True), -bound, bound, rng
        )
        self.bias = None
        if bias:
            self.bias = init.uniform_(
                zeros(out_features, dtype=dtype, requires_grad=True), -bound, bound, rng
            )

    def forward(self, input1: Any, input2: Any) -> Any:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class Identity(Module):
    """x itself; any constructor arguments are ignored, as torch's (a placeholder layer).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.Identity(54, unused="argument")(ge.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return input


class ReLU(Module):
    """max(x, 0), elementwise."""

    def forward(self, x: Any) -> Any:
        return relu(x)


class Tanh(Module):
    """tanh(x), elementwise."""

    def forward(self, x: Any) -> Any:
        return tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)), elementwise."""

    def forward(self, x: Any) -> Any:
        return sigmoid(x)
