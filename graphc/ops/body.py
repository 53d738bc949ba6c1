"""Graphs inside ops: binding a body's symbolic dims, typing it, and running it.

Ops whose attributes hold closed graphs (`fused`, `custom_vjp`, `cond`, `scan`,
`while_loop`) type-check their bodies against the types they are applied to and run
them here. `evaluate` is *the* reference semantics of a graph: each op's own kernel in
graph order, on fresh arrays, every value laid out as the compiled plans lay it out
(C-contiguous, but a transpose's view: see LAYOUT in runtime/plan.py, since matmul and
reductions round by memory order), and checked against its declared type. The
reference interpreter (`gc.run`) is `evaluate` after checking the feeds, and a
control-flow op's kernel evaluates its bodies with it, so nested bodies have the same
semantics as the graph around them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, NumericsError, ShapeError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import attr_dims, bound_attrs, get_op
from graphc.ir.types import Dim, TensorType, TupleType, format_shape, is_float, is_symbol


def bind_body_dims(
    body: Graph, types: Sequence[TensorType], op: str = "fused", what: str = "input"
) -> dict[str, Dim]:
    """Each symbol of the body's placeholders -> the dim the actual input has there.

    Dtypes and ranks must match, and so must every concrete dim and every repeated
    symbol; errors name the op and the body placeholder."""
    bindings: dict[str, Dim] = {}
    for p, t in zip(body.inputs, types):
        if p.type.dtype != t.dtype:
            raise DTypeError(
                f"{op}: {what} for body placeholder '{p.name}' has dtype {t.dtype}, "
                f"the body '{body.name}' expects {p.type.dtype}"
            )
        ok = p.type.rank == t.rank
        for d, a in zip(p.type.shape, t.shape) if ok else ():
            if is_symbol(d):
                ok = bindings.setdefault(d, a) == a  # type: ignore[arg-type]
            else:
                ok = d == a
            if not ok:
                break
        if not ok:
            raise ShapeError(
                f"{op}: {what} for body placeholder '{p.name}' has shape "
                f"{format_shape(t.shape)}, the body '{body.name}' expects "
                f"{format_shape(p.type.shape)}"
            )
    return bindings


def body_types(
    body: Graph, types: Sequence[TensorType], op: str = "fused", what: str = "input"
) -> dict[Node, TensorType | TupleType]:
    """The type of every body node when the body runs on inputs of `types`."""
    if len(types) != len(body.inputs):
        raise GraphcError(
            f"{op}: the body '{body.name}' has {len(body.inputs)} placeholders for "
            f"{len(types)} {what}s"
        )
    if all(t == p.type for t, p in zip(types, body.inputs)):
        # on its own placeholders' types a body's values have the types it holds: every
        # graph keeps each node's type equal to its op's rule (verify checks it, bodies
        # included); inferring a 5,000-op fused body again took 11 ms of a compile
        return {node: node.type for node in body.nodes}
    return inferred_types(body, types, op, what)


def inferred_types(
    body: Graph, types: Sequence[TensorType], op: str = "fused", what: str = "input"
) -> dict[Node, TensorType | TupleType]:
    """`body_types` by running every node's type rule (what it returns on the body's
    own types without running them)."""
    bindings = bind_body_dims(body, types, op, what)
    result: dict[Node, TensorType | TupleType] = dict(zip(body.inputs, types))
    for node in body.nodes:
        if node.kind == OP:
            ins = [result[x] for x in node.inputs]
            result[node] = get_op(node.op).infer(*ins, **bound_attrs(node, bindings))
        elif node.kind == OUTPUT:
            result[node] = result[node.inputs[0]]
    return result


def free_symbols(body: Graph) -> list[str]:
    """The symbolic dims the body's nodes use (in their types or shape attrs, a scan's
    `length`) that none of its placeholders has: nothing would give them a size."""
    bound = {d for p in body.inputs for d in p.type.symbols}
    used: dict[str, None] = {}
    for node in body.nodes:
        used.update(dict.fromkeys(node.type.symbols))
        if node.kind == OP:
            for key in get_op(node.op).shape_attrs:  # type: ignore[arg-type]
                used.update(
                    dict.fromkeys(d for d in attr_dims(node.attrs.get(key)) if is_symbol(d))
                )
    return [d for d in used if d not in bound]


def output_types(
    body: Graph, types: Sequence[TensorType], op: str, what: str = "input"
) -> list[TensorType]:
    """The types of the body's outputs on inputs of `types`. The body must be closed in
    its dims too: each symbol it uses is one of its placeholders' (bound by the operands)."""
    free = free_symbols(body)
    if free:
        raise ShapeError(
            f"{op}: the body '{body.name}' uses symbolic dim(s) {', '.join(map(repr, free))} "
            "that none of its placeholders has, so no operand gives them a size; pass a "
            "value with that dim in as an operand"
        )
    typed = body_types(body, types, op, what)
    return [typed[o] for o in body.outputs]  # type: ignore[misc]


