"""`vmap_graph`: a per-example graph becomes the graph of a batch of examples.

Algorithm (one forward walk, as JAX's batching interpreter over a jaxpr):

1. Each placeholder of the per-example graph becomes a placeholder of the new graph,
   with the batch dim inserted at its `in_axes` entry (None: the same value for every
   example, unchanged). The batch size is `axis_size` or, when not given, a symbolic
   dim named after no dim of the graph ("vmap", "vmap_1", ...). A placeholder batched
   on axis k is transposed so that its batch is axis 0: every value of the walk is
   batched on axis 0 or not at all.
2. Walk the op nodes in order. A node whose operands are all unbatched is copied
   unchanged, with its name. Otherwise its op's "vmap" rule (graphc/ops/batching.py)
   builds its batched value with op functions, recorded in the new graph, and says
   whether it is batched; bodies of control flow are walked the same way, recursively
   (the rules call back through `set_body_batching`).
3. Each output's batch is moved to its `out_axes` entry; an unbatched output is
   broadcast over the batch, or kept as it is with out_axes None.

Invariant: a value's flag says whether axis 0 is the batch; its type is then the
per-example node's type with the batch prepended, else that type itself (checked after
every rule, so a rule cannot write down a wrong shape). No formula lives here: every
batched computation comes from an op's rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from graphc.ir.graph import OUTPUT, PLACEHOLDER, Graph, Node, active_graph, expect_graph
from graphc.ir.types import Dim, TensorType, TupleType, as_dim, format_shape
from graphc.ops.batching import (
    Batched,
    VmapError,
    batched,
    move_axis,
    set_body_batching,
    vmap_rule,
)
from graphc.ops.symbolic import Symbol

Axes = int | None | Sequence[int | None]


def _any(flag: Any) -> bool:
    return any(flag) if isinstance(flag, tuple) else bool(flag)


def _expect(node: Node, value: Any, flag: Any, size: Dim) -> None:
    """The rule's result has the node's type, with the batch first where flagged."""
    if isinstance(node.type, TupleType):
        if not isinstance(value, tuple) or len(value) != len(node.type.items):
            raise VmapError(f"vmap: the rule of {node.describe()} gave no tuple of its results")
        for item, v, f in zip(node.type.items, value, flag):
            _expect_one(node, item, v, f, size)
        return
    _expect_one(node, node.type, value, flag, size)


def _expect_one(node: Node, t: TensorType, value: Any, flag: bool, size: Dim) -> None:
    want = (size, *t.shape) if flag else tuple(t.shape)
    got = tuple(value.type.shape)
    if got != want or value.type.dtype != t.dtype:
        raise VmapError(
            f"vmap: the rule of {node.describe()} gave {value.type}, expected "
            f"{t.dtype}{format_shape(want)} (batched: {flag})"
        )


def _copy(node: Node, inputs: list[Any], graph: Graph) -> Any:
    """The node itself, on unbatched operands: same op, attrs, type, meta; its name when free."""
    nodes = tuple(v.node for v in inputs)
    name = node.name if node.name not in graph else graph.fresh_name(node.name)
    return Symbol(graph.add_op(node.op, nodes, node.attrs, node.type, name=name, meta=node.meta))


def _read(value: Any, index: int) -> Any:
    """Result `index` of an unbatched node with several results."""
    return value[index] if isinstance(value, tuple) else value


def batch_nodes(g: Graph, args: Sequence[Batched], size: Dim) -> list[Batched]:
    """`g`'s outputs as (value, batched) for the placeholders' values `args`, the
    batched values recorded in the graph being built (which is open)."""
    graph = _open_graph(args)
    values: dict[Node, Batched] = {}
    outs: list[Batched] = []
    placeholders = iter(args)
    for node in g.nodes:
        if node.kind == PLACEHOLDER:
            values[node] = next(placeholders)
        elif node.kind == OUTPUT:
            outs.append(values[node.inputs[0]])
        elif not any(_any(values[x][1]) for x in node.inputs):
            if node.op == "result" and isinstance(values[node.inputs[0]][0], tuple):
                values[node] = (values[node.inputs[0]][0][node.attrs["index"]], False)
                continue
            inputs = [values[x][0] for x in node.inputs]
            copied = _copy(node, inputs, graph)
            flag = (False,) * len(node.type.items) if isinstance(node.type, TupleType) else False
            values[node] = (copied, flag)
        else:
            values[node] = _batch_node(node, [values[x] for x in node.inputs], size, graph)
    return outs


def _batch_node(node: Node, args: list[Batched], size: Dim, graph: Graph) -> Batched:
    rule = vmap_rule(node)
    start = len(graph.nodes)
    value, flag = rule(node, args, size)
    _expect(node, value, flag, size)
    for made in graph.nodes[start:]:
        made.meta.setdefault("vmap_of", node.name)
        if node.loc is not None:
            made.meta["loc"] = node.loc
    # the batched value keeps the per-example name, when the rule made it and it is free
    made_here = not isinstance(value, tuple) and value.node in graph.nodes[start:]
    if made_here and node.name not in graph:
        graph.rename(value.node, node.name)
    return value, flag


def _open_graph(args: Sequence[Batched]) -> Graph:
    graph = active_graph()
    if graph is None:
        raise VmapError("vmap: batch_nodes records into an open graph (with graph: ...)")
    return graph


def new_body(
    name: str,
    types: Sequence[TensorType],
    flags: Sequence[bool],
    size: Dim,
    build: Callable[[list[Batched]], list[Any]],
    names: Sequence[str] | None = None,
) -> Graph:
    """A closed graph whose placeholders have `types` (the batch first where `flags`
    say), its outputs the values `build` gives for them."""
    body = Graph(name)
    with body:
        args = []
        for k, (t, flag) in enumerate(zip(types, flags)):
            shape = (size, *t.shape) if flag else tuple(t.shape)
            label = names[k] if names is not None else f"in{k}"
            node = body.add_placeholder(label, TensorType(shape, t.dtype))
            args.append((Symbol(node), flag))
        for k, value in enumerate(build(args)):
            body.add_output(value.node, body.fresh_name(f"out{k}"))
    return body


set_body_batching(batch_nodes, new_body)


# -- vmap_graph ------------------------------------------------------------------------


def _dims(g: Graph) -> set[str]:
    """Every symbolic dim of `g` and of its bodies."""
    found: set[str] = set()
    for n in g.nodes:
        found.update(d for d in n.type.symbols)
        for value in n.attrs.values():
            if isinstance(value, Graph):
                found |= _dims(value)
    return found


def _fresh_dim(g: Graph) -> str:
    taken = _dims(g)
    name, k = "vmap", 0
    while name in taken:
        k += 1
        name = f"vmap_{k}"
    return name


def _per_item(axes: Axes, count: int, what: str, names: Sequence[str], g: Graph) -> list:
    if axes is None or isinstance(axes, int):
        items = [axes] * count
    else:
        items = list(axes)
        if len(items) != count:
            raise VmapError(
                f"vmap_graph: {what} has {len(items)} entries, but graph '{g.name}' has "
                f"{count} ({list(names)})"
            )
    for name, axis in zip(names, items):
        if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
            raise VmapError(f"vmap_graph: {what} for '{name}' must be an int or None, got {axis!r}")
    return items


def _axis(axis: int, rank: int, what: str) -> int:
    """`axis` of a value of rank `rank` (the batch included), made non-negative."""
    if not -rank <= axis < rank:
        raise VmapError(f"vmap_graph: {what}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def vmap_graph(
    g: Graph, in_axes: Axes = 0, out_axes: Axes = 0, axis_size: Dim | None = None
) -> Graph:
    """The graph computing `g` on a batch of examples: each placeholder gains a batch
    dim at its `in_axes` entry (None: one value for every example), each output gives
    its examples stacked along its `out_axes` entry. The batch size is `axis_size`, or
    a new symbolic dim ("vmap").

    >>> import numpy as np, graphc as gc
    >>> g = gc.Graph("dot")
    >>> with g:
    ...     x = gc.placeholder("x", shape=(3,))
    ...     w = gc.placeholder("w", shape=(3,))
    ...     _ = gc.output(gc.sum(x * w), name="y")
    >>> batch = gc.passes.vmap_graph(g, in_axes=(0, None))
    >>> str(batch.inputs[0].type), str(batch.outputs[0].type)
    ('f32[vmap,3]', 'f32[vmap]')
    >>> batch(np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32))
    array([3., 3.], dtype=float32)
    """
    expect_graph(g, "vmap_graph")
    inputs, outputs = g.inputs, g.outputs
    in_items = _per_item(in_axes, len(inputs), "in_axes", [p.name for p in inputs], g)
    out_items = _per_item(out_axes, len(outputs), "out_axes", [o.name for o in outputs], g)
    if all(a is None for a in in_items) and axis_size is None:
        raise VmapError(
            f"vmap_graph: in_axes {in_axes!r} batches no placeholder of graph '{g.name}'; "
            "batch at least one, or give axis_size"
        )
    size = _fresh_dim(g) if axis_size is None else as_dim(axis_size)
    result = Graph(f"{g.name}_vmap")
    args: list[Batched] = []
    for p, axis in zip(inputs, in_items):
        shape = tuple(p.type.shape)
        if axis is None:
            args.append((Symbol(result.add_placeholder(p.name, p.type, meta=p.meta)), False))
            continue
        axis = _axis(axis, len(shape) + 1, f"in_axes for placeholder '{p.name}'")
        batch_type = TensorType((*shape[:axis], size, *shape[axis:]), p.type.dtype)
        node = result.add_placeholder(p.name, batch_type, meta=p.meta)
        args.append((Symbol(node), axis))
    with result:
        args = [(v, False) if a is False else (move_axis(v, a, 0), True) for v, a in args]
        outs = batch_nodes(g, args, size)
        finals = []
        for o, (value, flag), axis in zip(outputs, outs, out_items):
            if axis is None:
                if flag:
                    raise VmapError(
                        f"vmap_graph: output '{o.name}' differs per example, but its out_axes "
                        "entry is None (one value for every example)"
                    )
                finals.append(value)
                continue
            rank = len(o.type.shape) + 1
            axis = _axis(axis, rank, f"out_axes for output '{o.name}'")
            finals.append(move_axis(batched(value, flag, size), 0, axis))
    for o, value in zip(outputs, finals):
        if o.name in result:  # a node the rules made took an output's name: it moves
            result.rename(result.node(o.name), result.fresh_name(f"{o.name}_value"))
        result.add_output(value.node, o.name, meta=o.meta)
    return result


__all__ = ["batch_nodes", "vmap_graph"]
