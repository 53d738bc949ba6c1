"""What the viewer page embeds: each view's nodes, edges and groups as plain JSON data.

`views_of` turns what `gc.viz.view` accepts into named views: a `Graph` (a joint
forward + backward graph included), a ``(forward, backward)`` pair from
`split_backward`, an optimization report (the graph before, each pass that changed
it as the union of before and after, the graph after) or a dict of those by name.
`view_data` turns one view into the page's data. Names, attributes and source lines
are data here, never markup: the page puts them into the document as text.

One view's data, keys kept short since a 50,000-node graph embeds every node:

- ``nodes``: per node ``n`` name, ``o`` op (or kind), ``k`` kind, ``t`` type, ``r`` role,
  ``p`` its group, ``i`` the nodes it reads; where they apply ``l`` (an index into
  ``locs``, the source lines), ``a`` attributes as [name, text] pairs, ``g`` the forward
  node a backward node differentiates, ``s`` what a body's input or output stands for,
  ``c`` the scope path.
- ``groups``: per group (the root first) ``n`` label, ``k`` kind, ``p`` parent, ``z``
  nodes inside, ``c`` its children in order (a node id, or ``-1 - group id``), ``h``
  the node a control-flow group stands for.
- ``open``: the groups expanded when the page opens (`hierarchy.initial_open`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.graph import OUTPUT, PLACEHOLDER, Graph, Node
from graphc.viz.painter import format_constant, grad_of_name
from graphc.viz.report import changed_passes, is_report
from graphc.viz.viewer.hierarchy import Group, Hierarchy, build, initial_open

MAX_ATTR_TEXT = 300  # characters of one attribute's text in the details panel


@dataclass
class View:
    """One graph the page can show, with how to colour it."""

    name: str
    graph: Graph
    all_backward: bool = False  # a backward graph from split_backward: every node is
    roles: dict[str, str] = field(default_factory=dict)  # node name -> added / removed


def views_of(obj: Any, name: str = "") -> list[View]:
    """The views of what `gc.viz.view` was given (see the module docstring)."""
    if isinstance(obj, Graph):
        return [View(name or obj.name, obj)]
    if isinstance(obj, tuple) and len(obj) == 2 and all(isinstance(g, Graph) for g in obj):
        prefix = f"{name}: " if name else ""
        return [View(f"{prefix}forward", obj[0]), View(f"{prefix}backward", obj[1], True)]
    if is_report(obj):
        return _report_views(obj, name)
    if isinstance(obj, Mapping):
        return [view for key, value in obj.items() for view in views_of(value, str(key))]
    raise GraphcError(
        f"gc.viz.view: cannot show a {type(obj).__name__}; expected a Graph, a "
        "(forward, backward) pair from gc.split_backward, a report from "
        "gc.optimize(graph, level, explain=True), or a dict of those by view name"
    )


def _report_views(report: Any, name: str) -> list[View]:
    prefix = f"{name}: " if name else ""
    if not report.passes or report.passes[0].before is None:
        raise GraphcError(
            "gc.viz.view: the report kept no graphs; get it from "
            "gc.optimize(graph, level, explain=True)"
        )
    views = [View(f"{prefix}before O{report.level}", report.passes[0].before)]
    for index, log, union, roles in changed_passes(report):
        added = sum(r == "added" for r in roles.values())
        removed = len(roles) - added
        title = f"{prefix}pass {index} {log.name} (+{added} −{removed})"
        views.append(View(title, union, roles=roles))
    views.append(View(f"{prefix}after O{report.level}", report.passes[-1].after))
    return views


def view_data(view: View) -> dict[str, Any]:
    """One view as the page's data (see the module docstring)."""
    h = build(view.graph, all_backward=view.all_backward)
    locs: dict[str, int] = {}
    nodes = []
    for nid, n in enumerate(h.nodes):
        entry: dict[str, Any] = {
            "n": n.name,
            "o": str(n.op) if n.op else n.kind,
            "k": n.kind,
            "t": str(n.type),
            "r": _role(h, nid, view),
            "p": h.parent[nid],
            "i": h.inputs[nid],
        }
        loc = n.meta.get("loc")
        if loc:
            entry["l"] = locs.setdefault(str(loc), len(locs))
        attrs = _attrs(n)
        if attrs:
            entry["a"] = attrs
        target = grad_of_name(n)
        if target is not None:
            entry["g"] = target
        if h.part[nid]:
            entry["s"] = h.part[nid]
        if n.meta.get("scope"):
            entry["c"] = str(n.meta["scope"])
        nodes.append(entry)
    return {
        "name": view.name,
        "graph": view.graph.name,
        "nodes": nodes,
        "groups": [_group_data(g) for g in h.groups],
        "open": initial_open(h),
        "locs": list(locs),
    }


def _group_data(group: Group) -> dict[str, Any]:
    children = [-1 - item.id if isinstance(item, Group) else item for item in group.items]
    entry: dict[str, Any] = {
        "n": group.label,
        "k": group.kind,
        "p": group.parent,
        "z": group.size,
        "c": children,
    }
    if group.head is not None:
        entry["h"] = group.head
    return entry


def _role(h: Hierarchy, nid: int, view: View) -> str:
    """How the page colours a node: the static pictures' roles (style.py)."""
    n = h.nodes[nid]
    if n.name in view.roles and not h.part[nid]:
        return view.roles[n.name]
    backward = view.all_backward or h.backward[nid]
    if n.kind == PLACEHOLDER:
        if h.part[nid]:
            return "body_input"
        if grad_of_name(n) is not None or "tangent_of" in n.meta:
            return "seed"  # a cotangent, or a forward-mode graph's tangent input
        return "saved" if view.all_backward else "input"
    if n.kind == OUTPUT:
        if h.part[nid]:
            return "body_output"
        return "backward_output" if backward else "output"
    if n.is_constant:
        return "constant"
    if n.op == "result":
        return "result"
    return "backward" if backward else "op"


def _attrs(n: Node) -> list[list[str]]:
    shown = []
    for key, value in n.attrs.items():
        if isinstance(value, Graph):
            text = f"graph '{value.name}' ({len(value.nodes)} nodes)"
        elif isinstance(value, np.ndarray) or key == "value":
            array = np.asarray(value)
            small = format_constant(array)
            text = small if small is not None else f"array {array.dtype}{list(array.shape)}"
        else:
            text = str(value)
        if len(text) > MAX_ATTR_TEXT:
            text = text[: MAX_ATTR_TEXT - 1] + "…"
        shown.append([str(key), text])
    return shown
