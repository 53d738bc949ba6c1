"""The batch split: one graph becomes a per-chunk graph, a merge graph and a combine graph.

Algorithm. One walk over the topological order gives every value a *role* with
respect to the batch dim (a symbolic dim, "B" by default):

- free: it does not depend on the batch (parameters, constants, and `count` nodes,
  which read the batch's size only: they become *size inputs*, computed once from the
  whole batch's dims and fed to every graph that needs them);
- mapped on axis a: it carries the batch dim on axis a, and row i depends only on row i
  of the batch inputs. A placeholder with the dim is mapped; an op node with a mapped
  operand asks its op's "batch_split" rule (rules.py) where the axis goes;
- reduced: the value of a reduction over the batch (a *root*: sum, mean, max, min,
  prod, logsumexp over the batch axis, or a contraction of it such as x.T @ dy), or of
  any op whose operands are only reduced and free values.

An op mixing a reduced operand with a mapped one (x - mean(x) over the batch, batch
norm's training statistics) needs the whole batch before any row: the split refuses
it, as it refuses what a rule refuses, with a `BatchSplitError` naming the node.

From the roles, three graphs:

- chunk: the mapped and free values the mapped outputs and the roots need, fed one
  chunk of the batch inputs. Outputs: the mapped outputs, then one *partial* per
  root: the root's own op on the chunk (a mean's partial is a sum).
- merge: partials of several chunks stacked on a new leading axis (a symbolic dim)
  reduced by the root kind's merge op (sum, max, min, prod, logsumexp). Merging is
  associative, so merges can form a tree.
- combine: from the merged partials, the roots (a mean divides its sum by the whole
  batch's count) and every reduced or free value the remaining outputs need.

Invariant: for any chunking of the batch, concatenating the chunk graph's mapped
outputs and combining its merged partials gives the original graph's outputs, up to
the rounding of summing in another order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.distributed.rules import Mapped, Reduce, UnsplittableError, batch_rule, linear
from graphc.ir.errors import GraphcError
from graphc.ir.graph import OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType, TupleType, bind_shape, is_float
from graphc.ir.verify import verify
from graphc.ops.dispatch import prepare
from graphc.passes.custom import inline_custom_forwards


class BatchSplitError(GraphcError, ValueError):
    """A graph cannot be computed chunk by chunk along its batch dim."""


REDUCED = "reduced"
FREE = None
# a loop's result summing, step by step, values reduced over the batch (the weight
# gradients a recurrent layer's backward scan accumulates): its value on a chunk is a
# partial, merged by sum
ACCUMULATED = "accumulated"


@dataclass(frozen=True)
class Results:
    """The roles of a multi-result node's results (a scan's), one per result."""

    roles: tuple


Role = Mapped | Results | str | None


@dataclass(frozen=True)
class SizeInput:
    """A `count` over symbolic dims: how many elements an array of `shape` has along
    `axis` (all when None), computed from the whole batch's dims."""

    name: str
    shape: tuple
    axis: tuple[int, ...] | None
    dtype: np.dtype

    def value(self, bindings: Mapping[str, int]) -> np.ndarray:
        dims = bind_shape(self.shape, bindings)
        counted = dims if self.axis is None else tuple(dims[a] for a in self.axis)
        return np.asarray(np.prod(counted, dtype=np.int64), self.dtype)


@dataclass(frozen=True)
class Partial:
    """The per-chunk partial of the reduction node `root`, merged by `kind`."""

    name: str
    root: str
    kind: str


@dataclass(frozen=True)
class OutputPlan:
    """Where one output of the original graph comes from: the chunk graph (mapped, the
    batch on `axis`) or the combine graph."""

    name: str
    mapped: bool
    axis: int | None = None


@dataclass
class BatchSplit:
    """The three graphs of a batch split and what joins them (see the module docstring)."""

    graph: Graph
    batch_dim: str
    chunk: Graph
    merge: Graph
    combine: Graph
    outputs: list[OutputPlan]
    partials: list[Partial]
    sizes: list[SizeInput]
    batch_inputs: dict[str, int] = field(default_factory=dict)  # placeholder -> axis

    def size_values(self, bindings: Mapping[str, int]) -> dict[str, np.ndarray]:
        """Every size input's value for the whole batch's dims."""
        return {s.name: s.value(bindings) for s in self.sizes}

    def __repr__(self) -> str:
        return (
            f"<BatchSplit of '{self.graph.name}' along {self.batch_dim}: "
            f"{sum(o.mapped for o in self.outputs)} mapped output(s), "
            f"{len(self.partials)} partial(s), {len(self.sizes)} size input(s)>"
        )


