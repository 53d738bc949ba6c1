"""`Optimizer`: one update rule that serves eager steps and compiled training steps.

A subclass states its update once, in `update(param, grad, state, group)`, written with
graphc ops and operators on whatever kind of value it is given: eager tensors
(`step()` runs it under `no_grad` and writes the results back in place) or graph
values (`gc.compile_train_step` records it into the training graph, where the
runtime writes the results into the parameters' own buffers). So the eager and
the static step compute the same numbers by construction.

Parameters come in param groups, as in torch: `params` is an iterable of tensors (one
group) or of dicts ``{"params": [...], "lr": ...}``, each group taking the constructor's
hyperparameters (`defaults`) for the keys it does not give. `param_groups` is that list
of dicts; `update` reads the hyperparameters of the parameter's group. Setting
``opt.lr = 0.5`` sets it in every group (and the defaults).

State is per parameter, as in torch: a dict of arrays named by `state_names_of(group)`,
made lazily by `init_state` (zeros) on a parameter's first step, and kept in `state`,
a list in the order of `params` (every group's parameters, group after group) that
also takes the parameter itself as the key (torch's `optimizer.state[p]`).
Hyperparameters are Python floats, weak-typed like numpy scalars, so they keep each
parameter's dtype.

A parameter that does not require grad is accepted and skipped while its gradient is
None (torch's rule), so freezing a layer needs no new optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from graphc.eager import Tensor, enable_grad, from_numpy, no_grad
from graphc.eager.autograd import zero_grads
from graphc.ir.errors import GraphcError
from graphc.ops import cast


def check_range(name: str, value: float, low: float, high: float | None = None) -> None:
    if not (low <= value and (high is None or value < high)):
        span = f"[{low}, {high})" if high is not None else f">= {low}"
        raise GraphcError(f"invalid {name}: {value} (expected {span})")


def check_adam_like(name: str, group: Mapping[str, Any]) -> None:
    """The checks of a group of Adam and its kin (Adam, AdamW, NAdam, RAdam, Adamax):
    torch's switches, lr, eps, the pair of betas in [0, 1), weight_decay."""
    check_switches(name, group)
    check_range("lr", group["lr"], 0.0)
    check_range("eps", group["eps"], 0.0)
    if len(group["betas"]) != 2:
        raise GraphcError(f"{name}: betas must be a pair (beta1, beta2), got {group['betas']!r}")
    check_range("beta1", group["betas"][0], 0.0, 1.0)
    check_range("beta2", group["betas"][1], 0.0, 1.0)
    check_range("weight_decay", group["weight_decay"], 0.0)


def check_switches(name: str, group: Mapping[str, Any]) -> None:
    """torch's implementation switches (`foreach`, `fused`, `capturable`,
    `differentiable`) choose how torch computes a step, not what it computes: a group
    keeps them, as torch's do, and graphc computes the same numbers whatever they say.
    Refused are the combinations torch refuses, and `differentiable=True`, a step
    recorded for autograd, which torch allows only for parameters that are no leaves
    (updating a leaf that requires grad in place under autograd is an error there) and
    graphc's optimizers take leaves only."""
    if group.get("fused") and group.get("foreach"):
        raise GraphcError(f"{name}: `fused` and `foreach` cannot be `True` together")
    if group.get("fused") and group.get("differentiable"):
        raise GraphcError(f"{name}: `fused` does not support `differentiable`")
    if group.get("differentiable"):
        raise GraphcError(
            f"{name}: differentiable=True records the step for autograd, which needs "
            "parameters that are no leaves (torch refuses to update a leaf that requires grad "
            "in place under autograd); graphc's optimizers update leaf tensors under no_grad, "
            "so leave differentiable=False"
        )


def like(value: Any, param: Any) -> Any:
    """A hyperparameter in `param`'s dtype: a Python number stays one (weak-typed, as
    numpy's scalars are), anything else (a compiled step's fed learning rate, a float64
    graph value) is cast, so that it scales the parameter in the parameter's dtype."""
    return value if isinstance(value, (int, float)) else cast(value, param.dtype)


