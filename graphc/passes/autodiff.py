"""Reverse-mode symbolic differentiation: the gradient of a graph is another graph.

Algorithm (one reverse walk, as in JAX's `backward_pass` over a jaxpr):

1. Copy the forward graph into a new graph, node for node, names kept. With
   `seeds=True` a cotangent placeholder ``ct_<output>`` per differentiated output
   follows the forward placeholders; otherwise each (scalar) output is seeded with
   the constant 1.
2. A node *varies* if it is a `wrt` placeholder, or an op node of floating dtype
   with a varying input. Integer and boolean values never vary: no gradient flows
   through them.
3. Walk the forward op nodes in reverse order. A node that received cotangent
   contributions sums them with one chain of `add` nodes, then its op's registered
   `vjp` rule runs on graph values of the new graph (with that graph open, so
   constants the rule makes are recorded there), with `needs[i]` set where input
   i varies. Each returned cotangent is a contribution to that input.
4. The gradient of each `wrt` placeholder is the sum of its contributions, or
   zeros when no path reaches it.
5. Only backward nodes that a gradient uses are kept (a rule may build a cotangent
   for an input that needs none).

No gradient formula lives here: every derivative comes from an op's `vjp`.

Invariant: every backward node has ``meta["grad_of"]``, the name of the forward
node whose rule created it, and that node's ``meta["loc"]``, so errors and
pictures point at the user's line of the forward computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import AutodiffError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node, expect_graph
from graphc.ir.registry import attr_dims, get_op
from graphc.ir.types import TensorType, TupleType, format_shape, is_float
from graphc.ir.verify import verified_on_failure, verify
from graphc.ops import elementwise as E
from graphc.ops import shape as S
from graphc.ops.symbolic import SYMBOLIC, Symbol, add_constant
from graphc.ops.tuples import add_cotangents


@dataclass
class Joint:
    """A differentiated graph and how its nodes divide into forward and backward."""

    graph: Graph
    forward: set[str]  # names of the nodes copied from the forward graph
    seeds: list[str]  # cotangent placeholders, one per differentiated output (seeds=True)
    grads: list[str]  # gradient outputs, one per wrt
    outputs: list[str]  # the forward graph's outputs, repeated first


def check_wrt(g: Graph, wrt: Sequence[str] | str, who: str = "gradients") -> list[Node]:
    """The placeholders `wrt` names, each floating point and named once; `who` (the
    transformation asking: gradients, tangents) begins the errors."""
    given = wrt
    if isinstance(wrt, str):
        wrt = [wrt]
    names = [p.name for p in g.inputs]
    # a collection of names (a graph value iterates too: it is refused below as itself)
    wrt = list(wrt) if isinstance(wrt, (Sequence, AbstractSet)) else [wrt]
    if not all(isinstance(n, str) for n in wrt):
        floating = [p.name for p in g.inputs if is_float(p.type.dtype)]
        raise AutodiffError(
            f"{who}: wrt takes the names of placeholders to differentiate by (a str or a "
            f"list of str, e.g. wrt={floating[:2] or names[:1]}), got {given!r}; graph "
            f"'{g.name}' has placeholders {names}"
        )
    result = []
    for name in wrt:
        if name not in names:
            raise AutodiffError(
                f"{who}: wrt '{name}' is not a placeholder of graph '{g.name}'; "
                f"its placeholders are {names}"
            )
        p = g.node(name)
        if not is_float(p.type.dtype):
            raise AutodiffError(
                f"{who}: wrt placeholder '{name}' has dtype {p.type.dtype}; only floating "
                f"point inputs have {who}"
            )
        result.append(p)
    if len(set(wrt)) != len(wrt):
        raise AutodiffError(f"{who}: wrt names a placeholder twice: {list(wrt)}")
    return result


def pick_outputs(
    g: Graph, outputs: Sequence[str] | str | None, seeds: bool, who: str = "gradients"
) -> list[Node]:
    """The outputs `outputs` names (every floating point one when None); without `seeds`
    each must hold one element. `who` begins the errors."""
    all_outputs = g.outputs
    if outputs is None:
        chosen = [o for o in all_outputs if is_float(o.type.dtype)]
    else:
        by_name = {o.name: o for o in all_outputs}
        names = [outputs] if isinstance(outputs, str) else list(outputs)
        floating = [o.name for o in all_outputs if is_float(o.type.dtype)]
        if not names and floating:
            raise AutodiffError(
                f"{who}: outputs=[] picks no output to differentiate; name some of the "
                f"floating point outputs of graph '{g.name}', {floating}, or leave outputs "
                "out for all of them"
            )
        chosen = []
        for name in names:
            if name not in by_name:
                raise AutodiffError(
                    f"{who}: graph '{g.name}' has no output '{name}'; "
                    f"its outputs are {list(by_name)}"
                )
            o = by_name[name]
            if not is_float(o.type.dtype):
                raise AutodiffError(
                    f"{who}: output '{name}' has dtype {o.type.dtype}; only floating "
                    "point outputs can be differentiated"
                )
            chosen.append(o)
        if len(set(names)) != len(names):  # its cotangent would be counted twice
            raise AutodiffError(f"{who}: outputs names an output twice: {names}")
    if not chosen:
        if not g.outputs:
            raise AutodiffError(
                f"{who}: graph '{g.name}' has no outputs: mark the value to differentiate "
                "with gc.output(value, name=...)"
            )
        raise AutodiffError(f"{who}: graph '{g.name}' has no floating point output")
    if not seeds:
        for o in chosen:
            if any(d != 1 for d in o.type.shape):  # one element, as PyTorch's backward()
                raise AutodiffError(
                    f"{who}: output '{o.name}' has shape {format_shape(o.type.shape)}, "
                    "not a scalar; differentiate a scalar (e.g. its sum), pick scalar outputs "
                    "with outputs=[...], or pass seeds=True to feed a cotangent per output"
                )
    return chosen


def _has_float(t: TensorType | TupleType) -> bool:
    items = t.items if isinstance(t, TupleType) else (t,)
    return any(is_float(item.dtype) for item in items)


def _varying(g: Graph, wrt: list[Node]) -> set[Node]:
    varying = set(wrt)
    for n in g.nodes:
        if n.kind == OP and _has_float(n.type) and any(x in varying for x in n.inputs):
            varying.add(n)
    return varying


class _Builder:
    """Accumulates cotangents in the new graph and tags the nodes it creates."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.contributions: dict[Node, list[Symbol]] = {}

    def tagged(self, forward: Node, start: int) -> None:
        """Mark nodes appended since `start` as the gradient of `forward`."""
        for n in self.graph.nodes[start:]:
            n.meta["grad_of"] = forward.name
            n.meta["loc"] = forward.meta.get("loc")

    def contribute(self, node: Node, ct: Any, rule_of: Node) -> None:
        if isinstance(node.type, TupleType):  # a tuple: one cotangent (or None) per result
            if not isinstance(ct, tuple) or len(ct) != len(node.type.items):
                raise AutodiffError(
                    f"the vjp rule of {rule_of.describe()} gave {ct!r} for '{node.name}', "
                    f"which has {len(node.type.items)} results: expected a tuple of as many"
                )
            slots = [
                None if c is None else self._checked(node, t, c, rule_of)
                for c, t in zip(ct, node.type.items)
            ]
            self.contributions.setdefault(node, []).append(tuple(slots))
            return
        self.contributions.setdefault(node, []).append(self._checked(node, node.type, ct, rule_of))

    def _checked(self, node: Node, t: TensorType, ct: Any, rule_of: Node) -> Symbol:
        if not isinstance(ct, Symbol):
            ct = SYMBOLIC.lift(ct, None, ())
        if ct.type.shape != t.shape:
            raise AutodiffError(
                f"the vjp rule of {rule_of.describe()} gave a cotangent of shape "
                f"{format_shape(ct.type.shape)} for '{node.name}' of shape "
                f"{format_shape(t.shape)}"
            )
        if ct.type.dtype != t.dtype:
            raise AutodiffError(
                f"the vjp rule of {rule_of.describe()} gave a cotangent of dtype "
                f"{ct.type.dtype} for '{node.name}' of dtype {t.dtype}"
            )
        return ct

    def total(self, node: Node) -> Any:
        """The sum of `node`'s contributions: one chain of adds, tagged grad_of node
        (for a node with several results, a tuple summed slot by slot)."""
        parts = self.contributions.get(node)
        if not parts:
            return None
        start = len(self.graph.nodes)
        total = parts[0]
        for part in parts[1:]:
            total = add_cotangents(total, part)
        self.tagged(node, start)
        if isinstance(total, tuple) and all(c is None for c in total):
            return None
        return total

    def zeros(self, node: Node, forward_value: Symbol) -> Symbol:
        """A zero gradient for `node`; from a scalar constant when its shape is known."""
        start = len(self.graph.nodes)
        if node.type.is_concrete:
            zero = add_constant(self.graph, np.zeros((), node.type.dtype))
            result = S.broadcast_to(zero, node.type.shape) if node.type.shape else zero
        else:
            result = E.zeros_like(forward_value)
        self.tagged(node, start)
        return result


