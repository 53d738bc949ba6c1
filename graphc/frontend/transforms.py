"""JAX's function transformations on graphs: grad, value_and_grad, vjp, jvp, linearize,
jacfwd, jacrev, hessian; and stop_gradient.

Each one stages the function (graphc/frontend/staging.py): it traces `f` into a
closed sub-graph typed like the arguments (symbolic dims kept; values `f` reads from
an enclosing graph are captured as extra placeholders), transforms that graph
(`gc.gradients` for reverse mode, `gc.tangents` for forward mode), and replays the
result into the graph being built (`inline`). So on graph values (inside `gc.trace`, `gc.jit`, a `cond` branch or a
`scan` / `while_loop` body) a transformation records ordinary ops, and the
transformations nest: `grad(grad(f))` differentiates a graph that already holds
gradient ops.

On numpy arrays and Python scalars a transformed function traces that staging once
per signature into a graph, compiles it (`gc.jit`'s cache: shapes, dtypes, the values
of static arguments) and returns numpy arrays. Python scalars among the arguments a
transformation differentiates are inputs of their weak dtype (a float is float32);
elsewhere they are static, as in `gc.jit`. On eager tensors the same compiled graph
runs on their values and the results are new tensors with no autograd history (the
eager tape's own `backward(create_graph=True)` differentiates eager programs).

Jacobians are one graph whatever their size: `jacfwd` vmaps the forward-mode graph over
the basis of each input (every Jacobian-vector product in one batched pass, as JAX's
jacfwd), `jacrev` the reverse-mode graph over the basis of each output; where vmap
refuses the graph (an op without a batching rule) they scan over the basis instead,
one product per step, and the name scope of their nodes (`jacfwd_by_vmap`,
`jacfwd_by_scan`, ...) says which. Their inputs (resp. outputs) need concrete shapes.
Arguments and results are pytrees (graphc/ops/pytree.py).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.frontend.call import inline
from graphc.frontend.staging import (
    OnArrays,
    Staged,
    as_array,
    as_tuple,
    is_python_int,
    leaf_names,
    stage,
)
from graphc.frontend.trace import lifted_feeds, parameter_names, trace
from graphc.ir.errors import AutodiffError, DTypeError, GraphcError, ShapeError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.scope import name_scope
from graphc.ir.types import TensorType, format_shape, is_float
from graphc.ops import custom as custom_ops
from graphc.ops import shape as S
from graphc.ops.batching import VmapError
from graphc.ops.closure import fn_name, graph_of, lift
from graphc.ops.dispatch import dtype_of, is_python_scalar, kind_of, weak_dtype
from graphc.ops.flow import scan
from graphc.ops.grad_state import grad_enabled
from graphc.ops.pytree import Tree, flatten, tree_map, unflatten
from graphc.ops.symbolic import Symbol
from graphc.passes.autodiff import differentiate, split_backward
from graphc.passes.forward import forward_joint, split_tangents
from graphc.passes.vmap import vmap_graph
from graphc.runtime.executable import Executable
from graphc.runtime.executable import compile as compile_graph

Argnums = int | Sequence[int]


def _is_float(t: TensorType) -> bool:
    return is_float(t.dtype)


def _plain_argnums(argnums: Any) -> Any:
    """`argnums` with numpy integers as Python ints (JAX takes any integer); anything else
    is left for `_argnums` to name."""
    if isinstance(argnums, np.integer):
        return int(argnums)
    if isinstance(argnums, (tuple, list)):
        return tuple(int(n) if isinstance(n, np.integer) else n for n in argnums)
    return argnums


def _argnums(argnums: Argnums, args: tuple, what: str) -> tuple[int, ...]:
    many = not isinstance(argnums, int)
    nums = tuple(argnums) if many else (argnums,)  # type: ignore[arg-type]
    if not nums or not all(isinstance(n, int) for n in nums):
        raise GraphcError(
            f"{what}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}"
        )
    result = []
    for n in nums:
        if not -len(args) <= n < len(args):
            raise GraphcError(
                f"{what}: argnums {n} is out of range: the function was called with "
                f"{len(args)} positional argument(s)"
            )
        result.append(n % len(args))
    if len(set(result)) != len(result):
        raise GraphcError(f"{what}: argnums names an argument twice: {argnums!r}")
    return tuple(result)


def _check_float_leaves(staged: Staged, f: Callable[..., Any], what: str) -> None:
    """Every differentiated leaf is floating point; else an error naming its argument."""
    arg_names = parameter_names(f, max(staged.leaf_args, default=0) + 1)
    for name, position in zip(staged.traced, staged.leaf_args):
        t = staged.body.node(name).type
        if not _is_float(t):
            leaf = "" if name == arg_names[position] else f" (its leaf '{name}')"
            raise AutodiffError(
                f"{what}: argument {position} ('{arg_names[position]}'){leaf} has dtype "
                f"{t.dtype}; only floating point inputs can be differentiated (pass floats, "
                "e.g. x.astype('float32'), or leave it out of argnums)"
            )


def _by_arg(staged: Staged, nums: tuple[int, ...], args: tuple, values: list[Any]) -> Any:
    """`values`, one per traced leaf, regrouped into the structures of the arguments
    at `nums` (one argument: its structure; a tuple of argnums: a tuple of them)."""
    grouped = []
    start = 0
    for i in nums:
        leaves, tree = flatten(args[i])
        grouped.append(unflatten(tree, values[start : start + len(leaves)]))
        start += len(leaves)
    return grouped


# -- grad and value_and_grad -----------------------------------------------------------------


def _value_and_grad_values(
    f: Callable[..., Any],
    argnums: Argnums,
    has_aux: bool,
    args: tuple,
    what: str,
    need_value: bool = True,
    allow_int: bool = False,
) -> tuple[Any, Any]:
    nums = _argnums(argnums, args, what)
    staged = stage(f, args, nums, what)
    if not allow_int:
        _check_float_leaves(staged, f, what)  # first: an int input gives an int output too
    outputs = staged.body.outputs
    if has_aux:
        n_out = _aux_split(staged, what)
    else:
        n_out = len(outputs)
    if n_out != 1:
        raise AutodiffError(
            f"{what}: '{fn_name(f, 'f')}' must return one scalar, got {n_out} values"
            + (" (with has_aux=True, return a pair (scalar, aux))" if not has_aux else "")
        )
    out = outputs[0]
    if out.type.shape != () or not _is_float(out.type):
        raise AutodiffError(
            f"{what}: '{fn_name(f, 'f')}' must return a floating point scalar (shape ()), "
            f"got {out.type}; differentiate a scalar such as its sum, or use gc.jacrev "
            "or gc.jvp for a non-scalar result"
        )
    floats = [x for x in staged.traced if _is_float(staged.body.node(x).type)]
    joint = differentiate(staged.body, floats, [out.name])
    if need_value:
        results = staged.run(joint.graph)
        values = unflatten(staged.out_tree, results[: len(outputs)])
        results = results[len(outputs) :]
    else:
        results, values = staged.run(joint.graph, first=len(outputs)), None
    by_leaf = dict(zip(floats, results))  # (allow_int: an integer input's gradient is zeros)
    results = [by_leaf[x] if x in by_leaf else _zeros_like(staged.feeds[x]) for x in staged.traced]
    grads = _by_arg(staged, nums, args, results)
    return values, (grads[0] if isinstance(argnums, int) else tuple(grads))


def _aux_split(staged: Staged, what: str) -> int:
    """The number of leaves before aux when `f` returns the pair (value, aux)."""
    tree = staged.out_tree
    probe = unflatten(tree, list(range(len(staged.body.outputs))))
    if not isinstance(probe, (tuple, list)) or len(probe) != 2:
        raise AutodiffError(
            f"{what}: with has_aux=True the function must return a pair (value, aux)"
        )
    return len(flatten(probe[0])[0])


def value_and_grad(
    f: Callable[..., Any],
    argnums: Argnums = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
) -> Callable[..., Any]:
    """`f` and its gradient at once: a function returning `(f(*args), grads)`
    (`((value, aux), grads)` with `has_aux=True`), as `jax.value_and_grad`.

    >>> import numpy as np, graphc as gc
    >>> gc.value_and_grad(lambda x: gc.sum(x * x))(np.array([1.0, 2.0]))
    (array(5.), array([2., 4.]))
    """

    argnums = _plain_argnums(argnums)
    _refuse_holomorphic("value_and_grad", holomorphic)

    def on_values(*args: Any, **kwargs: Any) -> Any:
        return _value_and_grad_values(
            _bound(f, kwargs), argnums, has_aux, args, "value_and_grad", True, allow_int
        )

    return _wrap(on_values, f, "value_and_grad", argnums)


def grad(
    f: Callable[..., Any],
    argnums: Argnums = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
) -> Callable[..., Any]:
    """The gradient of scalar-valued `f` with respect to the arguments at `argnums`
    (`jax.grad`): each argument may be an array, a graph value or a pytree of them;
    the gradient has its structure. With `has_aux=True`, `f` returns `(value, aux)`
    and the function returns `(grads, aux)`. With `allow_int=True` an integer argument's
    gradient is zeros of its dtype (JAX's float0 zeros; graphc has no float0). Works on arrays, eager tensors and graph
    values (inside `gc.trace`, `gc.jit` and control-flow bodies), and nests.

    >>> import numpy as np, graphc as gc
    >>> df = gc.grad(lambda x: gc.sum(gc.sin(x)))
    >>> df(np.array([0.0, np.pi]))
    array([ 1., -1.])
    >>> gc.grad(gc.grad(lambda x: x * x * x))(2.0)
    array(12., dtype=float32)
    """

    argnums = _plain_argnums(argnums)
    _refuse_holomorphic("grad", holomorphic)

    def on_values(*args: Any, **kwargs: Any) -> Any:
        values, grads = _value_and_grad_values(
            _bound(f, kwargs), argnums, has_aux, args, "grad", has_aux, allow_int
        )
        return (grads, values[1]) if has_aux else grads

    return _wrap(on_values, f, "grad", argnums)


def stop_gradient(x: Any) -> Any:
    """`x`, through which no gradient flows (`jax.lax.stop_gradient`; an eager tensor is
    `detach()`ed, as in PyTorch). `x` may be a pytree. On graph values it records a
    node whose value is `x` and whose derivative is zero in every mode (reverse,
    forward, and again under a second derivative); arrays come back as they are.

    >>> import numpy as np, graphc as gc
    >>> gc.grad(lambda x: gc.sum(gc.stop_gradient(x) * x))(np.array([1.0, 2.0]))
    array([1., 2.])
    """
    return tree_map(custom_ops.stopped, x)


def _refuse_holomorphic(what: str, holomorphic: bool) -> None:
    """JAX's `holomorphic=True` differentiates complex functions; graphc has no complex
    dtype."""
    if holomorphic:
        raise DTypeError(
            f"{what}: holomorphic=True differentiates complex functions, and graphc has no "
            "complex dtype"
        )


def _bound(f: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[..., Any]:
    """`f` with its keyword arguments given (its name and signature kept)."""
    if not kwargs:
        return f
    return functools.update_wrapper(functools.partial(f, **kwargs), f, updated=())


def _wrap(
    on_values: Callable[..., Any], f: Callable[..., Any], what: str, argnums: Argnums
) -> Callable[..., Any]:
    """`on_values(*args, **kwargs)` (on graph values) as a function of arrays, eager
    tensors or graph values. Keyword arguments pass through to `f`, never differentiated:
    on arrays they are one more argument (a dict), its arrays inputs, its scalars static."""
    nums = set(argnums) if isinstance(argnums, (tuple, list)) else {argnums}

    def dynamic(position: int, count: int) -> bool:
        positional = count - 1  # the last argument holds the keywords
        return position < positional and (position in nums or position - positional in nums)

    def on_all(*args: Any) -> Any:
        return on_values(*args[:-1], **args[-1])

    runner = OnArrays(on_all, f"{what}_{fn_name(f, 'f')}", dynamic)

    def transformed(*args: Any, **kwargs: Any) -> Any:
        return runner(*args, kwargs)

    transformed.__name__ = f"{what}_{fn_name(f, 'f')}"
    transformed.__doc__ = f"{what} of {fn_name(f, 'f')}"
    return transformed


# -- forward mode: jvp and linearize --------------------------------------------------------


def _jvp_values(
    f: Callable[..., Any], primals: tuple, tangents: tuple, has_aux: bool = False
) -> tuple[Any, ...]:
    staged = stage(f, primals, range(len(primals)), "jvp")
    n, value_tree, aux_tree = _aux_outputs(staged.body, staged.out_tree, has_aux, "jvp")
    tangent_leaves, _ = flatten(tuple(tangents))
    floats = []
    extra: dict[str, Any] = {}
    for name, tangent in zip(staged.traced, tangent_leaves):
        t = staged.body.node(name).type
        if not _is_float(t):  # an integer input has no tangent (JAX's float0)
            if t.is_concrete and np.shape(tangent) not in ((), t.shape):
                raise ShapeError(
                    f"jvp: the tangent for '{name}' has shape {np.shape(tangent)}; its "
                    f"primal is {t} (an integer input's tangent is ignored, but it must "
                    "have the primal's shape)"
                )
            continue
        value = lift(tangent, staged.parent) if not is_python_scalar(tangent) else None
        if value is None:
            value = lift(np.asarray(tangent, t.dtype), staged.parent)
        if value.type.shape != t.shape or value.type.dtype != t.dtype:
            error = ShapeError if value.type.shape != t.shape else DTypeError
            raise error(
                f"jvp: the tangent for '{name}' is {value.type}; it must have its primal's "
                f"shape and dtype, {t}"
            )
        floats.append(name)
        extra[name] = value
    outputs = staged.body.outputs
    float_outputs = [o.name for o in outputs[:n] if _is_float(o.type)]
    tangent_of: dict[str, Any] = {}
    if floats and float_outputs:
        fj = forward_joint(staged.body, floats, float_outputs)
        feeds = {tan: extra[x] for tan, x in zip(fj.tangent_inputs, floats)}
        results = staged.run(fj.graph, feeds)
        tangent_of = dict(zip(fj.differentiated, results[len(outputs) :]))
    else:
        results = staged.run(staged.body)
    primal_out = results[: len(outputs)]
    tangent_out = [
        tangent_of[o.name] if o.name in tangent_of else _zeros_like(r)
        for o, r in zip(outputs[:n], primal_out)
    ]
    pair = unflatten(value_tree, primal_out[:n]), unflatten(value_tree, tangent_out)
    return (*pair, unflatten(aux_tree, primal_out[n:])) if has_aux else pair


def _zero(value: Symbol) -> Symbol:
    return lift(np.zeros((), value.dtype), value.graph)


def _zeros_like(value: Symbol) -> Symbol:
    return S.broadcast_to(_zero(value), value.shape)


def _jvp_checked(primals: Any, tangents: Any) -> tuple[tuple, tuple]:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise GraphcError(
            "jvp: primals and tangents must be tuples (or lists) of the function's "
            f"arguments, got {type(primals).__name__} and {type(tangents).__name__}"
        )
    p_leaves, p_tree = flatten(tuple(primals))
    t_leaves, t_tree = flatten(tuple(tangents))
    if p_tree != t_tree:
        raise GraphcError(
            f"jvp: tangents must have the structure of primals: {len(p_leaves)} leaves in "
            f"primals, {len(t_leaves)} in tangents ({p_tree!r} vs {t_tree!r})"
        )
    if any(_is_float0(t) or is_python_scalar(t) for t in t_leaves):
        t_leaves = [_tangent_leaf(p, t, k) for k, (p, t) in enumerate(zip(p_leaves, t_leaves))]
        tangents = unflatten(t_tree, t_leaves)
    return tuple(primals), tuple(tangents)


def _is_float0(value: Any) -> bool:
    """A tangent of JAX's float0 dtype (numpy's structured void dtype of that name),
    which jax.jvp requires for an integer or bool primal."""
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.names == ("float0",)


def _tangent_leaf(primal: Any, tangent: Any, leaf: int) -> Any:
    """A tangent as jvp runs it: a Python number beside an array primal in that
    primal's dtype (on arrays it would become float32 first, refused for a float16
    primal); a float0 one (JAX's) as zeros of its integer primal's dtype (graphc ignores
    an integer primal's tangent, but not a dtype it has not got), refused for a float one."""
    if not _is_float0(tangent) and not is_python_scalar(tangent):
        return tangent
    if is_python_scalar(primal):
        if is_python_scalar(tangent):
            return tangent
        dtype = weak_dtype(primal, ())
    else:
        dtype = np.dtype(dtype_of(primal))
    if is_python_scalar(tangent):
        return np.asarray(tangent, dtype) if is_float(dtype) else tangent
    if is_float(dtype):
        raise DTypeError(
            f"jvp: the tangent of primal leaf {leaf} is float0 (JAX's tangent dtype for "
            f"integer primals), but that primal is {dtype}: give a tangent of its dtype"
        )
    zeros = np.zeros(np.shape(tangent), dtype)
    return 0 if is_python_scalar(primal) and not zeros.shape else zeros


_JVP_RUNNERS: weakref.WeakKeyDictionary[Any, dict[bool, OnArrays]] = weakref.WeakKeyDictionary()


def jvp(
    f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple[Any, ...]:
    """`(f(*primals), J·tangents)`, the Jacobian-vector product (`jax.jvp`), in forward
    mode: a graph transformation derived from the VJP by transposition, exact
    (`gc.tangents`). Integer inputs take no tangent; integer outputs get zeros. With
    `has_aux=True`, `f` returns `(value, aux)` and jvp `(value, tangent, aux)`.

    >>> import numpy as np, graphc as gc
    >>> x = np.array([0.0, 1.0])
    >>> y, ty = gc.jvp(lambda x: gc.sin(x) * 2.0, (x,), (np.ones(2),))
    >>> np.allclose(ty, 2.0 * np.cos(x))
    True
    """
    primals, tangents = _jvp_checked(primals, tangents)
    runner = _runner_for(f, bool(has_aux))
    return runner(primals, tangents)


def _runner_for(f: Callable[..., Any], has_aux: bool) -> OnArrays:
    """The runner of `jvp(f, ...)` on arrays, kept while `f` lives (its compiled graphs
    serve later calls); it refers to `f` weakly, else the cache would keep `f` alive."""
    try:
        runners = _JVP_RUNNERS.get(f)
    except TypeError:  # not weakly referable, or unhashable: a runner for this call only
        return _jvp_runner(lambda: f, fn_name(f, "f"), has_aux)
    if runners is None:
        runners = _JVP_RUNNERS[f] = {}
    if has_aux not in runners:
        runners[has_aux] = _jvp_runner(weakref.ref(f), fn_name(f, "f"), has_aux)
    return runners[has_aux]


def _jvp_runner(function: Callable[[], Any], name: str, has_aux: bool) -> OnArrays:
    def on_values(primals: tuple, tangents: tuple) -> Any:
        return _jvp_values(function(), tuple(primals), tuple(tangents), has_aux)

    return OnArrays(on_values, f"jvp_{name}", lambda position, count: True)


def linearize(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """`(f(*primals), f_jvp)` where `f_jvp(*tangents)` is the Jacobian-vector product at
    `primals` (`jax.linearize`). On arrays (and eager tensors) the forward-mode graph is
    cut in two (`split_tangents`): its primal part runs once here and keeps the
    residuals, and `f_jvp` runs only the linear part on them. On graph values `f_jvp`
    replays the forward-mode graph with the primals fixed (CSE merges the primal part
    with the one recorded for the output). With `has_aux=True`, `f` returns
    `(value, aux)` and linearize `(value, f_jvp, aux)`, as JAX's.

    >>> import numpy as np, graphc as gc
    >>> y, f_jvp = gc.linearize(lambda x: x * x, np.array([3.0]))
    >>> y, f_jvp(np.array([1.0]))
    (array([9.]), array([6.]))
    """
    leaves, tree = flatten(primals)
    if graph_of(leaves) is not None:
        primal_out, _, *aux = jvp(f, primals, primals, has_aux=has_aux)
        f_jvp = lambda *tangents: jvp(f, primals, tangents, has_aux=has_aux)[1]  # noqa: E731
        return (primal_out, f_jvp, *aux)
    return _linearize_arrays(f, primals, has_aux)


@dataclass
class _Traced:
    """`f` traced at arrays (for linearize and vjp, which keep residuals between calls)."""

    graph: Graph  # placeholders: the primals' leaves, then the eager tensors it lifted
    arrays: list[np.ndarray]  # the primals' leaves as arrays (Python scalars weakly typed)
    extra: list[Any]  # the lifted tensors' values, fed after the arrays
    tree: Tree  # the primals' structure
    out_tree: Tree  # the result's structure
    eager: Any  # the eager tensor kind among the primals (results become tensors), or None

    @property
    def floats(self) -> list[str]:
        """The placeholders of the floating point primal leaves (the differentiated ones)."""
        return [p.name for p in self.graph.inputs[: len(self.arrays)] if _is_float(p.type)]

    def lifted(self, values: Sequence[np.ndarray]) -> list[Any]:
        """Results as the caller's kind: new eager tensors (no history) or arrays."""
        if self.eager is None:
            return list(values)
        return [self.eager.lift(v, None, ()) for v in values]


def _trace_at(f: Callable[..., Any], primals: tuple) -> _Traced:
    leaves, tree = flatten(primals)
    eager = next((kind_of(v) for v in leaves if kind_of(v) is not None), None)
    arrays = [
        np.asarray(v, weak_dtype(v, ())) if is_python_scalar(v) else as_array(v) for v in leaves
    ]
    out_trees: list[Tree] = []

    def flat(*values: Any) -> tuple:
        # a Python int reaches f as itself, weakly typed (graphc/frontend/staging.py)
        given = [leaf if is_python_int(leaf) else v for leaf, v in zip(leaves, values)]
        out_leaves, out_tree = flatten(f(*unflatten(tree, given)))
        out_trees.append(out_tree)
        return tuple(out_leaves)

    flat.__name__ = fn_name(f, "f")
    flat.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_ONLY)
            for name in leaf_names(f, primals, range(len(primals)))
        ]
    )  # placeholders named after f's parameters
    with grad_enabled():  # linearize and vjp differentiate it next
        g = trace(flat, *arrays)
    lifted = lifted_feeds(g)
    extra = [lifted[p.name] for p in g.inputs[len(arrays) :]]
    return _Traced(g, arrays, extra, tree, out_trees[0], eager)


def _as_feed(value: Any, t: TensorType, what: str, role: str, whose: str) -> np.ndarray:
    """A tangent or cotangent `value` for a value of concrete type `t`, as the array fed
    for it: an eager tensor's values, a Python number in `t`'s dtype (as in jvp);
    anything else must have `t`'s shape and dtype already."""
    if kind_of(value) is not None:
        value = as_array(value)
    else:
        value = np.asarray(value, t.dtype) if is_python_scalar(value) else np.asarray(value)
    if value.shape != t.shape or value.dtype != t.dtype:
        raise (ShapeError if value.shape != t.shape else DTypeError)(
            f"{what}: {role} is {value.dtype}{list(value.shape)}; it must have {whose} "
            f"shape and dtype, {t}"
        )
    return value


def _as_input(value: Any, t: TensorType, what: str, role: str, whose: str) -> Any:
    """`_as_feed`, but a graph value stays one (checked against `t` the same way)."""
    if not isinstance(value, Symbol):
        return _as_feed(value, t, what, role, whose)
    if value.type.shape != t.shape or value.type.dtype != t.dtype:
        raise (ShapeError if value.type.shape != t.shape else DTypeError)(
            f"{what}: {role} is {value.type}; it must have {whose} shape and dtype, {t}"
        )
    return value


def _run_part(part: Executable, graph: Graph, residuals: tuple, values: list[Any]) -> tuple:
    """The backward (or linear) part of a split graph on the residuals saved at the
    arrays and `values`: compiled, or, when a value is a graph value (f_vjp or f_jvp
    called inside gc.trace, gc.jit or gc.vmap, as vmap(f_vjp) over a basis), `graph`
    replayed into that value's graph with the residuals as its constants."""
    parent = graph_of(values)
    if parent is None:
        return as_tuple(part(*residuals, *values))
    feeds = {p.name: lift(v, parent) for p, v in zip(graph.inputs, [*residuals, *values])}
    if active_graph() is None:
        with parent:
            return tuple(inline(graph, feeds))
    return tuple(inline(graph, feeds))


def _linearize_arrays(f: Callable[..., Any], primals: tuple, has_aux: bool) -> tuple[Any, ...]:
    """`f` linearized at arrays: the primal graph's outputs and residuals, computed once,
    and the compiled linear graph that `f_jvp` runs on them."""
    traced = _trace_at(f, primals)
    g, arrays, floats = traced.graph, traced.arrays, traced.floats
    n_value, value_tree, aux_tree = _aux_outputs(g, traced.out_tree, has_aux, "linearize")
    float_outputs = [o.name for o in g.outputs[:n_value] if _is_float(o.type)]
    n = len(g.outputs)
    run_linear: Executable | None = None
    linear: Graph | None = None
    residuals: tuple = ()
    tangent_names: dict[str, int] = {}  # a differentiated output -> its tangent's index
    if floats and float_outputs:
        primal, linear, fj = split_tangents(g, floats, float_outputs, rerun_loops=True)
        results = as_tuple(compile_graph(primal)(*arrays, *traced.extra))
        residuals, run_linear = results[n:], compile_graph(linear)
        tangent_names = {name: k for k, name in enumerate(fj.differentiated)}
    else:  # nothing to differentiate: every tangent is zeros
        results = as_tuple(g(*arrays, *traced.extra))
    outs = results[:n]

    def f_jvp(*tangents: Any) -> Any:
        t_leaves, t_tree = flatten(tangents)
        if t_tree != traced.tree:
            raise GraphcError(
                f"linearize: f_jvp takes tangents of the primals' structure, {len(arrays)} "
                f"arrays ({traced.tree!r}), got {len(t_leaves)} ({t_tree!r})"
            )
        feeds = [
            _as_input(t, p.type, "linearize", f"the tangent for '{p.name}'", "its primal's")
            for p, t in zip(g.inputs, t_leaves)
            if p.name in floats
        ]
        tans = ()
        if run_linear is not None and linear is not None:
            tans = _run_part(run_linear, linear, residuals, feeds)
        values = [
            tans[tangent_names[o.name]] if o.name in tangent_names else np.zeros_like(v)
            for o, v in zip(g.outputs[:n_value], outs)
        ]
        if graph_of(feeds) is not None:  # graph values: they stay graph values
            return unflatten(value_tree, values)
        return unflatten(value_tree, traced.lifted(values))

    value = unflatten(value_tree, traced.lifted(list(outs[:n_value])))
    if has_aux:
        return value, f_jvp, unflatten(aux_tree, traced.lifted(list(outs[n_value:])))
    return value, f_jvp


# -- reverse mode as a function: vjp --------------------------------------------------------


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """`(f(*primals), f_vjp)` where `f_vjp(ct)` is the vector-Jacobian product at
    `primals` (`jax.vjp`): `ct` has the structure, shapes and dtypes of `f`'s result,
    and `f_vjp` returns a tuple with one cotangent per primal, each structured like it.
    With `has_aux=True`, `f` returns `(value, aux)` and vjp returns
    `(value, f_vjp, aux)`. Integer primals get zeros; integer results take no cotangent
    (the value passed for one is not read).

    On arrays (and eager tensors) the gradient graph is cut in two (`gc.split_backward`):
    the forward part runs once here and keeps what the backward reads, and each `f_vjp`
    call runs only the backward on it. On graph values `f_vjp` records the gradient ops
    into the graph being built.

    >>> import numpy as np, graphc as gc
    >>> y, f_vjp = gc.vjp(lambda x: x * x, np.array([3.0, 4.0]))
    >>> y, f_vjp(np.array([1.0, 0.5]))
    (array([ 9., 16.]), (array([6., 4.]),))
    """
    if not primals:
        raise GraphcError("vjp: give the primals to differentiate at, as f's arguments")
    leaves, _ = flatten(primals)
    if graph_of(leaves) is not None:
        return _vjp_values(f, primals, has_aux)
    return _vjp_arrays(f, primals, has_aux)


def _aux_outputs(
    graph: Graph, out_tree: Tree, has_aux: bool, what: str
) -> tuple[int, Tree, Tree | None]:
    """How many leading outputs are differentiated (all, or with `has_aux` those of the
    value of the pair (value, aux) `f` returns), their structure and aux's."""
    if not has_aux:
        return len(graph.outputs), out_tree, None
    probe = unflatten(out_tree, list(range(len(graph.outputs))))
    if not isinstance(probe, (tuple, list)) or len(probe) != 2:
        raise AutodiffError(
            f"{what}: with has_aux=True the function must return a pair (value, aux)"
        )
    value_tree, aux_tree = flatten(probe[0])[1], flatten(probe[1])[1]
    return len(flatten(probe[0])[0]), value_tree, aux_tree


def _cotangent_leaves(cts: tuple, tree: Tree, count: int) -> list[Any]:
    """The leaves of the one cotangent given to f_vjp (its arguments `cts`)."""
    if len(cts) != 1:
        raise GraphcError(
            f"vjp: f_vjp takes one cotangent, of the structure of f's result ({tree!r}), got "
            f"{len(cts)} arguments (pass a tuple for a result that is one)"
        )
    ct_leaves, ct_tree = flatten(cts[0])
    if ct_tree != tree:
        raise GraphcError(
            f"vjp: f_vjp takes a cotangent of the structure of f's result, {count} array(s) "
            f"({tree!r}), got {len(ct_leaves)} ({ct_tree!r})"
        )
    return ct_leaves


def _vjp_values(f: Callable[..., Any], primals: tuple, has_aux: bool) -> tuple[Any, ...]:
    """vjp on graph values: the forward recorded now, the gradient ops at each f_vjp call
    (their forward part is the same ops again, which CSE merges)."""
    staged = stage(f, primals, range(len(primals)), "vjp")
    outputs = staged.body.outputs
    n, value_tree, aux_tree = _aux_outputs(staged.body, staged.out_tree, has_aux, "vjp")
    results = staged.run(staged.body)
    floats = [x for x in staged.traced if _is_float(staged.body.node(x).type)]
    differentiated = [o.name for o in outputs[:n] if _is_float(o.type)]
    joint = differentiate(staged.body, floats, differentiated, seeds=True) if floats else None

    def f_vjp(*cts: Any) -> tuple:
        ct_leaves = _cotangent_leaves(cts, value_tree, n)
        grads: dict[str, Any] = {}
        if joint is not None and differentiated:
            by_output = dict(zip([o.name for o in outputs[:n]], ct_leaves))
            types = {o.name: r.type for o, r in zip(outputs, results)}
            extra = {}
            for seed, name in zip(joint.seeds, differentiated):
                ct, t = by_output[name], types[name]
                lifted = lift(
                    np.asarray(ct, t.dtype) if is_python_scalar(ct) else ct, staged.parent
                )
                if lifted.type.shape != t.shape or lifted.type.dtype != t.dtype:
                    raise (ShapeError if lifted.type.shape != t.shape else DTypeError)(
                        f"vjp: the cotangent for '{name}' is {lifted.type}; it must have its "
                        f"output's shape and dtype, {t}"
                    )
                extra[seed] = lifted
            grads = dict(zip(floats, staged.run(joint.graph, extra, first=len(outputs))))
        values = [grads[x] if x in grads else _zeros_like(staged.feeds[x]) for x in staged.traced]
        return tuple(_by_arg(staged, tuple(range(len(primals))), primals, values))

    value = unflatten(value_tree, results[:n])
    if has_aux:
        return value, f_vjp, unflatten(aux_tree, results[n:])
    return value, f_vjp


def _vjp_arrays(f: Callable[..., Any], primals: tuple, has_aux: bool) -> tuple[Any, ...]:
    """vjp at arrays: the forward graph's outputs and saved values, computed once, and
    the compiled backward graph that `f_vjp` runs on them."""
    traced = _trace_at(f, primals)
    g, arrays, floats = traced.graph, traced.arrays, traced.floats
    n, value_tree, aux_tree = _aux_outputs(g, traced.out_tree, has_aux, "vjp")
    differentiated = [o for o in g.outputs[:n] if _is_float(o.type)]
    run_backward: Executable | None = None
    backward: Graph | None = None
    saved: tuple = ()
    if floats and differentiated:
        forward, backward = split_backward(g, floats, [o.name for o in differentiated])
        results = as_tuple(compile_graph(forward)(*arrays, *traced.extra))
        saved, run_backward = results[len(g.outputs) :], compile_graph(backward)
    else:  # nothing to differentiate: every cotangent is zeros
        results = as_tuple(g(*arrays, *traced.extra))
    outs = results[: len(g.outputs)]

    def f_vjp(*cts: Any) -> tuple:
        ct_leaves = _cotangent_leaves(cts, value_tree, n)
        by_output = dict(zip([o.name for o in g.outputs[:n]], ct_leaves))
        feeds = [
            _as_input(
                by_output[o.name], o.type, "vjp", f"the cotangent for '{o.name}'", "its output's"
            )
            for o in differentiated
        ]
        grads: tuple = ()
        if run_backward is not None and backward is not None:
            grads = _run_part(run_backward, backward, saved, feeds)
        by_input = dict(zip(floats, grads))
        values = [
            by_input[p.name] if p.name in by_input else np.zeros_like(a)
            for p, a in zip(g.inputs, arrays)
        ]
        if graph_of(feeds) is not None:  # graph values: they stay graph values
            return tuple(unflatten(traced.tree, values))
        return tuple(unflatten(traced.tree, traced.lifted(values)))

    value = unflatten(value_tree, traced.lifted(list(outs[:n])))
    if has_aux:
        return value, f_vjp, unflatten(aux_tree, traced.lifted(list(outs[n:])))
    return value, f_vjp


# -- Jacobians and the Hessian --------------------------------------------------------------


def _basis(t: TensorType, what: str, name: str, graph: Graph) -> Symbol:
    if not t.is_concrete:
        raise ShapeError(
            f"{what}: '{name}' has the symbolic shape {format_shape(t.shape)}; a Jacobian "
            "scans over the basis of a concrete shape"
        )
    size = int(np.prod(t.shape, dtype=np.int64))
    return lift(np.eye(size, dtype=t.dtype).reshape(size, *t.shape), graph)


def _columns_last(ys: Symbol, out_shape: tuple, in_shape: tuple) -> Symbol:
    """ys of shape (n, *out_shape), one row per basis vector of an input of `in_shape`,
    as the Jacobian block (*out_shape, *in_shape)."""
    rank = len(out_shape)
    moved = S.transpose(ys, axes=(*range(1, rank + 1), 0)) if rank else ys
    return S.reshape(moved, (*out_shape, *in_shape))


def _rows_first(ys: Symbol, out_shape: tuple, in_shape: tuple) -> Symbol:
    """ys of shape (m, *in_shape), one row per basis vector of an output, as the
    Jacobian block (*out_shape, *in_shape)."""
    return S.reshape(ys, (*out_shape, *in_shape))


# whether Jacobians batch their products with vmap where it can (tests turn it off to
# compare with the scan of one product per basis vector)
BATCH_PRODUCTS = True


def _products(
    staged: Staged, joint: Graph, vector: str, basis: Symbol, zeros: dict[str, Any], what: str
) -> list[Any]:
    """The products (JVPs or VJPs) of `joint` (the staged body's forward- or reverse-mode
    graph, its primal outputs first) for every row of `basis` fed to its placeholder
    `vector`, the other vectors fed `zeros`: one batched pass, `joint` vmapped over the
    basis, as JAX's jacfwd / jacrev do, where vmap batches every node; else (an op
    without a batching rule) a `scan` computing one product per row. The nodes made go
    under the name scope `<what>_by_vmap` or `<what>_by_scan`, which says which."""
    first = len(staged.body.outputs)
    size = basis.type.shape[0]
    batched = None
    if BATCH_PRODUCTS and size:
        in_axes = [0 if p.name == vector else None for p in joint.inputs]
        try:
            batched = vmap_graph(joint, in_axes, 0, axis_size=size)
        except VmapError:
            batched = None
    with name_scope(f"{what}_by_{'scan' if batched is None else 'vmap'}"):
        if batched is not None:
            return staged.run(batched, {**zeros, vector: basis}, first=first)

        def step(carry: Any, e: Any) -> tuple[Any, Any]:
            return carry, tuple(staged.run(joint, {**zeros, vector: e}, first=first))

        return list(scan(step, (), basis)[1])


def _jac_values(
    f: Callable[..., Any],
    argnums: Argnums,
    args: tuple,
    what: str,
    forward: bool,
    has_aux: bool = False,
) -> Any:
    nums = _argnums(argnums, args, what)
    staged = stage(f, args, nums, what)
    _check_float_leaves(staged, f, what)
    body, graph = staged.body, staged.parent
    inputs = [body.node(name) for name in staged.traced]
    n, value_tree, aux_tree = _aux_outputs(body, staged.out_tree, has_aux, what)
    outputs = body.outputs[:n]
    float_outputs = [o for o in outputs if _is_float(o.type)]
    if not forward and len(float_outputs) < len(outputs):  # as jax.jacrev
        k, bad = next((k, o) for k, o in enumerate(outputs) if not _is_float(o.type))
        raise AutodiffError(
            f"{what}: output {k} of 'f' has dtype {bad.type.dtype}; reverse mode "
            "differentiates floating point outputs only (gc.jacfwd gives an integer "
            "output's zeros, gc.vjp takes integer outputs)"
        )
    blocks: dict[tuple[str, str], Any] = {}  # (output, input) -> Jacobian block
    if float_outputs and forward:
        fj = forward_joint(body, staged.traced, [o.name for o in float_outputs])
        for k, x in enumerate(inputs):
            zeros = {
                t: _zeros_like(staged.feeds[inputs[j].name])
                for j, t in enumerate(fj.tangent_inputs)
                if j != k
            }
            basis = _basis(x.type, what, x.name, graph)
            ys = _products(staged, fj.graph, fj.tangent_inputs[k], basis, zeros, what)
            for o, y in zip(float_outputs, ys):
                blocks[(o.name, x.name)] = _columns_last(y, o.type.shape, x.type.shape)
    elif float_outputs:
        joint = differentiate(body, staged.traced, [o.name for o in float_outputs], seeds=True)
        for k, o in enumerate(float_outputs):
            zeros = {
                seed: _zeros_like_type(float_outputs[j].type, graph)
                for j, seed in enumerate(joint.seeds)
                if j != k
            }
            basis = _basis(o.type, what, o.name, graph)
            ys = _products(staged, joint.graph, joint.seeds[k], basis, zeros, what)
            for x, y in zip(inputs, ys):
                blocks[(o.name, x.name)] = _rows_first(y, o.type.shape, x.type.shape)
    per_output = []
    for o in outputs:
        row = [
            blocks.get((o.name, x.name))
            if (o.name, x.name) in blocks
            else _zeros_of((*o.type.shape, *x.type.shape), x.type.dtype, graph)
            for x in inputs
        ]
        grouped = _by_arg(staged, nums, args, row)
        per_output.append(grouped[0] if isinstance(argnums, int) else tuple(grouped))
    jacobian = unflatten(value_tree, per_output)
    if not has_aux:
        return jacobian
    return jacobian, unflatten(aux_tree, staged.run(staged.body)[n:])


def _zeros_like_type(t: TensorType, graph: Graph) -> Symbol:
    return _zeros_of(t.shape, t.dtype, graph)


def _zeros_of(shape: tuple, dtype: np.dtype, graph: Graph) -> Symbol:
    zero = lift(np.zeros((), dtype), graph)
    return S.broadcast_to(zero, shape) if shape else zero


def jacfwd(
    f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Jacobian of `f` by forward mode (`jax.jacfwd`): one Jacobian-vector product
    per basis vector of the inputs, all in one graph (vmapped over the basis, or a
    `scan` over it where vmap cannot batch `f`). For an output of shape O and an input
    of shape I the block has shape O + I. With `has_aux=True`, `f` returns
    `(value, aux)` and the function `(jacobian, aux)`, as JAX's (so for jacrev).

    >>> import numpy as np, graphc as gc
    >>> gc.jacfwd(lambda x: x * x)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """

    argnums = _plain_argnums(argnums)
    _refuse_holomorphic("jacfwd", holomorphic)

    def on_values(*args: Any, **kwargs: Any) -> Any:
        return _jac_values(_bound(f, kwargs), argnums, args, "jacfwd", True, has_aux)

    return _wrap(on_values, f, "jacfwd", argnums)


def jacrev(
    f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Jacobian of `f` by reverse mode (`jax.jacrev`): one vector-Jacobian product
    per basis vector of the outputs, all in one graph (vmapped over the basis, or a
    `scan` over it where vmap cannot batch `f`).

    >>> import numpy as np, graphc as gc
    >>> gc.jacrev(lambda x: gc.sum(x) * x)(np.array([1.0, 2.0]))
    array([[4., 1.],
           [2., 5.]])
    """

    argnums = _plain_argnums(argnums)
    _refuse_holomorphic("jacrev", holomorphic)

    def on_values(*args: Any, **kwargs: Any) -> Any:
        return _jac_values(_bound(f, kwargs), argnums, args, "jacrev", False, has_aux)

    return _wrap(on_values, f, "jacrev", argnums)


def hessian(
    f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Hessian of scalar-valued `f`: `jacfwd(jacrev(f))`, as `jax.hessian` (with
    `has_aux=True`, `f` returns `(value, aux)` and the function `(hessian, aux)`).

    >>> import numpy as np, graphc as gc
    >>> gc.hessian(lambda x: gc.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    _refuse_holomorphic("hessian", holomorphic)
    return jacfwd(jacrev(f, argnums, has_aux), argnums, has_aux)
