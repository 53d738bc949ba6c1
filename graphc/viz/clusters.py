"""Nodes with bodies drawn as clusters: fused groups, cond, scan and while_loop.

One mechanism serves every such node. The node's cluster holds one nested
`GraphPainter` per body (bodies.py says which bodies and how they are wired), so a
cond inside a scan inside a cond nests as clusters without any special case. After
painting, the outer painter learns where edges go:

- `entry[(node, i)]`: the ids operand i enters at, a body placeholder (in both
  branches of a cond, in the condition and the body of a while_loop), or for an
  inline fused body the members that read it;
- `result_sources[(node, k)]`: the body outputs that give result k, so the edges
  into a `result` node leave the cluster from them;
- `exit[node]`: for a fused node, the member whose value leaves the cluster.

Control-flow clusters also get a head node (the op, its attrs, the predicate's edge,
the anchor of backward → forward links) and the loop edges: a scan's carry outputs
go back, dashed, to the carry placeholders; a while_loop's to its condition and body,
and its condition's output to the head.

Invariant: every id put in `entry`, `result_sources` and `exit` is a node drawn
inside the cluster, so no edge points at an undrawn id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphc.ir.graph import OP, Node
from graphc.viz import style
from graphc.viz.bodies import Body, bodies_of

if TYPE_CHECKING:
    from graphc.viz.painter import GraphPainter

NODE_FILL = "#f4f6f7"  # a control-flow node's cluster; its bodies are white inside it
BODY_FILL = "#ffffff"


def paint_cluster(painter: GraphPainter, dot: Any, n: Node) -> None:
    """Draw node `n` of `painter`'s graph as a cluster around its bodies."""
    bodies = bodies_of(n)
    backward = n in painter.backward
    override = painter.role_overrides.get(n.name)  # "removed"/"added" in pass pictures
    prefix = f"{painter.prefix}{n.name}/"
    inline = bodies[0].inline
    children: list[GraphPainter] = []
    with dot.subgraph(name=f"cluster_{style.dot_id(prefix)}") as cluster:
        cluster.attr(**_node_cluster_attrs(painter, n, bodies, backward, override))
        if not inline:
            painter._paint_node(cluster, n)  # the head
        for body in bodies:
            roles = _body_roles(painter, n, body, override)
            if body.inline:
                child = painter.nested(body, prefix, roles, backward)
                child.paint(cluster)
            else:
                child = painter.nested(body, f"{prefix}{body.title}/", roles, backward)
                with cluster.subgraph(name=f"cluster_{style.dot_id(child.prefix)}") as sub:
                    sub.attr(**_body_cluster_attrs(body, backward, override))
                    child.paint(sub)
                _hang_below(cluster, painter.node_id(n), child)
            children.append(child)
        if not inline:
            _paint_loops(painter, cluster, n, bodies, children)
    for child in children:
        painter.roles |= child.roles
        painter.edge_kinds |= child.edge_kinds
    painter.roles.add("fused" if inline else "control")
    _wire(painter, n, bodies, children)


def _node_cluster_attrs(
    painter: GraphPainter, n: Node, bodies: list[Body], backward: bool, override: str | None
) -> dict[str, str]:
    if bodies[0].inline:
        # the ops a reader can count in the box: its constants are drawn as notes
        members = [m for m in bodies[0].graph.nodes if m.kind == OP and not m.is_constant]
        label, fill = f"{n.op}: {n.name} ({len(members)} ops)", "#f5eef8"
        color = style.BACKWARD_COLOR if backward else style.FUSED_COLOR
    else:
        label, fill = f"{n.op}: {n.name}", NODE_FILL
        color = style.BACKWARD_COLOR if backward else style.CONTROL_COLOR
    return {
        "label": style.plain(label, limit=style.LONGEST_DETAIL),
        "style": "rounded,dashed" if override == "removed" else "rounded,filled",
        "fillcolor": fill,
        "color": color if override is None else style.ROLES[override]["color"],
        "penwidth": "2",
        "fontname": style.FONT,
        "fontsize": "10",
        "tooltip": painter.tooltip(n),
    }


