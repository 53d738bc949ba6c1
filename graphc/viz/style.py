"""The visual conventions every picture shares, and the legend that explains them.

One table of node styles keyed by role, so a placeholder looks the same in a forward
graph, a backward graph, a pass diff and an eager tape. Colours are chosen to stay
distinguishable in greyscale print: forward values are cool, backward values warm.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable

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

# forward mode (gc.tangents): tangents look as gradients do, their legend in their words
ROLES["tangent"] = ROLES["backward"]
ROLES["tangent_output"] = ROLES["backward_output"]
ROLES["tangent_input"] = ROLES["seed"]
ROLES["primal_input"] = ROLES["saved"]

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

EDGES["tangent"] = EDGES["backward"]
EDGES["primal"] = EDGES["saved"]
EDGES["tangent_of"] = EDGES["grad_of"]

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
    "tangent": "tangent op (forward mode)",
    "tangent_output": "tangent output",
    "tangent_input": "tangent input",
    "primal_input": "primal value (body input)",
    "fused": "fused group",
    "collapsed": "collapsed nodes",
    "control": "control flow: cond, scan, while_loop",
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


# characters a node id must not hold as they are: graphviz reads ``a:b`` in an edge as
# node a, port b; a backslash before the closing quote, a quote, or an id that starts
# with "<" and ends with ">" (an HTML string to the graphviz package) break the DOT
# text; line breaks make it unreadable. "%" first, so the encoding stays one to one.
_ID_ESCAPES = {c: f"%{ord(c):02X}" for c in '%:\\"<>'}


def dot_id(text: str) -> str:
    """A node or cluster id that graphviz reads back as the one id it names: the
    characters DOT gives a meaning to, and control characters, percent-encoded.

    graphviz takes an id that starts with "%" for one of its own anonymous ids (a node
    named ``"a`` would be drawn as another, nameless one), so such an id gets a leading "." (and a name
    starting with "." has it encoded, so that the encoding stays one to one)."""
    encoded = "".join(
        _ID_ESCAPES.get(c) or (f"%{ord(c):02X}" if ord(c) < 32 or c == "\x7f" else c) for c in text
    )
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    return "." + encoded if encoded.startswith("%") else encoded


LONGEST_NAME = 48  # characters of a user's name a label shows; the tooltip has it all
LONGEST_DETAIL = 72  # of a detail line (attributes, the forward node a gradient is of)


def visible(text: str, limit: int | None = LONGEST_NAME) -> str:
    """`text` as a label shows it: control characters written as the text IR writes them
    (a newline in a name is ``\\n``, not a line break), and a very long name cut in the
    middle, so both its start and its numbered end stay readable."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    if limit is not None and len(text) > limit:
        head = limit * 2 // 3
        text = f"{text[:head]}…{text[len(text) - (limit - head - 1) :]}"
    return text


def _entities(text: str) -> str:
    """graphviz reads HTML entities in plain labels and tooltips too (``&amp;`` is drawn
    as ``&``), so a name holding one is written with its ``&`` as an entity."""
    return text.replace("&", "&amp;")


# graphviz reads escapes (``\\N`` the node's name, ``\\G`` the graph's, ``\\l`` a line
# break) in labels, HTML labels included, where ``\\\\`` gives one backslash; a tooltip is
# unescaped once more before that, so one backslash takes four there.
LABEL_BACKSLASH = "\\" * 2
TOOLTIP_BACKSLASH = "\\" * 4


def plain(*lines: str, left: bool = False, limit: int | None = None) -> str:
    """A plain (non-HTML) label of `lines` shown as written: backslashes escaped, the
    lines joined by DOT line breaks (``\\l`` after each: left-justified), marked as no
    HTML (so ``<x>`` is text)."""
    escaped = [_entities(visible(line, limit)).replace("\\", LABEL_BACKSLASH) for line in lines]
    text = "".join(f"{line}\\l" for line in escaped) if left else "\\n".join(escaped)
    return graphviz.nohtml(text)


def tooltip(*lines: str) -> str:
    """A tooltip of `lines` (a node's or a cluster's hover text), shown as written."""
    escaped = [_entities(visible(line, None)).replace("\\", TOOLTIP_BACKSLASH) for line in lines]
    return graphviz.nohtml("\\n".join(escaped))


