"""`gc.custom_vjp`: a function with a hand-written backward, JAX's spelling.

`f = gc.custom_vjp(fn); f.defvjp(fwd, bwd)`, with `fwd(*args) -> (out, residuals)`
and `bwd(residuals, ct) -> one cotangent per argument`. On graph values (inside
`with g:`, gc.trace, gc.jit) and on eager tensors, a call records one `custom_vjp`
node (graphc/ops/custom.py): `fn` traced into its forward body, `fwd` then `bwd`
traced into its backward body, so gradients follow `bwd` in static graphs and on the
eager tape alike. On plain arrays it just runs `fn`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from graphc.ir.errors import AutodiffError, GraphcError, TracingError
from graphc.ir.graph import active_graph
from graphc.ops.custom import (
    arg_names,
    build_body,
    fit_cotangent,
    is_tensor_arg,
    record_custom,
    value_type,
)
from graphc.ops.dispatch import kind_of
from graphc.ops.pytree import flatten, show_tree, unflatten
from graphc.ops.symbolic import Symbol


class _Running(threading.local):
    """The custom functions whose fwd this thread is tracing (fwd may call the function)."""

    def __init__(self) -> None:
        self.ids: set[int] = set()


_RUNNING = _Running()


class custom_vjp:  # noqa: N801 - JAX's name
    """Wrap `fn` so that its gradient is given by `defvjp(fwd, bwd)`.

    >>> import numpy as np, graphc as gc
    >>> @gc.custom_vjp
    ... def clip_grad(x):
    ...     return x
    >>> clip_grad.defvjp(lambda x: (x, None), lambda res, ct: (gc.clip(ct, -1.0, 1.0),))
    >>> g = gc.trace(lambda x: gc.sum(clip_grad(x) * 5.0), gc.TensorSpec((2,)))
    >>> gc.gradients(g, wrt=["x"])(np.ones(2, np.float32))[1]
    array([1., 1.], dtype=float32)
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        functools.update_wrapper(self, fn, updated=())  # not fn's __dict__

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """fwd(*args) -> (out, residuals); bwd(residuals, ct) -> tuple of cotangents."""
        self.fwd, self.bwd = fwd, bwd

    @property
    def _name(self) -> str:
        return getattr(self.fn, "__name__", "custom_vjp").replace("<lambda>", "lambda")

    def __call__(self, *args: Any) -> Any:
        leaves, tree = flatten(args)  # an argument may be a pytree, as in JAX
        graph_mode = active_graph() is not None or any(isinstance(a, Symbol) for a in leaves)
        plain = not graph_mode and not any(kind_of(a) is not None for a in leaves)
        if plain or id(self) in _RUNNING.ids:
            return self.fn(*args)  # plain arrays, or fwd calling the function itself
        if self.fwd is None or self.bwd is None:
            raise GraphcError(f"custom_vjp {self._name}: call defvjp(fwd, bwd) before using it")
        fwd, bwd, name = self.fwd, self.bwd, self._name
        slots = [i for i, a in enumerate(leaves) if is_tensor_arg(a)]
        types = [value_type(leaves[i]) for i in slots]
        specs = list(zip(_leaf_names(self.fn, args, slots), types))

        def call_with(placeholders: list[Symbol]) -> list[Any]:
            call = list(leaves)
            for i, p in zip(slots, placeholders):
                call[i] = p
            return list(unflatten(tree, call))

        forward = build_body(f"{name}_forward", specs, lambda ps: [self.fn(*call_with(ps))])
        out_type = forward.outputs[0].type

        def backward(placeholders: list[Symbol]) -> list[Any]:
            *xs, _out, ct = placeholders
            _RUNNING.ids.add(id(self))
            try:
                result = fwd(*call_with(xs))
            finally:
                _RUNNING.ids.discard(id(self))
            if not isinstance(result, tuple) or len(result) != 2:
                raise TracingError(f"custom_vjp {name}: fwd must return (output, residuals)")
            cts = bwd(result[1], ct)
            if not isinstance(cts, (tuple, list)) or len(cts) != len(args):
                raise AutodiffError(
                    f"custom_vjp {name}: bwd must return a tuple of {len(args)} cotangents "
                    f"(one per argument), got {cts!r}"
                )
            ct_leaves = _cotangent_leaves(name, cts, args)
            return [fit_cotangent(ct_leaves[i], x) for i, x in zip(slots, xs)]

        ct_names = [f"ct_{n}" for n, _ in specs]
        specs += [("out", out_type), ("ct", out_type)]
        backward_body = build_body(f"{name}_backward", specs, backward, ct_names)
        return record_custom(name, [leaves[i] for i in slots], forward, backward_body)


def _leaf_names(fn: Callable[..., Any], args: tuple, slots: list[int]) -> list[str]:
    """Body placeholder names for the tensor leaves at `slots`: the parameter's name for
    an argument that is one tensor, else the name and the leaf's index (p_0, p_1)."""
    per_arg = [len(flatten(a)[0]) for a in args]
    names = arg_names(fn, range(len(args)))
    leaf_names = [
        name if count == 1 else f"{name}_{k}"
        for name, count in zip(names, per_arg)
        for k in range(count)
    ]
    return [leaf_names[i] for i in slots]


def _cotangent_leaves(name: str, cts: Any, args: tuple) -> list[Any]:
    """The cotangents bwd returned, one per argument with that argument's structure (or
    None for zeros throughout), flattened to one per leaf of the arguments."""
    out: list[Any] = []
    for k, (ct, arg) in enumerate(zip(cts, args)):
        leaves, tree = flatten(arg)
        if ct is None:
            out += [None] * len(leaves)
            continue
        ct_leaves, ct_tree = flatten(ct)
        if ct_tree != tree:
            raise AutodiffError(
                f"custom_vjp {name}: bwd's cotangent {k} has the structure "
                f"{show_tree(ct_tree)}; argument {k} has {show_tree(tree)}"
            )
        out += ct_leaves
    return out
