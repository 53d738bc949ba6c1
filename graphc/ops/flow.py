"""`gc.cond`, `gc.switch`, `gc.scan`, `gc.map`, `gc.while_loop`, `gc.fori_loop`: control
flow with JAX's signatures and keyword names (`lax.cond(pred, true_fun, false_fun,
*operands)`, `lax.while_loop(cond_fun, body_fun, init_val)`, ...; graphc's earlier
spellings `true_fn`, `false_fn`, `cond_fn`, `body_fn`, `init` stay as aliases).

On graph values (inside `with g:`, `gc.trace`, `gc.jit`, or another body) each call
traces its functions into closed bodies and records one node (graphc/ops/control.py):
values a function reads from outside become captured operands, so the graph stays
closed and the node self-contained. `switch` is nested `cond` nodes and `map` a `scan`
without carries, so every pass and translator that knows those knows them. On eager
tensors and plain arrays they run the Python control flow they stand for, so one
function runs both ways, the eager tape recording what actually ran.

Operands, carries, branch results, xs and ys are pytrees (graphc/ops/pytree.py): tuples,
lists, dicts, namedtuples, None and registered types, flattened in JAX's order; a carry
or branch result whose structure differs is an error naming where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, ShapeError, TracingError
from graphc.ir.graph import Graph, Node, active_graph
from graphc.ir.types import TensorType, as_dim, is_float, is_symbol
from graphc.ops.closure import Traced, empty_ys, fn_name, graph_of, lift, trace_body, with_inputs
from graphc.ops.dispatch import bind, dtype_of, is_python_scalar, kind_of, weak_dtype
from graphc.ops.pytree import Tree, flatten, leaf_paths, mismatch, show_tree, unflatten
from graphc.ops.selection import cast, lt, ne
from graphc.ops.shape import stack
from graphc.ops.symbolic import Symbol, enclosing
from graphc.ops.tuples import results
from graphc.ops.weak import as_dtype_of, is_weak, join_weak, weak, weak_scalar

_MISSING: Any = object()


def _argument(op: str, jax_name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The argument given under JAX's name or graphc's alias, exactly one of them."""
    if value is not _MISSING and alias_value is not _MISSING:
        raise GraphcError(f"{op}: got both {jax_name}= and its alias {alias}=; give one")
    if value is _MISSING and alias_value is _MISSING:
        raise GraphcError(f"{op}: missing argument {jax_name}")
    return value if value is not _MISSING else alias_value


def _shape_of(value: Any) -> tuple:
    if isinstance(value, Symbol):
        return tuple(value.type.shape)
    shape = getattr(value, "shape", None)
    return tuple(np.shape(value) if shape is None else shape)


def _scalar_dtype(op: str, what: str, value: Any) -> np.dtype:
    """The dtype of a predicate or index, checked to be a scalar of numbers."""
    if value is None:
        raise DTypeError(
            f"{op}: the {what} is None; expected a scalar (a graph value, tensor, "
            "array or Python number)"
        )
    if isinstance(value, (str, bytes, dict, list, tuple)) or not (
        isinstance(value, (Symbol, np.ndarray, np.generic))
        or is_python_scalar(value)
        or kind_of(value) is not None
    ):
        raise DTypeError(f"{op}: the {what} must be a scalar, got {type(value).__name__}")
    shape = _shape_of(value)
    if shape:
        raise ShapeError(f"{op}: the {what} must be a scalar, got shape {shape}")
    dtype = value.type.dtype if isinstance(value, Symbol) else dtype_of(value)
    if dtype.kind not in "biu" and not is_float(dtype):
        raise DTypeError(f"{op}: the {what} must be a bool or number, got {dtype}")
    return dtype


# -- cond -----------------------------------------------------------------------------