# -- roles ------------------------------------------------------------------------------


def batch_roles(
    graph: Graph,
    batch_dim: str = "B",
    feedback: set[Node] | None = None,
    given: list[Role] | None = None,
) -> tuple[dict[Node, Role], dict[Node, str]]:
    """Each node's role (Mapped(axis), REDUCED or FREE; Results for a scan) and the
    roots with their kinds; nodes no output reads (dead code, which compile would drop
    too) get none.

    A reduced value feeding back into the rows is refused, unless `feedback` is given:
    then such values are added to it and taken as free from there on (as if the whole
    batch's value were known before the rows are computed: stages.py runs the graph in
    passes over the data that make it so). `given` holds the placeholders' roles when
    `graph` is a loop's body (`_scan_roles`); else they follow from their shapes."""
    roles: dict[Node, Role] = {}
    roots: dict[Node, str] = {}
    live = _needed([o.inputs[0] for o in graph.outputs], stop=set())
    for n in graph.nodes:
        if n.kind == OUTPUT:
            roles[n] = roles[n.inputs[0]]
            continue
        if n.kind == PLACEHOLDER:
            k = graph.inputs.index(n)
            roles[n] = _placeholder_role(n, batch_dim) if given is None else given[k]
            continue
        if n not in live:  # no output reads it: no chunk computes it, nothing to refuse
            continue
        if given is not None and n.op == "count" and batch_dim in _counted(n):
            # the size input that gives it the whole batch's count feeds the outer graph
            raise _refuse(n, f"it counts the batch dim {batch_dim} inside a loop body")
        if n.op == "result" and isinstance(roles[n.inputs[0]], Results):
            role = roles[n.inputs[0]].roles[n.attrs["index"]]
            if role == ACCUMULATED:
                roots[n], role = "sum", REDUCED
            else:
                _check_type(n, role, batch_dim)
            roles[n] = role
            continue
        inputs = [roles[x] for x in n.inputs]
        rows = any(isinstance(r, Mapped) for r in inputs) or batch_dim in n.type.symbols
        if feedback is not None and REDUCED in inputs and rows:
            feedback.update(x for x, r in zip(n.inputs, inputs) if r == REDUCED)
            inputs = [FREE if r == REDUCED else r for r in inputs]
        role = _op_role(n, inputs, roots, batch_dim)
        if isinstance(role, Reduce):
            roots[n], role = role.kind, REDUCED
        if role == REDUCED and batch_dim in n.type.symbols:
            raise _spread(n, roots)
        if not isinstance(role, Results):  # a scan's roles are checked against its body's
            _check_type(n, role, batch_dim)
        roles[n] = role
    return roles, roots


def _placeholder_role(n: Node, batch_dim: str) -> Role:
    shape = n.type.shape
    if shape.count(batch_dim) > 1:
        raise BatchSplitError(
            f"placeholder '{n.name}' has the batch dim {batch_dim} on {shape.count(batch_dim)} "
            f"axes (shape {n.type}); a batch input carries it on one axis"
        )
    return Mapped(shape.index(batch_dim)) if batch_dim in shape else FREE


def _op_role(n: Node, inputs: list[Role], roots: dict[Node, str], batch_dim: str) -> Any:
    if get_op(n.op).has("fusion"):
        raise _refuse(
            n,
            "it is a backend's fused node (made by its fusion step: gc.fuse, gc.compile); "
            "split the graph before fusion (the declared one, or gc.optimize's)",
        )
    mapped = [r for r in inputs if isinstance(r, Mapped)]
    if REDUCED in inputs and mapped:
        source = next(x for x, r in zip(n.inputs, inputs) if r == REDUCED)
        raise _refuse(
            n,
            f"it combines '{source.name}', a reduction over the batch, with per-row values; "
            "batch statistics feeding back into the rows (as batch norm in training) need "
            "the whole batch before any row",
        )
    if REDUCED in inputs:
        return REDUCED
    if not mapped:
        return _free_role(n, batch_dim)
    if n.op == "scan":
        return _scan_roles(n, inputs, batch_dim)
    rule = batch_rule(n)
    if rule is None:
        raise _refuse(n, "graphc has no rule for how this op carries the batch axis")
    axes = [r.axis if isinstance(r, Mapped) else None for r in inputs]
    try:
        return rule(n, axes)
    except UnsplittableError as exc:
        raise _refuse(n, str(exc)) from None


