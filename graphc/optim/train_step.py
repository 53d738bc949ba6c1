"""`compile_train_step`: forward, backward and optimizer update as ONE compiled graph.

How the graph is built:

1. Trace ``loss_fn(model(x), y)`` on the example batch's shapes, with the batch
   axis symbolic ("B"); the model's parameters become placeholders named after
   `named_parameters()` (dots become underscores).
2. Differentiate it with `gc.gradients` with respect to the parameters the
   optimizer trains: those in its param groups that require grad when the step is
   compiled (a frozen one, requires_grad False, is skipped, as eager `step()` skips a
   parameter without a gradient; so is one the loss reaches only through integer or
   boolean values, a comparison's or argmax's, whose .grad torch leaves None). The joint
   graph outputs the loss, then one gradient each.
3. Declare the step graph: placeholders x, y, every parameter, and the optimizer
   state of every trained parameter (``<param>_<state name>``); inline the joint
   graph; record the optimizer's own `update` on the parameter, gradient and state
   values, with the hyperparameters of the parameter's param group; output the loss and each new value (``<name>_new``).
4. `gc.compile(..., updates={name: name + "_new"})`: parameters and state become
   the executable's state, held in its own buffers and written in place each call.

Buffers the forward updates (batch norm's running statistics and batch count, through
`graphc.nn.module.update_buffer`) are recorded while tracing and become state too: the
traced loss graph outputs their new values after the loss, and the step writes them
back, so after N steps they hold what N eager steps (and PyTorch's) give. A buffer the
forward overwrites without reading it (spectral norm's v) is state as well, behind a
placeholder of the step graph that nothing reads. Other lifted
tensors the optimizer does not train (frozen parameters, buffers no forward updates,
captured tensors) are baked in as constants with their values at compile time.
Hyperparameters (betas, momentum, ...) are constants too, and so are the learning rates
unless the optimizer has an lr scheduler (graphc.optim.lr_scheduler) when the step is
compiled: then each param group's lr is a float64 placeholder (``lr``, or ``lr_group<i>``
for several groups) that every step is fed from ``param_groups[i]["lr"]``, so a schedule
needs no new compile. A step run after a constant hyperparameter changed raises
`StaleTrainStepError` (compile again). Which parameters train is decided at compile time
too: a step run after the requires_grad of a parameter in the optimizer changed raises
`StaleTrainStepError` before it computes anything (call `sync_to_model()` and compile
again).

Shape checks a layer can only make when the batch size is known (batch norm refuses a
training batch with one value per channel: its running variance would become nan) are
recorded while tracing (graphc/nn/shape_checks.py) and run before each step, so a
refused batch raises the layer's eager error (ShapeError) and changes no state.

Dropout: a traced dropout reads the graph's `rng_key` placeholder (folded with each
dropout's index, graphc/nn/functional/stochastic.py). The step keeps the key as state
and advances it every step (key <- fold_in(key, -1)), so each step draws new masks and
the plan stays pure: the first key comes from graphc.eager's generator when the step
is compiled (`ge.manual_seed` makes a run repeatable), or from `seed(key)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.eager import Tensor, creation, from_numpy, no_grad
from graphc.frontend import TensorSpec, constant, output, placeholder, trace
from graphc.frontend.trace import lifted_tensors, module_parameters
from graphc.ir.errors import GraphcError
from graphc.ir.graph import OP, Graph
from graphc.ir.types import TupleType, is_float
from graphc.nn.functional.stochastic import KEY
from graphc.nn.module import recording_buffer_updates
from graphc.nn.shape_checks import ShapeCheck, recording_shape_checks, run_shape_checks
from graphc.ops import fold_in
from graphc.ops.custom import zero_backward
from graphc.ops.grad_state import grad_enabled
from graphc.optim.optimizer import Optimizer
from graphc.passes.autodiff import gradients
from graphc.runtime.executable import Executable, compile

BATCH = "B"
LOSS = "loss"


class StaleTrainStepError(GraphcError, RuntimeError):
    """A parameter's requires_grad, or a hyperparameter the step holds as a constant,
    changed after the training step was compiled."""


def _as_array(value: Any) -> np.ndarray:
    return value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)


def _module_buffers(model: Any) -> dict[str, Tensor]:
    """A module's `named_buffers()` as a dict (dotted names); {} for other callables."""
    named = getattr(model, "named_buffers", None)
    return dict(named()) if callable(named) else {}