def differentiate(
    g: Graph, wrt: Sequence[str], outputs: Sequence[str] | None = None, seeds: bool = False
) -> Joint:
    """The joint graph of `g` and its gradients, with the bookkeeping split_backward needs.

    `g` is not verified first (the public entries do that; the frontend's and the control
    flow's callers made their graphs themselves), but on a failure it is: a graph broken
    through the low-level API (a cycle, a node reading an output, a wrong declared type)
    gives verify's named error, not the KeyError or the cotangent mismatch the walk met."""
    expect_graph(g, "gradients")
    with verified_on_failure(g):
        return _differentiate(g, wrt, outputs, seeds)


def _differentiate(
    g: Graph, wrt: Sequence[str], outputs: Sequence[str] | None, seeds: bool
) -> Joint:
    wrt_nodes = check_wrt(g, wrt)
    chosen = pick_outputs(g, outputs, seeds)
    varying = _varying(g, wrt_nodes)

    scratch = Graph(f"{g.name}_grad")
    copies: dict[Node, Node] = {}
    for n in g.inputs:
        scratch.append_copy(n, copies)
    seed_names: list[str] = []
    for o in chosen:
        if seeds:
            seed = scratch.add_placeholder(
                scratch.fresh_name(f"ct_{o.name}"),
                o.type,
                meta={"grad_of": o.name, "loc": o.meta.get("loc")},
            )
            seed_names.append(seed.name)
    for n in g.nodes:
        if n.kind != PLACEHOLDER:  # outputs too, so no backward node takes their names
            scratch.append_copy(n, copies)

    builder = _Builder(scratch)
    with scratch:
        for o, seed_name in zip(chosen, seed_names or [None] * len(chosen)):
            value = o.inputs[0]
            if value not in varying:
                continue
            if seed_name is not None:
                builder.contribute(value, Symbol(scratch.node(seed_name)), o)
            else:
                start = len(scratch.nodes)
                one = add_constant(
                    scratch,
                    np.ones(value.type.shape, value.type.dtype),
                    name=scratch.fresh_name("seed"),
                )
                builder.tagged(o, start)
                builder.contribute(value, one, o)

        for n in reversed(g.nodes):
            if n.kind != OP or n not in varying:
                continue
            ct = builder.total(n)
            if ct is None:
                continue
            _apply_vjp(n, ct, copies, varying, builder)

        grads = []
        for p in wrt_nodes:
            grad = builder.total(p)
            grads.append(grad if grad is not None else builder.zeros(p, Symbol(copies[p])))

    forward = {n.name for n in g.nodes if n.kind != OUTPUT}
    scratch, forward = _merge_augmented(scratch, forward)
    return _prune(g, scratch, forward, chosen, grads, [p.name for p in wrt_nodes], seed_names)