def html_label(title: str, *details: str) -> str:
    """A graphviz HTML label: a bold title and smaller grey detail lines."""

    def text(line: str, limit: int) -> str:
        return html.escape(visible(line, limit)).replace("\\", LABEL_BACKSLASH)

    parts = [f"<b>{text(title, LONGEST_NAME)}</b>"]
    parts += [
        f'<font point-size="9" color="#555555">{text(d, LONGEST_DETAIL)}</font>'
        for d in details
        if d
    ]
    return "<" + "<br/>".join(parts) + ">"


def node_attrs(role: str, **extra: str) -> dict[str, str]:
    attrs = {"fontname": FONT, "fontsize": "11", **ROLES[role]}
    attrs.update({k: v for k, v in extra.items() if v is not None})
    return attrs


def edge_attrs(kind: str = "data", **extra: str) -> dict[str, str]:
    """An edge's attributes; its `label` is text (a type's symbolic dims are user names)."""
    attrs = {"fontname": FONT, "fontsize": "9", **EDGES[kind]}
    attrs.update({k: v for k, v in extra.items() if v is not None})
    if "label" in attrs:
        attrs["label"] = plain(attrs["label"])
    return attrs


def new_digraph(name: str, rankdir: str = "TB", **graph_attr: str) -> graphviz.Digraph:
    # newrank: dot's newer ranking, which keeps sibling clusters in the order they are
    # written (a cond's true branch left of its false branch) and survives edges between
    # many clusters, where the old one fails with "trouble in init_rank" (an unrolled
    # loop's optimized forward/backward pair did)
    return graphviz.Digraph(
        dot_id(name),
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
    """A compact key: one small table node, two entries a row, of the node roles (a
    swatch of their fill and border) and edge kinds (a sample line in their colour) that
    appear in the picture. One node, so the key never widens the layout more than its
    own few centimetres (a cluster of sample nodes took a third of it). It lands at the
    top, beside the inputs: under newrank (new_digraph) dot ignores rank=sink."""
    roles = [r for r in LEGEND_TEXT if r in set(roles)]
    edges = list(dict.fromkeys(edges))
    if not roles and not edges:
        return
    cells = [_role_cell(role) for role in roles] + [_edge_cell(kind) for kind in edges]
    rows = ["".join(cells[i : i + LEGEND_COLUMNS]) for i in range(0, len(cells), LEGEND_COLUMNS)]
    table = (
        '<table border="0" cellborder="0" cellspacing="2" cellpadding="1">'
        f'<tr><td colspan="{2 * LEGEND_COLUMNS}" align="left"><b>legend</b></td></tr>'
        + "".join(f"<tr>{row}</tr>" for row in rows)
        + "</table>"
    )
    with dot.subgraph(name="legend") as key:
        key.attr(rank="sink")
        key.node(LEGEND_ID, f"<{table}>", shape="plaintext", fontname=FONT, fontsize="8")


LEGEND_ID = "legend/key"
LEGEND_COLUMNS = 2


def _role_cell(role: str) -> str:
    attrs = ROLES[role]
    fill = attrs.get("fillcolor", "#ffffff") if "filled" in attrs.get("style", "") else "#ffffff"
    border = attrs.get("color", "#555555")
    swatch = f'<td bgcolor="{fill}" color="{border}" border="1" width="14" height="9"></td>'
    return f'{swatch}<td align="left">{html.escape(LEGEND_TEXT[role])}</td>'


def _edge_cell(kind: str) -> str:
    attrs = EDGES.get(kind, {})
    color = attrs.get("color", "#000000")[:7]  # without a translucency suffix
    line = "╌╌▷" if attrs.get("style") == "dashed" else "──▶"
    sample = f'<td><font color="{color}">{line}</font></td>'
    return f'{sample}<td align="left">{html.escape(EDGE_TEXT.get(kind, kind))}</td>'


EDGE_TEXT = {
    "data": "value: dtype[shape]",
    "backward": "gradient flow",
    "saved": "saved value read by backward",
    "grad_of": "gradient of (backward → forward)",
    "tangent": "tangent flow",
    "primal": "primal value read by a tangent op",
    "tangent_of": "tangent of (tangent → primal)",
    "loop": "to the next step",
    "removed": "edge of a removed node",
}