def _body_cluster_attrs(body: Body, backward: bool, override: str | None) -> dict[str, str]:
    color = style.BACKWARD_COLOR if backward else "#7f8c8d"
    return {
        "label": style.plain(f"{body.title}: {body.graph.name}", limit=style.LONGEST_DETAIL),
        "labeljust": "l",
        "style": "rounded,dashed" if override == "removed" else "rounded,filled",
        "fillcolor": BODY_FILL,
        "color": color if override is None else style.ROLES[override]["color"],
        "penwidth": "1",
        "fontname": style.FONT,
        "fontsize": "10",
    }


def _body_roles(painter: GraphPainter, n: Node, body: Body, override: str | None) -> dict[str, str]:
    """Roles the nested painter cannot see from inside the body.

    A pass picture's removed/added node marks its whole body. A backward node's body
    placeholders are the cotangents it carries (fed by backward values) or the forward
    values it reads (saved activations, as in the outer graph).
    """
    if override is not None:
        return {m.name: override for m in body.graph.nodes}
    if body.inline or n not in painter.backward:
        return {}
    roles = {}
    for p, operand in zip(body.graph.inputs, body.feeds):
        x = n.inputs[operand]
        saved = painter._edge_kind(x, n) in ("saved", "primal") or painter.role(x) in (
            "saved",
            "primal_input",
        )
        roles[p.name] = "saved" if saved else "seed"
    return roles


def _hang_below(cluster: Any, head: str, child: GraphPainter) -> None:
    """Invisible edges from the head to a body's roots keep the head above the body."""
    roots = [m for m in child.graph.nodes if not m.inputs]
    for target in dict.fromkeys(child.node_id(m) for m in roots):
        cluster.edge(head, target, style="invis")


def _paint_loops(
    painter: GraphPainter, cluster: Any, n: Node, bodies: list[Body], children: list[Any]
) -> None:
    grey = {}
    if painter.role_overrides.get(n.name) == "removed":
        grey = {"color": style.REMOVED_COLOR, "fontcolor": style.REMOVED_COLOR}
    for body, child in zip(bodies, children):
        for k, out in enumerate(body.graph.outputs):
            source = child.node_id(out)
            attrs = style.edge_attrs(
                "loop", label=body.outputs[k] if painter.options.edge_labels else None, **grey
            )
            targets = [
                children[b].node_id(bodies[b].graph.inputs[j])
                for b, j in (body.loops_to[k] if body.loops_to else ())
            ]
            if body.decides:
                targets.append(painter.node_id(n))
            for target in targets:
                cluster.edge(source, target, **attrs)
                painter.edge_kinds.add("loop")


def _wire(painter: GraphPainter, n: Node, bodies: list[Body], children: list[Any]) -> None:
    for body, child in zip(bodies, children):
        graph = body.graph
        for p, operand in zip(graph.inputs, body.feeds):
            if body.inline:  # no placeholder drawn: enter at the members reading it
                readers = [m for m in graph.nodes if m.kind == OP and p in m.inputs]
                targets = list(dict.fromkeys(child.node_id(m) for m in readers))
            else:
                targets = [child.node_id(p)]
            painter.entry.setdefault((n, operand), []).extend(targets)
        if body.inline:
            values = [o.inputs[0] for o in graph.outputs]
            if values and values[0].kind == OP:
                painter.exit[n] = child.node_id(values[0])
            continue
        for k, out in enumerate(graph.outputs):
            index = body.results[k]
            if index is None:
                continue
            stacked = "stacked" if body.outputs[k].endswith("[t]") else None
            label = stacked if painter.options.edge_labels else None
            painter.result_sources.setdefault((n, index), []).append((child.node_id(out), label))
