"""The visual conventions every picture shares, and the legend that explains them.

One table of node styles keyed by role, so a placeholder looks the same in a forward
graph, a backward graph, a pass diff and an eager tape. Colours are chosen to stay
distinguishable in greyscale print: forward values are cool, backward values warm.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from typing import Any

import graphviz

from graphc.ir.types import TensorType

FONT = "Helvetica"
BACKWARD_COLOR = "#c0392b"
SAVED_COLOR = "#e67e22"
REMOVED_COLOR = "#b0b0b0"
ADDED_COLOR = "#1e8449"
FUSED_COLOR = "#6c3483"
CONTROL_COLOR = "#2e86c1"

# Node attributes by role. "op" and "backward" are the ones most nodes get.
ROLES: dict[str, dict[str, str]] = {
    "placeholder": {"shape": "invhouse", "style": "filled", "fillcolor": "#d6eaf8"},
    "constant": {"shape": "note", "style": "filled", "fillcolor": "#eeeeee"},
    "op": {"shape": "box", "style": "rounded,filled", "fillcolor": "#fef9e7"},
    "output": {"shape": "doubleoctagon", "style": "filled", "fillcolor": "#d5f5e3"},
    "backward": {
        "shape": "box",
        "style": "rounded,filled",
        "fillcolor": "#fadbd8",
        "color": BACKWARD_COLOR,
    },
    "backward_output": {
        "shape": "doubleoctagon",
        "style": "filled",
        "fillcolor": "#fadbd8",
        "color": BACKWARD_COLOR,
    },
    "seed": {
        "shape": "invhouse",
        "style": "filled",
        "fillcolor": "#fadbd8",
        "color": BACKWARD_COLOR,
    },
    "saved": {
        "shape": "invhouse",
        "style": "filled,bold",
        "fillcolor": "#fdebd0",
        "color": SAVED_COLOR,
    },
    "saved_output": {
        "shape": "doubleoctagon",
        "style": "filled",
        "fillcolor": "#fdebd0",
        "color": SAVED_COLOR,
    },
    "fused": {"shape": "box", "style": "rounded,filled,bold", "fillcolor": "#ebdef0"},
    "collapsed": {"shape": "box3d", "style": "filled", "fillcolor": "#f2f3f4"},
    # control flow: the head of a cond/scan/while_loop cluster, the values its bodies
    # give back, and the `result` nodes that read them (compact: they only project)
    # ordering=out: the bodies hang from the head in order, a cond's true branch left
    "control": {"shape": "hexagon", "style": "filled", "fillcolor": "#d4e6f1", "ordering": "out"},
    "body_output": {
        "shape": "oval",
        "style": "filled",
        "fillcolor": "#d5f5e3",
        "fontsize": "9",
        "height": "0.3",
        "margin": "0.04,0.02",
    },
    "result": {
        "shape": "oval",
        "style": "filled",
        "fillcolor": "#ffffff",
        "fontsize": "9",
        "height": "0.25",
        "margin": "0.04,0.02",
    },
    # pass diffs: what a pass removed, and what it added
    "removed": {
        "shape": "box",
        "style": "rounded,dashed",
        "color": REMOVED_COLOR,
        "fontcolor": REMOVED_COLOR,
    },
    "added": {
        "shape": "box",
        "style": "rounded,filled,bold",
        "fillcolor": "#d4efdf",
        "color": ADDED_COLOR,
        "penwidth": "2",
    },
    # eager tapes, after the tutorials' pictures
    "tensor": {"shape": "box", "style": "filled", "fillcolor": "#d6eaf8"},
    "root": {"shape": "box", "style": "filled", "fillcolor": "#d5f5e3"},
    "grad_fn": {"shape": "box", "style": "filled", "fillcolor": "#e5e7e9"},
    "accumulate": {"shape": "box", "style": "filled", "fillcolor": "#d6eaf8"},
}

# Edge attributes by meaning.
EDGES: dict[str, dict[str, str]] = {
    "data": {},
    "backward": {"color": BACKWARD_COLOR, "fontcolor": BACKWARD_COLOR},
    "saved": {"color": SAVED_COLOR, "fontcolor": SAVED_COLOR, "penwidth": "2"},
    # constraint=false: the link explains, it must not pull the layout apart
    "removed": {"style": "dashed", "color": REMOVED_COLOR, "fontcolor": REMOVED_COLOR},
    # a body output going round to the next step (the carry loop, a loop's test)
    "loop": {
        "style": "dashed",
        "color": CONTROL_COLOR,
        "fontcolor": CONTROL_COLOR,
        "penwidth": "1.5",
        "constraint": "false",
    },
    "grad_of": {
        "style": "dashed",
        "color": BACKWARD_COLOR + "99",  # translucent: the links explain, values matter more
        "arrowhead": "empty",
        "constraint": "false",
    },
}

LEGEND_TEXT: dict[str, str] = {
    "placeholder": "input (placeholder)",
    "constant": "constant",
    "op": "op",
    "output": "output",
    "backward": "backward op",
    "backward_output": "gradient output",
    "seed": "cotangent input",
    "saved_output": "saved for backward",
    "saved": "saved activation (backward input)",
    "fused": "fused group",
    "collapsed": "collapsed nodes",
    "control": "control flow (bodies in its cluster)",
    "body_output": "body output",
    "result": "result of control flow",
    "removed": "removed by this pass",
    "added": "added by this pass",
    "tensor": "leaf tensor",
    "root": "result tensor",
    "grad_fn": "grad_fn node",
    "accumulate": "AccumulateGrad",
}


def type_label(type: TensorType) -> str:
    """Shape and dtype as the text IR writes them: f32[B,3] (symbolic dims by name)."""
    return str(type)


def location(loc: str | None) -> str | None:
    """A user's file:line, relative to the working directory when it lies below it."""
    if not loc:
        return None
    path, sep, line = loc.rpartition(":")
    if not sep:
        return loc
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return loc
    return f"{path if rel.startswith('..') else rel}:{line}"


