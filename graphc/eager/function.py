"""`autograd.Function`: user-defined ops with a hand-written backward, PyTorch style.

`MyFn.apply(*args)` runs `MyFn.forward(ctx, *args)` without recording, then makes
`ctx` (an instance of the generated class `MyFnBackward`) the `grad_fn` of the
outputs. In backward the engine calls `MyFn.backward(ctx, *grads)`, which returns one
gradient per forward argument (None for non-tensor arguments).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager.grad_fn import (
    FREED_MESSAGE,
    GradFn,
    check_grads,
    edge,
    move_retained,
    needed_edges,
)
from graphc.eager.grad_mode import STATE, no_grad
from graphc.eager.tensor import Tensor, make
from graphc.eager.views import check_view_inplace, rebase_history
from graphc.ir.errors import AutodiffError, TracingError
from graphc.ir.graph import active_graph
from graphc.ir.types import is_float
from graphc.ops.custom import arg_names as arg_names_of
from graphc.ops.custom import build_body, fit_cotangent, is_tensor_arg, record_custom, replay
from graphc.ops.symbolic import SYMBOLIC, Symbol


class FunctionCtx(GradFn):
    """The `ctx` of a custom Function: stash for backward, and the outputs' `grad_fn`."""

    _forward_cls: Any = None

    def __init__(self) -> None:
        self.needs_input_grad: tuple[bool, ...] = ()
        self.materialize_grads = True
        self._saved: list[tuple[Any, int]] | None = []
        self._non_differentiable: set[int] = set()
        self._dirty: list[Any] = []
        self._arg_slots: tuple[int, ...] = ()
        self._input_shapes: list[tuple] = []
        self._output_meta: list[Any] = []

    def name(self) -> str:
        return f"{self._forward_cls.__name__}Backward"

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors for backward; read them back from `ctx.saved_tensors`."""
        self._saved = [(t, t._counter[0] if isinstance(t, Tensor) else 0) for t in tensors]

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise AutodiffError(FREED_MESSAGE.format(name=self.name()))
        for i, (t, version) in enumerate(self._saved):
            counter = t.counter if isinstance(t, _SavedOutput) else getattr(t, "_counter", None)
            if counter is not None and counter[0] != version:
                raise AutodiffError(
                    f"{self.name()}: saved tensor {i} was modified by an in-place operation "
                    f"(now at version {counter[0]}; saved at version {version})"
                )
        return tuple(self._unpack(t) for t, _ in self._saved)

    def _unpack(self, saved: Any) -> Any:
        """A saved output comes back on the tape (for create_graph) only while in use."""
        if not isinstance(saved, _SavedOutput):
            return saved
        t = make(saved.array)
        t._counter = saved.counter
        if STATE.enabled:
            t.grad_fn = self
            t._output_nr = saved.index
            t._requires_grad = True
        return t

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors: Any) -> None:
        """Say forward modified these inputs in place (and returns them): their history is
        rebased onto this node, as an in-place op's is."""
        self._dirty.extend(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def release(self) -> None:
        if self._saved:
            self._saved = None

    def apply(self, grads: list[Any], wanted: Any = None) -> tuple:
        if self.materialize_grads:
            grads = [
                g if g is not None or meta is None else make(np.zeros(*meta))
                for g, meta in zip(grads, self._output_meta)
            ]
        result = self._forward_cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        count = len(self.needs_input_grad)
        if len(result) < count or any(g is not None for g in result[count:]):
            raise AutodiffError(
                f"{self.name()}: backward returned {len(result)} gradients, "
                f"forward took {count} arguments"
            )
        needs = needed_edges(self.next_functions, wanted)
        per_input = [result[slot] for slot in self._arg_slots]
        return check_grads(self, per_input, self._input_shapes, needs)


class _FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple, namespace: dict) -> None:
        super().__init__(name, bases, namespace)
        cls._backward_cls = type(f"{name}Backward", (FunctionCtx,), {"_forward_cls": cls})


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable functions.

    >>> from graphc.eager import tensor
    >>> class Exp(Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         result = x.exp()
    ...         ctx.save_for_backward(result)
    ...         return result
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (result,) = ctx.saved_tensors
    ...         return grad_output * result
    >>> x = tensor([1.0], requires_grad=True)
    >>> Exp.apply(x)
    tensor([2.7183], grad_fn=<ExpBackward>)
    """

    _backward_cls: type[FunctionCtx]

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        """torch 2's other style: a forward without ctx, and this to fill ctx from the
        inputs and the output (save_for_backward, attributes)."""
        raise NotImplementedError("setup_context is defined by Functions whose forward has no ctx")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        if active_graph() is not None or any(isinstance(a, Symbol) for a in args):
            return _apply_in_graph(cls, args, kwargs)
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        record = STATE.enabled and any(ctx.needs_input_grad)
        with no_grad():
            outputs = _run_forward(cls, ctx, args, kwargs)
        if not record:
            ctx.release()
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if ctx._dirty:
            _check_dirty(ctx, outs)
        slots = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        ctx._arg_slots = slots
        ctx.next_functions = tuple(edge(args[i]) for i in slots)
        ctx._input_shapes = [args[i].shape for i in slots]
        ctx.num_outputs = len(outs)
        ctx._output_meta = [(o.shape, o.dtype) if isinstance(o, Tensor) else None for o in outs]
        wrapped = [_attach(ctx, i, out, args) for i, out in enumerate(outs)]
        _save_outputs_weakly(ctx, wrapped)
        return wrapped[0] if single else tuple(wrapped)


def _ctx_style(cls: type[Function]) -> bool:
    """Whether forward takes ctx first (the classic style) rather than leaving ctx to
    setup_context."""
    return cls.setup_context is Function.setup_context


def _run_forward(cls: type[Function], ctx: FunctionCtx, args: tuple, kwargs: dict) -> Any:
    if _ctx_style(cls):
        return cls.forward(ctx, *args, **kwargs)
    output = cls.forward(*args, **kwargs)
    cls.setup_context(ctx, args, output)
    return output


def _check_dirty(ctx: FunctionCtx, outs: tuple) -> None:
    """torch's checks of the inputs forward marked dirty, and their version bump: the
    write happened under no_grad, yet it is an in-place op on the tape."""
    for t in ctx._dirty:
        if not any(t is out for out in outs):
            raise AutodiffError(
                f"{ctx.name()}: some elements marked as dirty during the forward method were "
                "not returned as output; the inputs that are modified in place must all be "
                "outputs of the Function"
            )
        if t._base is None and t._requires_grad and t.grad_fn is None:
            raise AutodiffError(
                f"{ctx.name()}: a leaf Variable that requires grad has been used in an in-place "
                "operation (marked dirty by forward); apply the Function to a copy, or under "
                "no_grad"
            )
        if t._base is not None:
            check_view_inplace(t, f"{ctx.name()} (an input marked dirty)")
            if len(outs) > 1:
                raise AutodiffError(
                    f"{ctx.name()}: a Function that modifies in place an input that is a view "
                    "of another tensor may return one tensor only (as in torch); clone() the "
                    "input first"
                )
    for t in {id(t): t for t in ctx._dirty}.values():
        t._counter[0] += 1
    if ctx._saved:  # saved before the bump: the values backward reads are the written ones
        ctx._saved = [
            (t, t._counter[0] if any(t is d for d in ctx._dirty) else version)
            for t, version in ctx._saved
        ]


def _attach(ctx: FunctionCtx, index: int, out: Any, args: tuple) -> Any:
    """Make `out` an output of `ctx` on the tape (through an alias if it is an input, unless
    forward marked it dirty: then the input itself is rebased onto `ctx`)."""
    if not isinstance(out, Tensor) or not is_float(out._data.dtype):
        return out
    if id(out) in ctx._non_differentiable:
        return out
    if any(out is t for t in ctx._dirty):
        return _rebase_dirty(ctx, index, out)
    if out._requires_grad or any(out is a for a in args):
        alias = make(out._data)
        alias._counter = out._counter
        out = alias
    out.grad_fn = ctx
    out._output_nr = index
    out._requires_grad = True
    return out


def _rebase_dirty(ctx: FunctionCtx, index: int, out: Tensor) -> Tensor:
    """`out` was written in place by forward: its history is now `ctx` (a view's base gets
    a CopySlices history, as after any in-place op on a view)."""
    if out._base is None:
        old, old_nr = out.grad_fn, out._output_nr
        out.grad_fn = ctx
        out._output_nr = index
        out._requires_grad = True
        move_retained(out, old, old_nr)
        return out
    written = make(out._data)
    written._counter = out._counter
    written.grad_fn = ctx
    written._output_nr = index
    written._requires_grad = True
    rebase_history(out, written)
    return out


class _SavedOutput:
    """An output saved for backward, kept as memory only: holding the tensor itself
    (whose grad_fn is the ctx holding it) would make a reference cycle."""

    __slots__ = ("array", "counter", "index")

    def __init__(self, tensor: Tensor, index: int) -> None:
        self.array = tensor._data
        self.counter = tensor._counter
        self.index = index


def _save_outputs_weakly(ctx: FunctionCtx, wrapped: list) -> None:
    if not ctx._saved:
        return
    for k, (t, version) in enumerate(ctx._saved):
        for i, result in enumerate(wrapped):
            if t is result and result.grad_fn is ctx:  # not an input returned as is
                ctx._saved[k] = (_SavedOutput(result, i), version)
                break


# -- on graph values: one custom_vjp node ------------------------------------------------


def _apply_in_graph(cls: type[Function], args: tuple, kwargs: dict) -> Symbol:
    """Record `cls` as a custom_vjp node: forward and backward traced into its bodies.

    Tensor arguments (graph values, eager tensors, arrays) become the node's inputs;
    the others reach forward and backward as Python constants. `ctx` is one object
    shared by both traces, so attributes set in forward (ctx.coeff) are there in
    backward; saved values of the forward body are mapped into the backward body (the
    inputs and the output to its placeholders, intermediates recomputed there).
    """
    name = cls.__name__
    slots = [i for i, a in enumerate(args) if is_tensor_arg(a)]
    peers = [args[i] for i in slots]
    inputs = [SYMBOLIC.lift(a, None, peers) for a in peers]  # into the outer graph
    arg_names = arg_names_of(cls.forward, slots, skip=1 if _ctx_style(cls) else 0)
    types = [x.type for x in inputs]
    ctx = cls._backward_cls()
    ctx.needs_input_grad = tuple(
        i in slots and is_float(types[slots.index(i)].dtype) for i in range(len(args))
    )

    def forward(placeholders: list[Symbol]) -> list[Any]:
        call = list(args)
        for i, p in zip(slots, placeholders):
            call[i] = p
        out = _run_forward(cls, ctx, tuple(call), kwargs)
        if isinstance(out, tuple):
            if len(out) != 1:
                raise TracingError(
                    f"{name}.forward returned {len(out)} values; a Function traced into a graph "
                    "may return one tensor only for now (nodes have one output)"
                )
            out = out[0]
        return [out]

    fwd = build_body(f"{name}_forward", list(zip(arg_names, types)), forward)
    saved = list(ctx._saved or [])
    state = {k: v for k, v in vars(ctx).items() if isinstance(v, Symbol)}

    def backward(placeholders: list[Symbol]) -> list[Any]:
        *xs, out, ct = placeholders
        seeds = {fwd.outputs[0].inputs[0]: out, **dict(zip(fwd.inputs, xs))}
        wanted = [t.node for t, _ in saved if isinstance(t, Symbol)]
        wanted += [v.node for v in state.values()]
        env = replay(fwd, wanted, seeds)

        def mapped(value: Any) -> Any:
            if isinstance(value, Symbol) and value.node in env:
                return env[value.node]
            return value

        ctx._saved = [(mapped(t), version) for t, version in saved]
        for key, value in state.items():
            setattr(ctx, key, mapped(value))
        grads = cls.backward(ctx, ct)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) < len(args) or any(g is not None for g in grads[len(args) :]):
            raise AutodiffError(
                f"{name}Backward: backward returned {len(grads)} gradients, "
                f"forward took {len(args)} arguments"
            )
        return [fit_cotangent(grads[i], x) for i, x in zip(slots, xs)]

    bwd_inputs = [*zip(arg_names, types), ("out", fwd.outputs[0].type), ("ct", fwd.outputs[0].type)]
    bwd = build_body(f"{name}_backward", bwd_inputs, backward, [f"ct_{n}" for n in arg_names])
    return record_custom(name, inputs, fwd, bwd)
