"""`to_dot`: one entry point for every picture graphc draws.

It looks at what it is given — a `Graph` (forward, backward or joint), a
``(forward, backward)`` pair from `split_backward`, an optimization report, or an
eager tensor — and hands it to the drawer for that kind of thing.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import graphviz

from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph, Node
from graphc.ir.verify import verify
from graphc.viz import style
from graphc.viz.painter import GraphPainter, Options, backward_nodes, guarded


def make_options(**options: Any) -> Options:
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise GraphcError(
            f"to_dot: unknown option(s) {', '.join(unknown)}; expected some of {', '.join(sorted(known))}"
        )
    # dot ignores a rankdir it does not know and draws top to bottom without a word
    rankdir = options.get("rankdir", "TB")
    if not isinstance(rankdir, str) or rankdir.upper() not in RANKDIRS:
        raise GraphcError(f"to_dot: rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    options["rankdir"] = rankdir.upper()
    title = options.get("title")
    if title is not None and not isinstance(title, str):
        raise GraphcError(f"to_dot: title must be a str, got {type(title).__name__} {title!r}")
    for name in ("max_chain", "max_repeat", "max_nodes", "max_tape_nodes"):
        value = options.get(name)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise GraphcError(f"to_dot: {name} must be a whole number >= 0 or None, got {value!r}")
    return Options(**options)


RANKDIRS = ("TB", "LR", "BT", "RL")  # top to bottom, left to right, and back


def finish(
    dot: graphviz.Digraph, painters: list[GraphPainter], options: Options, title: bool = True
) -> None:
    """Add the title and a legend of what `painters` drew."""
    if title and options.title:
        dot.attr(label=style.plain(*options.title.split("\n")), labelloc="t", fontsize="14")
    if options.legend:
        roles = set().union(*(p.roles for p in painters))
        edges = set().union(*(p.edge_kinds for p in painters))
        order = ["data", "backward", "tangent", "saved", "primal", "loop", "grad_of"]
        order += ["tangent_of", "removed"]
        style.add_legend(dot, roles, [e for e in order if e in edges])


def graph_to_dot(graph: Graph, options: Options) -> graphviz.Digraph:
    """A forward or joint graph: backward nodes coloured and linked to their forward node."""
    dot = style.new_digraph(graph.name, options.rankdir)
    try:
        painter = GraphPainter(graph, options)
        harder = guarded([painter], options)  # too big to read: collapsed harder
        if harder is not None:
            options, painter = harder, GraphPainter(graph, harder)
        painter.paint(dot)
    except (KeyError, TypeError, ValueError, IndexError, RecursionError):
        # a malformed graph (a cycle, a dangling input, a body holding the graph around
        # it): say what is wrong
        verify(graph)
        raise
    if backward_nodes(graph):
        painter.paint_grad_links(dot)
    if not graph.nodes:  # say so, rather than hand back a blank picture
        text = style.plain(f"graph {graph.name}: no nodes yet", "(add placeholders, ops, outputs)")
        dot.node("empty", text, shape="plaintext", fontname=style.FONT, fontsize="11")
    finish(dot, [painter], options)
    return dot


def pair_to_dot(forward: Graph, backward: Graph, options: Options) -> graphviz.Digraph:
    """The forward graph and its backward graph side by side, saved values linking them."""
    dot = style.new_digraph(f"{forward.name} + {backward.name}", options.rankdir, compound="true")
    sources = {p: _forward_source(forward, p) for p in backward.inputs}
    saved_outputs = {s.name: "saved_output" for s in sources.values() if s is not None}
    fwd = GraphPainter(forward, options, prefix="forward/", role_overrides=saved_outputs)
    bwd = GraphPainter(backward, options, prefix="backward/", backward=True)
    harder = guarded([fwd, bwd], options)  # too big to read: collapsed harder
    if harder is not None:
        options = harder
        fwd = GraphPainter(forward, options, prefix="forward/", role_overrides=saved_outputs)
        bwd = GraphPainter(backward, options, prefix="backward/", backward=True)
    second = "linear" if bwd.tangents else "backward"  # split_tangents' linear part
    for painter, title, color in (
        (fwd, f"forward: {forward.name}", "#2e86c1"),
        (bwd, f"{second}: {backward.name}", style.BACKWARD_COLOR),
    ):
        with dot.subgraph(name=f"cluster_{painter.prefix}") as cluster:
            cluster.attr(
                label=style.plain(title, limit=style.LONGEST_DETAIL),
                color=color,
                style="rounded",
                fontname=style.FONT,
            )
            painter.paint(cluster)
    # each saved input of the backward graph is fed by the forward value of that name
    # (once per pair of drawn nodes: collapsed steps save many values each)
    drawn: set[tuple[str, str]] = set()
    for p, source in sources.items():
        if source is not None and bwd.role(p) == "saved":
            pair = (fwd.node_id(source), bwd.node_id(p))
            if pair not in drawn:
                drawn.add(pair)
                dot.edge(*pair, **style.edge_attrs("saved"))
            bwd.edge_kinds.add("saved")
    bwd.paint_grad_links(dot, forward=fwd)
    finish(dot, [fwd, bwd], options)
    return dot


def _is_tensor(obj: Any) -> bool:
    from graphc.viz import tape

    return tape.is_tensor(obj)


def _forward_source(forward: Graph, saved: Node) -> Node | None:
    """The forward output that carries backward input `saved` (split_backward's saved_<name>)."""
    for o in forward.outputs:
        if o.inputs[0].name == saved.name and o.name.startswith("saved_"):
            return o
    return None


def to_dot(obj: Any, **options: Any) -> graphviz.Digraph:
    """A graphviz picture of a graph, a (forward, backward) pair, a report or an eager tensor.

    Options: edge_labels, legend, max_chain, max_repeat, grad_links, rankdir, title,
    max_nodes (the size guard: a bigger picture is collapsed harder, a node per name
    scope, with a hint to `graphc view`; None turns it off), and for eager tensors
    names={"w": w, ...} to label leaf tensors and max_tape_nodes (80: the backward
    nodes nearest the tensor are drawn, the rest counted in one node; None draws all).

    >>> import graphc as gc
    >>> g = gc.Graph("double")
    >>> with g:
    ...     x = gc.placeholder("x", shape=("B", 3))
    ...     _ = gc.output(x * 2, name="y")
    >>> "f32[B,3]" in gc.viz.to_dot(g).source
    True
    """
    opts = make_options(**options)
    if opts.names is not None and not _is_tensor(obj):
        raise GraphcError(
            "to_dot: names labels an eager tensor's tape; a graph's nodes are labelled by their "
            "own names (name them when building: gc.placeholder('w', ...))"
        )
    if isinstance(obj, Graph):
        return graph_to_dot(obj, opts)
    if isinstance(obj, tuple) and len(obj) == 2 and all(isinstance(g, Graph) for g in obj):
        return pair_to_dot(obj[0], obj[1], opts)
    from graphc.viz import report, tape

    if report.is_report(obj):
        return report.report_to_dot(obj, opts)
    if tape.is_tensor(obj):
        return tape.tensor_to_dot(obj, opts)
    hint = ""
    if hasattr(obj, "graph_for"):  # a gc.jit function: its graph per call signature
        hint = "; a jitted function's graph for some arguments is fn.graph_for(*args)"
    elif callable(obj):
        hint = "; trace a function first: gc.trace(fn, gc.TensorSpec((2, 3)), ...)"
    raise GraphcError(
        f"to_dot: cannot draw a {type(obj).__name__}; expected a Graph, a (forward, backward) "
        f"pair of Graphs, an optimization report or an eager Tensor{hint}"
    )