def ascent(grad: Any, group: Mapping[str, Any]) -> Any:
    """The gradient to descend: negated when the group maximizes (torch's `maximize`,
    applied before any weight decay, as torch applies it)."""
    return -grad if group.get("maximize") else grad


def _as_array(value: Any) -> np.ndarray:
    return value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)


class ParameterStates(list):
    """Each parameter's state (a dict), in the order of the optimizer's parameters: read
    by position, or by the parameter itself as torch's `optimizer.state[p]`."""

    def __init__(self, params: list[Tensor], states: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(states)
        self.params = params

    def _index(self, key: Any) -> Any:
        if not isinstance(key, Tensor):
            return key
        for index, p in enumerate(self.params):
            if p is key:
                return index
        raise KeyError(f"optimizer state: the tensor of shape {tuple(key.shape)} is no parameter")

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._index(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._index(key), value)

    def __contains__(self, key: Any) -> bool:
        if isinstance(key, Tensor):  # as torch's: a parameter that has state
            return any(p is key for p in self.params) and bool(self[key])
        return super().__contains__(key)


class Optimizer:
    """Base class: holds the param groups, the state, `zero_grad` and eager `step`."""

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        object.__setattr__(self, "defaults", dict(defaults))
        self.param_groups: list[dict[str, Any]] = []
        self.params: list[Tensor] = []  # every group's parameters, in order
        # state per parameter index: name -> tensor; filled on each parameter's first step
        self.state: ParameterStates = ParameterStates(self.params)
        # the lr schedulers stepping this optimizer (graphc.optim.lr_scheduler): a compiled
        # step reads the learning rates of an optimizer with one every step
        self.lr_schedulers: list[Any] = []
        listed = list(params)
        if not listed:
            raise GraphcError(f"{type(self).__name__} got an empty parameter list")
        groups = listed if all(isinstance(g, Mapping) for g in listed) else [{"params": listed}]
        for group in groups:
            self.add_param_group(group)

    # -- hyperparameters and groups ----------------------------------------------------

    def check_group(self, group: Mapping[str, Any]) -> None:
        """Raise a GraphcError for hyperparameters out of range (subclasses check theirs)."""

    def state_names_of(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        """The names of a parameter's state under this group's hyperparameters."""
        return ()

    @property
    def state_names(self) -> tuple[str, ...]:
        """The state names under the defaults (a group's own settings may differ)."""
        return self.state_names_of(self.defaults)

    def add_param_group(self, param_group: Mapping[str, Any]) -> None:
        """Add a group ``{"params": tensors, hyperparameter: value, ...}``; the keys it
        does not give take the defaults. A parameter may be in one group only.

        >>> import graphc.eager as ge
        >>> from graphc import optim
        >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=0.1)
        >>> opt.add_param_group({"params": [ge.ones(3, requires_grad=True)], "lr": 0.01})
        >>> [g["lr"] for g in opt.param_groups]
        [0.1, 0.01]
        """
        if not isinstance(param_group, Mapping) or "params" not in param_group:
            raise GraphcError(
                f"{type(self).__name__}: a param group is a dict with a 'params' key, got "
                f"{type(param_group).__name__}"
            )
        group = dict(param_group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        named = [isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in params]
        if any(named):  # model.named_parameters(), as torch 2.13 takes: names kept in the group
            if not all(named):
                raise GraphcError(
                    f"{type(self).__name__}: a param group holds (name, parameter) pairs or "
                    "parameters, not both"
                )
            group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        seen = {id(p) for p in self.params}
        for index, p in enumerate(params, start=len(self.params)):
            if not isinstance(p, Tensor):
                raise GraphcError(
                    f"{type(self).__name__}: parameter {index} is a {type(p).__name__}, "
                    "not an eager tensor (pass model.parameters())"
                )
            if not p.is_leaf:
                raise GraphcError(
                    f"{type(self).__name__}: parameter {index} (shape {tuple(p.shape)}) must "
                    "be a leaf tensor (a non-leaf is a result of other tensors: detach it, "
                    "or optimize the leaves it comes from)"
                )
            if id(p) in seen:
                raise GraphcError(
                    f"{type(self).__name__}: parameter {index} (shape {tuple(p.shape)}) is "
                    "listed twice (in one group or in two): each parameter may appear once"
                )
            seen.add(id(p))
        for name, value in self.defaults.items():
            group.setdefault(name, value)
        group["params"] = params
        self.check_group(group)
        self.param_groups.append(group)
        self.params.extend(params)
        self.state.extend({} for _ in params)

    def group_of(self, index: int) -> dict[str, Any]:
        """The param group holding parameter `index` (of `params`)."""
        start = 0
        for group in self.param_groups:
            start += len(group["params"])
            if index < start:
                return group
        raise GraphcError(f"{type(self).__name__}: no parameter {index}")

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not attributes: the hyperparameters
        defaults = self.__dict__.get("defaults", {})
        if name not in defaults:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        values = [g[name] for g in self.__dict__.get("param_groups", [])] or [defaults[name]]
        if any(v != values[0] for v in values):
            raise GraphcError(
                f"{type(self).__name__}: {name} differs between the param groups "
                f"({values}); read opt.param_groups[i][{name!r}]"
            )
        return values[0]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__.get("defaults", {}):  # opt.lr = ...: every group
            for group in self.param_groups:
                trial = {**group, name: value}
                self.check_group(trial)
            self.defaults[name] = value
            for group in self.param_groups:
                group[name] = value
            return
        object.__setattr__(self, name, value)

    # -- state ---------------------------------------------------------------------------

    def init_state(self, param: Tensor, group: Mapping[str, Any] | None = None) -> dict:
        """A parameter's state before its first step: zeros of its shape, or scalar counters."""
        names = self.state_names_of(self.defaults if group is None else group)
        return {
            name: np.zeros(self.state_shape(name, param), self.state_dtype(name, param))
            for name in names
        }

    def completed_state(self, entry: Mapping[str, Any], group: Mapping[str, Any]) -> Mapping:
        """A loaded parameter state with what this optimizer keeps beyond torch's filled
        in from the rest (a subclass's; by default the entry as it is)."""
        return entry

    def state_dtype(self, name: str, param: Tensor) -> np.dtype:
        """The dtype a state is kept in: the parameter's (a subclass may keep a scalar in
        torch's scalar dtype, float32)."""
        return np.dtype(param.dtype)

    def state_shape(self, name: str, param: Tensor) -> tuple[int, ...]:
        """A state named "step" is a scalar counter; any other has the parameter's shape."""
        return () if name == "step" else tuple(param.shape)

    def update(
        self, param: Any, grad: Any, state: dict[str, Any], group: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """The new parameter and new state, from values of any kind (tensors or graph
        values), with the hyperparameters of `group` (the defaults when None)."""
        raise NotImplementedError

    def state_arrays(self, index: int) -> dict[str, np.ndarray]:
        """Parameter `index`'s current state as arrays (initial values before its first step)."""
        if not self.state[index]:
            return self.init_state(self.params[index], self.group_of(index))
        return {name: t.numpy() for name, t in self.state[index].items()}

    def load_state_arrays(self, index: int, arrays: dict[str, np.ndarray]) -> None:
        self.state[index] = {name: from_numpy(np.array(a)) for name, a in arrays.items()}

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: ``{"state": {index: {name: array}}, "param_groups": [group with
        "params" as the indices of its parameters]}``, arrays copied.

        >>> import graphc.eager as ge
        >>> from graphc import optim
        >>> opt = optim.SGD([ge.ones(2, requires_grad=True)], lr=0.1, momentum=0.9)
        >>> opt.state_dict()["param_groups"][0]["params"], opt.state_dict()["state"]
        ([0], {})
        """
        state = {
            index: {name: np.array(t.numpy(), copy=True) for name, t in entry.items()}
            for index, entry in enumerate(self.state)
            if entry
        }
        groups, start = [], 0
        for group in self.param_groups:
            count = len(group["params"])
            groups.append({**group, "params": list(range(start, start + count))})
            start += count
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take the hyperparameters and state of `state_dict` (from `state_dict()`, or
        torch's with arrays or tensors); its groups must have the sizes of ours."""
        groups = list(state_dict["param_groups"])
        sizes = [len(g["params"]) for g in groups]
        ours = [len(g["params"]) for g in self.param_groups]
        if sizes != ours:
            raise GraphcError(
                f"{type(self).__name__}.load_state_dict: the state has param groups of "
                f"sizes {sizes}, this optimizer {ours}"
            )
        # their parameter ids (indices in ours, or whatever torch's caller gave) -> our index
        keys = [key for group in groups for key in group["params"]]
        index_of = {key: index for index, key in enumerate(keys)}
        # everything is checked before anything changes: a refused state_dict leaves no trace
        trials = []
        for group, loaded in zip(self.param_groups, groups):
            trial = {**group, **{k: v for k, v in loaded.items() if k in self.defaults}}
            trial["params"] = group["params"]
            self.check_group(trial)
            trials.append(trial)
        group_of = [trial for trial in trials for _ in trial["params"]]
        state: list[dict[str, np.ndarray]] = [{} for _ in self.params]
        for key, entry in state_dict["state"].items():
            if key not in index_of:
                raise GraphcError(
                    f"{type(self).__name__}.load_state_dict: state for parameter {key!r}, "
                    "which no param group lists"
                )
            index = index_of[key]
            param = self.params[index]
            wanted_names = self.state_names_of(group_of[index])
            entry = self.completed_state(entry, group_of[index])
            missing = [name for name in wanted_names if name not in entry]
            if missing:
                raise GraphcError(
                    f"{type(self).__name__}.load_state_dict: the state of parameter {index} "
                    f"lacks {missing} (its settings keep {list(wanted_names)})"
                )
            for name, value in entry.items():
                array = _as_array(value)
                wanted = self.state_shape(name, param)
                if array.shape != wanted:
                    raise GraphcError(
                        f"{type(self).__name__}.load_state_dict: state {name!r} of parameter "
                        f"{index} has shape {array.shape}, expected {wanted}"
                    )
                state[index][name] = np.array(array, dtype=self.state_dtype(name, param))
        for group, trial in zip(self.param_groups, trials):
            group.update(trial)
        self.state = ParameterStates(self.params, ({} for _ in self.params))
        for index, arrays in enumerate(state):
            if arrays:
                self.load_state_arrays(index, arrays)

    # -- stepping ------------------------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the accumulated gradients (set them to None, or to zeros in place)."""
        zero_grads(self.params, set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Apply one update to every parameter that has a gradient, in place (a frozen
        parameter, requires_grad False, has none). `closure`, as torch's, recomputes the
        loss (with gradients recorded, whatever the caller's mode) before the update; its
        result is returned.

        >>> import graphc.eager as ge
        >>> from graphc import optim
        >>> w = ge.tensor([3.0], requires_grad=True)
        >>> opt = optim.SGD([w], lr=0.25)
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = (w * w).sum()
        ...     loss.backward()
        ...     return loss
        >>> opt.step(closure).item(), w.tolist()
        (9.0, [1.5])
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for index, p in enumerate(self.params):
                if p.grad is None:
                    continue
                group = self.group_of(index)
                if not self.state[index]:
                    self.load_state_arrays(index, self.init_state(p, group))
                new_param, new_state = self.update(p, p.grad, self.state[index], group)
                p.copy_(new_param)
                self.state[index] = new_state
        return loss

    def __repr__(self) -> str:
        def settings(group: Mapping[str, Any]) -> str:
            return ", ".join(f"{k}={group[k]}" for k in self.defaults)

        if len(self.param_groups) == 1:
            return f"{type(self).__name__}({settings(self.param_groups[0])})"
        groups = "; ".join(f"group {i}: {settings(g)}" for i, g in enumerate(self.param_groups))
        return f"{type(self).__name__}({groups})"