def _free_role(n: Node, batch_dim: str) -> Role:
    if batch_dim not in n.type.symbols:
        return FREE
    if n.op == "broadcast_to":  # a batch-independent value repeated for every row
        return Mapped(n.type.shape.index(batch_dim))
    raise _refuse(
        n,
        f"it makes values along the batch dim {batch_dim} from no batch input, so each "
        "row's value would depend on its position or on the chunk (arange, random draws)",
    )


def _check_type(n: Node, role: Role, batch_dim: str) -> None:
    """A mapped value carries the batch dim once, where its rule says; no other does."""
    if isinstance(n.type, TupleType):
        if isinstance(role, Mapped) or batch_dim in n.type.symbols:
            raise _refuse(n, "it has several results carrying the batch")
        return
    shape = n.type.shape
    if isinstance(role, Mapped):
        if shape.count(batch_dim) != 1 or shape[role.axis] != batch_dim:
            raise _refuse(n, f"its result {n.type} does not keep the batch dim on one axis")
    elif batch_dim in shape:
        raise _refuse(n, f"its result {n.type} carries the batch dim but no batch rows")


def _spread(n: Node, roots: dict[Node, str]) -> BatchSplitError:
    """The refusal of a node spreading a value of the whole batch over its rows, naming
    the reduction it comes from (a loss's gradient divided by a batch-dependent count)."""
    seen, todo = set(), list(n.inputs)
    while todo:
        x = todo.pop()
        if x in roots:
            return _refuse(
                n,
                f"it spreads over the rows a value computed from '{x.name}' ({x.op} over the "
                "batch); batch statistics feeding back into the rows need the whole batch "
                "before any row (a gradient of a loss divided by a count that depends on the "
                "batch, as cross entropy's with weight, ignore_index or label_smoothing)",
            )
        if x not in seen:
            seen.add(x)
            todo.extend(x.inputs)
    return _refuse(n, f"its result {n.type} carries the batch dim but no batch rows")


def _refuse(n: Node, why: str) -> BatchSplitError:
    where = f" (at {n.loc})" if n.loc else ""
    return BatchSplitError(f"cannot split {n.describe()}{where} along the batch: {why}")


def _counted(n: Node) -> list:
    """The dims a `count` node counts."""
    shape, axis = n.attrs["shape"], n.attrs["axis"]
    return list(shape) if axis is None else [shape[a] for a in axis]


def _counted_symbols(n: Node) -> bool:
    return any(isinstance(d, str) for d in _counted(n))


# -- loops --------------------------------------------------------------------------------


def _scan_roles(n: Node, inputs: list[Role], batch_dim: str) -> Results:
    """A scan with a mapped operand: its body's walk, from its placeholders' roles, gives
    each result's role. Row i of a mapped carry or slice stays row i at every step. A
    batch-free carry that adds, at every step, an increment linear in the body's sums
    over the batch (`acc + d`: a weight gradient's accumulator) is accumulated: run from
    zero on every chunk, the chunks' results add up to the whole batch's increments,
    and the start is added once (split_batch). A stacked per-step value linear in the
    body's sums is accumulated too. Anything else reduced in the body is refused, as is
    a slice scanned along the batch axis."""
    body = n.attrs["body"]
    num_carry, num_xs = n.attrs["num_carry"], n.attrs["num_xs"]
    carries, xs = inputs[:num_carry], inputs[num_carry : num_carry + num_xs]
    consts = inputs[num_carry + num_xs :]
    for k, r in enumerate(xs):
        if isinstance(r, Mapped) and r.axis == 0:
            raise _refuse(n, f"its xs operand {k} is scanned along the batch dim {batch_dim}")
    slices = [Mapped(r.axis - 1) if isinstance(r, Mapped) else r for r in xs]
    accumulated: set[int] = set()
    while True:  # each pass may find more accumulators, at most one per carry
        given = [REDUCED if k in accumulated else r for k, r in enumerate(carries)]
        try:
            roles, roots = batch_roles(body, batch_dim, given=given + slices + consts)
        except BatchSplitError as exc:
            raise _refuse(n, f"in its body '{body.name}', {exc}") from None
        outs = [roles[o] for o in body.outputs]
        found = {k for k in range(num_carry) if outs[k] == REDUCED} - accumulated
        if not found:
            break
        accumulated |= found
    users: dict[Node, int] = {}
    for x in (x for m in [*body.nodes, *body.outputs] for x in m.inputs):
        users[x] = users.get(x, 0) + 1
    results: list[Role] = []
    for k, (o, role) in enumerate(zip(body.outputs, outs)):
        what = f"carry {k}" if k < num_carry else f"result ys {k - num_carry}"
        if role == REDUCED:
            if not _increments(o.inputs[0], body.inputs[k] if k < num_carry else None, users):
                raise _refuse(
                    n,
                    f"its {what} is not a sum of values reduced over the batch (acc + d, d "
                    "linear in the body's sums over the batch), so its chunks' results "
                    "would not add up",
                )
            if not _linear(o.inputs[0], roles, roots, body.inputs[k] if k < num_carry else None):
                raise _refuse(
                    n,
                    f"its {what} is computed from values reduced over the batch other than "
                    "by sums and linear ops, so its chunks' results would not add up",
                )
            results.append(ACCUMULATED)
        elif k < num_carry:
            if role != carries[k]:
                raise _refuse(
                    n,
                    f"its {what} enters the body as {_shown(carries[k])} and leaves it as "
                    f"{_shown(role)}",
                )
            results.append(role)
        else:  # a stacked result: the steps on a new leading axis
            results.append(Mapped(role.axis + 1) if isinstance(role, Mapped) else role)
    return Results(tuple(results))