def _merge_augmented(scratch: Graph, forward: set[str]) -> tuple[Graph, set[str]]:
    """The forward part of the joint graph, settled. Each differentiated forward scan
    runs once: a scan's VJP runs it again with a body that also outputs residuals (its
    node's meta "augments" names the forward scan); that scan takes the forward one's
    place (same inputs, the same results first), and its results become forward
    values, which split_backward saves."""
    plus: dict[str, Node] = {}
    for n in scratch.nodes:
        target = n.meta.get("augments")
        if (
            target in forward
            and target not in plus
            and n.name not in forward
            and all(x.name in forward for x in n.inputs)
        ):
            plus[target] = n
    # a rule reading a forward node with several results reads it through new `result`
    # nodes (cond's zeros for an unread result): those are forward values too
    forward = forward | {
        n.name
        for n in scratch.nodes
        if n.kind == OP and n.op == "result" and n.inputs[0].name in forward
    }
    if not plus:
        return scratch, forward
    readers: dict[Node, list[Node]] = {p: [] for p in plus.values()}
    for n in scratch.nodes:
        if n.kind == OP and n.op == "result" and n.inputs[0] in readers:
            readers[n.inputs[0]].append(n)
    moved = {r for rs in readers.values() for r in rs} | set(plus.values())
    merged = Graph(scratch.name)
    copies: dict[Node, Node] = {}
    for n in scratch.nodes:
        if n in moved:
            continue
        if n.name not in plus:
            merged.append_copy(n, copies)
            continue
        p = plus[n.name]  # in the forward scan's place, under its name and meta
        inputs = tuple(copies[x] for x in p.inputs)
        copies[n] = copies[p] = merged.append(
            Node(n.name, OP, p.op, inputs, p.attrs, p.type, n.meta)
        )
        for r in readers[p]:
            meta = {k: v for k, v in r.meta.items() if k != "grad_of"}
            copy = Node(r.name, OP, r.op, (copies[p],), r.attrs, r.type, meta)
            copies[r] = merged.append(copy)
    forward = forward | {r.name for rs in readers.values() for r in rs}
    return merged, forward


