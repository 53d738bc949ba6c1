"""Module backward hooks (torch's register_full_backward_hook and
register_full_backward_pre_hook) on the eager tape.

A call of a module with such hooks passes its tensor inputs that require grad through
one identity autograd Function and its floating outputs through another. Backward
reaches the outputs' Function first: it runs the pre-hooks on the gradients with
respect to the outputs (which may replace them) and keeps them; the inputs' Function
then has the gradients with respect to the inputs this call alone produced (another
use of an input adds its own elsewhere, as in torch) and runs the hooks on both, which
may replace the inputs' gradients. As in torch, grad_input holds zeros for a tensor
input that does not require grad (None for an argument that is no tensor), grad_output
None for an output that does not require grad; when no input requires grad, the hooks
run from the outputs' Function with None for every input.
"""

from __future__ import annotations

from typing import Any

from graphc.eager import Tensor, zeros_like
from graphc.eager.autograd import Function
from graphc.ir.types import is_float

__all__ = ["watch_inputs", "watch_outputs"]


class _Call:
    """What one module call's backward hooks need: the module, its positional arguments
    and which of them are watched, and the output gradients once known."""

    def __init__(self, module: Any, args: tuple, watched: list[int]) -> None:
        self.module, self.args, self.watched = module, args, watched
        self.count = len(args)
        self.outputs, self.watched_outputs = 0, []
        self.grad_output: tuple = ()

    def hooks(self, kind: str) -> list[Any]:
        return list(self.module.__dict__.get("_hooks", {}).get(kind, {}).values())

    def run(self, grad_input: tuple) -> tuple:
        for hook in self.hooks("backward"):
            changed = hook(self.module, grad_input, self.grad_output)
            if changed is not None:
                grad_input = tuple(changed) if isinstance(changed, (tuple, list)) else (changed,)
        return grad_input


def _copies(tensors: tuple) -> Any:
    copies = tuple(t * 1 for t in tensors)  # new tensors on the tape, the same values
    return copies if len(copies) != 1 else copies[0]


class _Inputs(Function):
    @staticmethod
    def forward(ctx: Any, call: _Call, *tensors: Tensor) -> Any:
        ctx.call = call
        return _copies(tensors)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        call = ctx.call
        grad_input = [zeros_like(a) if isinstance(a, Tensor) else None for a in call.args]
        for position, grad in zip(call.watched, grads):
            grad_input[position] = grad
        grad_input = call.run(tuple(grad_input))
        return (None, *(grad_input[position] for position in call.watched))


class _Outputs(Function):
    @staticmethod
    def forward(ctx: Any, call: _Call, *tensors: Tensor) -> Any:
        ctx.call = call
        return _copies(tensors)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        call = ctx.call
        full = [None] * call.outputs
        for position, grad in zip(call.watched_outputs, grads):
            full[position] = grad
        grad_output = tuple(full)
        for hook in call.hooks("backward_pre"):
            changed = hook(call.module, grad_output)
            if changed is not None:
                grad_output = tuple(changed) if isinstance(changed, (tuple, list)) else (changed,)
        call.grad_output = grad_output
        if not call.watched:  # no input takes a gradient: the hooks run here, as torch's
            call.run((None,) * call.count)
        return (None, *(grad_output[position] for position in call.watched_outputs))


def watch_inputs(module: Any, args: tuple) -> tuple[tuple, _Call]:
    """The call's arguments with those that require grad passed through the inputs'
    Function, and the call's record for `watch_outputs`."""
    watched = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    call = _Call(module, args, watched)
    if not watched:
        return args, call
    copies = _Inputs.apply(call, *(args[i] for i in watched))
    copies = copies if isinstance(copies, tuple) else (copies,)
    args = list(args)
    for position, copy in zip(watched, copies):
        args[position] = copy
    return tuple(args), call


def watch_outputs(call: _Call, output: Any) -> Any:
    """The call's output (a tensor, or a tuple or list of them) with its floating
    tensors passed through the outputs' Function."""
    single = isinstance(output, Tensor)
    items = (output,) if single else tuple(output) if isinstance(output, (tuple, list)) else ()
    floats = [
        i
        for i, t in enumerate(items)
        if isinstance(t, Tensor) and is_float(t.dtype) and t.requires_grad
    ]
    call.outputs, call.watched_outputs = len(items), floats
    if not floats:
        return output
    copies = _Outputs.apply(call, *(items[i] for i in floats))
    copies = copies if isinstance(copies, tuple) else (copies,)
    items = list(items)
    for position, copy in zip(floats, copies):
        items[position] = copy
    if single:
        return items[0]
    return items if isinstance(output, list) else tuple(items)