def _increments(value: Node, acc: Node | None, users: dict[Node, int]) -> bool:
    """Whether a reduced body output is `acc + d` with acc read there alone (a carry), or
    does not read an accumulator at all (a stacked result)."""
    if acc is None:
        return True
    return users.get(acc, 0) == 1 and value.op == "add" and acc in value.inputs


def _linear(x: Node, roles: dict, roots: dict, acc: Node | None) -> bool:
    """Whether reduced `x` is linear in the body's sums over the batch (`acc` counted
    as one of them: `acc + d`, by `_increments`)."""
    if x is acc:
        return True
    if x in roots:
        return roots[x] == "sum"
    if x.kind == PLACEHOLDER:  # another carry's accumulator: its start would count per chunk
        return False
    reduced = [roles.get(i) == REDUCED for i in x.inputs]
    return linear(x, reduced) and all(
        _linear(i, roles, roots, acc) for i, r in zip(x.inputs, reduced) if r
    )


def _accumulator(n: Node, roles: dict[Node, Role]) -> bool:
    """Whether `n` is a scan's result read from an accumulated carry."""
    return bool(n.inputs) and n.attrs.get("index") in _starts(n.inputs[0], roles)


def _shown(role: Role) -> str:
    if isinstance(role, Mapped):
        return f"rows along axis {role.axis}"
    return "batch-free" if role == FREE else "reduced over the batch"


def _starts(n: Node, roles: dict[Node, Role]) -> dict[int, Node]:
    """A scan's accumulated carries by position, each with the node it starts from."""
    role = roles.get(n)
    if not isinstance(role, Results):
        return {}
    count = n.attrs["num_carry"]
    return {k: n.inputs[k] for k in range(count) if role.roles[k] == ACCUMULATED}


# -- the three graphs ---------------------------------------------------------------------