def _reaching_the_loss(loss_graph: Graph) -> set[str]:
    """The placeholders from which a gradient reaches the loss: those with a path to it
    through floating-point values only (torch's rule for which leaves get a .grad: an
    integer or boolean value, such as a comparison's or argmax's, carries none), and not
    through gc.stop_gradient or another custom node whose backward is zero (torch's
    detach: a zero gradient there would still be a .grad, and the update's weight decay
    and momentum would move the parameter)."""
    carrying = {next(o for o in loss_graph.outputs if o.name == LOSS).inputs[0]}
    for n in reversed(loss_graph.nodes):
        if n in carrying and n.kind == OP and _has_float(n.type) and not zero_backward(n):
            carrying.update(n.inputs)
    return {p.name for p in loss_graph.inputs if p in carrying and _has_float(p.type)}


def _has_float(t: Any) -> bool:
    items = t.items if isinstance(t, TupleType) else (t,)
    return any(is_float(item.dtype) for item in items)


def _batch_size(x: Any) -> int | None:
    shape = x.shape if hasattr(x, "shape") else np.shape(x)
    return int(shape[0]) if len(shape) else None


def _batch_spec(array: np.ndarray, what: str) -> TensorSpec:
    if array.ndim == 0:
        raise GraphcError(f"compile_train_step: {what} must have a batch axis, got a scalar")
    return TensorSpec((BATCH, *array.shape[1:]), array.dtype)