def _apply_vjp(
    n: Node, ct: Symbol, copies: dict[Node, Node], varying: set[Node], builder: _Builder
) -> None:
    opdef = get_op(n.op)  # type: ignore[arg-type]
    needs = tuple(x in varying for x in n.inputs)
    if opdef.vjp is None and opdef.has("fusion"):
        raise AutodiffError(
            f"{n.describe()} is a backend's fused node (made by its fusion step: gc.fuse, "
            "gc.compile); differentiate the graph before fusion (the declared one, or "
            "gc.optimize's)"
        )
    if opdef.vjp is None:
        raise AutodiffError(
            f"{n.describe()} has no gradient rule, but a gradient must flow through it"
            + (f" (created at {n.loc})" if n.loc else "")
        )
    start = len(builder.graph.nodes)
    inputs = [Symbol(copies[x]) for x in n.inputs]
    cts = opdef.vjp(ct, Symbol(copies[n]), *inputs, needs=needs, **n.attrs)
    if len(cts) != len(n.inputs):
        raise AutodiffError(
            f"the vjp rule of op '{n.op}' returned {len(cts)} cotangents for "
            f"{len(n.inputs)} inputs ({n.describe()})"
        )
    for x, need, x_ct in zip(n.inputs, needs, cts):
        if need and x_ct is not None:
            builder.contribute(x, x_ct, n)
    builder.tagged(n, start)  # lifted constants are tagged too


def _prune(
    g: Graph,
    scratch: Graph,
    forward: set[str],
    chosen: list[Node],
    grads: list[Symbol],
    wrt: list[str],
    seed_names: list[str],
) -> Joint:
    """The final joint graph: forward nodes, the live backward nodes, then the outputs."""
    live: set[Node] = set()
    stack = [scratch.node(grad.node.name) for grad in grads]
    while stack:
        n = stack.pop()
        if n in live or n.name in forward:
            continue
        live.add(n)
        stack.extend(n.inputs)

    result = Graph(scratch.name)
    copies: dict[Node, Node] = {}
    for n in scratch.nodes:
        if n.kind != OUTPUT and (n.kind == PLACEHOLDER or n.name in forward or n in live):
            result.append_copy(n, copies)
    for o in g.outputs:
        result.add_output(copies[scratch.node(o.inputs[0].name)], o.name, meta=o.meta)
    grad_names = []
    for name, grad in zip(wrt, grads):
        out = result.add_output(
            copies[scratch.node(grad.node.name)],
            result.fresh_name(f"grad_{name}"),
            meta={"grad_of": name, "loc": grad.node.meta.get("loc")},
        )
        grad_names.append(out.name)
    return Joint(result, forward, seed_names, grad_names, [o.name for o in g.outputs])


def gradients(
    g: Graph,
    wrt: Sequence[str],
    outputs: Sequence[str] | None = None,
    seeds: bool = False,
) -> Graph:
    """The joint graph: `g`'s outputs, then the gradient of each `wrt` placeholder.

    Without seeds every differentiated output must hold one element (its cotangent is 1);
    with `seeds=True` a cotangent placeholder ``ct_<output>`` per output is added.
    `outputs` picks the outputs to differentiate (all floating point ones by default),
    each named once. `g` is verified first (gc.verify's error for a graph broken through
    the low-level API).

    >>> import numpy as np, graphc as gc
    >>> g = gc.trace(lambda x: gc.sum(x * x), gc.TensorSpec((3,), "float64"))
    >>> gg = gc.gradients(g, wrt=["x"])
    >>> [o.name for o in gg.outputs]
    ['out', 'grad_x']
    >>> gg(np.array([1.0, 2.0, 3.0]))[1]
    array([2., 4., 6.])
    """
    expect_graph(g, "gradients")
    verify(g)  # a graph broken through the low-level API: verify's named error, first
    return differentiate(g, wrt, outputs, seeds).graph


