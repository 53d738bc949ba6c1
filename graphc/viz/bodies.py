"""What the bodies of a node mean, for drawing: which operand feeds which placeholder.

Nodes whose attrs hold subgraphs are drawn as clusters around their bodies. The
picture needs, per body, the wiring the op's semantics imply (graphc/ops/control.py,
graphc/backends/numpy/nodes/fused.py), and nothing else about the op:

- which of the node's operands feeds each body placeholder (a cond's operand 0 is
  its predicate and feeds no branch; a while_loop's carries feed both the condition
  and the body);
- what each placeholder and body output stands for ("carry 0", "x 1", "const"), so
  a reader need not count operands;
- which of the node's results each body output becomes (what its `result` nodes
  read), and which placeholders it feeds at the next step (the carry loop).

A `fused` body is *inline*: its placeholders and output are not drawn, the edges
enter at the members that read them. Control-flow bodies draw their placeholders
and outputs, since carries and slices are what a reader needs to see.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphc.ir.errors import UnknownOpError
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op

# (body index, placeholder index): where a body output goes at the next step
Target = tuple[int, int]


@dataclass(frozen=True)
class Body:
    """One body of a node, with its wiring to the node's operands and results."""

    graph: Graph
    title: str  # the body's cluster title: "true", "false", "body", "condition"
    feeds: tuple[int, ...]  # per placeholder: the node's operand that feeds it
    inputs: tuple[str, ...]  # per placeholder: what it stands for
    outputs: tuple[str, ...]  # per output: what it stands for
    results: tuple[int | None, ...]  # per output: the node's result it becomes
    loops_to: tuple[tuple[Target, ...], ...] = ()  # per output: placeholders it feeds next
    inline: bool = False  # drawn without its placeholders and outputs (fused)
    decides: bool = False  # its one output decides whether the loop goes on


def has_bodies(n: Node) -> bool:
    return bool(bodies_of(n))


def is_control(n: Node) -> bool:
    """A node drawn as a cluster with a head node (control flow, not fusion)."""
    return has_bodies(n) and not bodies_of(n)[0].inline


def bodies_of(n: Node) -> list[Body]:
    """The node's bodies in drawing order (left to right), or [] for an ordinary node."""
    if _holds_bodies(n):
        if n.op == "cond":
            return _cond(n)
        if n.op == "scan":
            return [_scan(n)]
        if n.op == "while_loop":
            return _while(n)
    keys = get_op(n.op).bodies if _holds_bodies(n) else ()
    if len(keys) == 1:  # fused groups, and any other op of one body: drawn inline
        body = n.attrs[keys[0]]
        count = len(body.inputs)
        return [
            Body(
                body,
                "",
                tuple(range(count)),
                ("",) * count,
                ("",) * len(body.outputs),
                (None,) * len(body.outputs),
                inline=True,
            )
        ]
    return []


def _holds_bodies(n: Node) -> bool:
    """Whether `n`'s op declares bodies (`OpDef.bodies`) and each of those attrs holds
    a Graph."""
    if n.kind != OP:
        return False
    try:
        keys = get_op(n.op).bodies
    except UnknownOpError:  # a graph not verified yet is drawn all the same
        return False
    return bool(keys) and all(isinstance(n.attrs.get(k), Graph) for k in keys)


def _cond(n: Node) -> list[Body]:
    bodies = []
    for key, title in (("then_body", "true"), ("else_body", "false")):
        body: Graph = n.attrs[key]
        count, outs = len(body.inputs), len(body.outputs)
        bodies.append(
            Body(
                body,
                title,
                feeds=tuple(range(1, count + 1)),  # operand 0 is the predicate
                inputs=tuple(f"operand {k}" for k in range(count)),
                outputs=tuple(f"result {k}" for k in range(outs)),
                results=tuple(range(outs)),
            )
        )
    return bodies


def _scan(n: Node) -> Body:
    body: Graph = n.attrs["body"]
    carries, xs = int(n.attrs.get("num_carry", 0)), int(n.attrs.get("num_xs", 0))
    inputs = [f"carry {k}" for k in range(carries)]
    inputs += [f"x {k} [t]" for k in range(xs)]  # one slice per step
    inputs += ["const"] * (len(body.inputs) - carries - xs)
    outs = len(body.outputs)
    outputs = [f"carry {k}" if k < carries else f"y {k - carries} [t]" for k in range(outs)]
    return Body(
        body,
        "body",
        feeds=tuple(range(len(body.inputs))),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        results=tuple(range(outs)),
        loops_to=tuple(((0, k),) if k < carries else () for k in range(outs)),
    )


def _while(n: Node) -> list[Body]:
    test: Graph = n.attrs["cond_body"]
    body: Graph = n.attrs["body"]
    carries = int(n.attrs.get("num_carry", 0))
    test_consts = int(n.attrs.get("num_cond_consts", 0))

    def wiring(graph: Graph, first_const: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
        consts = len(graph.inputs) - carries
        feeds = tuple(range(carries)) + tuple(range(first_const, first_const + consts))
        return feeds, tuple(f"carry {k}" for k in range(carries)) + ("const",) * consts

    test_feeds, test_inputs = wiring(test, carries)
    body_feeds, body_inputs = wiring(body, carries + test_consts)
    # the new carries go to the condition, then (while it holds) to the body again
    loops = tuple(((0, k), (1, k)) for k in range(len(body.outputs)))
    return [
        Body(
            test,
            "condition",
            test_feeds,
            test_inputs,
            outputs=("go on?",) * len(test.outputs),
            results=(None,) * len(test.outputs),
            decides=True,
        ),
        Body(
            body,
            "body",
            body_feeds,
            body_inputs,
            outputs=tuple(f"carry {k}" for k in range(len(body.outputs))),
            results=tuple(range(len(body.outputs))),
            loops_to=loops,
        ),
    ]


def head_details(n: Node) -> str:
    """The attrs a control-flow node's head shows (its bodies show the rest)."""
    if n.op == "scan":
        reverse = ", reverse" if n.attrs.get("reverse") else ""
        return f"length={n.attrs.get('length')}{reverse}"
    return ""


def result_part(n: Node, index: int) -> str:
    """What result `index` of control-flow node `n` is: "carry 0", "ys 1", "result 0"."""
    if n.op == "scan":
        carries = int(n.attrs.get("num_carry", 0))
        return f"carry {index}" if index < carries else f"ys {index - carries}"
    if n.op == "while_loop":
        return f"carry {index}"
    return f"result {index}"
