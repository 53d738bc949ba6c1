"""Containers of modules with torch.nn's names and methods: Sequential, ModuleList and
ModuleDict; and of parameters: ParameterList and ParameterDict. Their modules register as submodules (so parameters are named "0.weight",
"encoder.bias", ...); Sequential and ModuleList number theirs "0", "1", ... and number
them again after an insert or a deletion, as torch does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from graphc.eager import Tensor
from graphc.ir.errors import GraphcError
from graphc.nn.module import Module
from graphc.nn.parameter import Parameter

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]


def _module(owner: str, name: Any, value: Any) -> Module:
    if not isinstance(value, Module):
        raise GraphcError(f"{owner}: {name} is a {type(value).__name__}, not an nn.Module")
    return value


class _Indexed(Module):
    """Modules held in order under their names: indexing, deletion and insertion."""

    def __len__(self) -> int:
        return len(self._registry("_modules"))

    def __iter__(self) -> Iterator[Module]:
        return iter(self._registry("_modules").values())

    def _key(self, index: int) -> str:
        """The name of the module at position `index` (negative counts from the end)."""
        size = len(self)
        if not isinstance(index, int) or isinstance(index, bool):
            raise GraphcError(
                f"{type(self).__name__} indices are ints or slices, got {type(index).__name__}"
            )
        if not -size <= index < size:
            raise IndexError(f"{type(self).__name__}: index {index} is out of range for {size}")
        return list(self._registry("_modules"))[index % size]

    def _renumber(self, modules: list[Module]) -> None:
        """Hold exactly `modules`, named "0", "1", ... (torch's numbering after a change)."""
        for name in list(self._registry("_modules")):
            delattr(self, name)
        for index, module in enumerate(modules):
            setattr(self, str(index), module)

    def __setitem__(self, index: int, module: Module) -> None:
        setattr(self, self._key(index), _module(type(self).__name__, index, module))

    def __delitem__(self, index: int | slice) -> None:
        if not isinstance(index, slice):
            self._key(index)  # an index out of range is refused, naming the container
        modules = list(self)
        del modules[index]
        self._renumber(modules)

    def append(self, module: Module) -> _Indexed:
        """Add `module` at the end, named by its position."""
        setattr(self, str(len(self)), _module(type(self).__name__, len(self), module))
        return self

    def extend(self, modules: Iterable[Module]) -> _Indexed:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Put `module` before position `index`; the modules are numbered again."""
        modules = list(self)
        modules.insert(index, _module(type(self).__name__, index, module))
        self._renumber(modules)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module


class Sequential(_Indexed):
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
            setattr(self, name, _module("Sequential", f"layer {name}", layer))

    def __getitem__(self, index: int | slice) -> Module:
        if isinstance(index, slice):
            return Sequential(dict(list(self.named_children())[index]))
        return self._registry("_modules")[self._key(index)]

    def forward(self, x: Any) -> Any:
        for layer in self:
            x = layer(x)
        return x


class ModuleList(_Indexed):
    """Modules held in a list, registered as "0", "1", ... (no forward of its own).

    >>> from graphc import nn
    >>> blocks = nn.ModuleList([nn.Linear(2, 2, generator=k) for k in range(3)])
    >>> len(blocks), [name for name, _ in blocks.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        self.extend(modules)

    def __getitem__(self, index: int | slice) -> Module:
        if isinstance(index, slice):  # renumbered from 0, as torch's
            return ModuleList(list(self)[index])
        return self._registry("_modules")[self._key(index)]

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def __iadd__(self, other: Iterable[Module]) -> ModuleList:
        self.extend(other)
        return self


class ModuleDict(Module):
    """Modules held in a dict under their keys, in insertion order (no forward).

    >>> from graphc import nn
    >>> heads = nn.ModuleDict({"value": nn.Linear(4, 1, generator=0)})
    >>> heads["policy"] = nn.Linear(4, 3, generator=1)
    >>> list(heads), [name for name, _ in heads.named_parameters()][-1]
    (['value', 'policy'], 'policy.bias')
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] = ()) -> None:
        super().__init__()
        self.update(modules)

    def __getitem__(self, key: str) -> Module:
        try:
            return self._registry("_modules")[key]
        except KeyError:
            raise KeyError(f"ModuleDict has no module {key!r}") from None

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, _module("ModuleDict", repr(key), module))

    def __delitem__(self, key: str) -> None:
        self[key]  # noqa: B018 - a missing key raises KeyError naming it
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._registry("_modules"))

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry("_modules"))

    def __contains__(self, key: object) -> bool:
        return key in self._registry("_modules")

    def keys(self) -> Iterable[str]:
        return self._registry("_modules").keys()

    def values(self) -> Iterable[Module]:
        return self._registry("_modules").values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._registry("_modules").items()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module


def _parameter(owner: str, key: Any, value: Any) -> Parameter:
    """`value` as a parameter: a Parameter as it is, another tensor made one (torch's
    containers wrap tensors so)."""
    if isinstance(value, Parameter):
        return value
    if not isinstance(value, Tensor):
        raise GraphcError(f"{owner}: {key} is a {type(value).__name__}, not a tensor")
    return Parameter(value)


def _describe(p: Tensor) -> str:
    size = "x".join(str(d) for d in p.shape) or "()"
    return f"Parameter containing: [{p.dtype} of size {size}]"


class ParameterList(Module):
    """Parameters held in a list, registered as "0", "1", ... (tensors become Parameters).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> scales = nn.ParameterList([ge.ones(2), ge.zeros(3)])
    >>> [(name, p.shape) for name, p in scales.named_parameters()]
    [('0', (2,)), ('1', (3,))]
    """

    def __init__(self, values: Iterable[Tensor] = ()) -> None:
        super().__init__()
        self.extend(values)

    def __len__(self) -> int:
        return len(self._registry("_parameters"))

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self._registry("_parameters").values())

    def _key(self, index: int) -> str:
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"ParameterList: index {index} is out of range for {size}")
        return str(index % size)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ParameterList(list(self)[index])
        return self._registry("_parameters")[self._key(index)]

    def __setitem__(self, index: int, value: Tensor) -> None:
        setattr(self, self._key(index), _parameter("ParameterList", index, value))

    def append(self, value: Tensor) -> ParameterList:
        setattr(self, str(len(self)), _parameter("ParameterList", len(self), value))
        return self

    def extend(self, values: Iterable[Tensor]) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): {_describe(p)}" for k, p in enumerate(self))


class ParameterDict(Module):
    """Parameters held in a dict under their keys, in insertion order.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> table = nn.ParameterDict({"scale": ge.ones(2)})
    >>> table["shift"] = ge.zeros(2)
    >>> list(table), [name for name, _ in table.named_parameters()]
    (['scale', 'shift'], ['scale', 'shift'])
    """

    def __init__(self, values: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]] = ()) -> None:
        super().__init__()
        self.update(values)

    def __getitem__(self, key: str) -> Tensor:
        try:
            return self._registry("_parameters")[key]
        except KeyError:
            raise KeyError(f"ParameterDict has no parameter {key!r}") from None

    def __setitem__(self, key: str, value: Tensor) -> None:
        if not isinstance(key, str) or not key or "." in key:
            raise GraphcError(
                f"ParameterDict: a key is a non-empty string without '.', got {key!r}"
            )
        setattr(self, key, _parameter("ParameterDict", repr(key), value))

    def __delitem__(self, key: str) -> None:
        self[key]  # noqa: B018 - a missing key raises KeyError naming it
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._registry("_parameters"))

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry("_parameters"))

    def __contains__(self, key: object) -> bool:
        return key in self._registry("_parameters")

    def keys(self) -> Iterable[str]:
        return self._registry("_parameters").keys()

    def values(self) -> Iterable[Tensor]:
        return self._registry("_parameters").values()

    def items(self) -> Iterable[tuple[str, Tensor]]:
        return self._registry("_parameters").items()

    def pop(self, key: str) -> Tensor:
        value = self[key]
        del self[key]
        return value

    def update(self, values: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]]) -> None:
        pairs = values.items() if isinstance(values, Mapping) else values
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): {_describe(p)}" for k, p in self.items())
