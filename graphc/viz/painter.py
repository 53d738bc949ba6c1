"""Drawing one `Graph` into a graphviz picture (or into a cluster of a bigger one).

A `GraphPainter` decides a role for every node (placeholder, constant, op, output;
backward, seed or saved when the graph came from autodiff), asks `collapse` which
nodes to hide behind summary nodes, and emits graphviz nodes and edges. Node ids
carry a prefix so that several graphs (forward and backward, or one per pass) can
share one sheet. A node whose attrs hold bodies (fused, cond, scan, while_loop) is
drawn as a cluster: each body is painted by a nested painter, so bodies nest as
deeply as the IR does (clusters.py). The edges that enter such a node go to the body
placeholders its operands feed (or, in a fused body, to the members reading them);
a `result` node is a small node fed by the body outputs that give its value.

Backward nodes are recognised by ``meta["grad_of"]`` (set by autodiff) and by
depending on a backward node: a forward value never depends on a gradient. A
forward-mode graph (`gc.tangents`, whose tangent inputs and outputs carry
``meta["tangent_of"]``) is drawn the same way in its own words: tangent inputs, tangent
ops, primal values they read (nothing is saved), tangent outputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import graphviz
import numpy as np

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.viz import style
from graphc.viz.bodies import Body, bodies_of, has_bodies, head_details, is_control, result_part
from graphc.viz.clusters import paint_cluster
from graphc.viz.collapse import Collapse, plan_collapse


@dataclass
class Options:
    """What `to_dot` draws; every field is also a keyword of `to_dot`."""

    edge_labels: bool = True  # shape and dtype on every edge
    legend: bool = True
    max_chain: int | None = 12  # longer single-use chains collapse (None: never)
    max_repeat: int | None = 6  # more identical siblings collapse (None: never)
    grad_links: bool = True  # dashed backward → forward links
    rankdir: str = "TB"
    title: str | None = None
    names: Mapping[str, Any] | None = None  # eager tapes: leaf tensors by name
    # the size guard: a picture of more nodes than this (after collapsing) is drawn
    # collapsed harder, name scopes as single nodes, with a hint to `graphc view`
    max_nodes: int | None = 300
    # an eager tape's guard: its backward nodes nearest the result, the rest counted in
    # one node. dot's layout time grows steeply with a tape's depth when leaves feed
    # every step (an RNN's weights): 0.2 s for 10 steps, 3 s for 20, minutes for 40
    max_tape_nodes: int | None = 80
    group_scopes: bool = False  # one node per name scope (what the size guard sets)
    # a node with bodies as one node, its bodies not drawn (what the size guard sets)
    collapse_bodies: bool = False


VIEW_HINT = "drawn collapsed to stay readable: `graphc view` (gc.viz.view) shows every node"


def guarded(painters: list[GraphPainter], options: Options) -> Options | None:
    """The options for a harder-collapsed picture when `painters` would draw more than
    `options.max_nodes` nodes in all, else None."""
    drawn = sum(p.drawn_nodes() for p in painters)
    if options.max_nodes is None or options.group_scopes or drawn <= options.max_nodes:
        return None
    total = sum(len(p.graph.nodes) for p in painters)
    hint = f"{total} nodes, {VIEW_HINT}"
    return replace(
        options,
        max_chain=min(options.max_chain or 4, 4),
        max_repeat=min(options.max_repeat or 2, 2),
        group_scopes=True,
        collapse_bodies=True,
        title=f"{options.title}\n{hint}" if options.title else hint,  # a line each
    )


def grad_of_name(n: Node) -> str | None:
    """The name of the forward node that backward node `n` differentiates, if any."""
    target = n.meta.get("grad_of")
    if target is None:
        return None
    return target.name if isinstance(target, Node) else str(target)


def backward_nodes(graph: Graph) -> set[Node]:
    """Nodes autodiff produced (marked with grad_of, seeds included), or fed by such
    nodes; in a forward-mode graph, its tangent inputs and what they feed."""
    result: set[Node] = set()
    for n in graph.nodes:
        derived = grad_of_name(n) is not None or "tangent_of" in n.meta
        if derived or any(x in result for x in n.inputs):
            result.add(n)
    return result


def has_tangents(graph: Graph) -> bool:
    """Is `graph` a forward-mode graph (or its linear part): has it tangent inputs?"""
    return any("tangent_of" in p.meta for p in graph.inputs)


# what a gradient graph's roles and edge kinds are called in a forward-mode graph
TANGENT_ROLES = {
    "backward": "tangent",
    "backward_output": "tangent_output",
    "seed": "tangent_input",
    "saved": "primal_input",
}
TANGENT_EDGES = {"backward": "tangent", "saved": "primal", "grad_of": "tangent_of"}


def format_constant(value: Any) -> str | None:
    """A constant's value when it is small enough to read in a node, else None."""
    array = np.asarray(value)
    if array.size > 4:
        return None
    if array.ndim == 0:
        return (
            np.format_float_positional(array.item(), trim="-")
            if array.dtype.kind == "f"
            else str(array.item())
        )
    return np.array2string(array, precision=4, separator=", ")


