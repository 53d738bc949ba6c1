"""Tracing the functions of gc.cond / gc.scan / gc.while_loop into closed bodies.

A function is traced into a body Graph declared inside the graph being built: values
of an enclosing graph that it reads become placeholders of the body (captures), which
the caller passes in as extra operands (closure conversion); eager tensors it reads
become placeholders of the traced graph around them first (graphc.ops.symbolic). A
body is closed in its dims too: for a symbolic dim it uses that none of its
placeholders has, it captures an outer value that has it.

`empty_ys` learns the types a scan body gives without running it, for the eager and
array path of a scan of no steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError, TracingError
from graphc.ir.graph import Graph, Node, active_graph
from graphc.ir.types import TensorType
from graphc.ops.body import free_symbols
from graphc.ops.custom import value_type
from graphc.ops.dispatch import is_python_scalar, kind_of, weak_dtype
from graphc.ops.pytree import Tree, flatten, unflatten
from graphc.ops.symbolic import (
    SYMBOLIC,
    Symbol,
    capture,
    enclosing,
    register_lifter,
    tracing_body,
    user_location,
)
from graphc.ops.weak import as_dtype_of, is_weak, weak_scalar


def fn_name(fn: Callable[..., Any], default: str) -> str:
    name = getattr(fn, "__name__", default)
    return default if name == "<lambda>" else name


# -- which way to run -----------------------------------------------------------------


def graph_of(values: Sequence[Any]) -> Graph | None:
    """The graph to record into: the one being declared, or that of a graph value."""
    active = active_graph()
    if active is not None:
        return active
    for v in values:
        if isinstance(v, Symbol):
            return v.graph
    return None


def lift(value: Any, graph: Graph | None = None) -> Symbol:
    """`value` as a graph value: of the graph being declared, else of `graph` (the
    graph of the call's other graph values: an array next to them is its constant)."""
    if isinstance(value, Symbol):
        return value
    if graph is not None and active_graph() is None:
        with graph:
            return lift(value)
    if is_python_scalar(value):  # graphc's default dtypes; a numpy scalar keeps its own
        return SYMBOLIC.lift(np.asarray(value, weak_dtype(value, ())), None, ())
    return SYMBOLIC.lift(value, None, ())


# -- tracing a body -------------------------------------------------------------------


class Traced:
    """A function traced into a body: its graph, its output structure and captures, and
    which of its results are weak (graphc/ops/weak.py): result index -> the Python
    scalar it was or stands for, for the caller to settle their dtypes."""

    def __init__(
        self, body: Graph, tree: Tree, captures: dict[Node, Node], weak: dict[int, Any]
    ) -> None:
        self.body = body
        self.tree = tree
        self.captures = captures  # outer node -> body placeholder
        self.weak = weak


def trace_body(
    name: str,
    parent: Graph,
    inputs: Sequence[tuple[str, TensorType]],
    fn: Callable[[list[Symbol]], Any],
    op: str,
    result_dtypes: Mapping[int, np.dtype] | None = None,
) -> Traced:
    """`fn` traced on placeholders of types `inputs` into a body graph named `name`.

    A weak result (a Python scalar, or a weak graph value) takes the dtype
    `result_dtypes` gives for its index, if any; else it keeps its own."""
    body = Graph(name)
    weak_results: dict[int, Any] = {}
    with tracing_body(body, parent) as captures:
        symbols = [
            Symbol(body.add_placeholder(body.fresh_name(n), t, meta={"loc": user_location()}))
            for n, t in inputs
        ]
        result = fn(symbols)
        leaves, tree = flatten(result)
        for k, leaf in enumerate(leaves):
            if leaf is None:
                continue
            if is_weak(leaf):
                weak_results[k] = weak_scalar(leaf)
                if result_dtypes is not None and k in result_dtypes:
                    leaf = as_dtype_of(leaf, result_dtypes[k], f"{op}: result {k} of '{name}'")
            symbol = _as_body_value(leaf, body, op, name, k)
            body.add_output(symbol.node, body.fresh_name(f"out{k}"))
        _close_dims(body, parent, op)
    return Traced(body, tree, captures, weak_results)


def _close_dims(body: Graph, parent: Graph, op: str) -> None:
    """Capture an outer value for each symbolic dim the body uses but none of its
    placeholders has (`broadcast_to(v, xs.shape)`, `length=xs.shape[0]` of an outer xs),
    so the body stays closed: the operand gives the dim its size when the node runs."""
    for dim in free_symbols(body):
        carrier = next(
            (p for g in enclosing(parent) for p in g.inputs if dim in p.type.symbols), None
        )
        if carrier is None:
            raise ShapeError(
                f"{op}: the body '{body.name}' uses the symbolic dim {dim!r}, which no input "
                f"of graph '{parent.name}' (or a graph around it) has, so nothing gives it a "
                "size when the graph runs"
            )
        capture(Symbol(carrier), body)


def _as_body_value(value: Any, body: Graph, op: str, name: str, k: int) -> Symbol:
    if isinstance(value, Symbol):
        if value.graph is body:
            return value
        captured = capture(value, body)
        if captured is None:
            raise TracingError(
                f"{op}: '{name}' returns value '{value.name}' of graph '{value.graph.name}', "
                "which encloses neither this call nor the graph being declared"
            )
        return captured
    try:
        return lift(value)
    except GraphcError as exc:
        hint = ""
        if not isinstance(value, (str, bytes)) and np.ndim(value) == 0 and not np.isscalar(value):
            hint = (
                " (if it is a container of values, register its class with "
                "gc.register_pytree_node or gc.register_dataclass)"
            )
        raise TracingError(
            f"{op}: result {k} of '{name}' is {type(value).__name__}, not a tensor: {exc}{hint}"
        ) from None


def with_inputs(body: Graph, names: Sequence[tuple[str | None, Node | None, TensorType]]) -> Graph:
    """A copy of `body` whose placeholders are exactly `names`, in order: each entry is
    (name for a new unused placeholder, the body's existing placeholder, type)."""
    result = Graph(body.name)
    copies: dict[Node, Node] = {}
    for name, existing, t in names:
        if existing is not None:
            result.append_copy(existing, copies)
        else:  # a name neither the body's nodes (copied below) nor earlier entries take
            base = name or "unused"
            fresh, k = base, 0
            while fresh in body or fresh in result:
                k += 1
                fresh = f"{base}_{k}"
            result.add_placeholder(fresh, t)
    for node in body.nodes:
        if node.kind != "placeholder":
            result.append_copy(node, copies)
    return result


# -- the ys of a scan of no steps -------------------------------------------------------


def empty_ys(f: Callable[..., Any], init: Any, xs_leaves: list[Any], xs_tree: Tree) -> Any:
    """The ys of a scan of no steps: empty arrays (or tensors) of the types f gives,
    learnt by tracing f once on placeholders."""
    init_leaves, init_tree = flatten(init)
    probe = Graph("scan_types")
    _PROBES.add(probe.id)
    try:
        ys = _probe_ys(probe, f, init_leaves, init_tree, xs_leaves, xs_tree)
    finally:
        _PROBES.discard(probe.id)
    y_leaves, tree = flatten(ys)
    kind = next((kind_of(v) for v in init_leaves + xs_leaves if kind_of(v)), None)
    empties = []
    for leaf in y_leaves:
        t = value_type(leaf)
        array = np.zeros((0, *t.shape), t.dtype)
        empties.append(kind.lift(array, None, ()) if kind is not None else array)
    return unflatten(tree, empties)


# graphs traced only for the types of what they compute: a foreign value (an eager tensor
# the function closes over) read there stands in as a placeholder of its type
_PROBES: set[int] = set()


def _probe_lifter(value: Any, graph: Graph) -> Symbol | None:
    if graph.id not in _PROBES or kind_of(value) is None or isinstance(value, Symbol):
        return None
    return Symbol(graph.add_placeholder(graph.fresh_name("captured"), value_type(value)))


register_lifter(_probe_lifter)


def _probe_ys(
    probe: Graph,
    f: Callable[..., Any],
    init_leaves: list[Any],
    init_tree: Tree,
    xs_leaves: list[Any],
    xs_tree: Tree,
) -> Any:
    with probe:
        carry = [
            Symbol(probe.add_placeholder(f"c{i}", value_type(v))) for i, v in enumerate(init_leaves)
        ]
        xs = [
            Symbol(probe.add_placeholder(f"x{i}", value_type(x).with_shape(np.shape(x)[1:])))
            for i, x in enumerate(xs_leaves)
        ]
        _, y = f(unflatten(init_tree, carry), unflatten(xs_tree, xs))
    return y