def split_batch(graph: Graph, batch_dim: str = "B") -> BatchSplit:
    """Split `graph` along its symbolic `batch_dim` into chunk, merge and combine graphs.

    >>> import graphc as gc
    >>> g = gc.Graph("g")
    >>> with g:
    ...     x = gc.placeholder("x", shape=("B", 3), dtype="float64")
    ...     _ = gc.output(gc.mean(x * 2.0), name="m")
    >>> split = split_batch(g)
    >>> [p.kind for p in split.partials], [s.name for s in split.sizes]
    (['mean'], ['mean_count'])
    """
    verify(graph)
    # a split graph is run, never differentiated again: a custom-gradient node (BCE's
    # loss, stop_gradient, a value traced under no_grad) is its forward ops here
    graph = inline_custom_forwards(graph)
    roles, roots = batch_roles(graph, batch_dim)
    if not any(isinstance(roles[p], Mapped) for p in graph.inputs):
        raise BatchSplitError(
            f"graph '{graph.name}' has no placeholder with the batch dim {batch_dim} "
            f"(placeholders: {', '.join(str(p.type) + ' ' + p.name for p in graph.inputs)})"
        )
    names = _Names(graph)
    partials = {
        r: Partial(names.fresh(f"{r.name}_partial"), r.name, kind) for r, kind in roots.items()
    }
    mean_counts = {r: names.fresh(f"{r.name}_count") for r, kind in roots.items() if kind == "mean"}
    counts = {n for n in graph.op_nodes if n.op == "count" and _counted_symbols(n)}

    mapped_outs = [o for o in graph.outputs if isinstance(roles[o], Mapped)]
    other_outs = [o for o in graph.outputs if not isinstance(roles[o], Mapped)]
    combine_needs = _needed([o.inputs[0] for o in other_outs], stop=set(roots))
    # an accumulated carry's start, added once to the merged increments of the chunks
    starts = {
        r: _starts(r.inputs[0], roles)[r.attrs["index"]] for r in roots if _accumulator(r, roles)
    }
    combine_needs |= _needed([starts[r] for r in starts if r in combine_needs], stop=set(roots))
    for n in graph.op_nodes:
        if n in combine_needs and isinstance(roles.get(n), Results):
            raise _refuse(
                n,
                "a batch-free result of it is needed after the chunks' partials are merged, "
                "but computing it runs the loop over the rows",
            )
    used_roots = [r for r in roots if r in combine_needs]  # in graph order
    chunk_needs = _needed([o.inputs[0] for o in mapped_outs] + used_roots, stop=set())

    chunk = _chunk_graph(
        graph, roles, chunk_needs, counts, mapped_outs, used_roots, partials, names
    )
    merge = _merge_graph(graph, [partials[r] for r in used_roots], chunk, names)
    combine = _combine_graph(
        graph, combine_needs, counts, other_outs, used_roots, partials, mean_counts, chunk, starts
    )
    sizes = [
        SizeInput(n.name, n.attrs["shape"], n.attrs["axis"], n.type.dtype)
        for n in graph.op_nodes
        if n in counts and (n in chunk_needs or n in combine_needs)
    ]
    sizes += [
        SizeInput(name, r.inputs[0].type.shape, r.attrs["axis"], mean_dtype(r))
        for r, name in mean_counts.items()
        if r in combine_needs
    ]
    for g in (chunk, merge, combine):
        verify(g)
    plans = [
        OutputPlan(o.name, True, roles[o].axis)
        if isinstance(roles[o], Mapped)
        else OutputPlan(o.name, False)
        for o in graph.outputs
    ]
    batch_inputs = {p.name: roles[p].axis for p in graph.inputs if isinstance(roles[p], Mapped)}
    return BatchSplit(
        graph,
        batch_dim,
        chunk,
        merge,
        combine,
        plans,
        [partials[r] for r in used_roots],
        sizes,
        batch_inputs,
    )


class _Names:
    """Fresh names beside every node name of the original graph."""

    def __init__(self, graph: Graph) -> None:
        self.used = {n.name for n in graph.nodes}

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name


def _needed(targets: Iterable[Node], stop: set[Node]) -> set[Node]:
    """The nodes `targets` read, transitively; a node in `stop` is needed but not entered."""
    seen: set[Node] = set()
    todo = list(targets)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in stop:
            todo.extend(n.inputs)
    return seen


def append_op(g: Graph, op: str, inputs: list[Node], name: str, **attrs: Any) -> Node:
    """An op node named `name`, with canonical attrs and the type its rule infers."""
    full, out_type = prepare(get_op(op), [x.type for x in inputs], attrs)
    return g.add_op(op, inputs, full, out_type, name=name)


def _placeholders_first(g: Graph, graph: Graph, needs: set[Node], copies: dict) -> None:
    for p in graph.inputs:
        if p in needs:
            g.append_copy(p, copies)


