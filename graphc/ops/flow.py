"""`gc.cond`, `gc.scan`, `gc.while_loop`, `gc.fori_loop`: control flow, JAX's signatures.

On graph values (inside `with g:`, `gc.trace`, `gc.jit`, or another body) each call
traces its functions into closed bodies and records one node (graphc/ops/control.py):
values a function reads from outside become captured operands, so the graph stays
closed and the node self-contained. On eager tensors and plain arrays they run the
Python control flow they stand for, so one function runs both ways, the eager tape
recording what actually ran.

Operands, carries and outputs may be lists and tuples of values, nested (pytrees as
far as lists and tuples go); None is an empty subtree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError, TracingError
from graphc.ir.graph import Graph, Node
from graphc.ir.types import TensorType, as_dim, is_symbol
from graphc.ops.closure import Traced, empty_ys, fn_name, graph_of, lift, trace_body, with_inputs
from graphc.ops.dispatch import bind
from graphc.ops.pytree import Tree, flatten, show_tree, unflatten
from graphc.ops.shape import stack
from graphc.ops.symbolic import Symbol, enclosing
from graphc.ops.tuples import results

# -- cond -----------------------------------------------------------------------------


def cond(
    pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any
) -> Any:
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`.

    On graph values both branches are traced and one `cond` node records them (each
    must return the same structure of the same types); on eager tensors or arrays the
    Python `if` runs.

    >>> import numpy as np, graphc as gc
    >>> f = gc.trace(lambda x: gc.cond(gc.sum(x) > 0, lambda v: v * 2, lambda v: -v, x),
    ...              gc.TensorSpec((2,)))
    >>> f(np.array([1.0, 2.0], np.float32)), f(np.array([-1.0, -2.0], np.float32))
    (array([2., 4.], dtype=float32), array([1., 2.], dtype=float32))
    """
    leaves, tree = flatten(operands)
    graph = graph_of([pred, *leaves])
    if graph is None or isinstance(pred, (bool, np.bool_)):
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    pred = lift(pred, graph)
    symbols = [lift(v, graph) for v in leaves]
    inputs = [(f"x{i}", s.type) for i, s in enumerate(symbols)]

    def branch(fn: Callable[..., Any], default: str) -> Traced:
        name = fn_name(fn, default)
        return trace_body(name, graph, inputs, lambda xs: fn(*unflatten(tree, xs)), "cond")

    taken, other = branch(true_fn, "true_fn"), branch(false_fn, "false_fn")
    if taken.tree != other.tree:
        raise TracingError(
            f"cond: the branches return different structures: {show_tree(taken.tree)} "
            f"from '{taken.body.name}', {show_tree(other.tree)} from '{other.body.name}'"
        )
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
    return unflatten(taken.tree, results(node))


