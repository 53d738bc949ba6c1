"""Pass by pass: pictures of what each optimization pass changed.

An optimization report (``gc.optimize(g, level, explain=True)[1]``) keeps, per pass
run, the graph before and after. A pass's picture is the *union* of the two: nodes
the pass kept are drawn as usual, nodes it removed greyed and dashed, nodes it
added (folded constants, fused groups, rewritten ops) highlighted. Nodes are
matched by name, op and input names; a node whose name survives with another op or
other inputs counts as removed and added.

`to_dot(report)` puts every pass that changed the graph on one sheet, a cluster per
pass; `pass_pictures(report)` gives one picture per pass, for writing separate files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import graphviz

from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph, Node
from graphc.viz import style
from graphc.viz.painter import GraphPainter, Options, guarded


def is_report(obj: Any) -> bool:
    return hasattr(obj, "passes") and hasattr(obj, "level")


def _signature(n: Node) -> tuple:
    return (n.kind, n.op, tuple(x.name for x in n.inputs))


def diff_graph(before: Graph, after: Graph) -> tuple[Graph, dict[str, str]]:
    """The union of `before` and `after`, and the role ("removed"/"added") of changed nodes."""
    same = {
        n.name
        for n in after.nodes
        if n.name in before and _signature(before.node(n.name)) == _signature(n)
    }
    union = Graph(after.name)
    roles: dict[str, str] = {}
    new: dict[tuple[str, Node], Node] = {}  # (side, node) -> copy in the union

    def copy(side: str, n: Node, inputs: list[Node]) -> Node:
        name = n.name if n.name not in union else union.fresh_name(f"{n.name}_before")
        node = Node(name, n.kind, n.op, tuple(inputs), n.attrs, n.type, n.meta)
        return union.append(node)

    # Kahn's walk over both graphs at once keeps the union in topological order.
    pending: list[tuple[str, Node]] = [("after", n) for n in after.nodes]
    pending += [("before", n) for n in before.nodes if n.name not in same]

    def source(side: str, x: Node) -> tuple[str, Node]:
        if side == "before" and x.name in same:
            return ("after", after.node(x.name))
        return (side, x)

    while pending:
        waiting = []
        for side, n in pending:
            keys = [source(side, x) for x in n.inputs]
            if all(k in new for k in keys):
                new[(side, n)] = copy(side, n, [new[k] for k in keys])
                if n.name not in same:
                    roles[new[(side, n)].name] = "added" if side == "after" else "removed"
            else:
                waiting.append((side, n))
        if len(waiting) == len(pending):
            raise GraphcError(
                f"cannot draw the diff of graph '{after.name}': its nodes form a cycle"
            )
        pending = waiting
    return union, roles


def _title(index: int, log: Any, hint: str | None = None) -> str:
    lines = [f"{index}. {log.name}: {log.nodes_before} → {log.nodes_after} nodes"]
    notes = list(log.lines()) if hasattr(log, "lines") else []
    lines += notes[:4] + ([f"… {len(notes) - 4} more notes"] if len(notes) > 4 else [])
    return style.plain(*lines, *([hint] if hint else []), left=True)


def changed_passes(report: Any) -> list[tuple[int, Any, Graph, dict[str, str]]]:
    """(1-based index, log, union, roles) of the pass runs that changed the graph."""
    result = []
    for i, log in enumerate(report.passes, 1):
        if getattr(log, "before", None) is None or getattr(log, "after", None) is None:
            raise GraphcError(
                f"the report's pass '{log.name}' kept no graphs; get the report from "
                "gc.optimize(graph, level, explain=True)"
            )
        union, roles = diff_graph(log.before, log.after)
        if roles:
            result.append((i, log, union, roles))
    return result


def _pass_painters(
    changed: list[tuple[int, Any, Graph, dict[str, str]]], options: Options, prefixed: bool
) -> tuple[list[GraphPainter], Options]:
    """Painters for the passes in `changed` (no backward -> forward links: here the
    question is what changed), and the options they use: collapsed harder when they
    would draw more than `options.max_nodes` nodes in all (a report of a big graph holds
    it once per pass, and dot takes minutes over thousands of nodes)."""

    def painters(opts: Options) -> list[GraphPainter]:
        return [
            GraphPainter(
                union, opts, prefix=f"pass{index}/" if prefixed else "", role_overrides=roles
            )
            for index, _, union, roles in changed
        ]

    drawn = painters(options)
    harder = guarded(drawn, options)
    return (drawn, options) if harder is None else (painters(harder), harder)


def pass_pictures(report: Any, **options: Any) -> list[tuple[str, graphviz.Digraph]]:
    """One (name, picture) per pass that changed the graph, in the order they ran."""
    from graphc.viz.dot import finish, make_options

    opts = make_options(**options)
    pictures = []
    for change in changed_passes(report):
        index, log = change[0], change[1]
        [painter], used = _pass_painters([change], opts, prefixed=False)
        hint = used.title.split("\n")[-1] if used is not opts else None
        dot = style.new_digraph(f"{index}_{log.name}", opts.rankdir)
        dot.attr(label=_title(index, log, hint), labelloc="t", labeljust="l", fontsize="12")
        painter.paint(dot)
        finish(dot, [painter], used, title=False)
        pictures.append((f"{index:02d}-{log.name}", dot))
    return pictures


def report_to_dot(report: Any, options: Options) -> graphviz.Digraph:
    """All passes that changed the graph on one sheet, one cluster per pass."""
    from graphc.viz.dot import finish

    dot = style.new_digraph(f"O{report.level}", options.rankdir)
    changed = changed_passes(report)
    unchanged = sorted({log.name for log in report.passes} - {log.name for _, log, _, _ in changed})
    title = (
        options.title
        or f"optimization at O{report.level}: {report.nodes_before} → {report.nodes_after} nodes"
    )
    if unchanged:
        title += f" (no change: {', '.join(unchanged)})"
    painters, options = _pass_painters(changed, replace(options, title=title), prefixed=True)
    for (index, log, _, _), painter in zip(changed, painters):
        with dot.subgraph(name=f"cluster_pass{index}") as cluster:
            cluster.attr(
                label=_title(index, log), labeljust="l", style="rounded", fontname=style.FONT
            )
            painter.paint(cluster)
    dot.attr(label=style.plain(*(options.title or "").split("\n")), labelloc="t", fontsize="14")
    finish(dot, painters, options, title=False)
    return dot