ATTR_LINE = 40  # characters of attributes a detail line holds before the next one starts


def format_attrs(n: Node) -> list[str]:
    """The node's short attributes (key=value of 24 characters at most), a few to a line,
    so that a conv's five attributes make a box three lines high, not a page wide."""
    lines: list[str] = []
    for key, value in n.attrs.items():
        if key in ("value", "body") or isinstance(value, (Graph, np.ndarray)):
            continue
        text = f"{key}={value}"
        if len(text) > 24:
            continue
        if lines and len(lines[-1]) + 2 + len(text) <= ATTR_LINE:
            lines[-1] += f", {text}"
        else:
            lines.append(text)
    return lines


class GraphPainter:
    """Paints one graph; `roles`, `edge_kinds` and `ids` tell callers what it drew."""

    def __init__(
        self,
        graph: Graph,
        options: Options,
        prefix: str = "",
        role_overrides: dict[str, str] | None = None,
        backward: bool | None = None,
        body: Body | None = None,
        tangents: str | None = None,
    ) -> None:
        self.graph = graph
        self.options = options
        self.prefix = prefix
        self.role_overrides = role_overrides or {}
        # backward=True: the whole graph is a backward graph (from split_backward)
        self.all_backward = bool(backward)
        self.backward = set(graph.nodes) if backward else backward_nodes(graph)
        # a forward-mode graph, "joint" (gc.tangents) or "linear" (its linear part, drawn
        # beside the primal part that saves its inputs): its derived nodes are tangents
        # (a body learns it from the painter of the graph around it)
        self.tangents = tangents
        if tangents is None and has_tangents(graph):
            self.tangents = "linear" if backward else "joint"
        self.collapse: Collapse = plan_collapse(
            graph, options.max_chain, options.max_repeat, prefix=prefix, scopes=options.group_scopes
        )
        self.roles: set[str] = set()
        self.edge_kinds: set[str] = set()
        # a body drawn inside a node's cluster: what its placeholders and outputs stand
        # for; an inline (fused) body draws neither
        self.body = body
        self.inline = body is not None and body.inline
        self.parts: dict[Node, str] = {}
        if body is not None:
            self.parts.update(zip(graph.inputs, body.inputs))
            self.parts.update(zip(graph.outputs, body.outputs))
        self.entry: dict[tuple[Node, int], list[str]] = {}  # operand -> ids inside a cluster
        self.exit: dict[Node, str] = {}  # node -> the id its value leaves from
        # (node, result index) -> (id, edge label) of the body outputs that give the result
        self.result_sources: dict[tuple[Node, int], list[tuple[str, str | None]]] = {}
        self.alias = _duplicate_results(graph)  # autodiff may read one result twice

    def drawn_nodes(self) -> int:
        """How many nodes this painter draws (summaries counted once), the nodes of the
        bodies it draws as clusters included: an LSTM's scans hold most of its picture."""
        hidden = set(self.collapse.owner) | set(self.alias)
        shown = [n for n in self.graph.nodes if n not in hidden]
        inside = 0
        if not self.options.collapse_bodies:
            inside = sum(_body_nodes(n) for n in shown)
        return len(shown) + inside + len(self.collapse.groups)

    # -- ids and roles ----------------------------------------------------------

    def node_id(self, n: Node) -> str:
        n = self.alias.get(n, n)
        if n in self.exit:
            return self.exit[n]
        group = self.collapse.owner.get(n)
        return group.id if group is not None else style.dot_id(f"{self.prefix}{n.name}")

    def role(self, n: Node) -> str:
        role = self._role(n)
        if not self.tangents or (role == "saved" and self.tangents == "linear"):
            return role  # the linear part's inputs are saved by the primal part
        return TANGENT_ROLES.get(role, role)

    def kind(self, kind: str) -> str:
        """An edge kind, in forward-mode words when this is a forward-mode graph."""
        if not self.tangents or (kind == "saved" and self.tangents == "linear"):
            return kind
        return TANGENT_EDGES.get(kind, kind)

    def _role(self, n: Node) -> str:
        if n.name in self.role_overrides:
            return self.role_overrides[n.name]
        if n.kind == PLACEHOLDER:
            if "tangent_of" in n.meta:
                return "seed"  # a tangent input (forward mode)
            if self.tangents == "linear":
                return "saved"  # the linear part's other inputs: primal values saved
            # autodiff's cotangent inputs say which output they seed (grad_of)
            if grad_of_name(n) is not None:
                return "seed"
            if self.all_backward:  # split_backward's other inputs are saved forward values
                return "saved"
            return "placeholder"
        if n.is_constant:
            return "constant"
        if n.kind == OUTPUT and self.body is not None:
            return "body_output"
        if n.kind == OUTPUT:
            return "backward_output" if n in self.backward else "output"
        if is_control(n):
            return "control"
        if has_bodies(n):
            return "fused"
        if n.op == "result":
            return "result"
        return "backward" if n in self.backward else "op"

    def nested(
        self, body: Body, prefix: str, role_overrides: dict[str, str], backward: bool
    ) -> GraphPainter:
        """A painter for one body of a node of this graph, with the same options."""
        return GraphPainter(
            body.graph,
            self.options,
            prefix=prefix,
            role_overrides=role_overrides,
            backward=backward or None,
            body=body,
            tangents=self.tangents,
        )

    def label(self, n: Node) -> str:
        if n.kind == PLACEHOLDER:
            saved = "saved " if self.role(n) == "saved" else ""
            part = f"{self.parts[n]} · " if self.parts.get(n) else ""
            return style.html_label(n.name, part + saved + style.type_label(n.type))
        if n.kind == OUTPUT:
            return style.html_label(n.name, self.parts.get(n, ""))
        if n.op == "result":
            source, index = n.inputs[0], int(n.attrs.get("index", 0))
            shown = result_part(source, index) if is_control(source) else f"result {index}"
            return style.html_label(shown)
        if is_control(n):
            return style.html_label(str(n.op), *self._control_details(n))
        if n.is_constant:
            shown = format_constant(n.value)
            if shown is None:
                return style.html_label(n.name, style.type_label(n.type))
            plain = re.fullmatch(r"const(ant)?(_\d+)?", n.name)
            return style.html_label(shown, "" if plain else n.name)
        # a name of the program's (a variable's, a module's) is the title, its op below
        named = not re.fullmatch(rf"{re.escape(str(n.op))}(_\d+)?", n.name)
        details = [str(n.op)] if named else []
        details += format_attrs(n)
        target = grad_of_name(n)
        if target is not None:
            details.append(f"∂ of {target}")
        return style.html_label(n.name if named else str(n.op), *details)

    def _control_details(self, n: Node) -> list[str]:
        details = [head_details(n)]
        if self.options.collapse_bodies:  # the bodies are not drawn: say how big they are
            details.append(f"{_body_nodes(n)} nodes in its bodies, not drawn")
        if n.name != n.op and not re.fullmatch(rf"{re.escape(str(n.op))}_\d+", n.name):
            details.insert(0, n.name)
        target = grad_of_name(n)
        if target is not None:
            details.append(f"∂ of {target}")
        return details

    def tooltip_lines(self, n: Node) -> list[str]:
        what = n.op if n.kind == OP else n.kind
        lines = [f"{n.name} = {what}: {style.type_label(n.type)}"]
        loc = style.location(n.loc)
        if loc:
            lines.append(loc)
        return lines

    def tooltip(self, n: Node) -> str:
        return style.tooltip(*self.tooltip_lines(n))

    # -- painting ---------------------------------------------------------------

    def paint(self, dot: graphviz.Digraph) -> None:
        for n in self.graph.nodes:
            if n in self.collapse.owner or n in self.alias or (self.inline and n.kind != OP):
                continue
            if has_bodies(n) and not self.options.collapse_bodies:
                paint_cluster(self, dot, n)
            else:
                self._paint_node(dot, n)
        for group in self.collapse.groups:
            kinds = {self.role(m) for m in group.members if not m.is_constant}
            fill = (
                {"fillcolor": style.ROLES["backward"]["fillcolor"]}
                if kinds in ({"backward"}, {"tangent"})
                else {}
            )
            tip = style.tooltip(
                *(line for m in group.members[:20] for line in self.tooltip_lines(m))
            )
            label = style.plain(*group.label)
            dot.node(group.id, label, **style.node_attrs("collapsed", tooltip=tip, **fill))
            self.roles.add("collapsed")
        self._paint_edges(dot)

    def _paint_node(
        self, dot: Any, n: Node, node_id: str | None = None, role: str | None = None
    ) -> None:
        role = role or self.role(n)
        self.roles.add(role)
        extra = {}
        if role in ("control", "result", "body_output") and n in self.backward:
            # one shape per kind, and the backward colours on top, as ops get them
            extra = {
                "fillcolor": style.ROLES["backward"]["fillcolor"],
                "color": style.BACKWARD_COLOR,
            }
        dot.node(
            node_id or self.node_id(n),
            self.label(n),
            **style.node_attrs(role, tooltip=self.tooltip(n), **extra),
        )

    def _edge_style(self, x: Node, kind: str) -> dict[str, str]:
        label = style.type_label(x.type) if self.options.edge_labels else None
        if kind == "saved" and label is not None:
            label = f"saved {label}"
        self.edge_kinds.add(kind)
        return style.edge_attrs(kind, label=label)

    def _paint_edges(self, dot: graphviz.Digraph) -> None:
        drawn: set[tuple[str, str]] = set()
        held: set[tuple[str, str]] = set()  # invisible edges that only shape the layout
        for n in self.graph.nodes:
            if n in self.alias or (self.inline and n.kind != OP):
                continue
            if n.op == "result":
                self._paint_result_edge(dot, n)
                continue
            group = self.collapse.owner.get(n)
            for i, x in enumerate(n.inputs):
                if group is not None and self.collapse.owner.get(x) is group:
                    continue  # inside one summary node
                if self.inline and x.kind == PLACEHOLDER:
                    continue  # the cluster's entry edges stand for it
                targets = self.entry.get((n, i)) or [self.node_id(n)]
                source = self.node_id(x)
                head = self.node_id(n)
                if is_control(n) and head not in targets and (source, head) not in held:
                    # the head takes every operand, so the cluster starts below them all
                    held.add((source, head))
                    dot.edge(source, head, style="invis")
                for target in targets:
                    kind = self._edge_kind(x, n)
                    if (group or self.collapse.owner.get(x)) and (source, target) in drawn:
                        continue
                    drawn.add((source, target))
                    attrs = self._edge_style(x, kind)
                    if (
                        self.role_overrides.get(n.name) == "removed"
                        or self.role_overrides.get(x.name) == "removed"
                    ):
                        attrs.update(style.edge_attrs("removed"))
                        self.edge_kinds.add("removed")
                    dot.edge(source, target, **attrs)

    def _paint_result_edge(self, dot: graphviz.Digraph, n: Node) -> None:
        """Into a `result` node: from the body outputs that give it (both branches of a
        cond), else from the node with several results, labelled by the value's type (and
        the index, unless the result node names the part: "carry 0", "ys 1")."""
        x, index = n.inputs[0], int(n.attrs.get("index", 0))
        shown = style.type_label(n.type)
        fallback = (self.node_id(x), shown if is_control(x) else f"[{index}] {shown}")
        sources = self.result_sources.get((x, index)) or [fallback]
        kind = self._edge_kind(x, n)
        self.edge_kinds.add(kind)
        for source, label in sources:
            shown = label if self.options.edge_labels else None
            dot.edge(source, self.node_id(n), **style.edge_attrs(kind, label=shown))

    def _edge_kind(self, x: Node, n: Node) -> str:
        if n in self.backward and not self.all_backward:
            if x not in self.backward and n.kind == OP and not x.is_constant:
                return self.kind("saved")
            return self.kind("backward")
        return self.kind("backward") if self.all_backward else "data"

    def paint_grad_links(self, dot: graphviz.Digraph, forward: GraphPainter | None = None) -> None:
        """Dashed links from backward nodes to the forward node each differentiates.

        One vjp rule often makes several nodes (transpose then matmul); every one of
        them is labelled "∂ of <node>", and one link per rule, from the node that
        finishes it, is enough to find the forward node without a tangle of lines.
        Summary nodes (collapsed steps, chains, repeats) get no links: their members'
        links would all join the same few boxes.
        """
        if not self.options.grad_links:
            return
        forward = forward or self
        finishing: dict[tuple[str, str], Node] = {}  # (group, target) -> last node
        for n in self.graph.nodes:
            target = grad_of_name(n)
            if target is None or target not in forward.graph or n.is_constant:
                continue
            if n.op == "result" and grad_of_name(n.inputs[0]) == target:
                continue  # the control-flow node it reads finishes the rule
            key = (self._rule_group(n), target)
            if key in finishing and is_control(finishing[key]):
                continue  # a rule's loop or branch is its head (a scan's gradient may
                # end in a product of its stacks after the backward scan)
            finishing[key] = n
        drawn: set[tuple[str, str]] = set()
        summaries = {g.id for g in self.collapse.groups} | {g.id for g in forward.collapse.groups}
        for (_, target), n in finishing.items():
            pair = (self.node_id(n), forward.node_id(forward.graph.node(target)))
            if pair in drawn or pair[0] == pair[1] or summaries.intersection(pair):
                continue  # a summary's links would say "these steps, those steps": a tangle
            drawn.add(pair)
            kind = self.kind("grad_of")
            dot.edge(*pair, **style.edge_attrs(kind))
            self.edge_kinds.add(kind)

    def _rule_group(self, n: Node) -> str:
        """Outputs and seeds stand alone; the ops one rule made share their target."""
        return n.name if n.kind != OP else "ops"


def _body_nodes(n: Node) -> int:
    """The nodes drawn inside node `n`'s cluster, nested bodies included (an upper
    bound: bodies are collapsed by the same rules as the graph around them)."""
    return sum(
        len(b.graph.nodes) + sum(_body_nodes(m) for m in b.graph.nodes) for b in bodies_of(n)
    )


def _duplicate_results(graph: Graph) -> dict[Node, Node]:
    """`result` nodes reading a result another one already reads -> that first one
    (autodiff's own reads, marked grad_of, stay apart from the forward's)."""
    first: dict[tuple[Node, int, bool], Node] = {}
    alias: dict[Node, Node] = {}
    for n in graph.nodes:
        if n.op == "result" and n.inputs:
            key = (n.inputs[0], int(n.attrs.get("index", 0)), grad_of_name(n) is not None)
            if key in first:
                alias[n] = first[key]
            else:
                first[key] = n
    return alias
