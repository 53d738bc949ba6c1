"""`gc.custom_vjp` and `gc.custom_jvp`: functions with hand-written derivatives, JAX's
spelling.

`f = gc.custom_vjp(fn); f.defvjp(fwd, bwd)`, with `fwd(*args) -> (out, residuals)`
and `bwd(residuals, ct) -> one cotangent per argument`. On graph values (inside
`with g:`, gc.trace, gc.jit) and on eager tensors, a call records one `custom_vjp`
node (graphc/ops/custom.py): `fn` traced into its forward body, `fwd` then `bwd`
traced into its backward body, so gradients follow `bwd` in static graphs and on the
eager tape alike. On plain arrays it just runs `fn`.

`f = gc.custom_jvp(fn); f.defjvp(jvp)`, with `jvp(primals, tangents) -> (out,
tangent_out)` linear in the tangents, records the same node: its backward body is the
transpose of the tangent map (`gc.vjp` of `tangents -> jvp(primals, tangents)[1]`,
exact because that map is linear), and it is marked linear (`linear=True`), so forward
mode, which transposes a backward, gets the user's tangent map back exactly.

Both take JAX's `nondiff_argnums`: arguments at those positions (a function, a
number, a flag) are not differentiated; they reach `fn` and `fwd` in their places,
and come first in `bwd(*nondiff, residuals, ct)` and `jvp(*nondiff, primals,
tangents)`, whose primals, tangents and cotangents are the other arguments' only.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from graphc.ir.errors import AutodiffError, GraphcError, TracingError
from graphc.ir.graph import active_graph
from graphc.ir.types import is_float
from graphc.ops.custom import (
    arg_names,
    build_body,
    fit_cotangent,
    is_tensor_arg,
    record_custom,
    value_type,
)
from graphc.ops.dispatch import bind, kind_of
from graphc.ops.pytree import flatten, show_tree, tree_map, unflatten
from graphc.ops.symbolic import Symbol


class _Running(threading.local):
    """The custom functions whose fwd this thread is tracing (fwd may call the function)."""

    def __init__(self) -> None:
        self.ids: set[int] = set()


_RUNNING = _Running()


def _nondiff_positions(what: str, nondiff_argnums: Any) -> tuple[int, ...]:
    nums = (nondiff_argnums,) if isinstance(nondiff_argnums, int) else tuple(nondiff_argnums)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nums):
        raise GraphcError(f"{what}: nondiff_argnums must be non-negative ints, got {nums!r}")
    return tuple(sorted(set(nums)))


def _split_nondiff(what: str, nums: tuple[int, ...], args: tuple) -> tuple[list, list]:
    """(the nondiff arguments in order, the others)."""
    if nums and nums[-1] >= len(args):
        raise GraphcError(
            f"{what}: nondiff_argnums {list(nums)} but the call has {len(args)} arguments"
        )
    return [args[i] for i in nums], [a for i, a in enumerate(args) if i not in nums]


def _merged(nums: tuple[int, ...], fixed: list, others: tuple) -> tuple:
    """The full argument tuple: `fixed` at the positions `nums`, `others` around them."""
    rest, fixed_at = iter(others), dict(zip(nums, fixed))
    return tuple(
        fixed_at[k] if k in fixed_at else next(rest) for k in range(len(fixed) + len(others))
    )


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

    def __init__(self, fn: Callable[..., Any], nondiff_argnums: Any = ()) -> None:
        self.fn = fn
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.nondiff_argnums = _nondiff_positions("custom_vjp", nondiff_argnums)
        self._key = id(self)  # which function fwd is running (a nondiff call's: its maker's)
        functools.update_wrapper(self, fn, updated=())  # not fn's __dict__

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """fwd(*args) -> (out, residuals); bwd(residuals, ct) -> tuple of cotangents."""
        self.fwd, self.bwd = fwd, bwd

    @property
    def _name(self) -> str:
        return getattr(self.fn, "__name__", "custom_vjp").replace("<lambda>", "lambda")

    def __call__(self, *args: Any) -> Any:
        if self.nondiff_argnums and self._key not in _RUNNING.ids:
            return self._of_the_rest(args)
        leaves, tree = flatten(args)  # an argument may be a pytree, as in JAX
        graph_mode = active_graph() is not None or any(isinstance(a, Symbol) for a in leaves)
        plain = not graph_mode and not any(kind_of(a) is not None for a in leaves)
        if plain or self._key in _RUNNING.ids:
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
            _RUNNING.ids.add(self._key)
            try:
                result = fwd(*call_with(xs))
            finally:
                _RUNNING.ids.discard(self._key)
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

    def _of_the_rest(self, args: tuple) -> Any:
        """The call as one of a custom_vjp of the differentiated arguments only, the
        nondiff ones fixed (passed to fn and fwd in their places, first to bwd)."""
        nums, fn, fwd, bwd = self.nondiff_argnums, self.fn, self.fwd, self.bwd
        fixed, others = _split_nondiff(f"custom_vjp {self._name}", nums, args)
        rest = custom_vjp(functools.wraps(fn)(lambda *xs: fn(*_merged(nums, fixed, xs))))
        rest._key = self._key
        if fwd is not None and bwd is not None:
            rest.defvjp(
                lambda *xs: fwd(*_merged(nums, fixed, xs)),
                lambda res, ct: bwd(*fixed, res, ct),
            )
        return rest(*others)


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


class custom_jvp:  # noqa: N801 - JAX's name
    """Wrap `fn` so that its derivative is given by `defjvp(jvp)` (`jax.custom_jvp`):
    `jvp(primals, tangents) -> (primal_out, tangent_out)`, with `primals` and `tangents`
    tuples of the arguments, and `tangent_out` linear in `tangents`. Reverse mode
    (grad, gradients, the eager tape) uses its transpose, forward mode (jvp, tangents)
    the rule itself; the value is always `fn`'s. Integer arguments take zero tangents.

    >>> import numpy as np, graphc as gc
    >>> @gc.custom_jvp
    ... def log1pexp(x):
    ...     return gc.log(1.0 + gc.exp(x))
    >>> @log1pexp.defjvp
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), gc.sigmoid(x) * t
    >>> gc.grad(lambda x: log1pexp(x))(np.float64(1000.0))  # exp(1000) overflows
    array(1.)
    """

    def __init__(self, fn: Callable[..., Any], nondiff_argnums: Any = ()) -> None:
        self.fn = fn
        self.jvp: Callable[..., Any] | None = None
        self.nondiff_argnums = _nondiff_positions("custom_jvp", nondiff_argnums)
        self._key = id(self)  # which function the rule is running (see custom_vjp)
        functools.update_wrapper(self, fn, updated=())  # not fn's __dict__

    def defjvp(self, jvp: Callable[..., Any]) -> Callable[..., Any]:
        """jvp(primals, tangents) -> (out, tangent_out); returns `jvp` (a decorator)."""
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One rule per argument, `jvp_k(tangent_k, primal_out, *primals)` -> its part
        of the output's tangent, summed (None: the argument contributes nothing), as
        JAX's `defjvps`."""
        if self.nondiff_argnums:
            raise GraphcError(
                f"custom_jvp {self._name}: defjvps cannot be used with nondiff_argnums"
            )

        def rule(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
            out = self(*primals)
            if len(jvps) != len(primals):
                raise GraphcError(
                    f"custom_jvp {self._name}: defjvps got {len(jvps)} rules for "
                    f"{len(primals)} arguments"
                )
            parts = [jvp(t, out, *primals) for jvp, t in zip(jvps, tangents) if jvp is not None]
            if not parts:
                return out, bind("full_like", out, value=0)
            return out, functools.reduce(lambda a, b: tree_map(lambda x, y: x + y, a, b), parts)

        self.jvp = rule

    @property
    def _name(self) -> str:
        return getattr(self.fn, "__name__", "custom_jvp").replace("<lambda>", "lambda")

    def __call__(self, *args: Any) -> Any:
        if self.nondiff_argnums and self._key not in _RUNNING.ids:
            return self._of_the_rest(args)
        leaves, tree = flatten(args)
        graph_mode = active_graph() is not None or any(isinstance(a, Symbol) for a in leaves)
        plain = not graph_mode and not any(kind_of(a) is not None for a in leaves)
        if plain or self._key in _RUNNING.ids:
            return self.fn(*args)  # plain arrays, or the rule calling the function itself
        if self.jvp is None:
            raise GraphcError(f"custom_jvp {self._name}: call defjvp(jvp) before using it")
        rule, name = self.jvp, self._name
        slots = [i for i, a in enumerate(leaves) if is_tensor_arg(a)]
        specs = list(zip(_leaf_names(self.fn, args, slots), [value_type(leaves[i]) for i in slots]))

        def call_with(values: dict[int, Any], default: Callable[[Any], Any]) -> tuple:
            return tuple(
                unflatten(
                    tree, [values[i] if i in values else default(a) for i, a in enumerate(leaves)]
                )
            )

        def keep(a: Any) -> Any:
            return a

        forward = build_body(
            f"{name}_forward", specs, lambda ps: [self.fn(*call_with(dict(zip(slots, ps)), keep))]
        )
        out_type = forward.outputs[0].type

        def backward(placeholders: list[Symbol]) -> list[Any]:
            from graphc.frontend.transforms import vjp  # transforms build on this module's layer

            *xs, _out, ct = placeholders
            primals = call_with(dict(zip(slots, xs)), keep)
            floats = [k for k, x in enumerate(xs) if is_float(x.dtype)]

            def tangent_map(*ts: Symbol) -> Any:
                given = {slots[k]: t for k, t in zip(floats, ts)}
                zeros = {slots[k]: bind("full_like", x, value=0) for k, x in enumerate(xs)}
                _RUNNING.ids.add(self._key)
                try:
                    result = rule(primals, call_with({**zeros, **given}, _zero_tangent))
                finally:
                    _RUNNING.ids.discard(self._key)
                if not isinstance(result, (tuple, list)) or len(result) != 2:
                    raise TracingError(
                        f"custom_jvp {name}: jvp must return (primal_out, tangent_out)"
                    )
                tangent = result[1]
                t_type = value_type(tangent)
                if t_type.shape != out_type.shape:
                    raise AutodiffError(
                        f"custom_jvp {name}: jvp's tangent_out is {t_type}; the function's "
                        f"output is {out_type}"
                    )
                return tangent

            cts: dict[int, Any] = {}
            if floats and is_float(out_type.dtype):
                _, pull = vjp(tangent_map, *(bind("full_like", xs[k], value=0) for k in floats))
                cts = dict(zip(floats, pull(ct)))
            return [fit_cotangent(cts.get(k), x) for k, x in enumerate(xs)]

        ct_names = [f"ct_{n}" for n, _ in specs]
        specs += [("out", out_type), ("ct", out_type)]
        backward_body = build_body(f"{name}_backward", specs, backward, ct_names)
        return record_custom(name, [leaves[i] for i in slots], forward, backward_body, linear=True)

    def _of_the_rest(self, args: tuple) -> Any:
        """The call as one of a custom_jvp of the differentiated arguments only, the
        nondiff ones fixed (passed to fn in their places, first to the rule)."""
        nums, fn, jvp = self.nondiff_argnums, self.fn, self.jvp
        fixed, others = _split_nondiff(f"custom_jvp {self._name}", nums, args)
        rest = custom_jvp(functools.wraps(fn)(lambda *xs: fn(*_merged(nums, fixed, xs))))
        rest._key = self._key
        if jvp is not None:
            rest.defjvp(lambda primals, tangents: jvp(*fixed, primals, tangents))
        return rest(*others)


def _zero_tangent(value: Any) -> Any:
    """The tangent of an argument leaf that is no tensor (a Python number): zero."""
    return 0.0 if isinstance(value, (int, float)) and not isinstance(value, bool) else value