def dims_of(graph: Graph, arrays: Sequence[np.ndarray]) -> dict[str, int]:
    """The sizes the arrays fed to `graph`'s placeholders give its symbols."""
    bindings: dict[str, int] = {}
    for p, a in zip(graph.inputs, arrays):
        for d, n in zip(p.type.shape, np.shape(a)):
            if is_symbol(d):
                bindings.setdefault(d, n)  # type: ignore[arg-type]
    return bindings


def check_finite(node: Node, value: Any) -> None:
    """A NumericsError naming `node` when a float value holds nan or inf."""
    for array in value if isinstance(value, tuple) else (value,):
        if is_float(array.dtype) and not np.all(np.isfinite(array)):
            kind = "NaN" if np.isnan(array).any() else "inf"
            where = f" (created at {node.loc})" if node.loc else ""
            raise NumericsError(f"{node.describe()} produced {kind}{where}", node=node.name)


def _laid_out(node: Node, value: Any, declared: TensorType | TupleType, permutes: bool) -> Any:
    """`value` in the layout the plans give it, checked against its declared type."""
    if isinstance(declared, TupleType):
        items = tuple(np.asarray(v, order="C") for v in value)
        got = [TensorType.of(v) for v in items]
        if len(items) != len(declared.items) or any(g != d for g, d in zip(got, declared.items)):
            shown = "(" + ", ".join(map(str, got)) + ")"
            raise ShapeError(
                f"{node.describe()} is declared {node.type}, i.e. {declared}, but its kernel "
                f"gave {shown}",
                node=node.name,
            )
        return items
    # (not ascontiguousarray: it makes 0-d arrays 1-d)
    value = np.asarray(value) if permutes else np.asarray(value, order="C")
    if value.shape != declared.shape or value.dtype != declared.dtype:
        # never hand on a value of another type than the graph declares (a slice
        # x[0:5] of a dim B fed with B=3; a kernel disagreeing with its rule)
        where = f" (created at {node.loc})" if node.loc else ""
        raise ShapeError(
            f"{node.describe()}{where} is declared {node.type}, i.e. {declared}, "
            f"but its kernel gave {value.dtype}{list(value.shape)}",
            node=node.name,
        )
    return value


def evaluate(
    graph: Graph,
    arrays: Sequence[np.ndarray],
    bindings: Mapping[str, int] | None = None,
    check_numerics: bool = False,
) -> list[np.ndarray]:
    """Run `graph` on `arrays` (one per placeholder, in order), node by node; returns
    fresh C-contiguous copies of its outputs. Errors a kernel raises carry the node's
    name."""
    if bindings is None:
        bindings = dims_of(graph, arrays)
    values: dict[Node, Any] = dict(zip(graph.inputs, arrays))
    results = []
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            continue
        if node.kind == OUTPUT:
            # C-contiguous, as the plans' buffers: a body's output is the next step's
            # carry, whose layout matmul and reductions round by
            results.append(np.array(values[node.inputs[0]], copy=True, order="C"))
            continue
        opdef = get_op(node.op)  # type: ignore[arg-type]
        inputs = [values[x] for x in node.inputs]
        try:
            with np.errstate(all="ignore"):
                value = opdef.kernel(*inputs, **bound_attrs(node, bindings))
        except GraphcError as exc:
            exc.node = exc.node or node.name
            raise
        value = _laid_out(node, value, node.type.bind(bindings), opdef.permutes)
        if check_numerics:
            check_finite(node, value)
        values[node] = value
    return results


def check_body(body: Any, arity: int, op: str = "fused") -> Node:
    """The body's single output value; errors name what is wrong with the body."""
    if not isinstance(body, Graph):
        raise GraphcError(f"{op}: attr 'body' must be a Graph, got {type(body).__name__}")
    outputs = body.outputs
    if len(outputs) != 1:
        raise GraphcError(f"{op}: the body '{body.name}' must have one output, has {len(outputs)}")
    if len(body.inputs) != arity:
        raise GraphcError(
            f"{op}: the body '{body.name}' has {len(body.inputs)} placeholders for {arity} inputs"
        )
    return outputs[0].inputs[0]


def body_cost(out: TensorType, *inputs: TensorType, body: Graph) -> int:
    """The flops of `body`'s ops on these input types (the cost rule of an op running one
    body once: a fused group, custom_vjp's forward)."""
    types = body_types(body, inputs)
    return sum(
        get_op(n.op).flops(types[n], *(types[x] for x in n.inputs), **n.attrs)
        for n in body.nodes
        if n.kind == OP
    )
