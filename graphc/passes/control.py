"""Control flow, cleaned up: dead carries and results, constant predicates, invariants.

`simplify_control_flow` rewrites cond, scan and while_loop nodes (graphc/ops/control.py)
by looking into their bodies; `optimize_bodies` runs a pipeline on every body. Each is
one forward walk over the graph; a rewritten node's `result` readers are redirected
to the new node's results (or the values that replace them). Every rewrite is exact:
the same ops run on the same values, only fewer of them, or outside the loop.

- cond with a constant predicate: the branch taken, inlined.
- cond: results nobody reads leave both branches; operands neither branch then reads
  leave the node.
- scan: liveness to a fixed point. The ys and final carries read outside are live; a
  carry whose input a live output depends on is live, and so its output is. Dead
  carries and ys leave the body, and so do xs and consts it no longer reads.
- while_loop: the same, rooted at the read results and at what the condition reads
  (a carry that decides when to stop is live).
- scan: rows a body takes at its step counter (a for loop's `x[i]`) become xs, sliced
  by the loop instead of copied by a take (passes/scan_rows.py).
- scan and while_loop bodies: loop-invariant code motion. A body op whose inputs are
  all consts, constants or such ops computes the same value at every step; the
  outermost of them (those a varying op or an output reads) are computed once in the
  outer graph and passed in as new consts. Ops on constants alone stay in the body:
  folding computes them once where it can, and what it leaves (a transpose, a view
  in another memory order; an op a backend keeps) stays visibly a constant's, so the
  native backend's matmul packs such a weight once, at setup, instead of on every
  step (backends/native/matmul.py).

Linear in the nodes of the graph and its bodies, times the rounds of the liveness
fixed point (at most the number of carries).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from graphc.ir.graph import OP, OUTPUT, Graph, Node
from graphc.ir.registry import attr_dims, bound_attrs, get_op
from graphc.ops.body import bind_body_dims
from graphc.passes.builder import GraphBuilder, live_nodes
from graphc.passes.report import PassLog
from graphc.passes.scan_rows import rows_as_xs

# -- bodies as graphs ---------------------------------------------------------------


def needed_inputs(body: Graph, outputs: set[int]) -> set[int]:
    """The placeholders (by position) the given outputs (by position) depend on: for
    their values, or as the only ones giving a symbolic dim those outputs' nodes use
    (a body is closed in its dims: ops/control.py)."""
    stack = [body.outputs[k].inputs[0] for k in outputs]
    seen: set[Node] = set()
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.inputs)
    needed = {i for i, p in enumerate(body.inputs) if p in seen}
    used: set[str] = set()
    for node in seen:
        used.update(node.type.symbols)
        if node.kind == OP:
            for key in get_op(node.op).shape_attrs:
                used.update(d for d in attr_dims(node.attrs[key]) if isinstance(d, str))
    bound = {d for i in needed for d in body.inputs[i].type.symbols}
    for i, p in enumerate(body.inputs):
        if i not in needed and set(p.type.symbols) & (used - bound):
            needed.add(i)
            bound.update(p.type.symbols)
    return needed


def sub_body(body: Graph, inputs: Sequence[int], outputs: Sequence[int]) -> Graph:
    """`body` with only the placeholders and outputs at these positions (the kept
    outputs may depend on the kept placeholders only), without the nodes it no
    longer needs."""
    kept_outputs = [body.outputs[k] for k in outputs]
    live: set[Node] = set()
    stack = [o.inputs[0] for o in kept_outputs]
    while stack:
        node = stack.pop()
        if node not in live:
            live.add(node)
            stack.extend(node.inputs)
    result = Graph(body.name)
    copies: dict[Node, Node] = {}
    for i in inputs:
        result.append_copy(body.inputs[i], copies)
    for node in body.nodes:
        if node.kind == OP and node in live:
            result.append_copy(node, copies)
    for o in kept_outputs:
        result.append_copy(o, copies)
    return result


def inline(
    builder: GraphBuilder,
    body: Graph,
    nodes: Sequence[Node],
    placeholders: Sequence[Node],
    operands: Sequence[Node],
    meta: dict,
) -> dict[Node, Node]:
    """Copy the body op `nodes` into the builder's graph, `placeholders` standing for
    `operands`. Types are inferred again and shape attrs rebound: the body's symbolic
    dims are its own, bound by the operands' dims (which may be other symbols, or ints
    in a graph specialized to one signature)."""
    bindings = bind_body_dims(body, [x.type for x in operands], "inline")  # type: ignore[arg-type]
    env: dict[Node, Node] = {}
    for p, x in zip(placeholders, operands):
        env[p] = x
    for node in nodes:
        inputs = [env[x] for x in node.inputs]
        name = builder.fresh_name(node.name)
        env[node] = builder.op(node.op, inputs, bound_attrs(node, bindings), meta=meta, name=name)
    return env


def _results(builder: GraphBuilder, node: Node, mapping: dict[int, int]) -> dict[int, Node]:
    """old result index -> a `result` of the new node at its new index."""
    return {old: builder.op("result", [node], {"index": new}) for old, new in mapping.items()}


# -- the rewrites -------------------------------------------------------------------

Rewrite = Callable[[GraphBuilder, Node, list[Node], set[int]], dict[int, Node] | None]


def _cond(
    builder: GraphBuilder, node: Node, inputs: list[Node], read: set[int]
) -> dict[int, Node] | None:
    pred, operands = inputs[0], inputs[1:]
    then_body, else_body = node.attrs["then_body"], node.attrs["else_body"]
    if pred.is_constant:
        taken = sub_body(
            then_body if bool(pred.value) else else_body, range(len(operands)), sorted(read)
        )
        env = inline(builder, taken, taken.op_nodes, taken.inputs, operands, node.meta)
        return {k: env[o.inputs[0]] for k, o in zip(sorted(read), taken.outputs)}
    outputs = sorted(read)
    used = sorted(needed_inputs(then_body, set(outputs)) | needed_inputs(else_body, set(outputs)))
    if len(outputs) == len(then_body.outputs) and len(used) == len(operands):
        return None
    attrs = {
        "then_body": sub_body(then_body, used, outputs),
        "else_body": sub_body(else_body, used, outputs),
    }
    new = builder.op(
        "cond", [pred, *(operands[i] for i in used)], attrs, meta=node.meta, replaces=node
    )
    return _results(builder, new, {k: j for j, k in enumerate(outputs)})


def _live_carries(body: Graph, roots: set[int], num_carry: int) -> tuple[set[int], set[int]]:
    """The carries a live output needs, to a fixed point (a live carry's own output is
    live), and every input position the live outputs read. `roots`: the outputs read
    from outside (carries first, then ys)."""
    live = {i for i in roots if i < num_carry}
    ys = {k for k in roots if k >= num_carry}
    while True:
        needed = needed_inputs(body, ys | live)
        grown = live | {i for i in needed if i < num_carry}
        if grown == live:
            return live, needed
        live = grown


def _scan(
    builder: GraphBuilder, node: Node, inputs: list[Node], read: set[int]
) -> dict[int, Node] | None:
    a = node.attrs
    body, nc, nx = a["body"], a["num_carry"], a["num_xs"]
    rows = rows_as_xs(node, body, inputs, nc, nx)
    if rows is not None:
        body, inputs, nx = rows
    hoisted = _hoist(builder, node, body, inputs, first_const=nc + nx)
    if hoisted is not None:
        body, inputs = hoisted
    live, needed = _live_carries(body, set(read), nc)
    carries = sorted(live)
    ys = sorted(k for k in read if k >= nc)
    kept_inputs = carries + sorted(i for i in needed if i >= nc)
    if (
        rows is None
        and hoisted is None
        and len(carries) == nc
        and len(ys) == len(body.outputs) - nc
        and len(kept_inputs) == len(inputs)
    ):
        return None
    attrs = dict(a, body=sub_body(body, kept_inputs, carries + ys), num_carry=len(carries))
    attrs["num_xs"] = sum(1 for i in kept_inputs if nc <= i < nc + nx)
    new = builder.op("scan", [inputs[i] for i in kept_inputs], attrs, meta=node.meta, replaces=node)
    return _results(builder, new, {k: j for j, k in enumerate(carries + ys)})


def _while(
    builder: GraphBuilder, node: Node, inputs: list[Node], read: set[int]
) -> dict[int, Node] | None:
    a = node.attrs
    test, body, nc, k = a["cond_body"], a["body"], a["num_carry"], a["num_cond_consts"]
    hoisted = _hoist(builder, node, body, inputs[:nc] + inputs[nc + k :], first_const=nc)
    if hoisted is not None:
        body, kept = hoisted
        inputs = inputs[: nc + k] + kept[nc:]
    deciding = {i for i in needed_inputs(test, {0}) if i < nc}
    live, needed = _live_carries(body, set(read) | deciding, nc)
    carries = sorted(live)
    test_consts = sorted(i - nc for i in needed_inputs(test, {0}) if i >= nc)
    body_consts = sorted(i - nc for i in needed if i >= nc)
    n_body_consts = len(body.inputs) - nc
    if (
        hoisted is None
        and len(carries) == nc
        and len(test_consts) == k
        and len(body_consts) == n_body_consts
    ):
        return None
    attrs = {
        "cond_body": sub_body(test, carries + [nc + i for i in test_consts], [0]),
        "body": sub_body(body, carries + [nc + i for i in body_consts], carries),
        "num_carry": len(carries),
        "num_cond_consts": len(test_consts),
    }
    operands = [inputs[i] for i in carries] + [inputs[nc + i] for i in test_consts]
    operands += [inputs[nc + k + i] for i in body_consts]
    new = builder.op("while_loop", operands, attrs, meta=node.meta, replaces=node)
    return _results(builder, new, {i: j for j, i in enumerate(carries)})


def _hoist(
    builder: GraphBuilder, node: Node, body: Graph, inputs: list[Node], first_const: int
) -> tuple[Graph, list[Node]] | None:
    """Move `body`'s loop-invariant ops out (see the module docstring): the new body,
    with a const placeholder per hoisted value after its own, and its new inputs."""
    invariant = set(body.inputs[first_const:])
    constant: set[Node] = set()  # computed from constants alone: they stay
    moved: list[Node] = []
    for n in body.nodes:
        if n.kind == OP and (
            n.is_constant
            or (get_op(n.op).pure and n.inputs and all(x in invariant for x in n.inputs))
        ):
            invariant.add(n)
            if n.is_constant or all(x in constant for x in n.inputs):
                constant.add(n)
            else:
                moved.append(n)
    if not moved:
        return None
    users = body.users()
    frontier = [n for n in moved if any(u not in invariant for u in users[n])]
    if not frontier:
        return None
    hoisted = [n for n in body.nodes if n in invariant and n.kind == OP]
    consts = body.inputs[first_const:]
    env = inline(
        builder, _consts_only(body, first_const), hoisted, consts, inputs[first_const:], node.meta
    )
    new = Graph(body.name)
    copies: dict[Node, Node] = {}
    for p in body.inputs:
        new.append_copy(p, copies)
    for n in frontier:
        copies[n] = new.add_placeholder(new.fresh_name(n.name), n.type)
    for n in body.nodes:
        if (
            n.kind == OP
            and n not in copies
            and (n not in invariant or n in constant)
            or (n.kind == OUTPUT)
        ):
            new.append_copy(n, copies)
    return new, inputs + [env[n] for n in frontier]


def _consts_only(body: Graph, first_const: int) -> Graph:
    """A graph whose placeholders are `body`'s consts (for binding their dims)."""
    graph = Graph(body.name)
    for p in body.inputs[first_const:]:
        graph.add_placeholder(p.name, p.type)
    return graph


