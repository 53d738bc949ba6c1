"""Custom-gradient nodes for execution: each `custom_vjp` node (gc.custom_vjp,
gc.custom_jvp, gc.stop_gradient, a traced autograd.Function, a value traced under
no_grad) replaced by the ops of its forward body.

The node exists so that gradients follow the user's backward; a plan computes only its
forward, which the op's kernel would evaluate body node by body node, apart from the
ops around it. So a backend's fusion step, which runs after every gradient is taken
(gc.fuse: differentiate, export or split a graph before fusing it), first puts the
forward's ops in the node's place, where they fuse with their neighbours. The names
of the copied ops are the node's name and the body node's, made unique.
"""

from __future__ import annotations

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.passes.pipeline import PassLog


def inline_custom_forwards(
    graph: Graph, log: PassLog | None = None, keep: frozenset[str] = frozenset()
) -> Graph:
    """`graph` with each custom_vjp node's forward ops in its place (the graph itself
    when it has none). A node whose forward holds an op of `keep` stays: a backend whose
    own kernels compute those ops with other bits than the node's kernel (numpy's,
    evaluating the body) keeps them where every level computes them alike."""
    customs = [n for n in graph.nodes if _inlinable(n, keep)]
    if not customs:
        return graph
    taken = {n.name for n in graph.nodes}
    out = Graph(graph.name)
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        if n in customs:
            copies[n] = _replay(n, out, copies, taken)
        else:
            out.append_copy(n, copies)
    if log is not None:
        log.note(f"inlined the forward of {len(customs)} custom-gradient node(s)")
    return out


def _inlinable(n: Node, keep: frozenset[str]) -> bool:
    """A custom_vjp node whose forward body is typed exactly as its inputs (so its ops
    can be copied as they are) and holds no op of `keep`."""
    if n.kind != OP or n.op != "custom_vjp":
        return False
    body = n.attrs["forward"]
    return (
        len(body.inputs) == len(n.inputs)
        and all(p.type == x.type for p, x in zip(body.inputs, n.inputs))
        and not any(b.kind == OP and b.op in keep for b in body.nodes)
    )


def _replay(n: Node, out: Graph, copies: dict[Node, Node], taken: set[str]) -> Node:
    """Copy the forward body's ops of custom node `n` into `out`; the node of its value."""
    body = n.attrs["forward"]
    inner: dict[Node, Node] = {}
    for b in body.nodes:
        if b.kind == PLACEHOLDER:
            inner[b] = copies[n.inputs[body.inputs.index(b)]]
        elif b.kind == OUTPUT:
            return inner[b.inputs[0]]
        else:
            name = _unique(f"{n.name}_{b.name}", taken)
            inputs = tuple(inner[x] for x in b.inputs)
            inner[b] = out.append(Node(name, OP, b.op, inputs, b.attrs, b.type, b.meta))
    raise AssertionError(f"custom node '{n.name}': its forward body has no output")


def _unique(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name