def cond(
    pred: Any,
    true_fun: Callable[..., Any] = _MISSING,
    false_fun: Callable[..., Any] = _MISSING,
    *operands: Any,
    true_fn: Callable[..., Any] = _MISSING,
    false_fn: Callable[..., Any] = _MISSING,
) -> Any:
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)` (`lax.cond`).

    `pred` is a scalar: a bool, or a number (nonzero is true, as in JAX). On graph
    values both branches are traced and one `cond` node records them (each must return
    the same structure of the same types, except that a Python scalar result takes the
    dtype of the other branch's result there, where JAX would refuse it); on eager
    tensors, arrays or a Python `pred` the Python `if` runs.

    >>> import numpy as np, graphc as gc
    >>> f = gc.trace(lambda x: gc.cond(gc.sum(x) > 0, lambda v: v * 2, lambda v: -v, x),
    ...              gc.TensorSpec((2,)))
    >>> f(np.array([1.0, 2.0], np.float32)), f(np.array([-1.0, -2.0], np.float32))
    (array([2., 4.], dtype=float32), array([1., 2.], dtype=float32))
    """
    true_fun = _argument("cond", "true_fun", true_fun, "true_fn", true_fn)
    false_fun = _argument("cond", "false_fun", false_fun, "false_fn", false_fn)
    dtype = _scalar_dtype("cond", "predicate", pred)
    return _cond(pred, dtype, true_fun, false_fun, operands, "cond")


def _cond(
    pred: Any,
    dtype: np.dtype,
    true_fun: Callable[..., Any],
    false_fun: Callable[..., Any],
    operands: tuple,
    op: str,
) -> Any:
    """`cond` for `op` (cond, or switch's tree of conds), which its errors name."""
    leaves, tree = flatten(operands)
    graph = graph_of([pred, *leaves])
    if graph is None or (not isinstance(pred, Symbol) and kind_of(pred) is None):
        return true_fun(*operands) if bool(pred) else false_fun(*operands)
    pred = lift(pred, graph)
    if dtype.kind != "b":
        with graph:
            pred = ne(pred, 0)
    symbols = [lift(v, graph) for v in leaves]
    inputs = [(f"x{i}", s.type) for i, s in enumerate(symbols)]
    weak_operands = [is_weak(v) for v in leaves]  # weak inside the branches too, as in JAX

    def branch(fn: Callable[..., Any], default: str, dtypes: dict | None = None) -> Traced:
        name = fn_name(fn, default)

        def body(xs: list[Symbol]) -> Any:
            return fn(*unflatten(tree, _weakened(xs, weak_operands)))

        return trace_body(name, graph, inputs, body, "cond", dtypes)

    taken, other = branch(true_fun, "true_fn"), branch(false_fun, "false_fn")
    if taken.tree != other.tree:
        raise TracingError(
            f"{op}: the branches return different structures: {show_tree(taken.tree)} "
            f"from '{taken.body.name}', {show_tree(other.tree)} from '{other.body.name}' "
            f"(they differ at {mismatch(taken.tree, other.tree, 'result')})"
        )
    settled = _join_branches(op, [taken, other], leaf_paths(taken.tree, "result"))
    if _retrace(taken, settled):
        taken = branch(true_fun, "true_fn", settled)
    if _retrace(other, settled):
        other = branch(false_fun, "false_fn", settled)
    types = [[o.type for o in t.body.outputs] for t in (taken, other)]
    if types[0] != types[1]:  # said here, with the op's and the branches' names
        shown = ["(" + ", ".join(str(t) for t in ts) + ")" for ts in types]  # (map is gc.map)
        raise ShapeError(
            f"{op}: the branches give results of different types: '{taken.body.name}' "
            f"gives {shown[0]}, '{other.body.name}' gives {shown[1]}"
        )
    weak_results = set(taken.weak) & set(other.weak)  # weak in every branch: still weak
    captured = list(dict.fromkeys([*taken.captures, *other.captures]))
    bodies = []
    for traced in (taken, other):
        own = traced.body.inputs
        entries: list[tuple[str | None, Node | None, TensorType]] = [
            (None, p, p.type) for p in own[: len(symbols)]
        ]
        entries += [(c.name, traced.captures.get(c), c.type) for c in captured]
        bodies.append(with_inputs(traced.body, entries))
    node = bind(
        "cond",
        pred,
        *symbols,
        *(Symbol(c) for c in captured),
        then_body=bodies[0],
        else_body=bodies[1],
    )
    values = [weak(v) if k in weak_results else v for k, v in enumerate(results(node))]
    return unflatten(taken.tree, values)


def _join_branches(op: str, traced: Sequence[Traced], paths: list[str]) -> dict[int, np.dtype]:
    """The dtype each weak branch result takes (graphc/ops/weak.py): that of the other
    branches' strongly typed result there, or, weak in every branch, the default dtype
    of the highest Python kind among them. Results whose types differ otherwise are left
    to the op's type rule, which names them."""
    settled: dict[int, np.dtype] = {}
    for k, path in enumerate(paths):
        types = [t.body.outputs[k].type for t in traced]
        if not any(k in t.weak for t in traced) or len({ty.shape for ty in types}) != 1:
            continue
        fixed = {ty.dtype for t, ty in zip(traced, types) if k not in t.weak}
        if len(fixed) > 1:
            continue
        if not fixed:
            settled[k] = join_weak([t.weak[k] for t in traced])
            continue
        target = next(iter(fixed))
        for t in traced:
            if k in t.weak and weak_dtype(t.weak[k], [target]) != target:
                scalar = t.weak[k]
                raise DTypeError(
                    f"{op}: {path} is a weakly typed {type(scalar).__name__} (a Python "
                    f"scalar) in '{t.body.name}' and {target} in the other branches; a Python "
                    f"{type(scalar).__name__} meeting {target} gives "
                    f"{weak_dtype(scalar, [target])}, not {target}: return a value of one "
                    f"dtype from every branch (np.{target}(...), or gc.cast)"
                )
        settled[k] = target
    return settled


def _retrace(traced: Traced, settled: dict[int, np.dtype]) -> bool:
    """Whether a weak result of `traced` must be traced again to take its settled dtype."""
    outputs = traced.body.outputs
    return any(k in settled and outputs[k].type.dtype != settled[k] for k in traced.weak)


# -- switch ---------------------------------------------------------------------------


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """`branches[index](*operands)`, the index clamped to [0, len(branches) - 1]
    (`lax.switch`); `index` an integer scalar.

    On graph values it is a balanced tree of `cond` nodes on `index < k` (so the clamp
    needs no op and every translator of cond serves it); every branch is traced and
    must return the same structure of the same types. A Python or numpy index, or
    eager tensors, call the one branch.

    >>> import numpy as np, graphc as gc
    >>> branches = [lambda v: v + 1, lambda v: v * 10, lambda v: -v]
    >>> f = gc.trace(lambda i, x: gc.switch(i, branches, x),
    ...              gc.TensorSpec((), "int32"), gc.TensorSpec((2,)))
    >>> x = np.array([1.0, 2.0], np.float32)
    >>> f(np.int32(1), x), f(np.int32(7), x), f(np.int32(-3), x)
    (array([10., 20.], dtype=float32), array([-1., -2.], dtype=float32), array([2., 3.], dtype=float32))
    """
    branches = list(branches) if isinstance(branches, (list, tuple)) else branches
    if not isinstance(branches, list) or not branches:
        raise GraphcError(
            f"switch: branches must be a non-empty list or tuple of functions, got {branches!r}"
        )
    for k, fn in enumerate(branches):
        if not callable(fn):
            raise GraphcError(f"switch: branches[{k}] is {type(fn).__name__}, not a function")
    dtype = _scalar_dtype("switch", "index", index)
    if dtype.kind not in "iu":
        raise DTypeError(f"switch: the index must be an integer scalar, got {dtype}")
    leaves, _ = flatten(operands)
    graph = graph_of([index, *leaves])
    if graph is None or (not isinstance(index, Symbol) and kind_of(index) is None):
        return branches[min(max(int(index), 0), len(branches) - 1)](*operands)
    index = lift(index, graph)

    def named(k: int) -> Callable[..., Any]:
        """Branch k, named for the errors (a lambda as branch_k)."""

        def branch(*args: Any) -> Any:
            return branches[k](*args)

        branch.__name__ = fn_name(branches[k], f"branch_{k}")
        return branch

    def between(lo: int, hi: int) -> Callable[..., Any]:
        """The branches lo..hi-1 as one function: a cond on index < middle."""
        if hi - lo == 1:
            return named(lo)

        def pick(*args: Any) -> Any:
            middle = (lo + hi) // 2
            below = lt(index, middle)
            return _cond(
                below, below.dtype, between(lo, middle), between(middle, hi), args, "switch"
            )

        pick.__name__ = f"branches_{lo}_to_{hi - 1}"
        return pick

    if len(branches) == 1:  # traced alone, like JAX's switch of one branch
        return branches[0](*operands)
    return between(0, len(branches))(*operands)


# -- scan and map ---------------------------------------------------------------------


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | str | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the slices `x` of `xs` along their first axis;
    returns the final carry and the ys stacked along a new first axis (`lax.scan`).

    A Python scalar in `init` is weakly typed, as in JAX (graphc/ops/weak.py): it takes
    the dtype the body gives it (`scan(f, 0, float32_xs)` with `carry + x` has a float32
    carry; the body is traced again on that dtype). With `reverse=True` the steps run
    from the last slice to the first (ys[t] still belongs to xs[t]). Without xs,
    `length` gives the number of steps. On graph values the body is traced once (twice
    when a weak carry changes dtype) and one `scan` node records it, whatever the length.
    `unroll` (a positive int, or a bool) is accepted for JAX's sake and changes
    nothing, results included: graphc's compiled loop calls a body planned once per
    step, so there is no per-iteration dispatch for unrolling to save.

    >>> import numpy as np, graphc as gc
    >>> def cumsum(xs):
    ...     return gc.scan(lambda c, x: (c + x, c + x), np.float32(0.0), xs)[1]
    >>> gc.trace(cumsum, gc.TensorSpec((4,)))(np.arange(4, dtype=np.float32))
    array([0., 1., 3., 6.], dtype=float32)
    """
    _check_unroll("scan", unroll)
    return _scan(f, init, xs, length, reverse, None, "scan")


def _check_unroll(op: str, unroll: Any) -> None:
    if not isinstance(unroll, (bool, np.bool_)) and not (
        isinstance(unroll, (int, np.integer)) and unroll >= 1
    ):
        raise GraphcError(f"{op}: unroll must be a positive int or a bool, got {unroll!r}")


def _scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any,
    length: int | str | None,
    reverse: bool,
    paths: list[str] | None,
    op: str,
) -> tuple[Any, Any]:
    """`scan`, its carry errors saying `op` and naming the carries' leaves by `paths`
    (else from `init`: `init[0]`)."""
    init_leaves, init_tree = flatten(init)
    xs_leaves, xs_tree = flatten(xs)
    graph = graph_of([*init_leaves, *xs_leaves])
    if graph is None:
        return _scan_python(f, init, xs_leaves, xs_tree, length, reverse)
    carries = [lift(v, graph) for v in init_leaves]
    xs_symbols = [lift(v, graph) for v in xs_leaves]
    steps = _scan_length([x.shape for x in xs_symbols], length)
    if is_symbol(steps) and not xs_symbols:
        _check_bound(graph, steps)  # type: ignore[arg-type]
    name = fn_name(f, "scan_body")
    xs_inputs = [(f"x{i}", x.type.with_shape(x.shape[1:])) for i, x in enumerate(xs_symbols)]

    def trace(carries: list[Symbol], weak_carries: list[bool]) -> Traced:
        inputs = [(f"carry{i}", c.type) for i, c in enumerate(carries)] + xs_inputs

        def body_fn(values: list[Symbol]) -> Any:
            carry = unflatten(init_tree, _weakened(values[: len(carries)], weak_carries))
            x = unflatten(xs_tree, values[len(carries) :])
            out = _pair(f(carry, x), name)
            _check_carry("scan", name, init_tree, flatten(out[0])[1])
            return out

        return trace_body(name, graph, inputs, body_fn, "scan")

    paths = paths if paths is not None else leaf_paths(init_tree, "init")
    weak_carries = [is_weak(v) for v in init_leaves]
    traced = trace(carries, weak_carries)
    settled = _settle_carries(op, traced, init_leaves, carries, weak_carries, paths, graph)
    if settled is not None:
        carries, weak_carries = settled
        traced = trace(carries, weak_carries)
    _check_carry_types(op, traced, carries, paths)
    ys_tree = traced.tree.children[1]  # the tree of the pair (carry, y)
    node = bind(
        "scan",
        *carries,
        *xs_symbols,
        *(Symbol(c) for c in traced.captures),
        body=traced.body,
        length=steps,
        reverse=reverse,
        num_carry=len(carries),
        num_xs=len(xs_symbols),
    )
    values = results(node)
    # a carry weak in and out stays weak, and so does a y that is weak
    flags = [
        k in traced.weak and (k >= len(carries) or weak_carries[k]) for k in range(len(values))
    ]
    values = _weakened(values, flags)
    return unflatten(init_tree, values[: len(carries)]), unflatten(ys_tree, values[len(carries) :])


def _weakened(values: Sequence[Symbol], flags: Sequence[bool]) -> list[Symbol]:
    """`values`, those whose flag is set marked weak (graphc/ops/weak.py)."""
    return [weak(v) if flag else v for v, flag in zip(values, flags, strict=True)]


def _settle_carries(
    op: str,
    traced: Traced,
    init_leaves: Sequence[Any],
    carries: list[Symbol],
    weak_carries: list[bool],
    paths: list[str],
    graph: Graph,
) -> tuple[list[Symbol], list[bool]] | None:
    """The carries again, if a weak one (a Python scalar's) must take the dtype the body
    returns for it, as JAX promotes a weakly typed carry: `scan(f, 0, float32_xs)` with
    `carry + x` is a float32 carry. A promoted carry is strongly typed from then on; the
    body is to be traced again with them. None when nothing changes."""
    outputs = traced.body.outputs
    new_carries, new_weak, changed = list(carries), list(weak_carries), False
    for k, (carry, is_weak_carry) in enumerate(zip(carries, weak_carries)):
        given = outputs[k].type
        if not is_weak_carry or given == carry.type or given.shape != carry.type.shape:
            continue  # unchanged, or a mistake _check_carry_types names
        scalar = weak_scalar(init_leaves[k])
        if weak_dtype(scalar, [given.dtype]) != given.dtype:
            raise DTypeError(
                f"{op}: the carry {paths[k]} starts as a Python {type(scalar).__name__} "
                f"({carry.dtype}) but '{traced.body.name}' returns it as {given.dtype}, which "
                f"a Python {type(scalar).__name__} does not take (it would make "
                f"{weak_dtype(scalar, [given.dtype])}): start it at the dtype it keeps, e.g. "
                f"np.{given.dtype}(...), or cast it in the body"
            )
        where = f"{op}: the carry {paths[k]}"
        if active_graph() is None:
            with graph:
                new_carries[k] = as_dtype_of(init_leaves[k], given.dtype, where)
        else:
            new_carries[k] = as_dtype_of(init_leaves[k], given.dtype, where)
        new_weak[k], changed = False, True
    return (new_carries, new_weak) if changed else None


def _check_carry_types(
    op: str, traced: Traced, carries: Sequence[Symbol], paths: list[str]
) -> None:
    """Each carry leaves the body with the type it entered it; else an error naming the
    carry and both types."""
    outputs = traced.body.outputs
    for k, (carry, path) in enumerate(zip(carries, paths)):
        given = outputs[k].type
        if given == carry.type:
            continue
        hint = ""
        if given.dtype != carry.dtype and is_float(given.dtype) and is_float(carry.dtype):
            hint = (
                " (graphc promotes arrays as numpy does: an int32 or int64 array meeting a "
                "float32 gives float64, where JAX's lattice keeps float32)"
            )
        if given.dtype != carry.dtype:
            fix = f"cast it in the body (gc.cast(..., '{carry.dtype}'))"
        else:  # the same dtype: its shape changed
            fix = "give it back in its shape (a reshape or broadcast_to in the body)"
        raise ShapeError(
            f"{op}: the carry {path} enters the body '{traced.body.name}' as {carry.type} but "
            f"leaves it as {given}; each carry must keep its type: {fix} or start it at the "
            f"type the body gives{hint}"
        )


def _pair(out: Any, name: str) -> tuple[Any, Any]:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TracingError(
            f"scan: '{name}' must return a pair (carry, y), got {type(out).__name__}"
        )
    return out[0], out[1]


def _check_carry(op: str, name: str, init_tree: Tree, new_tree: Tree) -> None:
    if new_tree != init_tree:
        raise TracingError(
            f"{op}: '{name}' returns a carry of structure {show_tree(new_tree)}, but the "
            f"initial carry has structure {show_tree(init_tree)} (they differ at "
            f"{mismatch(init_tree, new_tree, 'carry')}, initial vs returned)"
        )


def _scan_length(shapes: Sequence[tuple], length: int | str | None) -> int | str:
    firsts = []
    for shape in shapes:
        if not shape:
            raise ShapeError("scan: every x must have a leading axis to step along (got a scalar)")
        firsts.append(shape[0])
    if isinstance(length, Symbol) or kind_of(length) is not None:
        raise ShapeError(  # the number of steps is part of the node, fixed when tracing
            "scan: length must be known when tracing (an int, or a dim of an input such as "
            "x.shape[0]), got a graph value; hold it static (gc.jit's static_argnums), or "
            "loop on a count known only when running with gc.fori_loop or gc.while_loop"
        )
    if length is not None:
        length = as_dim(length)
        firsts.append(length)
    if not firsts:
        raise GraphcError("scan: without xs, give the number of steps as length=")
    if len(set(firsts)) != 1:
        raise ShapeError(
            f"scan: the xs' leading axes and length disagree: {firsts} (they must all be equal)"
        )
    return firsts[0]


def _check_bound(graph: Graph, dim: str) -> None:
    """A symbolic length without xs must be a dim of some input, which gives it a size
    when the graph runs."""
    for g in enclosing(graph):
        if any(dim in p.type.symbols for p in g.inputs):
            return
    raise ShapeError(
        f"scan: length={dim!r} is a symbolic dim that no input of graph '{graph.name}' has, "
        "so nothing gives it a size when the graph runs; pass an int, or a dim of an input "
        "(length=x.shape[0])"
    )


def _scan_python(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs_leaves: list[Any],
    xs_tree: Tree,
    length: int | str | None,
    reverse: bool,
) -> tuple[Any, Any]:
    if length is not None and is_symbol(length):
        raise GraphcError(f"scan: a symbolic length ({length!r}) needs graph values")
    steps = _scan_length([np.shape(x) for x in xs_leaves], length)
    order = range(steps - 1, -1, -1) if reverse else range(steps)  # type: ignore[arg-type]
    init_tree = flatten(init)[1]
    name = fn_name(f, "scan_body")
    carry = _settled_init(f, init, xs_leaves, xs_tree, order, name)
    ys: list[Any] = [None] * steps  # type: ignore[list-item]
    for t in order:
        carry, ys[t] = _pair(f(carry, unflatten(xs_tree, [x[t] for x in xs_leaves])), name)
        _check_carry("scan", name, init_tree, flatten(carry)[1])
    if steps == 0:
        return carry, empty_ys(f, init, xs_leaves, xs_tree)
    y_leaves = [flatten(y)[0] for y in ys]
    tree = flatten(ys[0])[1]
    stacked = [
        stack([_as_leaf(leaves[k]) for leaves in y_leaves], axis=0) for k in range(len(y_leaves[0]))
    ]
    return carry, unflatten(tree, stacked)


def _as_leaf(value: Any) -> Any:
    """A y to stack: a Python scalar as numpy's array of it (its default dtype)."""
    return np.asarray(value) if isinstance(value, (bool, int, float)) else value


def _settled_init(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs_leaves: list[Any],
    xs_tree: Tree,
    order: range,
    name: str,
) -> Any:
    """`init` with each Python scalar leaf (weakly typed, as in JAX) in the dtype of the
    carry the first step returns in its place, so that every step's carry, and so its
    ys, has one dtype (`scan(f, 0, float32_xs)` carries float32, as jax's does; stacked
    as they came, a Python 0 beside float32 values gave float64 or failed)."""
    leaves, tree = flatten(init)
    if not len(order) or not any(isinstance(v, (bool, int, float)) for v in leaves):
        return init
    first = f(init, unflatten(xs_tree, [x[order[0]] for x in xs_leaves]))
    out, _ = _pair(first, name)
    _check_carry("scan", name, tree, flatten(out)[1])
    settled = [
        np.asarray(v, dtype=np.result_type(o))[()]
        if isinstance(v, (bool, int, float)) and hasattr(o, "dtype")
        else v
        for v, o in zip(leaves, flatten(out)[0])
    ]
    return unflatten(tree, settled)


def map(f: Callable[[Any], Any], xs: Any) -> Any:  # noqa: A001
    """`f` applied to each slice of `xs` along its first axis, the results stacked
    (`lax.map`): a `scan` without carries, one slice per step. `gc.map` adds JAX's
    `batch_size=` above this layer (graphc/frontend/batched_map.py: it needs vmap).

    >>> import numpy as np, graphc as gc
    >>> gc.map(lambda row: gc.sum(row * row), np.arange(6.0).reshape(3, 2))
    array([ 1., 13., 41.])
    """

    def step(carry: None, x: Any) -> tuple[None, Any]:
        return None, f(x)

    step.__name__ = fn_name(f, "map_body")
    return scan(step, None, xs)[1]


# -- while_loop and fori_loop ---------------------------------------------------------


def while_loop(
    cond_fun: Callable[[Any], Any] = _MISSING,
    body_fun: Callable[[Any], Any] = _MISSING,
    init_val: Any = _MISSING,
    *,
    cond_fn: Callable[[Any], Any] = _MISSING,
    body_fn: Callable[[Any], Any] = _MISSING,
    init: Any = _MISSING,
) -> Any:
    """`while cond_fun(val): val = body_fun(val)`; returns the final val (`lax.while_loop`).

    On graph values both functions are traced into one `while_loop` node, whose trip
    count is decided at run time; it is forward only (differentiate a loop of known
    length with gc.fori_loop or gc.scan), as in JAX. A Python scalar in `init_val` is
    weakly typed: it takes the dtype the body gives it, as in `scan`.

    >>> import numpy as np, graphc as gc
    >>> f = gc.trace(lambda x: gc.while_loop(lambda v: gc.sum(v) < 100, lambda v: v * 2, x),
    ...              gc.TensorSpec((2,)))
    >>> f(np.array([1.0, 2.0], np.float32))
    array([ 64., 128.], dtype=float32)
    """
    cond_fun = _argument("while_loop", "cond_fun", cond_fun, "cond_fn", cond_fn)
    body_fun = _argument("while_loop", "body_fun", body_fun, "body_fn", body_fn)
    init_val = _argument("while_loop", "init_val", init_val, "init", init)
    return _while_loop(cond_fun, body_fun, init_val, None, "while_loop")


def _while_loop(
    cond_fun: Callable[[Any], Any],
    body_fun: Callable[[Any], Any],
    init_val: Any,
    paths: list[str] | None,
    op: str,
) -> Any:
    """`while_loop`, its carry errors saying `op` and naming the carries' leaves by
    `paths` (else from `init_val`: `init_val[0]`)."""
    leaves, tree = flatten(init_val)
    graph = graph_of(leaves)
    name = fn_name(body_fun, "body_fn")
    if graph is None:
        val = init_val
        while _holds(op, fn_name(cond_fun, "cond_fn"), cond_fun(val)):
            val = body_fun(val)
            _check_carry(op, name, tree, flatten(val)[1])
        return val
    carries = [lift(v, graph) for v in leaves]
    paths = paths if paths is not None else leaf_paths(tree, "init_val")

    def trace(carries: list[Symbol], weak_carries: list[bool]) -> tuple[Traced, Traced]:
        inputs = [(f"carry{i}", c.type) for i, c in enumerate(carries)]

        def carry(xs: list[Symbol]) -> Any:
            return unflatten(tree, _weakened(xs, weak_carries))

        test = trace_body(
            fn_name(cond_fun, "cond_fn"),
            graph,
            inputs,
            lambda xs: [cond_fun(carry(xs))],
            "while_loop",
        )
        step = trace_body(name, graph, inputs, lambda xs: body_fun(carry(xs)), "while_loop")
        _check_carry("while_loop", step.body.name, tree, step.tree)
        return test, step

    weak_carries = [is_weak(v) for v in leaves]
    test, step = trace(carries, weak_carries)
    settled = _settle_carries(op, step, leaves, carries, weak_carries, paths, graph)
    if settled is not None:
        carries, weak_carries = settled
        test, step = trace(carries, weak_carries)
    _check_carry_types(op, step, carries, paths)
    node = bind(
        "while_loop",
        *carries,
        *(Symbol(c) for c in test.captures),
        *(Symbol(c) for c in step.captures),
        cond_body=test.body,
        body=step.body,
        num_carry=len(carries),
        num_cond_consts=len(test.captures),
    )
    flags = [w and k in step.weak for k, w in enumerate(weak_carries)]
    return unflatten(tree, _weakened(results(node), flags))


def _holds(op: str, name: str, pred: Any) -> bool:
    """A predicate the condition gave on the Python path, checked as on graph values (a
    bool scalar, as JAX's while_loop requires): a tuple or a float would otherwise be
    truthy forever."""
    shape = None if isinstance(pred, (tuple, list, dict)) else _shape_of(pred)
    dtype = np.result_type(type(pred)) if is_python_scalar(pred) else getattr(pred, "dtype", None)
    if shape != () or dtype != np.bool_:
        got = type(pred).__name__ if shape is None else f"{dtype} of shape {shape}"
        raise DTypeError(
            f"{op}: the condition '{name}' must give one bool scalar, gives {got} "
            "(compare it, e.g. x > 0)"
        )
    return bool(pred)


def fori_loop(
    lower: Any,
    upper: Any,
    body_fun: Callable[[Any, Any], Any] = _MISSING,
    init_val: Any = _MISSING,
    *,
    unroll: int | bool | None = None,
    body_fn: Callable[[Any, Any], Any] = _MISSING,
    init: Any = _MISSING,
) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)`; returns val (`lax.fori_loop`).

    The counter `i` has the bounds' dtype: int32 bounds give an int32 counter, Python
    ints (weak, as in JAX) take the other bound's dtype, int64 when both are Python
    ints. With int bounds on graph values the loop is a `scan` of upper - lower steps
    (the counter a carry), so it can be differentiated; with graph-value bounds it is a
    `while_loop`. With Python bounds the counter is weakly typed, as in JAX
    (graphc/ops/weak.py): `v + i` keeps the dtype of a float32 `v`. A counter of typed
    bounds (np.int32, graph values) is an ordinary int array, which promotes by numpy's
    rules (float32 with int32 is float64, where JAX's lattice keeps float32): cast it
    before mixing it into a float32 carry, else the carry's change of dtype is an error
    naming it. On eager tensors and arrays `i` is a Python int (of the bounds' numpy
    type when they have one). A Python scalar `init_val` (leaf) is weak too, as in
    `while_loop` and `scan`: it takes the dtype the body gives it. `unroll`, as JAX's,
    only with bounds known when tracing, changes nothing (see `scan`).

    >>> import numpy as np, graphc as gc
    >>> f = gc.trace(lambda x: gc.fori_loop(0, 3, lambda i, v: v * 2 + i, x), gc.TensorSpec(()))
    >>> f(np.float32(1.0))
    array(12., dtype=float32)
    >>> gc.trace(lambda x: gc.fori_loop(0, 3, lambda i, v: v + x, 0), gc.TensorSpec(()))(
    ...     np.float32(0.5))
    array(1.5, dtype=float32)
    """
    body_fun = _argument("fori_loop", "body_fun", body_fun, "body_fn", body_fn)
    init_val = _argument("fori_loop", "init_val", init_val, "init", init)
    counter = _counter_dtype(lower, upper)
    leaves, _ = flatten(init_val)
    graph = graph_of([lower, upper, *leaves])
    static = not any(isinstance(b, Symbol) or kind_of(b) is not None for b in (lower, upper))
    if unroll is not None:
        _check_unroll("fori_loop", unroll)
        if not static:  # JAX's rule too: a loop of unknown length cannot be unrolled
            raise GraphcError(
                "fori_loop: unroll= needs bounds known when tracing (Python or numpy ints); "
                "these are graph values, so the loop is a while_loop: leave unroll out"
            )
    if graph is None:
        both_python = all(is_python_scalar(b) for b in (lower, upper))
        tree = flatten(init_val)[1]
        name = fn_name(body_fun, "body_fn")
        val = init_val
        for i in range(int(lower), int(upper)):
            val = body_fun(i if both_python else counter.type(i), val)
            _check_carry("fori_loop", name, tree, flatten(val)[1])
        return val
    paths = leaf_paths(flatten(init_val)[1], "init_val")
    if static:
        start = np.asarray(int(lower), counter)
        # Python bounds make a weakly typed counter, as in JAX: `val + i` keeps val's dtype
        weak_counter = all(is_python_scalar(b) for b in (lower, upper))

        def step(carry: Any, _: Any) -> tuple[Any, None]:
            i, val = carry
            return (i + 1, body_fun(weak(i) if weak_counter else i, val)), None

        step.__name__ = fn_name(body_fun, "body_fn")
        steps = max(int(upper) - int(lower), 0)
        labels = ["counter", *paths]
        (_, val), _ = _scan(step, (start, init_val), None, steps, False, labels, "fori_loop")
        return val
    with graph:
        low, high = (cast(lift(b, graph), counter) for b in (lower, upper))
    _, _, val = _while_loop(
        lambda c: c[0] < c[1],
        lambda c: (c[0] + 1, c[1], body_fun(c[0], c[2])),
        (low, high, init_val),
        ["counter", "upper", *paths],
        "fori_loop",
    )
    return val


def _counter_dtype(lower: Any, upper: Any) -> np.dtype:
    """The bounds' dtype: a Python int is weak (it takes the other bound's dtype)."""
    strong = []
    for what, bound in (("lower", lower), ("upper", upper)):
        dtype = _scalar_dtype("fori_loop", what, bound)
        if dtype.kind not in "iu":
            raise DTypeError(f"fori_loop: {what} must be an integer, got {dtype}")
        if not is_python_scalar(bound):
            strong.append(dtype)
    return np.result_type(*strong) if strong else np.dtype(np.int64)
