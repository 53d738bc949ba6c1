"""Forward-mode differentiation: the tangents of a graph are another graph.

`tangents(g, wrt)` gives the graph of `g`'s outputs and their tangents J·t, where t
are new tangent placeholders ``tan_<input>``, one per `wrt` input. No JVP rule per op
exists: forward mode is derived from the VJP by transposition, which is exact.

Algorithm (the transposition trick of JAX's "linearize and transpose", run backwards):

1. ``gradients(g, wrt, seeds=True)`` builds the VJP: with a cotangent placeholder
   ``ct_<output>`` per output u, its gradient outputs are J^T u, a linear function of u.
2. That graph is differentiated again, with respect to its cotangent placeholders,
   seeded with the tangents: the VJP of u -> J^T u is t -> (J^T)^T t = J t, exact and
   symbolic (every derivative still comes from an op's `vjp` rule).
3. J t does not depend on u (the map is linear), so the cotangent placeholders feed
   nothing the tangents need; a node that still reads one (a rule that builds a term
   it then drops) reads zeros instead. The outputs J^T u are dropped, and the exact
   cleanups (simplify's exact rules, CSE, dead code elimination: `x.T.T` -> `x`) leave
   the forward nodes and the tangent nodes.

Step 2 is exact because every op's `vjp` rule is linear in its cotangent. A user's
backward (`gc.custom_vjp`, an eager `Function`) need not be (gradient clipping is not),
so a node with one on the differentiated path is refused by name, as `jax.jvp`
refuses a custom_vjp function.

Cost: building it differentiates twice (the graph, then its linear backward part).
Running it computes the forward values once plus one pass of linear ops, each the
transpose of one of the VJP's ops: about the work of a forward and backward pass,
with no cotangent input. Forward mode pays off for few inputs and many outputs
(a Jacobian by columns, `gc.jacfwd`).

One op has no VJP to transpose: `while_loop`, whose trip count is known only when it
runs. A graph with one on the differentiated path is taken node by node instead
(`_node_by_node`): each other op's tangent is the transposition above applied to a graph
of that one node, inlined; a while_loop's tangent is another while_loop carrying the
tangents of its floating point carries beside them, its body the forward-mode graph of
the body (so loops nest) and its predicate the old one, which reads the primal carries
only (`_while_tangents`, what jax.jvp does with lax.while_loop). A scan or cond whose
body holds one is taken the same way: its tangent is a scan (cond) over the
forward-mode graphs of its bodies, carrying (returning) the tangents beside the values
(`_scan_tangents`, `_cond_tangents`, as jax.jvp does); a while_loop in another op's body
is still refused by name, that op's tangent coming from its VJP. `split_tangents`
refuses such a graph, whose loops compute primal and tangent carries together, unless
told to rerun them in its linear part (linearize does, as JAX's).

Invariant: the result's placeholders are `g`'s, then one ``tan_<name>`` per `wrt`
name, of that input's type; its outputs are `g`'s, then one ``tan_<name>`` per
differentiated output, of that output's type. A tangent node's ``meta["grad_of"]``
names the forward node it is (part of) the tangent of, as gradients' nodes do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import AutodiffError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node, expect_graph
from graphc.ir.registry import get_op
from graphc.ir.types import TupleType, is_float
from graphc.ops import elementwise as E
from graphc.ops import shape as S
from graphc.ops.closure import with_inputs
from graphc.ops.custom import inline_body, zero_backward
from graphc.ops.dispatch import bind
from graphc.ops.symbolic import Symbol, add_constant
from graphc.ops.tuples import results
from graphc.passes.autodiff import Joint, check_wrt, differentiate, pick_outputs
from graphc.passes.cse import eliminate_common_subexpressions
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.simplify import simplify


@dataclass
class ForwardJoint:
    """A forward-mode graph and the names of its tangent inputs and outputs."""

    graph: Graph
    tangent_inputs: list[str]  # one tangent placeholder per wrt input, in wrt's order
    tangent_outputs: list[str]  # one tangent output per differentiated output
    outputs: list[str]  # g's outputs, repeated first
    differentiated: list[str]  # the outputs of g that have a tangent output


def forward_joint(
    g: Graph, wrt: Sequence[str] | str, outputs: Sequence[str] | str | None = None
) -> ForwardJoint:
    """The forward-mode graph of `g` with the names `gc.jvp` and `gc.jacfwd` need."""
    expect_graph(g, "tangents")
    if isinstance(wrt, (list, tuple)) and not wrt:
        raise AutodiffError(
            f"tangents: wrt takes a str or a non-empty list of the names of placeholders of "
            f"graph '{g.name}'; its placeholders are {[p.name for p in g.inputs]}"
        )
    wrt_names = [p.name for p in check_wrt(g, wrt, "tangents")]
    chosen = [o.name for o in pick_outputs(g, outputs, seeds=True, who="tangents")]
    _refuse_user_backwards(g, wrt_names, chosen)
    if any(_holds_while(n) for n in _on_path(g, wrt_names, chosen)):
        return _node_by_node(g, wrt_names, chosen)
    try:
        vjp = differentiate(g, wrt_names, chosen, seeds=True)  # grads J^T u, linear in u
    except AutodiffError as exc:  # (a while_loop: graphc's forward mode has no rule of its own)
        raise AutodiffError(
            f"tangents: forward mode is derived from the VJP of graph '{g.name}', which "
            f"cannot be built: {exc}"
        ) from None
    try:
        twice = differentiate(vjp.graph, vjp.seeds, vjp.grads, seeds=True)
    except AutodiffError as exc:
        raise AutodiffError(
            f"tangents: forward mode transposes the VJP of graph '{g.name}', and that failed: {exc}"
        ) from None
    return _assemble(g, vjp, wrt_names, chosen, twice)


def _on_path(g: Graph, wrt: list[str], outputs: list[str]) -> list[Node]:
    """The op nodes of `g` that read a `wrt` input (through others) and that an output
    in `outputs` needs."""
    needed: set[Node] = set()
    stack = [g.node(name) for name in outputs]
    while stack:
        n = stack.pop()
        if n not in needed:
            needed.add(n)
            stack.extend(n.inputs)
    varying = {g.node(name) for name in wrt}
    path = []
    for n in g.nodes:
        if n.kind == OP and any(x in varying for x in n.inputs):
            varying.add(n)
            if n in needed:
                path.append(n)
    return path


def _node_by_node(g: Graph, wrt: list[str], chosen: list[str]) -> ForwardJoint:
    """The forward-mode graph of `g` built one node at a time (see the module docstring):
    `g` replayed into a new graph, each node reading a tangent followed by its tangent.
    A node of several results has a list of values and of tangents (None: no tangent)."""
    result = Graph(f"{g.name}_jvp")
    value: dict[Node, Any] = {}
    tangent: dict[Node, Any] = {}
    with result:
        for p in g.inputs:
            value[p] = Symbol(result.add_placeholder(p.name, p.type, meta=p.meta))
        tangent_inputs = []
        for x in wrt:
            meta = {"tangent_of": x, "loc": g.node(x).meta.get("loc")}
            name = _fresh_in(g, result, f"tan_{x}")
            tangent[g.node(x)] = Symbol(result.add_placeholder(name, g.node(x).type, meta=meta))
            tangent_inputs.append(name)
        for n in g.nodes:
            if n.kind in (PLACEHOLDER, OUTPUT):
                continue
            if n.is_constant:
                value[n] = add_constant(result, n.value)
            elif n.op == "result" and isinstance(value[n.inputs[0]], list):
                k = n.attrs["index"]
                value[n] = value[n.inputs[0]][k]
                if n.inputs[0] in tangent and tangent[n.inputs[0]][k] is not None:
                    tangent[n] = tangent[n.inputs[0]][k]
            elif not any(x in tangent for x in n.inputs):
                value[n] = bind(n.op, *(value[x] for x in n.inputs), **n.attrs)
            else:
                rule = _RULES.get(n.op, _op_tangents) if _holds_while(n) else _op_tangents
                value[n], tangents = rule(n, value, tangent)
                if tangents is not None:
                    tangent[n] = tangents
        for o in g.outputs:
            result.add_output(value[o.inputs[0]].node, o.name, meta=o.meta)
        tangent_outputs = []
        for name in chosen:
            x = g.node(name).inputs[0]
            t = tangent.get(x)
            t = E.zeros_like(value[x]) if t is None else t
            meta = {"tangent_of": name, "loc": g.node(name).meta.get("loc")}
            out = result.add_output(t.node, _fresh_in(g, result, f"tan_{name}"), meta=meta)
            tangent_outputs.append(out.name)
    graph = eliminate_dead_code(eliminate_common_subexpressions(simplify(result)))
    return ForwardJoint(graph, tangent_inputs, tangent_outputs, [o.name for o in g.outputs], chosen)


def _fresh_in(g: Graph, result: Graph, base: str) -> str:
    """A name free in both `g` and `result`."""
    name, k = base, 0
    while name in g or name in result:
        k += 1
        name = f"{base}_{k}"
    return name


def _op_tangents(n: Node, value: dict[Node, Any], tangent: dict[Node, Any]) -> tuple[Any, Any]:
    """The value and tangent of op node `n` (lists for several results): the forward-mode
    graph of a graph holding `n` alone, by transposition, inlined."""
    inputs = list(dict.fromkeys(n.inputs))  # each once
    one = Graph(f"{n.op}_node")
    slots = {x: one.add_placeholder(f"x{k}", x.type) for k, x in enumerate(inputs)}
    node = one.append_copy(n, slots)
    with one:
        items = results(Symbol(node)) if isinstance(n.type, TupleType) else [Symbol(node)]
        for k, item in enumerate(items):
            one.add_output(item.node, f"y{k}")
    floats = [o.name for o in one.outputs if is_float(o.type.dtype)]
    varying = [x for x in inputs if x in tangent]
    if not floats:  # (an integer or bool result: no tangent)
        values = inline_body(one, [value[x] for x in inputs])
        return (values if isinstance(n.type, TupleType) else values[0]), None
    fj = forward_joint(one, [slots[x].name for x in varying], floats)
    values = inline_body(fj.graph, [value[x] for x in inputs] + [tangent[x] for x in varying])
    primal, tangents = values[: len(items)], dict(zip(fj.differentiated, values[len(items) :]))
    per_item = [tangents.get(o.name) for o in one.outputs]
    return (primal, per_item) if isinstance(n.type, TupleType) else (primal[0], per_item[0])


def _while_tangents(n: Node, value: dict[Node, Any], tangent: dict[Node, Any]) -> tuple[Any, Any]:
    """A while_loop's results and their tangents: one while_loop whose carries are the
    old ones, then a tangent per floating point carry (zeros where the initial value
    has none); its body is the forward-mode graph of the old body with respect to those
    carries and to the body's constants that have a tangent (passed as constants); its
    predicate reads the primal carries."""
    count, cond_count = n.attrs["num_carry"], n.attrs["num_cond_consts"]
    carries = n.inputs[:count]
    cond_consts, consts = n.inputs[count : count + cond_count], n.inputs[count + cond_count :]
    body, cond = n.attrs["body"], n.attrs["cond_body"]
    floats = [i for i, c in enumerate(carries) if is_float(c.type.dtype)]
    moving = [j for j, c in enumerate(consts) if c in tangent]
    wrt = [body.inputs[i].name for i in floats] + [body.inputs[count + j].name for j in moving]
    fj = forward_joint(body, wrt, [body.outputs[i].name for i in floats])
    # the new body reads its placeholders as carries, their tangents, constants, theirs
    ins = fj.graph.inputs
    order = ins[:count] + ins[len(body.inputs) : len(body.inputs) + len(floats)]
    order += ins[count : len(body.inputs)] + ins[len(body.inputs) + len(floats) :]
    new_body = with_inputs(fj.graph, [(None, p, p.type) for p in order])
    new_cond = with_inputs(
        cond,
        [(None, p, p.type) for p in cond.inputs[:count]]
        + [(f"tan_carry{i}", None, carries[i].type) for i in floats]
        + [(None, p, p.type) for p in cond.inputs[count:]],
    )
    starts = [tangent.get(carries[i]) for i in floats]
    starts = [E.zeros_like(value[carries[i]]) if t is None else t for i, t in zip(floats, starts)]
    loop = bind(
        "while_loop",
        *(value[c] for c in carries),
        *starts,
        *(value[c] for c in cond_consts),
        *(value[c] for c in consts),
        *(tangent[consts[j]] for j in moving),
        cond_body=new_cond,
        body=new_body,
        num_carry=count + len(floats),
        num_cond_consts=cond_count,
    )
    items = results(loop)
    tangents: list[Any] = [None] * count
    for k, i in enumerate(floats):
        tangents[i] = items[count + k]
    return items[:count], tangents


def _holds_while(n: Node) -> bool:
    """Whether `n` is a while_loop or holds one in a body (at any depth): then it has no
    VJP to transpose, and its tangent comes from a rule of this module."""
    if n.op == "while_loop":
        return True
    if n.kind != OP:
        return False
    opdef = get_op(n.op)  # type: ignore[arg-type]
    return any(_holds_while(inner) for key in opdef.bodies for inner in n.attrs[key].nodes)


def _reordered(body: Graph, inputs: Sequence[Node], outputs: Sequence[Node]) -> Graph:
    """A copy of `body` with its placeholders and outputs in the given orders."""
    result = Graph(body.name)
    copies: dict[Node, Node] = {}
    for p in inputs:
        result.append_copy(p, copies)
    for n in body.nodes:
        if n.kind == OP:
            result.append_copy(n, copies)
    for o in outputs:
        result.append_copy(o, copies)
    return result


def _scan_tangents(n: Node, value: dict[Node, Any], tangent: dict[Node, Any]) -> tuple[Any, Any]:
    """A scan's results and their tangents (a scan whose body holds a while_loop): one
    scan carrying a tangent beside each floating point carry (zeros where the initial
    value has none), scanning the tangents of the xs that have one beside them and
    reading those of its constants, its body the forward-mode graph of the old body;
    its ys are the old ys, then the tangents of the floating point ones."""
    count, n_xs = n.attrs["num_carry"], n.attrs["num_xs"]
    carries, xs, consts = n.inputs[:count], n.inputs[count : count + n_xs], n.inputs[count + n_xs :]
    body = n.attrs["body"]
    n_ys = len(body.outputs) - count
    floats = [i for i, c in enumerate(carries) if is_float(c.type.dtype)]
    moving_xs = [j for j, x in enumerate(xs) if x in tangent]
    moving = [j for j, c in enumerate(consts) if c in tangent]
    float_ys = [k for k in range(n_ys) if is_float(body.outputs[count + k].type.dtype)]
    ins = body.inputs
    wrt = [ins[i] for i in floats] + [ins[count + j] for j in moving_xs]
    wrt += [ins[count + n_xs + j] for j in moving]
    chosen = [body.outputs[i] for i in floats] + [body.outputs[count + k] for k in float_ys]
    if not wrt:  # (no float carry, nothing moving: nothing has a tangent)
        return _op_tangents(n, value, tangent)
    fj = forward_joint(body, [p.name for p in wrt], [o.name for o in chosen])
    tan_in = dict(zip(wrt, (fj.graph.node(t) for t in fj.tangent_inputs)))
    tan_out = dict(zip(chosen, (fj.graph.node(t) for t in fj.tangent_outputs)))
    node = fj.graph.node
    carry_ins = [node(p.name) for p in ins[:count]] + [tan_in[ins[i]] for i in floats]
    xs_ins = [node(p.name) for p in ins[count : count + n_xs]]
    xs_ins += [tan_in[ins[count + j]] for j in moving_xs]
    const_ins = [node(p.name) for p in ins[count + n_xs :]]
    const_ins += [tan_in[ins[count + n_xs + j]] for j in moving]
    outs = [node(o.name) for o in body.outputs[:count]]
    outs += [tan_out[body.outputs[i]] for i in floats]
    outs += [node(o.name) for o in body.outputs[count:]]
    outs += [tan_out[body.outputs[count + k]] for k in float_ys]
    new_body = _reordered(fj.graph, carry_ins + xs_ins + const_ins, outs)
    starts = [tangent.get(carries[i]) for i in floats]
    starts = [E.zeros_like(value[carries[i]]) if t is None else t for i, t in zip(floats, starts)]
    attrs = {**n.attrs, "body": new_body, "num_carry": count + len(floats)}
    attrs["num_xs"] = n_xs + len(moving_xs)
    loop = bind(
        "scan",
        *(value[c] for c in carries),
        *starts,
        *(value[x] for x in xs),
        *(tangent[xs[j]] for j in moving_xs),
        *(value[c] for c in consts),
        *(tangent[consts[j]] for j in moving),
        **attrs,
    )
    items = results(loop)
    width = count + len(floats)
    primal = items[:count] + items[width : width + n_ys]
    tangents: list[Any] = [None] * (count + n_ys)
    for k, i in enumerate(floats):
        tangents[i] = items[count + k]
    for k, y in enumerate(float_ys):
        tangents[count + y] = items[width + n_ys + k]
    return primal, tangents


def _cond_tangents(n: Node, value: dict[Node, Any], tangent: dict[Node, Any]) -> tuple[Any, Any]:
    """A cond's results and their tangents (a cond whose branches hold a while_loop):
    one cond passing the tangents of its operands that have one beside them, each branch
    the forward-mode graph of the old one, giving the old results, then the tangents of
    the floating point ones."""
    pred, operands = n.inputs[0], n.inputs[1:]
    moving = [j for j, x in enumerate(operands) if x in tangent]
    branches = {key: n.attrs[key] for key in get_op(n.op).bodies}  # type: ignore[arg-type]
    first = next(iter(branches.values()))
    floats = [k for k, o in enumerate(first.outputs) if is_float(o.type.dtype)]
    if not moving or not floats:
        return _op_tangents(n, value, tangent)
    new = {}
    for key, branch in branches.items():
        fj = forward_joint(
            branch,
            [branch.inputs[j].name for j in moving],
            [branch.outputs[k].name for k in floats],
        )
        new[key] = fj.graph  # placeholders: operands, then tangents; outputs: results, tangents
    chosen = bind(
        n.op,
        value[pred],
        *(value[x] for x in operands),
        *(tangent[operands[j]] for j in moving),
        **{**n.attrs, **new},
    )
    items = results(chosen)
    count = len(first.outputs)
    tangents: list[Any] = [None] * count
    for k, i in enumerate(floats):
        tangents[i] = items[count + k]
    return items[:count], tangents


_RULES = {"while_loop": _while_tangents, "scan": _scan_tangents, "cond": _cond_tangents}


def _refuse_user_backwards(g: Graph, wrt: list[str], outputs: list[str]) -> None:
    """Transposing is exact for a VJP linear in its cotangent, which every op's rule is;
    a user's backward (gc.custom_vjp, a Function) need not be (gradient clipping is
    not), so forward mode through one is refused, as JAX refuses jvp of a custom_vjp,
    unless it is linear by construction (gc.custom_jvp's, marked `linear`) or zero."""
    for n in _on_path(g, wrt, outputs):
        user = _user_backward(n)
        if user is not None and not user.attrs.get("linear") and not zero_backward(user):
            where = "" if user is n else f" (in a body of {n.describe()})"
            raise AutodiffError(
                f"tangents: {user.describe()}{where} has a user-defined backward "
                f"('{user.attrs.get('function', 'custom')}'); forward mode transposes the "
                "VJP, which is exact only for one linear in its cotangent, so it is refused "
                "(as jax.jvp refuses a custom_vjp function); differentiate it in reverse "
                "mode (gc.grad, gc.jacrev)"
            )


def _user_backward(n: Node) -> Node | None:
    """`n`, or a node in its bodies, whose gradient is a user's backward body."""
    opdef = get_op(n.op)  # type: ignore[arg-type]
    if "backward" in opdef.bodies:
        return n
    for key in opdef.bodies:
        for inner in n.attrs[key].nodes:
            found = _user_backward(inner) if inner.kind == OP else None
            if found is not None:
                return found
    return None


def _assemble(
    g: Graph, vjp: Joint, wrt: list[str], chosen: list[str], twice: Joint
) -> ForwardJoint:
    """The final graph: g's placeholders, the tangent placeholders, the nodes the
    outputs and tangents need (a cotangent read as zeros), g's outputs, the tangents."""
    joint, vjp_graph, cotangents = twice.graph, vjp.graph, vjp.seeds
    seeds, grads = twice.seeds, twice.grads  # the tangent placeholders; J t per output
    taken = {n.name for n in joint.nodes}

    def fresh(base: str) -> str:
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    wanted = [joint.node(o.name).inputs[0] for o in g.outputs]
    wanted += [joint.node(name).inputs[0] for name in grads]
    live: set[Node] = set()
    stack = list(wanted)
    while stack:
        n = stack.pop()
        if n not in live:
            live.add(n)
            stack.extend(n.inputs)

    result = Graph(f"{g.name}_jvp")
    copies: dict[Node, Node] = {}
    for p in joint.inputs:
        if p.name in cotangents:
            continue
        if p.name in seeds:  # ct_grad_x: the tangent of x
            x = wrt[seeds.index(p.name)]
            meta = {"tangent_of": x, "loc": g.node(x).meta.get("loc")}
            copies[p] = result.add_placeholder(fresh(f"tan_{x}"), p.type, meta=meta)
        else:
            result.append_copy(p, copies)
    tangent_inputs = [copies[joint.node(s)].name for s in seeds]

    forward_of = {o.name: o.inputs[0].name for o in g.outputs}
    for n in joint.nodes:
        if n.kind in (PLACEHOLDER, OUTPUT) or n not in live:
            continue
        for x in n.inputs:
            if x not in copies:  # a cotangent placeholder: zeros, made at its first reader
                copies[x] = _zeros_for(result, x, copies, joint, forward_of, fresh)
        copy = result.append_copy(n, copies)
        target = copy.meta.get("grad_of")
        if target in vjp_graph and target not in g:  # a VJP node: name its forward node
            copy.meta["grad_of"] = vjp_graph.node(target).meta.get("grad_of")

    for o in g.outputs:
        result.add_output(copies[joint.node(o.name).inputs[0]], o.name, meta=o.meta)
    tangent_outputs = []
    for name, grad in zip(chosen, grads):
        value = copies[joint.node(grad).inputs[0]]
        meta = {"tangent_of": name, "loc": g.node(name).meta.get("loc")}
        out = result.add_output(value, fresh(f"tan_{name}"), meta=meta)
        tangent_outputs.append(out.name)
    graph = eliminate_dead_code(eliminate_common_subexpressions(simplify(result)))
    return ForwardJoint(graph, tangent_inputs, tangent_outputs, [o.name for o in g.outputs], chosen)


def _zeros_for(
    result: Graph,
    ct: Node,
    copies: dict[Node, Node],
    joint: Graph,
    forward_of: dict[str, str],
    fresh: Callable[[str], str],
) -> Node:
    """Zeros in place of cotangent placeholder `ct`, made where its first reader is
    (named apart from every node of `joint`, which are copied after them)."""
    mark = len(result.nodes)
    with result:
        if ct.type.is_concrete:
            zero = add_constant(result, np.zeros((), ct.type.dtype))
            value = S.broadcast_to(zero, ct.type.shape) if ct.type.shape else zero
        else:  # the shape of the output it seeds, whose value is computed by now
            output = ct.meta["grad_of"]
            value = E.zeros_like(Symbol(copies[joint.node(forward_of[output])]))
    assert isinstance(value, Symbol)
    for n in result.nodes[mark:]:
        name = fresh(f"zeros_{ct.name}" if n is value.node else n.name)
        if name != n.name:
            result.rename(n, name)
    return value.node


def tangents(
    g: Graph, wrt: Sequence[str] | str, outputs: Sequence[str] | str | None = None
) -> Graph:
    """The forward-mode graph: `g`'s outputs, then the tangent of each output.

    Each `wrt` placeholder x gets a tangent placeholder ``tan_x`` (after `g`'s); each
    differentiated output y (`outputs`, all floating point ones by default) a tangent
    output ``tan_y`` = J t, the Jacobian-vector product. Derived from the VJP by
    transposition, exact (see the module docstring for how, and what it costs); the
    result is an ordinary graph: printable, compilable, differentiable again.

    >>> import numpy as np, graphc as gc
    >>> g = gc.trace(lambda x: gc.sin(x) * x, gc.TensorSpec((2,), "float64"))
    >>> tg = gc.tangents(g, wrt=["x"])
    >>> [p.name for p in tg.inputs], [o.name for o in tg.outputs]
    (['x', 'tan_x'], ['out', 'tan_out'])
    >>> x = np.array([0.0, 1.0])
    >>> np.allclose(tg(x, np.ones(2))[1], np.cos(x) * x + np.sin(x))
    True
    """
    return forward_joint(g, wrt, outputs).graph


def split_tangents(
    g: Graph,
    wrt: Sequence[str] | str,
    outputs: Sequence[str] | str | None = None,
    rerun_loops: bool = False,
) -> tuple[Graph, Graph, ForwardJoint]:
    """The forward-mode graph cut in two, as `jax.linearize` does: a primal graph giving
    `g`'s outputs, then ``saved_<name>`` for each residual (a value of the primal part
    that a tangent node reads); and a linear graph from those residuals (placeholders
    named after them, in the same order) and the ``tan_<input>`` placeholders to the
    tangent outputs. The primal graph runs once; the linear one per tangent.

    A while_loop on the differentiated path computes its primal carries beside the
    tangents: refused by name, unless `rerun_loops`, when the linear graph is the whole
    forward-mode graph and its residuals are `g`'s inputs (each run reruns the loop, as
    jax.linearize's linear function does with lax.while_loop).

    >>> import numpy as np, graphc as gc
    >>> from graphc.passes.forward import split_tangents
    >>> g = gc.trace(lambda x: gc.exp(x) * 2.0, gc.TensorSpec((2,), "float64"))
    >>> primal, linear, _ = split_tangents(g, wrt=["x"])
    >>> [o.name for o in primal.outputs], [p.name for p in linear.inputs]
    (['out', 'saved_exp'], ['exp', 'tan_x'])
    """
    fj = forward_joint(g, wrt, outputs)
    graph = fj.graph
    varying: set[Node] = {graph.node(name) for name in fj.tangent_inputs}
    for n in graph.nodes:
        if n.kind != PLACEHOLDER and any(x in varying for x in n.inputs):
            varying.add(n)
            if _holds_while(n) and rerun_loops:
                return _split_rerunning(g, fj)
            if _holds_while(n):
                raise AutodiffError(
                    f"linearize: graph '{g.name}' has a while_loop on the differentiated "
                    f"path ({n.describe()}); its tangent loop computes the primal carries "
                    "beside the tangents, so it has no primal part to run once: use "
                    "gc.jvp, which runs both"
                )
    tangent_values = [graph.node(name).inputs[0] for name in fj.tangent_outputs]
    read = [x for n in graph.nodes if n in varying and n.kind != OUTPUT for x in n.inputs]
    read += tangent_values
    saved = [
        n
        for n in graph.nodes
        if n not in varying and not n.is_constant and n in set(read) and n.kind != OUTPUT
    ]

    primal = Graph(f"{g.name}_primal")
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        if n.kind != OUTPUT and n not in varying:
            primal.append_copy(n, copies)
    for o in g.outputs:
        primal.add_output(copies[graph.node(o.name).inputs[0]], o.name, meta=o.meta)
    for n in saved:
        primal.add_output(copies[n], primal.fresh_name(f"saved_{n.name}"), meta=dict(n.meta))

    linear = Graph(f"{g.name}_linear")
    lcopies: dict[Node, Node] = {}
    for n in saved:
        lcopies[n] = linear.add_placeholder(n.name, n.type, meta=dict(n.meta))
    for name in fj.tangent_inputs:
        linear.append_copy(graph.node(name), lcopies)
    constants = {x for x in read if x.is_constant}
    for n in graph.nodes:
        if n.kind != OUTPUT and n not in lcopies and (n in constants or n in varying):
            linear.append_copy(n, lcopies)
    for name, value in zip(fj.tangent_outputs, tangent_values):
        linear.add_output(lcopies[value], name, meta=graph.node(name).meta)
    return eliminate_dead_code(primal), linear, fj


def _split_rerunning(g: Graph, fj: ForwardJoint) -> tuple[Graph, Graph, ForwardJoint]:
    """`split_tangents` of a graph whose tangents pass through a while_loop: that loop
    computes its primal carries beside the tangents, so the linear part is the whole
    forward-mode graph (its primal outputs dropped), the primal inputs its residuals,
    and each of its runs reruns the loop (as jax.linearize's linear function does)."""
    primal = Graph(f"{g.name}_primal")
    copies: dict[Node, Node] = {}
    for n in g.nodes:
        if n.kind != OUTPUT:
            primal.append_copy(n, copies)
    for o in g.outputs:
        primal.add_output(copies[o.inputs[0]], o.name, meta=o.meta)
    for p in g.inputs:
        primal.add_output(copies[p], primal.fresh_name(f"saved_{p.name}"), meta=dict(p.meta))
    linear = Graph(f"{g.name}_linear")
    lcopies: dict[Node, Node] = {}
    for n in fj.graph.nodes:
        if n.kind != OUTPUT:
            linear.append_copy(n, lcopies)
    for name in fj.tangent_outputs:
        node = fj.graph.node(name)
        linear.add_output(lcopies[node.inputs[0]], name, meta=node.meta)
    return eliminate_dead_code(primal), eliminate_dead_code(linear), fj
