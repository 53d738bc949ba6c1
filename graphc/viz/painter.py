"""Drawing one `Graph` into a graphviz picture (or into a cluster of a bigger one).

A `GraphPainter` decides a role for every node (placeholder, constant, op, output;
backward, seed or saved when the graph came from autodiff), asks `collapse` which
nodes to hide behind summary nodes, and emits graphviz nodes and edges. Node ids
carry a prefix so that several graphs (forward and backward, or one per pass) can
share one sheet. A fused node is drawn as a cluster of its members; the edges that
enter it go to the members reading the corresponding body input.

Backward nodes are recognised by ``meta["grad_of"]`` (set by autodiff) and by
depending on a backward node: a forward value never depends on a gradient.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import graphviz
import numpy as np

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.viz import style
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


def grad_of_name(n: Node) -> str | None:
    """The name of the forward node that backward node `n` differentiates, if any."""
    target = n.meta.get("grad_of")
    if target is None:
        return None
    return target.name if isinstance(target, Node) else str(target)


def backward_nodes(graph: Graph) -> set[Node]:
    """Nodes autodiff produced (marked with grad_of, seeds included), or fed by such nodes."""
    result: set[Node] = set()
    for n in graph.nodes:
        if grad_of_name(n) is not None or any(x in result for x in n.inputs):
            result.add(n)
    return result


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


def format_attrs(n: Node) -> str:
    parts = []
    for key, value in n.attrs.items():
        if key in ("value", "body") or isinstance(value, (Graph, np.ndarray)):
            continue
        text = f"{key}={value}"
        if len(text) <= 24:
            parts.append(text)
    return ", ".join(parts)


class GraphPainter:
    """Paints one graph; `roles`, `edge_kinds` and `ids` tell callers what it drew."""

    def __init__(
        self,
        graph: Graph,
        options: Options,
        prefix: str = "",
        role_overrides: dict[str, str] | None = None,
        backward: bool | None = None,
    ) -> None:
        self.graph = graph
        self.options = options
        self.prefix = prefix
        self.role_overrides = role_overrides or {}
        # backward=True: the whole graph is a backward graph (from split_backward)
        self.all_backward = bool(backward)
        self.backward = set(graph.nodes) if backward else backward_nodes(graph)
        self.collapse: Collapse = plan_collapse(
            graph, options.max_chain, options.max_repeat, prefix=prefix
        )
        self.roles: set[str] = set()
        self.edge_kinds: set[str] = set()
        self.entry: dict[tuple[Node, int], list[str]] = {}  # fused inputs -> member ids
        self.exit: dict[Node, str] = {}  # node -> the id its value leaves from

    # -- ids and roles ----------------------------------------------------------

    def node_id(self, n: Node) -> str:
        if n in self.exit:
            return self.exit[n]
        group = self.collapse.owner.get(n)
        return group.id if group is not None else style.dot_id(f"{self.prefix}{n.name}")

    def role(self, n: Node) -> str:
        if n.name in self.role_overrides:
            return self.role_overrides[n.name]
        if n.kind == PLACEHOLDER:
            # autodiff's cotangent inputs say which output they seed (grad_of)
            if grad_of_name(n) is not None:
                return "seed"
            if self.all_backward:  # split_backward's other inputs are saved forward values
                return "saved"
            return "placeholder"
        if n.is_constant:
            return "constant"
        if n.kind == OUTPUT:
            return "backward_output" if n in self.backward else "output"
        if n.op == "fused" or "body" in n.attrs:
            return "fused"
        return "backward" if n in self.backward else "op"

    def label(self, n: Node) -> str:
        if n.kind == PLACEHOLDER:
            saved = "saved " if self.role(n) == "saved" else ""
            return style.html_label(n.name, saved + style.type_label(n.type))
        if n.kind == OUTPUT:
            return style.html_label(n.name)
        if n.is_constant:
            shown = format_constant(n.value)
            if shown is None:
                return style.html_label(n.name, style.type_label(n.type))
            plain = re.fullmatch(r"const(ant)?(_\d+)?", n.name)
            return style.html_label(shown, "" if plain else n.name)
        details = []
        if not re.fullmatch(rf"{re.escape(str(n.op))}(_\d+)?", n.name):
            details.append(n.name)
        details.append(format_attrs(n))
        target = grad_of_name(n)
        if target is not None:
            details.append(f"∂ of {target}")
        return style.html_label(str(n.op), *details)

    def tooltip(self, n: Node) -> str:
        what = n.op if n.kind == OP else n.kind
        lines = [f"{n.name} = {what}: {style.type_label(n.type)}"]
        loc = style.location(n.loc)
        if loc:
            lines.append(loc)
        return "\\n".join(lines)  # a DOT escape: graphviz turns it into a line break

    # -- painting ---------------------------------------------------------------

    def paint(self, dot: graphviz.Digraph) -> None:
        for n in self.graph.nodes:
            if n in self.collapse.owner:
                continue
            if isinstance(n.attrs.get("body"), Graph):
                self._paint_fused(dot, n)
            else:
                self._paint_node(dot, n)
        for group in self.collapse.groups:
            kinds = {self.role(m) for m in group.members if not m.is_constant}
            fill = (
                {"fillcolor": style.ROLES["backward"]["fillcolor"]} if kinds == {"backward"} else {}
            )
            tip = "\\n".join(self.tooltip(m) for m in group.members[:20])
            dot.node(group.id, group.label, **style.node_attrs("collapsed", tooltip=tip, **fill))
            self.roles.add("collapsed")
        self._paint_edges(dot)

    def _paint_node(
        self, dot: Any, n: Node, node_id: str | None = None, role: str | None = None
    ) -> None:
        role = role or self.role(n)
        self.roles.add(role)
        dot.node(
            node_id or self.node_id(n),
            self.label(n),
            **style.node_attrs(role, tooltip=self.tooltip(n)),
        )

    def _paint_fused(self, dot: graphviz.Digraph, n: Node) -> None:
        body: Graph = n.attrs["body"]
        inner = style.dot_id(f"{self.prefix}{n.name}/")
        color = style.BACKWARD_COLOR if n in self.backward else style.FUSED_COLOR
        role = self.role_overrides.get(n.name)
        with dot.subgraph(name=f"cluster_{inner}") as cluster:
            members = [m for m in body.nodes if m.kind == OP]
            cluster.attr(
                label=f"{n.op}: {n.name} ({len(members)} ops)",
                style="rounded,dashed" if role == "removed" else "rounded,filled",
                fillcolor="#f5eef8",
                color=color if role is None else style.ROLES[role]["color"],
                penwidth="2",
                fontname=style.FONT,
                fontsize="10",
                tooltip=self.tooltip(n),
            )
            ids = {m: inner + style.dot_id(m.name) for m in members}
            inner_kind = "backward" if n in self.backward else "data"
            for m in members:
                member_role = (
                    "constant" if m.is_constant else ("backward" if n in self.backward else "op")
                )
                self._paint_node(cluster, m, ids[m], role or member_role)
            for m in members:
                for x in m.inputs:
                    if x.kind == OP:
                        cluster.edge(ids[x], ids[m], **self._edge_style(x, inner_kind))
        self.roles.add("fused")
        placeholders = body.inputs
        for i, p in enumerate(placeholders):
            readers = [ids[m] for m in members if p in m.inputs]
            self.entry[(n, i)] = readers
        results = [o.inputs[0] for o in body.outputs]
        if results and results[0].kind == OP:
            self.exit[n] = ids[results[0]]

    def _edge_style(self, x: Node, kind: str) -> dict[str, str]:
        label = style.type_label(x.type) if self.options.edge_labels else None
        if kind == "saved" and label is not None:
            label = f"saved {label}"
        self.edge_kinds.add(kind)
        return style.edge_attrs(kind, label=label)

    def _paint_edges(self, dot: graphviz.Digraph) -> None:
        drawn: set[tuple[str, str]] = set()
        for n in self.graph.nodes:
            group = self.collapse.owner.get(n)
            for i, x in enumerate(n.inputs):
                if group is not None and self.collapse.owner.get(x) is group:
                    continue  # inside one summary node
                targets = self.entry.get((n, i)) or [self.node_id(n)]
                source = self.node_id(x)
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

    def _edge_kind(self, x: Node, n: Node) -> str:
        if n in self.backward and not self.all_backward:
            if x not in self.backward and n.kind == OP and not x.is_constant:
                return "saved"
            return "backward"
        return "backward" if self.all_backward else "data"

    def paint_grad_links(self, dot: graphviz.Digraph, forward: GraphPainter | None = None) -> None:
        """Dashed links from backward nodes to the forward node each differentiates.

        One vjp rule often makes several nodes (transpose then matmul); every one of
        them is labelled "∂ of <node>", and one link per rule, from the node that
        finishes it, is enough to find the forward node without a tangle of lines.
        """
        if not self.options.grad_links:
            return
        forward = forward or self
        finishing: dict[tuple[str, str], Node] = {}  # (group, target) -> last node
        for n in self.graph.nodes:
            target = grad_of_name(n)
            if target is None or target not in forward.graph or n.is_constant:
                continue
            finishing[(self._rule_group(n), target)] = n
        drawn: set[tuple[str, str]] = set()
        for (_, target), n in finishing.items():
            pair = (self.node_id(n), forward.node_id(forward.graph.node(target)))
            if pair in drawn or pair[0] == pair[1]:
                continue
            drawn.add(pair)
            dot.edge(*pair, **style.edge_attrs("grad_of"))
            self.edge_kinds.add("grad_of")

    def _rule_group(self, n: Node) -> str:
        """Outputs and seeds stand alone; the ops one rule made share their target."""
        return n.name if n.kind != OP else "ops"