def _chunk_graph(
    graph: Graph,
    roles: dict[Node, Role],
    needs: set[Node],
    counts: set[Node],
    mapped_outs: list[Node],
    roots: list[Node],
    partials: dict[Node, Partial],
    names: _Names,
) -> Graph:
    g = Graph(f"{graph.name}_chunk")
    copies: dict[Node, Node] = {}
    _placeholders_first(g, graph, needs, copies)
    for n in graph.op_nodes:
        if n in needs and n in counts:
            copies[n] = g.add_placeholder(n.name, n.type)
    for n in graph.op_nodes:
        if n not in needs or n in counts:
            continue
        if n in partials and partials[n].kind == "mean":
            rows = copies[n.inputs[0]]
            wide = mean_dtype(n)
            if wide != n.type.dtype:  # a float16 mean sums in float32, as the op's kernel
                rows = append_op(g, "cast", [rows], f"{n.name}_wide", dtype=wide)
            copies[n] = append_op(g, "sum", [rows], f"{n.name}_sum", **_axes(n))
        elif starts := _starts(n, roles):  # each chunk's loop accumulates from zero
            inputs = [copies[x] for x in n.inputs]
            for k, start in starts.items():
                zero = names.fresh(f"{n.name}_start{k}")
                inputs[k] = append_op(g, "full_like", [copies[start]], zero, value=0)
            copies[n] = g.append(Node(n.name, n.kind, n.op, tuple(inputs), n.attrs, n.type, n.meta))
        else:
            g.append_copy(n, copies)
    for o in mapped_outs:
        g.add_output(copies[o.inputs[0]], name=o.name)
    for r in roots:
        g.add_output(copies[r], name=partials[r].name)
    return g


def mean_dtype(root: Node) -> np.dtype:
    """The dtype a mean over the batch sums its chunks' rows and divides in: its own, but
    float32 for a 16-bit float (as the mean op's kernel does, like np.mean: a float16 sum
    of a large batch overflows where the mean does not)."""
    dtype = root.type.dtype
    if is_float(dtype) and dtype.itemsize < 4:
        return np.dtype("float32")
    return dtype


def _axes(n: Node) -> dict[str, Any]:
    return {"axis": n.attrs["axis"], "keepdims": n.attrs["keepdims"]}


def _merge_graph(graph: Graph, partials: list[Partial], chunk: Graph, names: _Names) -> Graph:
    g = Graph(f"{graph.name}_merge")
    symbols = {d for n in graph.nodes if isinstance(n.type, TensorType) for d in n.type.symbols}
    stacked = "chunks"
    while stacked in symbols:
        stacked += "_"
    types = {o.name: o.type for o in chunk.outputs}
    inputs = [
        g.add_placeholder(
            f"{p.name}_{stacked}", TensorType((stacked, *types[p.name].shape), types[p.name].dtype)
        )
        for p in partials
    ]
    for p, x in zip(partials, inputs):
        op = "sum" if p.kind == "mean" else p.kind  # a mean's partials are sums
        merged = append_op(g, op, [x], f"{p.name}_merge", axis=(0,), keepdims=False)
        g.add_output(merged, name=p.name)
    return g


def _combine_graph(
    graph: Graph,
    needs: set[Node],
    counts: set[Node],
    outs: list[Node],
    roots: list[Node],
    partials: dict[Node, Partial],
    mean_counts: dict[Node, str],
    chunk: Graph,
    starts: dict[Node, Node],
) -> Graph:
    g = Graph(f"{graph.name}_combine")
    copies: dict[Node, Node] = {}
    _placeholders_first(g, graph, needs, copies)
    types = {o.name: o.type for o in chunk.outputs}
    merged = {r: g.add_placeholder(partials[r].name, types[partials[r].name]) for r in roots}
    for n in graph.op_nodes:
        if n in needs and n in counts:
            copies[n] = g.add_placeholder(n.name, n.type)
    sizes = {
        r: g.add_placeholder(name, TensorType((), mean_dtype(r)))
        for r, name in mean_counts.items()
        if r in needs
    }
    for n in graph.op_nodes:
        if n not in needs or n in counts:
            continue
        if n in merged and n in starts:  # the chunks' increments, after the start
            copies[n] = append_op(g, "add", [copies[starts[n]], merged[n]], n.name)
        elif n in merged:
            copies[n] = _finish_root(g, n, merged[n], sizes.get(n))
        else:
            g.append_copy(n, copies)
    for o in outs:
        g.add_output(copies[o.inputs[0]], name=o.name)
    return g


def _finish_root(g: Graph, root: Node, merged: Node, count: Node | None) -> Node:
    """The root's value from its merged partial: itself, or for a mean, sum / count,
    divided in the count's dtype (`mean_dtype`) and cast to the mean's."""
    if count is None:
        return merged
    total = merged
    if merged.type.dtype != count.type.dtype:  # an integer mean sums exactly, divides as float
        total = append_op(g, "cast", [merged], f"{root.name}_total", dtype=count.type.dtype)
    if count.type.dtype == root.type.dtype:
        return append_op(g, "div", [total, count], root.name)
    wide = append_op(g, "div", [total, count], f"{root.name}_wide")
    return append_op(g, "cast", [wide], root.name, dtype=root.type.dtype)