# -- scan -----------------------------------------------------------------------------


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | str | None = None,
    reverse: bool = False,
) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the slices `x` of `xs` along their first axis;
    returns the final carry and the ys stacked along a new first axis (`lax.scan`).

    With `reverse=True` the steps run from the last slice to the first (ys[t] still
    belongs to xs[t]). Without xs, `length` gives the number of steps. On graph values
    the body is traced once and one `scan` node records it, whatever the length.

    >>> import numpy as np, graphc as gc
    >>> def cumsum(xs):
    ...     return gc.scan(lambda c, x: (c + x, c + x), np.float32(0.0), xs)[1]
    >>> gc.trace(cumsum, gc.TensorSpec((4,)))(np.arange(4, dtype=np.float32))
    array([0., 1., 3., 6.], dtype=float32)
    """
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
    inputs = [(f"carry{i}", c.type) for i, c in enumerate(carries)]
    inputs += [(f"x{i}", x.type.with_shape(x.shape[1:])) for i, x in enumerate(xs_symbols)]

    def body_fn(values: list[Symbol]) -> Any:
        carry = unflatten(init_tree, values[: len(carries)])
        x = unflatten(xs_tree, values[len(carries) :])
        out = f(carry, x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TracingError(
                f"scan: '{name}' must return a pair (carry, y), got {type(out).__name__}"
            )
        new_leaves, new_tree = flatten(out[0])
        if new_tree != init_tree:
            raise TracingError(
                f"scan: '{name}' returns a carry of structure {show_tree(new_tree)}, but the "
                f"initial carry has structure {show_tree(init_tree)}"
            )
        return out

    traced = trace_body(name, graph, inputs, body_fn, "scan")
    ys_tree = traced.tree[1][1]  # the tree of the pair (carry, y)
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
    return unflatten(init_tree, values[: len(carries)]), unflatten(ys_tree, values[len(carries) :])


def _scan_length(shapes: Sequence[tuple], length: int | str | None) -> int | str:
    firsts = []
    for shape in shapes:
        if not shape:
            raise ShapeError("scan: every x must have a leading axis to step along (got a scalar)")
        firsts.append(shape[0])
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
    carry, ys = init, [None] * steps  # type: ignore[list-item]
    for t in order:
        carry, ys[t] = f(carry, unflatten(xs_tree, [x[t] for x in xs_leaves]))
    if steps == 0:
        return carry, empty_ys(f, init, xs_leaves, xs_tree)
    y_leaves = [flatten(y)[0] for y in ys]
    tree = flatten(ys[0])[1]
    stacked = [stack([leaves[k] for leaves in y_leaves], axis=0) for k in range(len(y_leaves[0]))]
    return carry, unflatten(tree, stacked)


# -- while_loop and fori_loop ---------------------------------------------------------


def while_loop(cond_fn: Callable[[Any], Any], body_fn: Callable[[Any], Any], init: Any) -> Any:
    """`while cond_fn(carry): carry = body_fn(carry)`; returns the final carry.

    On graph values both functions are traced into one `while_loop` node, whose trip
    count is decided at run time; it is forward only (differentiate a loop of known
    length with gc.fori_loop or gc.scan), as in JAX.

    >>> import numpy as np, graphc as gc
    >>> f = gc.trace(lambda x: gc.while_loop(lambda v: gc.sum(v) < 100, lambda v: v * 2, x),
    ...              gc.TensorSpec((2,)))
    >>> f(np.array([1.0, 2.0], np.float32))
    array([ 64., 128.], dtype=float32)
    """
    leaves, tree = flatten(init)
    graph = graph_of(leaves)
    if graph is None:
        carry = init
        while bool(cond_fn(carry)):
            carry = body_fn(carry)
        return carry
    carries = [lift(v, graph) for v in leaves]
    inputs = [(f"carry{i}", c.type) for i, c in enumerate(carries)]
    test = trace_body(
        fn_name(cond_fn, "cond_fn"),
        graph,
        inputs,
        lambda xs: [cond_fn(unflatten(tree, xs))],
        "while_loop",
    )
    step = trace_body(
        fn_name(body_fn, "body_fn"),
        graph,
        inputs,
        lambda xs: body_fn(unflatten(tree, xs)),
        "while_loop",
    )
    if step.tree != tree:
        raise TracingError(
            f"while_loop: '{step.body.name}' returns a carry of structure "
            f"{show_tree(step.tree)}, but the initial carry has structure {show_tree(tree)}"
        )
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
    return unflatten(tree, results(node))


def fori_loop(lower: Any, upper: Any, body_fn: Callable[[Any, Any], Any], init: Any) -> Any:
    """`for i in range(lower, upper): val = body_fn(i, val)`; returns val (`lax.fori_loop`).

    With Python int bounds on graph values it is a `scan` of upper - lower steps (the
    counter an int64 carry), so it can be differentiated; with graph-value bounds it is
    a `while_loop`. On graph values `i` is an int64 value, and numpy's promotion makes
    int64 with float32 float64 (JAX's would keep float32): cast it before mixing it into
    a float32 carry. On eager tensors and arrays `i` is a Python int.

    >>> import numpy as np, graphc as gc
    >>> body = lambda i, v: v * 2 + gc.cast(i, "float32")
    >>> f = gc.trace(lambda x: gc.fori_loop(0, 3, body, x), gc.TensorSpec(()))
    >>> f(np.float32(1.0))
    array(12., dtype=float32)
    """
    leaves, _ = flatten(init)
    graph = graph_of([lower, upper, *leaves])
    static = all(
        isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in (lower, upper)
    )
    if graph is None:
        val = init
        for i in range(int(lower), int(upper)):
            val = body_fn(i, val)
        return val
    if static:
        start = np.int64(lower)

        def step(carry: Any, _: Any) -> tuple[Any, None]:
            i, val = carry
            return (i + 1, body_fn(i, val)), None

        (_, val), _ = scan(step, (start, init), length=max(int(upper) - int(lower), 0))
        return val
    low, high = lift(lower, graph), lift(upper, graph)
    _, _, val = while_loop(
        lambda c: c[0] < c[1],
        lambda c: (c[0] + 1, c[1], body_fn(c[0], c[2])),
        (low, high, init),
    )
    return val