class TrainStep:
    """A compiled training step; see `compile_train_step`.

    `step(x, y)` runs forward, backward and the update and returns the loss (a 0-d
    array). The parameters live in the executable until `sync_to_model()` copies
    them (and the optimizer state) back into the model's tensors.
    """

    def __init__(
        self,
        model: Callable[[Any], Any],
        loss_fn: Callable[[Any, Any], Any],
        optimizer: Optimizer,
        example_batch: Sequence[Any],
        opt_level: int = 2,
        fast_math: bool = False,
        backend: str = "auto",
        wait: bool | None = None,
    ) -> None:
        if len(example_batch) != 2:
            raise GraphcError(
                f"compile_train_step: example_batch must be (x, y), got {len(example_batch)} items"
            )
        x, y = (_as_array(v) for v in example_batch)
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.loss_graph = self._trace_loss(x, y)
        self.lifted: dict[str, Tensor] = lifted_tensors(self.loss_graph)
        # placeholder names of the buffers the forward updates, in the loss graph's order
        self.buffer_names = self._buffer_placeholders()
        index_of = {id(p): i for i, p in enumerate(optimizer.params)}
        # the optimizer's parameters the loss uses -> requires_grad when compiled
        self.requires_grad = {
            n: t.requires_grad for n, t in self.lifted.items() if id(t) in index_of
        }
        # a parameter the loss reads only through values that carry no gradient (a
        # comparison, argmax, an integer cast) has .grad None in torch, and its step skips
        # it: no weight decay, momentum or state; so it is not trained here either
        self.gradless = sorted(
            set(n for n, flag in self.requires_grad.items() if flag)
            - _reaching_the_loss(self.loss_graph)
        )
        # placeholder name -> the optimizer's index of that parameter
        self.trained = {
            n: index_of[id(self.lifted[n])]
            for n, flag in self.requires_grad.items()
            if flag and n not in self.gradless
        }
        if not self.trained:
            frozen = sorted(n for n, flag in self.requires_grad.items() if not flag)
            raise GraphcError(
                "compile_train_step: the loss does not depend on any parameter the optimizer "
                f"trains (the loss uses {sorted(self.lifted) or 'no eager tensors'}"
                + (f"; frozen, requires_grad False: {frozen}" if frozen else "")
                + (f"; reached by no gradient: {self.gradless}" if self.gradless else "")
                + ")"
            )
        # an optimizer with an lr scheduler: each group's lr is a placeholder the step is
        # fed from param_groups every call; else the lrs are constants, as the rest are
        self.fed_lr = bool(optimizer.lr_schedulers)
        self.lr_names: list[str] = []
        self.compiled_hyperparameters = self._hyperparameters()
        # param placeholder -> {state key: state placeholder}
        self.state_names: dict[str, dict[str, str]] = {}
        self.random = any(p.name == KEY for p in self.loss_graph.inputs)
        self.key = np.int64(creation.generator().integers(-(2**63), 2**63 - 1))
        self.graph, updates = self._build_step_graph()
        self.executable: Executable = compile(
            self.graph,
            opt_level=opt_level,
            updates=updates,
            fast_math=fast_math,
            backend=backend,
            wait=wait,
        )
        self.load_from_model()

    # -- building -------------------------------------------------------------------

    def _trace_loss(self, x: np.ndarray, y: np.ndarray) -> Graph:
        model, loss_fn = self.model, self.loss_fn
        self.updated_buffers: list[Tensor] = []
        self.shape_checks: list[ShapeCheck] = []

        def loss(x: Any, y: Any) -> Any:
            with recording_buffer_updates() as pending, recording_shape_checks() as checks:
                value = loss_fn(model(x), y)
            self.shape_checks = checks
            self.updated_buffers = [buffer for buffer, _ in pending.values()]
            news = {f"buffer_{i}": new for i, (_, new) in enumerate(pending.values())}
            return {LOSS: value, **news}

        names = {**module_parameters(model), **_module_buffers(model)}
        with grad_enabled():  # a step differentiates its loss, as torch.func's grad would
            return trace(loss, _batch_spec(x, "x"), _batch_spec(y, "y"), name="loss", params=names)

    def _buffer_placeholders(self) -> list[str]:
        """The state name of each buffer the forward updates: its placeholder where the
        forward reads it too, else a name of its own (a buffer the forward overwrites
        without reading, spectral norm's v: the step graph gets a placeholder for it that
        nothing reads, so the executable keeps it as state all the same)."""
        name_of = {id(t): name for name, t in self.lifted.items()}
        dotted = {id(t): name for name, t in _module_buffers(self.model).items()}
        self.buffer_tensors: dict[str, Tensor] = {}
        names = []
        for index, buffer in enumerate(self.updated_buffers):
            name = name_of.get(id(buffer))
            if name is None:
                base = dotted.get(id(buffer), f"buffer_{index}").replace(".", "_")
                name, count = base, 1
                while name in self.lifted or name in self.buffer_tensors:
                    name, count = f"{base}_{count}", count + 1
            self.buffer_tensors[name] = buffer
            names.append(name)
        return names

    def _build_step_graph(self) -> tuple[Graph, dict[str, str]]:
        joint = gradients(self.loss_graph, wrt=list(self.trained), outputs=[LOSS])
        step = Graph("train_step")
        updates: dict[str, str] = {}
        with step:
            x, y = (placeholder(p.name, p.type.shape, p.type.dtype) for p in joint.inputs[:2])
            lrs = self._lr_placeholders(step) if self.fed_lr else None
            values: dict[str, Any] = {}
            for p in joint.inputs[2:]:
                if p.name in self.trained or p.name in self.buffer_names or p.name == KEY:
                    values[p.name] = placeholder(p.name, p.type.shape, p.type.dtype)
                else:  # not trained: frozen at its current value
                    values[p.name] = constant(_as_array(self.lifted[p.name]), name=p.name)
            read = {p.name for p in joint.inputs}
            for index, name in enumerate(self.buffer_names):
                if name not in read:  # overwritten, never read: a placeholder of its own
                    fresh = step.fresh_name(name)
                    buffer = self.buffer_tensors.pop(name)
                    self.buffer_tensors[fresh] = buffer
                    self.buffer_names[index] = fresh
                    placeholder(fresh, tuple(buffer.shape), buffer.dtype)
            states = {name: self._state_placeholders(step, name) for name in self.trained}
            loss, *rest = joint(x, y, **values)
            news, grads = rest[: len(self.buffer_names)], rest[len(self.buffer_names) :]
            output(loss, name=LOSS)
            for name, new in zip(self.buffer_names, news):
                updates[name] = self._output_update(step, new, name)
            if self.random:  # the next step's key
                updates[KEY] = self._output_update(step, fold_in(values[KEY], -1), KEY)
            for name, grad in zip(self.trained, grads):
                group = self.optimizer.group_of(self.trained[name])
                if lrs is not None:
                    index = next(i for i, g in enumerate(self.optimizer.param_groups) if g is group)
                    group = {**group, "lr": lrs[index]}
                new_param, new_state = self.optimizer.update(
                    values[name], grad, states[name], group
                )
                updates[name] = self._output_update(step, new_param, name)
                for key, value in new_state.items():
                    target = self.state_names[name][key]
                    updates[target] = self._output_update(step, value, target)
        return step, updates

    def _lr_placeholders(self, step: Graph) -> list[Any]:
        groups = len(self.optimizer.param_groups)
        self.lr_names = ["lr"] if groups == 1 else [f"lr_group{i}" for i in range(groups)]
        self.lr_names = [step.fresh_name(name) for name in self.lr_names]
        return [placeholder(name, (), np.float64) for name in self.lr_names]

    def _hyperparameters(self) -> list[dict[str, Any]]:
        """Each param group's settings the step holds as constants (all but a fed lr)."""
        skip = {"params", "initial_lr"} | ({"lr"} if self.fed_lr else set())
        return [
            {k: v for k, v in group.items() if k not in skip}
            for group in self.optimizer.param_groups
        ]

    def _check_hyperparameters(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.compiled_hyperparameters):
            raise StaleTrainStepError(
                f"TrainStep: the optimizer has {len(groups)} param groups, and the step was "
                f"compiled with {len(self.compiled_hyperparameters)}: compile it again"
            )
        for index, (group, then) in enumerate(zip(groups, self.compiled_hyperparameters)):
            for key, value in then.items():
                if group.get(key) != value:
                    advice = (
                        "make the lr scheduler before compiling the step (its step then reads "
                        "the learning rates), or compile again"
                        if key == "lr"
                        else "compile the step again"
                    )
                    raise StaleTrainStepError(
                        f"TrainStep: {key} of param group {index} is {group.get(key)!r}, and "
                        f"the step was compiled with {key}={value!r} as a constant: {advice}"
                    )

    def _lr_feeds(self) -> list[np.ndarray]:
        return [np.asarray(g["lr"], np.float64) for g in self.optimizer.param_groups]

    @staticmethod
    def _output_update(step: Graph, value: Any, target: str) -> str:
        name = step.fresh_name(f"{target}_new")
        output(value, name=name)
        return name

    def _state_placeholders(self, step: Graph, name: str) -> dict[str, Any]:
        arrays = self.optimizer.state_arrays(self.trained[name])
        targets = self.state_names[name] = {k: step.fresh_name(f"{name}_{k}") for k in arrays}
        return {k: placeholder(targets[k], a.shape, a.dtype) for k, a in arrays.items()}

    # -- running and syncing ---------------------------------------------------------

    def check_current(self) -> None:
        """Raise StaleTrainStepError where what the step was compiled with has changed
        since (a parameter's requires_grad, a hyperparameter it holds as a constant):
        whatever runs the step (`step`, a DataParallelStep) asks first."""
        for name, flag in self.requires_grad.items():
            if self.lifted[name].requires_grad != flag:
                raise StaleTrainStepError(
                    f"TrainStep: parameter '{name}' was compiled with requires_grad={flag} "
                    f"(so it {'trains' if flag else 'stays frozen'}), and requires_grad is now "
                    f"{not flag}: call sync_to_model() and compile the step again"
                )
        self._check_hyperparameters()

    def fed_hyperparameters(self) -> dict[str, np.ndarray]:
        """What a step is fed beside the batch, by placeholder name: each param group's
        current lr when an lr scheduler drives them, else nothing."""
        return dict(zip(self.lr_names, self._lr_feeds())) if self.fed_lr else {}

    def step(self, x: Any, y: Any) -> np.ndarray:
        """One training step on a batch; returns the loss before the update."""
        self.check_current()
        size = _batch_size(x)
        if self.shape_checks and size is not None:  # else the executable's feed error
            run_shape_checks(self.shape_checks, {BATCH: size})
        if self.fed_lr:
            return self.executable(x, y, *self._lr_feeds())
        return self.executable(x, y)

    __call__ = step

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the step's plans run on their final tier (see `Executable.wait`)."""
        return self.executable.wait(timeout)

    def load_from_model(self) -> None:
        """Copy the model's parameters and the optimizer's state into the executable."""
        values = {name: _as_array(self.lifted[name]) for name in self.trained}
        values.update({name: _as_array(self.buffer_tensors[name]) for name in self.buffer_names})
        for name, index in self.trained.items():
            for key, array in self.optimizer.state_arrays(index).items():
                values[self.state_names[name][key]] = array
        if self.random:
            values[KEY] = np.asarray(self.key, np.int64)
        self.executable.set_state(**values)

    def seed(self, key: int) -> None:
        """Start the dropout keys from `key` (an int64); the next step draws with it."""
        self.key = np.int64(key)
        if self.random:
            self.executable.set_state(**{KEY: np.asarray(self.key, np.int64)})

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the trained parameters' current values, by the model's parameter names."""
        dotted = {id(t): name for name, t in module_parameters(self.model).items()}
        state = self.executable.state
        return {dotted.get(id(self.lifted[name]), name): state[name] for name in self.trained}

    def buffers(self) -> dict[str, np.ndarray]:
        """Copies of the buffers the steps update (batch norm's running statistics), by the
        model's buffer names."""
        dotted = {id(t): name for name, t in _module_buffers(self.model).items()}
        state = self.executable.state
        return {dotted.get(id(self.buffer_tensors[n]), n): state[n] for n in self.buffer_names}

    def sync_to_model(self) -> None:
        """Copy the parameters and updated buffers into the model's tensors (in place) and
        the state into the optimizer, so eager code sees them and eager training can
        continue from here."""
        state = self.executable.state
        with no_grad():
            for name in self.buffer_names:
                self.buffer_tensors[name].copy_(from_numpy(state[name]))
            for name, index in self.trained.items():
                self.lifted[name].copy_(from_numpy(state[name]))
                arrays = {key: state[target] for key, target in self.state_names[name].items()}
                if arrays:
                    self.optimizer.load_state_arrays(index, arrays)

    def explain(self, x: Any, y: Any) -> str:
        """The plan of a step on batches shaped like (x, y): steps, buffers, peak bytes."""
        return self.executable.explain(x, y, *(self._lr_feeds() if self.fed_lr else ()))

    def profile(self, x: Any, y: Any, runs: int = 20) -> Any:
        """Where a step's time goes, step by step of its plan (see `Executable.profile`);
        the parameters and the optimizer's state are as before once it returns."""
        feeds = self._lr_feeds() if self.fed_lr else ()
        return self.executable.profile(x, y, *feeds, runs=runs)

    def __repr__(self) -> str:
        return (
            f"<TrainStep: {len(self.trained)} trained parameter(s), "
            f"{type(self.optimizer).__name__}, {len(self.graph.nodes)} nodes>"
        )


def compile_train_step(
    model: Callable[[Any], Any],
    loss_fn: Callable[[Any, Any], Any],
    optimizer: Optimizer,
    example_batch: Sequence[Any],
    opt_level: int = 2,
    fast_math: bool = False,
    backend: str = "auto",
    wait: bool | None = None,
) -> TrainStep:
    """Compile forward, symbolic backward and `optimizer`'s update into one executable.
    `fast_math=True` lets the compiler change values (e.g. scale the batch operand of
    the weight gradient by the learning rate; see `gc.compile`); `backend` picks who
    runs the plan, and `wait` whether a step waits for its compiled kernels, as in
    `gc.compile`.

    Parameters and optimizer state stay in the executable's buffers, updated in place
    by each `step(x, y)`; `sync_to_model()` copies them back into the model. The batch
    axis is symbolic, so a smaller last batch works too (with its own plan).

    The step trains the optimizer's parameters that require grad when it is compiled;
    the others (frozen) are constants. If a parameter's requires_grad changes later,
    the next step raises `graphc.optim.StaleTrainStepError` and changes nothing: call
    `sync_to_model()` and compile again.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn, optim
    >>> model = nn.Linear(3, 1, generator=0)
    >>> opt = optim.SGD(model.parameters(), lr=0.1)
    >>> x, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)
    >>> train = gc.compile_train_step(model, nn.MSELoss(), opt, (x, y))
    >>> losses = [float(train.step(x, y)) for _ in range(20)]
    >>> losses[-1] < 1e-3 < losses[0]
    True
    >>> train.sync_to_model()
    """
    return TrainStep(model, loss_fn, optimizer, example_batch, opt_level, fast_math, backend, wait)