REWRITES: dict[str, Rewrite] = {"cond": _cond, "scan": _scan, "while_loop": _while}


def simplify_control_flow(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with its cond, scan and while_loop nodes cleaned up (module docstring)."""
    if not any(n.kind == OP and n.op in REWRITES for n in graph.nodes):
        return graph
    users = graph.users()
    live = live_nodes(graph)  # a result node nobody needs reads nothing
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    redirected: dict[Node, dict[int, Node]] = {}
    for node in graph.nodes:
        if node not in live:
            continue  # (what DCE would remove: it may read a result no longer given)
        if node.kind == OP and node.op == "result" and node.inputs[0] in redirected:
            new[node] = redirected[node.inputs[0]][node.attrs["index"]]
            continue
        inputs = [new[x] for x in node.inputs]
        if node.kind == OP and node.op in REWRITES:
            read = {u.attrs["index"] for u in users[node] if u in live and u.op == "result"}
            replaced = REWRITES[node.op](builder, node, inputs, read) if read else None
            if replaced is not None:
                redirected[node] = replaced
                if log is not None:
                    log.count(f"rewrote a {node.op}")
                continue
        new[node] = builder.copy(node, inputs)
    return builder.graph


def optimize_bodies(
    graph: Graph, optimize: Callable[[Graph], Graph], log: PassLog | None = None
) -> Graph:
    """`graph` with `optimize` run on every body of its cond, scan and while_loop nodes
    (and, through `optimize`, on theirs): the attrs their op declares as bodies. Only
    the control-flow ops this module rewrites: a fused group's body is what fusion
    made, and the pipeline run in it again would fuse it anew."""
    if not any(_control(n) for n in graph.nodes):
        return graph
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        inputs = [new[x] for x in node.inputs]
        if _control(node):
            keys = get_op(node.op).bodies
            attrs = dict(node.attrs)
            for key in keys:
                attrs[key] = optimize(attrs[key])
            if log is not None:
                before = sum(len(node.attrs[k].nodes) for k in keys)
                after = sum(len(attrs[k].nodes) for k in keys)
                log.note(f"{node.op} '{node.name}': bodies {before} -> {after} nodes")
            new[node] = builder.graph.add_op(
                node.op, inputs, attrs, node.type, name=node.name, meta=node.meta
            )
        else:
            new[node] = builder.copy(node, inputs)
    return builder.graph


def _control(node: Node) -> bool:
    """Whether `node` is a control-flow node: one of the ops REWRITES dispatches."""
    return node.kind == OP and node.op in REWRITES