def dot_id(text: str) -> str:
    """A node id graphviz will not split: it reads ``a:b`` in an edge as node a, port b."""
    return text.replace(":", "%3A")


def html_label(title: str, *details: str) -> str:
    """A graphviz HTML label: a bold title and smaller grey detail lines."""
    parts = [f"<b>{html.escape(title)}</b>"]
    parts += [f'<font point-size="9" color="#555555">{html.escape(d)}</font>' for d in details if d]
    return "<" + "<br/>".join(parts) + ">"


def node_attrs(role: str, **extra: str) -> dict[str, str]:
    attrs = {"fontname": FONT, "fontsize": "11", **ROLES[role]}
    attrs.update({k: v for k, v in extra.items() if v is not None})
    return attrs


def edge_attrs(kind: str = "data", **extra: str) -> dict[str, str]:
    attrs = {"fontname": FONT, "fontsize": "9", **EDGES[kind]}
    attrs.update({k: v for k, v in extra.items() if v is not None})
    return attrs


def new_digraph(name: str, rankdir: str = "TB", **graph_attr: str) -> graphviz.Digraph:
    # newrank: dot's newer ranking, which keeps sibling clusters in the order they are
    # written (a cond's true branch left of its false branch) and survives edges between
    # many clusters, where the old one fails with "trouble in init_rank" (an unrolled
    # loop's optimized forward/backward pair did)
    return graphviz.Digraph(
        name,
        graph_attr={
            "rankdir": rankdir,
            "fontname": FONT,
            "nodesep": "0.3",
            "newrank": "true",
            **graph_attr,
        },
        node_attr={"fontname": FONT},
        edge_attr={"fontname": FONT},
    )


def add_legend(dot: graphviz.Digraph, roles: Iterable[str], edges: Iterable[str] = ()) -> None:
    """A boxed key: rows of the node roles and edge kinds that appear in the picture."""
    roles = [r for r in LEGEND_TEXT if r in set(roles)]
    edges = list(dict.fromkeys(edges))
    if not roles and not edges:
        return
    with dot.subgraph(name="cluster_legend") as key:
        key.attr(label="legend", fontname=FONT, fontsize="10", style="rounded", color="#999999")
        # each row is a list of (first id, last id) of its entries, left to right
        rows: list[list[tuple[str, str]]] = []
        for start in range(0, len(roles), 4):
            with key.subgraph() as row:
                row.attr(rank="same")
                entries = []
                for role in roles[start : start + 4]:
                    node_id = f"legend/{role}"
                    row.node(node_id, LEGEND_TEXT[role], **node_attrs(role, fontsize="9"))
                    entries.append((node_id, node_id))
                rows.append(entries)
        for start in range(0, len(edges), 2):
            with key.subgraph() as row:
                row.attr(rank="same")
                rows.append([_legend_edge(row, kind) for kind in edges[start : start + 2]])
        # invisible edges keep each row in order and the rows stacked
        for entries in rows:
            for (_, left), (right, _) in zip(entries, entries[1:]):
                key.edge(left, right, style="invis")
        for upper, lower in zip(rows, rows[1:]):
            key.edge(upper[0][0], lower[0][0], style="invis")


EDGE_TEXT = {
    "data": "value: dtype[shape]",
    "backward": "gradient flow",
    "saved": "saved value read by backward",
    "grad_of": "gradient of (backward → forward)",
    "loop": "to the next step",
    "removed": "edge of a removed node",
}


def _legend_edge(row: Any, kind: str) -> tuple[str, str]:
    """Two points joined by a sample edge; returns their ids."""
    a, b = f"legend/{kind}/from", f"legend/{kind}/to"
    point = {"shape": "point", "width": "0.06"}
    row.node(a, "", **point)
    row.node(b, "", **point)
    attrs = {k: v for k, v in EDGES.get(kind, {}).items() if k != "constraint"}
    row.edge(
        a, b, label=EDGE_TEXT.get(kind, kind), fontname=FONT, fontsize="9", minlen="3", **attrs
    )
    return a, b
