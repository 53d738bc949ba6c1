"""Layers: `Linear`, the activations, `Sequential` and `ModuleList` (the losses are in loss.py).

Every forward is written with graphc ops, so it runs on eager tensors and records
nodes on graph values alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from graphc.eager import zeros
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import init
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


class Sequential(Module):
    """Layers applied in order; their parameters are named "0.weight", "1.bias", ...
    (or after the keys of a dict of layers, as torch's ``Sequential(OrderedDict(...))``).
    A slice is a Sequential of those layers under their names, as in torch.

    >>> from graphc import nn
    >>> model = nn.Sequential(nn.Linear(4, 8, generator=0), nn.ReLU(), nn.Linear(8, 2))
    >>> [name for name, _ in model.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
    >>> [name for name, _ in model[1:].named_parameters()]
    ['2.weight', '2.bias']
    """

    def __init__(self, *layers: Module | Mapping[str, Module]) -> None:
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], Mapping):
            named = [(str(name), layer) for name, layer in layers[0].items()]
        else:
            named = [(str(index), layer) for index, layer in enumerate(layers)]
        for name, layer in named:
            if not isinstance(layer, Module):
                raise GraphcError(
                    f"Sequential: layer {name} is a {type(layer).__name__}, not an nn.Module"
                )
            setattr(self, name, layer)

    def __len__(self) -> int:
        return len(self._registry("_modules"))

    def __iter__(self) -> Iterator[Module]:
        return iter(self._registry("_modules").values())

    def __getitem__(self, index: int | slice) -> Module:
        if isinstance(index, slice):
            return Sequential(dict(list(self.named_children())[index]))
        return list(self)[index]

    def forward(self, x: Any) -> Any:
        for layer in self:
            x = layer(x)
        return x


class ModuleList(Module):
    """Modules held in a list, registered as "0", "1", ... (no forward of its own).

    >>> from graphc import nn
    >>> blocks = nn.ModuleList([nn.Linear(2, 2, generator=k) for k in range(3)])
    >>> len(blocks), [name for name, _ in blocks.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise GraphcError(f"ModuleList: got a {type(module).__name__}, not an nn.Module")
        setattr(self, str(len(self)), module)
        return self

    def __len__(self) -> int:
        return len(self._registry("_modules"))

    def __iter__(self) -> Iterator[Module]:
        return iter(self._registry("_modules").values())

    def __getitem__(self, index: int | slice) -> Module:
        if isinstance(index, slice):  # renumbered from 0, as torch's
            return ModuleList(list(self)[index])
        return list(self)[index]