def split_backward(
    g: Graph,
    wrt: Sequence[str],
    outputs: Sequence[str] | None = None,
    seeds: bool = True,
) -> tuple[Graph, Graph]:
    """Split differentiation into a forward graph and a backward graph.

    The forward graph computes `g`'s outputs, then outputs ``saved_<name>`` for each
    value the backward needs. The backward graph's placeholders are those saved
    values (named as in the forward graph, in the same order), then one cotangent
    ``ct_<output>`` per differentiated output; its outputs are the gradients. So
    ``backward(*forward(...)[len(g.outputs):], *cotangents)`` gives the gradients.

    >>> import numpy as np, graphc as gc
    >>> g = gc.trace(lambda x: gc.sum(gc.exp(x)), gc.TensorSpec((2,), "float64"))
    >>> fwd, bwd = gc.split_backward(g, wrt=["x"])
    >>> [p.name for p in bwd.inputs]
    ['exp', 'ct_out']
    """
    expect_graph(g, "split_backward")
    verify(g)
    joint = differentiate(g, wrt, outputs, seeds)
    graph = joint.graph
    backward_nodes = [
        n
        for n in graph.nodes
        if n.kind != OUTPUT and n.name not in joint.forward and n.name not in joint.seeds
    ]
    grad_values = [graph.node(name).inputs[0] for name in joint.grads]

    saved = _saved_values(graph, joint, backward_nodes, grad_values)

    # the joint graph's forward part: g's nodes, with a differentiated scan replaced by
    # the one that also gives the residuals its backward reads (_merge_augmented)
    forward = Graph(f"{g.name}_forward")
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        if n.kind != OUTPUT and n.name in joint.forward:
            forward.append_copy(n, copies)
    for o in g.outputs:
        forward.add_output(copies[graph.node(o.inputs[0].name)], o.name, meta=o.meta)
    for n in saved:
        forward.add_output(
            forward.node(n.name), forward.fresh_name(f"saved_{n.name}"), meta=dict(n.meta)
        )

    backward = Graph(f"{g.name}_backward")
    bcopies: dict[Node, Node] = {}
    for n in saved:
        bcopies[n] = backward.add_placeholder(n.name, n.type, meta=dict(n.meta))
    for name in joint.seeds:
        backward.append_copy(graph.node(name), bcopies)
    used_constants = {
        x for n in backward_nodes for x in n.inputs if x.name in joint.forward and x.is_constant
    } | {v for v in grad_values if v.name in joint.forward and v.is_constant}
    copied = used_constants | set(backward_nodes)
    for n in graph.nodes:
        if n in copied:
            backward.append_copy(n, bcopies)
    for name, value in zip(joint.grads, grad_values):
        backward.add_output(bcopies[value], name, meta=graph.node(name).meta)
    return forward, backward


def _saved_values(
    graph: Graph, joint: Joint, backward_nodes: list[Node], grad_values: list[Node]
) -> list[Node]:
    """The forward values the backward reads, in forward order.

    Constants are copied into the backward instead of saved. A symbolic dim the
    backward's shapes mention but no saved value carries is bound by saving a
    forward placeholder that has it (the runtime binds dims from the feeds).
    """

    def is_saved(x: Node) -> bool:
        return x.name in joint.forward and not x.is_constant

    needed = {x for n in backward_nodes for x in n.inputs if is_saved(x)}
    needed |= {v for v in grad_values if is_saved(v)}

    bound = {d for n in needed for d in n.type.symbols}
    bound |= {d for name in joint.seeds for d in graph.node(name).type.symbols}
    wanted = {d for n in backward_nodes for d in _symbols_of(n)}
    for dim in sorted(wanted - bound):
        carrier = next(
            (p for p in graph.inputs if dim in p.type.symbols and p.name in joint.forward), None
        )
        if carrier is not None:
            needed.add(carrier)
            bound |= set(carrier.type.symbols)
    return [n for n in graph.nodes if n in needed]


def _symbols_of(n: Node) -> set[str]:
    symbols = set(n.type.symbols)
    if n.kind == OP:
        for key in get_op(n.op).shape_attrs:  # type: ignore[arg-type]
            symbols |= {d for d in attr_dims(n.attrs.get(key)) if isinstance(d, str)}
    return symbols
