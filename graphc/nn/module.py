"""`Module`: a layer that owns named eager tensors and runs in both modes.

A module's parameters are eager tensors that require grad, registered by assigning
them as attributes (as in PyTorch); submodules register the same way, so
`named_parameters()` walks the tree and names parameters by their attribute path
(``"0.weight"``). Registered values also live in the instance dict, so reading
``self.weight`` inside `forward` is a plain attribute lookup.

`forward` is written with graphc op functions and operators, so the same code runs
eagerly on tensors and records nodes on graph values: `gc.trace(model, spec)`
lifts the parameters to placeholders named after `named_parameters()`
(``"encoder.0.weight"``), and the nodes a submodule's forward records carry its
attribute path as their scope (``meta["scope"] == "encoder/0"``).

Buffers a forward changes (batch norm's running statistics) change through
`update_buffer`: eagerly the tensor is written in place, as in PyTorch; while tracing,
the new value is a graph value, handed to whoever records buffer updates
(`compile_train_step` makes the buffer executable state updated by each step). A
trace nobody records for stays pure: the buffers keep their values.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from graphc.eager import Tensor, from_numpy, is_grad_enabled, no_grad
from graphc.eager.autograd import zero_grads
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.graph import active_graph
from graphc.ir.scope import SEPARATOR, known_values, path_scope
from graphc.ir.types import is_float
from graphc.nn.backward_hooks import watch_inputs, watch_outputs
from graphc.nn.parameter import Buffer, Parameter
from graphc.ops.devices import check_device

_REGISTRIES = ("_parameters", "_buffers", "_modules")


class _Recorders(threading.local):
    """The buffer-update recorders open in this thread, innermost last."""

    def __init__(self) -> None:
        self.stack: list[dict[int, tuple[Tensor, Any]]] = []


_RECORDERS = _Recorders()


class _Trees(threading.local):
    """While recording: the module trees being called, outermost first, each as
    id(module) -> its attribute path ("encoder.0.linear"; "" for the tree's root)."""

    def __init__(self) -> None:
        self.paths: list[dict[int, str]] = []


_TREES = _Trees()


@contextmanager
def _module_scope(module: Module) -> Iterator[None]:
    """Record the module's nodes under its attribute path as their scope
    ("encoder/0/linear"). The outermost module called is the root of the paths, and
    its parameters' and buffers' dotted names are known to tracing, which names their
    placeholders so."""
    for paths in reversed(_TREES.paths):
        path = paths.get(id(module))
        if path is not None:
            with path_scope(path.replace(".", SEPARATOR)):
                yield
            return
    paths = {id(m): name for name, m in module.named_modules()}
    values: dict[int, str] = {}
    for name, tensor in module._state_items(everything=True):
        values.setdefault(id(tensor), name)  # a shared tensor: its first key, as torch
    _TREES.paths.append(paths)
    try:
        with known_values(values):
            yield
    finally:
        _TREES.paths.pop()


@contextmanager
def recording_buffer_updates() -> Iterator[dict[int, tuple[Tensor, Any]]]:
    """Collect the graph values that forwards traced inside give to buffers.

    Yields a dict id(buffer) -> (buffer, new value), filled as `update_buffer` is called
    on graph values (a later update of the same buffer replaces the earlier one).

    >>> import graphc as gc, graphc.eager as ge
    >>> count = ge.tensor(0)
    >>> def step(x):
    ...     update_buffer(count, count + 1)
    ...     return x * 2.0
    >>> with recording_buffer_updates() as updates:
    ...     g = gc.trace(step, gc.TensorSpec((2,)))
    >>> [str(value.type) for _, value in updates.values()]
    ['i64[]']
    """
    updates: dict[int, tuple[Tensor, Any]] = {}
    _RECORDERS.stack.append(updates)
    try:
        yield updates
    finally:
        _RECORDERS.stack.remove(updates)


def keeps_updates(value: Any) -> bool:
    """Would an update computed from `value` be kept: eagerly (a tensor), or while
    something records buffer updates? (Else a forward need not compute it at all.)"""
    return isinstance(value, Tensor) or bool(_RECORDERS.stack)


def update_buffer(buffer: Tensor, value: Any) -> None:
    """Give `buffer` a new value: in place for a tensor (without recording gradients);
    recorded for the innermost `recording_buffer_updates` for a graph value (dropped
    when nothing records: the trace stays pure)."""
    if isinstance(value, Tensor):
        with no_grad():
            buffer.copy_(value.detach())
    elif _RECORDERS.stack:
        _RECORDERS.stack[-1][id(buffer)] = (buffer, value)


def buffer_value(buffer: Tensor) -> Any:
    """The buffer's current value: a graph value recorded for it earlier in this trace,
    else the buffer itself (so a module applied twice updates twice, as in PyTorch)."""
    if _RECORDERS.stack:
        pending = _RECORDERS.stack[-1].get(id(buffer))
        if pending is not None:
            return pending[1]
    return buffer


class _HookHandle:
    """What registering a hook returns: `remove()` takes the hook away again."""

    _next_id = 0

    def __init__(self, hooks: dict[int, Any]) -> None:
        self.hooks = hooks
        self.id = _HookHandle._next_id
        _HookHandle._next_id += 1

    def remove(self) -> None:
        self.hooks.pop(self.id, None)


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict(strict=False)` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class _ForwardSignature:
    """An instance's call signature is its forward's, so tracing names inputs after it."""

    def __get__(self, module: Module | None, owner: type) -> inspect.Signature | None:
        return None if module is None else inspect.signature(module.forward)


class Module:
    """Base class of layers: parameters, buffers and submodules found by attribute.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> class Scale(nn.Module):
    ...     def __init__(self) -> None:
    ...         super().__init__()
    ...         self.w = ge.ones(2, requires_grad=True)  # requires grad: a parameter
    ...     def forward(self, x):
    ...         return x * self.w
    >>> [name for name, _ in Scale().named_parameters()]
    ['w']
    """

    training: bool
    __signature__ = _ForwardSignature()

    def __init__(self) -> None:
        for registry in _REGISTRIES:
            object.__setattr__(self, registry, {})
        object.__setattr__(self, "_non_persistent", set())  # buffers left out of state_dict
        object.__setattr__(self, "training", True)

    # -- registration ---------------------------------------------------------------

    def _registry(self, name: str) -> dict[str, Any]:
        try:
            return self.__dict__[name]
        except KeyError:
            raise GraphcError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes"
            ) from None

    def _unregister(self, name: str, keep: str | None = None) -> None:
        for registry in _REGISTRIES:
            if registry != keep:
                self._registry(registry).pop(name, None)

    def _register(self, registry: str | None, name: str, value: Any) -> None:
        """File `value` under `name` in `registry` (None: in none). A name assigned again
        in its own registry keeps its place, so `state_dict` and `named_parameters` keep
        the registration order, as torch's do."""
        self._unregister(name, keep=registry)
        if registry is not None:
            self._registry(registry)[name] = value
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Buffer):  # torch's nn.Buffer: register_buffer's spelling
            self.register_buffer(name, value, value.persistent)
            return
        if isinstance(value, Parameter):
            registry = "_parameters"  # whether or not it requires grad, as torch's
        elif isinstance(value, Tensor) and name in self._registry("_parameters"):
            registry = "_parameters"  # a frozen (requires_grad False) tensor keeps the slot
        elif isinstance(value, Tensor) and (
            value.requires_grad or name in self._registry("_buffers")
        ):
            registry = "_parameters" if value.requires_grad else "_buffers"
        elif isinstance(value, Module):
            registry = "_modules"
        elif value is None and name in self._registry("_parameters"):
            registry = "_parameters"  # an empty slot (torch's `self.bias = None`): listed nowhere
        elif value is None and name in self._registry("_buffers"):
            registry = "_buffers"
        else:
            registry = None
        self._register(registry, name, value)

    def __delattr__(self, name: str) -> None:
        self._unregister(name)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, tensor: Tensor | None) -> None:
        """Register `tensor` as a parameter (a plain tensor is made to require grad; an
        nn.Parameter keeps its requires_grad), or None as an empty slot, as torch's."""
        if tensor is not None and not isinstance(tensor, Parameter) and not tensor.requires_grad:
            tensor.requires_grad_()
        self._register("_parameters", name, tensor)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register state that is not trained (e.g. running stats), saved in `state_dict`
        unless persistent=False, as torch's."""
        self._register("_buffers", name, tensor)
        if persistent:
            self.__dict__["_non_persistent"].discard(name)
        else:
            self.__dict__["_non_persistent"].add(name)

    # -- walking the tree -----------------------------------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._registry("_modules").items()

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(
        self, memo: set[Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, named by attribute path; a module
        reached twice is listed once unless remove_duplicate=False (torch's arguments)."""
        seen: set[int] = {id(m) for m in memo} if memo else set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in seen:
                    continue
                seen.add(id(module))
            yield name, module
            children = list(module.named_children())
            for child_name, child in reversed(children):
                stack.append((f"{name}.{child_name}" if name else child_name, child))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def _named_members(
        self, registry: str, recurse: bool, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()  # a tensor shared by two layers is listed once, as in torch
        if recurse:
            modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            modules = iter([(prefix, self)])
        for path, module in modules:
            for name, tensor in module._registry(registry).items():
                if tensor is None or (remove_duplicate and id(tensor) in seen):
                    continue
                seen.add(id(tensor))
                yield (f"{path}.{name}" if path else name), tensor

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, tensor) for every parameter, each tensor once."""
        if isinstance(prefix, bool):  # graphc's earlier spelling named_parameters(recurse)
            prefix, recurse = "", prefix
        return self._named_members("_parameters", recurse, prefix, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, tensor in self.named_parameters(recurse=recurse):
            yield tensor

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, tensor) for every buffer, each tensor once."""
        if isinstance(prefix, bool):  # graphc's earlier spelling named_buffers(recurse)
            prefix, recurse = "", prefix
        return self._named_members("_buffers", recurse, prefix, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, tensor in self.named_buffers(recurse=recurse):
            yield tensor

    def add_module(self, name: str, module: Module | None) -> None:
        """Register `module` as the submodule `name` (torch's spelling of setattr)."""
        if module is not None and not isinstance(module, Module):
            raise GraphcError(
                f"{type(self).__name__}.add_module: {name!r} is a {type(module).__name__}, "
                "not an nn.Module"
            )
        if not isinstance(name, str) or not name or "." in name:
            raise GraphcError(
                f"{type(self).__name__}.add_module: a module name is a non-empty string "
                f"without '.', got {name!r}"
            )
        self._register("_modules", name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ("" is this module)."""
        module: Module = self
        if not target:
            return module
        walked = []
        for part in target.split("."):
            child = module._registry("_modules").get(part)
            if child is None:
                where = ".".join(walked) or type(self).__name__
                raise GraphcError(
                    f"{type(self).__name__}.get_submodule: {where} has no submodule {part!r} "
                    f"(looking for {target!r})"
                )
            walked.append(part)
            module = child
        return module

    def _get_member(self, target: str, registry: str, what: str) -> Tensor:
        path, _, name = target.rpartition(".")
        member = self.get_submodule(path)._registry(registry).get(name)
        if member is None:
            raise GraphcError(f"{type(self).__name__}: no {what} {target!r}")
        return member

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at dotted path `target` ("encoder.0.weight")."""
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path `target` ("bn.running_mean")."""
        return self._get_member(target, "_buffers", "buffer")

    # -- state ----------------------------------------------------------------------

    def _state_items(
        self, prefix: str = "", everything: bool = False
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted key, tensor) of every parameter and buffer (the non-persistent buffers
        only with `everything`), walked as PyTorch's state_dict walks: each module's
        parameters, then its buffers, then its children; a module or tensor reached twice
        (shared) is listed under each of its keys."""
        left_out = set() if everything else self.__dict__.get("_non_persistent", set())
        for registry in ("_parameters", "_buffers"):
            for name, tensor in self._registry(registry).items():
                if tensor is not None and not (registry == "_buffers" and name in left_out):
                    yield prefix + name, tensor
        for name, child in self.named_children():
            yield from child._state_items(f"{prefix}{name}.", everything)

    def state_dict(
        self, destination: dict[str, Any] | None = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Any]:
        """Copies of every parameter and buffer as numpy arrays, under PyTorch's keys and
        in its order (each key after `prefix`; into `destination` if given; the tensors
        themselves with keep_vars=True).

        >>> from graphc import nn
        >>> list(nn.Sequential(nn.Linear(2, 2, generator=0), nn.BatchNorm1d(2)).state_dict())[2:]
        ['1.weight', '1.bias', '1.running_mean', '1.running_var', '1.num_batches_tracked']
        """
        state = {} if destination is None else destination
        for key, t in self._state_items(prefix):
            state[key] = t if keep_vars else np.array(t.detach().numpy(), copy=True)
        return state

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True
    ) -> IncompatibleKeys:
        """Copy arrays into the parameters and buffers in place (the tensors stay the same).

        Shapes must match; values are cast to each tensor's dtype. With `strict`,
        missing or unexpected keys are an error naming them.
        """
        own = dict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise GraphcError(
                f"load_state_dict for {type(self).__name__}: missing keys {missing}, "
                f"unexpected keys {unexpected}"
            )
        for name, tensor in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            array = np.asarray(value.detach().numpy() if isinstance(value, Tensor) else value)
            if array.shape != tuple(tensor.shape):
                raise ShapeError(
                    f"load_state_dict: '{name}' expects shape {tuple(tensor.shape)}, "
                    f"got {array.shape}"
                )
            with no_grad():
                tensor.copy_(from_numpy(np.array(array, dtype=tensor.dtype)))
        return IncompatibleKeys(missing, unexpected)

    # -- modes and gradients -----------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the accumulated gradients (set them to None, or to zeros in place)."""
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze every parameter; they stay parameters, as in torch."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def apply(self, fn: Any) -> Module:
        """Call fn on every submodule, then on this module (torch's order); returns self.

        >>> from graphc import nn
        >>> from graphc.nn import init
        >>> net = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
        >>> _ = net.apply(lambda m: init.zeros_(m.bias) if isinstance(m, nn.Linear) else None)
        >>> net[1].bias.tolist()
        [0.0]
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Cast the floating-point parameters and buffers (and gradients) to a dtype, in
        place: `to(dtype)`, `to(tensor)`, `to(device, dtype)` (the only device is "cpu").
        Integer buffers (num_batches_tracked) keep theirs, as in torch."""
        args = tuple(a.dtype if isinstance(a, Tensor) else a for a in args)
        if isinstance(kwargs.get("dtype"), Tensor):
            kwargs["dtype"] = kwargs["dtype"].dtype
        kwargs.pop("non_blocking", None)  # a device other than the CPU is refused below
        dtype = np.dtype(from_numpy(np.zeros(0, np.float32)).to(*args, **kwargs).dtype)
        if not is_float(dtype):
            raise GraphcError(
                f"{type(self).__name__}.to: a module's dtype must be floating point, got {dtype}"
            )
        for _, tensor in self._state_items(everything=True):
            if not is_float(tensor.dtype) or tensor.dtype == dtype:
                continue
            with no_grad():
                tensor.data = tensor.detach().numpy().astype(dtype)
                if tensor.grad is not None:
                    tensor.grad.data = tensor.grad.numpy().astype(dtype)
        return self

    def cpu(self) -> Module:
        """This module: graphc computes on the CPU already (as torch's cpu(), in place)."""
        return self

    def cuda(self, device: Any = None) -> Module:
        """An ArgumentError: there is no CUDA device here (graphc.ops.devices.check_device)."""
        check_device("cuda" if device is None else f"cuda:{device}", f"{type(self).__name__}.cuda")
        return self  # (not reached)

    def double(self) -> Module:
        """Floating-point parameters and buffers to float64."""
        return self.to(np.float64)

    def float(self) -> Module:
        """Floating-point parameters and buffers to float32."""
        return self.to(np.float32)

    def half(self) -> Module:
        """Floating-point parameters and buffers to float16 (graphc computes a 16-bit
        float op in float32 and rounds once)."""
        return self.to(np.float16)

    def bfloat16(self) -> Module:
        """Floating-point parameters and buffers to bfloat16 (needs ml_dtypes)."""
        return self.to("bfloat16")

    # -- calling --------------------------------------------------------------------

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hooks = self.__dict__.get("_hooks")
        if hooks:  # forward pre-hooks may replace the arguments
            for hook in list(hooks["pre"].values()):
                changed = hook(self, args)
                if changed is not None:
                    args = changed if isinstance(changed, tuple) else (changed,)
        # eagerly, recording: backward hooks watch this call's inputs and (after the
        # forward hooks, as torch's) its outputs
        watched = None
        backward = hooks and (hooks.get("backward") or hooks.get("backward_pre"))
        if backward and active_graph() is None and is_grad_enabled():
            args, watched = watch_inputs(self, args)
        if active_graph() is None:  # eagerly: no nodes to put in a scope
            output = self.forward(*args, **kwargs)
        else:
            with _module_scope(self):
                output = self.forward(*args, **kwargs)
        if hooks:  # forward hooks may replace the output
            for hook in list(hooks["post"].values()):
                changed = hook(self, args, output)
                if changed is not None:
                    output = changed
        return output if watched is None else watch_outputs(watched, output)

    def _add_hook(self, kind: str, hook: Any) -> _HookHandle:
        hooks = self.__dict__.setdefault("_hooks", {"pre": {}, "post": {}})
        hooks.setdefault(kind, {})
        handle = _HookHandle(hooks[kind])
        hooks[kind][handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook: Any) -> _HookHandle:
        """Call hook(module, args) before each forward; a result other than None replaces
        the arguments (a tuple, or one value). Returns a handle whose remove() undoes it.

        >>> import graphc.eager as ge
        >>> from graphc import nn
        >>> layer = nn.ReLU()
        >>> handle = layer.register_forward_pre_hook(lambda module, args: -args[0])
        >>> layer(ge.tensor([2.0, -3.0])).tolist()
        [0.0, 3.0]
        >>> handle.remove()
        """
        return self._add_hook("pre", hook)

    def register_forward_hook(self, hook: Any) -> _HookHandle:
        """Call hook(module, args, output) after each forward; a result other than None
        replaces the output. Returns a handle whose remove() undoes it."""
        return self._add_hook("post", hook)

    def register_full_backward_hook(self, hook: Any) -> _HookHandle:
        """Call hook(module, grad_input, grad_output) once the gradients with respect to
        this call's inputs are known (None for an input that takes none); a result other
        than None replaces grad_input. Eager calls only (a traced graph has no tape to
        hook); see graphc/nn/backward_hooks.py.

        >>> import graphc.eager as ge
        >>> from graphc import nn
        >>> seen = []
        >>> layer = nn.Tanh()
        >>> _ = layer.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].tolist()))
        >>> layer(ge.zeros(2, requires_grad=True)).sum().backward()
        >>> seen
        [[1.0, 1.0]]
        """
        return self._add_hook("backward", hook)

    def register_full_backward_pre_hook(self, hook: Any) -> _HookHandle:
        """Call hook(module, grad_output) once the gradients with respect to this call's
        outputs are known; a result other than None replaces grad_output."""
        return self._add_hook("backward_pre", hook)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        # torch's layout: extra_repr's lines, then one "(name): child" line per child
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): {child!r}" for name, child in self.named_children()]
        if len(lines) == 1 and not children:
            return f"{type(self).__name__}({lines[0]})"
        if not lines and not children:
            return f"{type(self).__name__}()"
        body = "\n".join(lines + children).replace("\n", "\n  ")
        return f"{type(self).__name__}(\n  {body}\n)"
