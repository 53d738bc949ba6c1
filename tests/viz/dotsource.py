"""A small reader for the DOT text `graphviz.Digraph.source` produces, for tests.

It understands what the graphviz package writes: one statement per line, ids bare
or quoted, attribute values bare, "quoted" or <HTML>, and ``subgraph cluster_x {``
blocks. Each node and edge remembers the clusters it was written in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ID = r'(?:"(?:[^"\\]|\\.)*"|[^\s\[\]{};=]+)'
_EDGE = re.compile(rf"^({_ID})\s*->\s*({_ID})\s*(\[.*\])?$", re.S)
_NODE = re.compile(rf"^({_ID})\s*(\[.*\])?$", re.S)


def _unquote(text: str) -> str:
    if text.startswith('"') and text.endswith('"'):
        return re.sub(r'\\(["\\])', r"\1", text[1:-1])
    return text


def _attrs(text: str | None) -> dict[str, str]:
    """Parse ``[key=value key="v a l" key=<html>]``."""
    result: dict[str, str] = {}
    if not text:
        return result
    body, i = text.strip()[1:-1], 0
    while i < len(body):
        while i < len(body) and body[i] in " \t\n,":
            i += 1
        if i >= len(body):
            break
        eq = body.index("=", i)
        key = body[i:eq].strip()
        i = eq + 1
        if body[i] == '"':
            j = i + 1
            while body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            result[key] = _unquote(body[i : j + 1])
            i = j + 1
        elif body[i] == "<":
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(body[j], 0)
                j += 1
                if depth == 0:
                    break
            result[key] = body[i + 1 : j - 1]
            i = j
        else:
            j = i
            while j < len(body) and body[j] not in " \t\n":
                j += 1
            result[key] = body[i:j]
            i = j
    return result


@dataclass
class Dot:
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    clusters: dict[str, dict[str, str]] = field(default_factory=dict)
    cluster_of: dict[str, str] = field(default_factory=dict)  # node id -> innermost cluster

    def edges_between(self, a: str, b: str) -> list[dict[str, str]]:
        return [attrs for x, y, attrs in self.edges if (x, y) == (a, b)]

    def label(self, node_id: str) -> str:
        return self.nodes[node_id].get("label", node_id)


def _statements(source: str) -> list[str]:
    """Join lines that belong to one statement (quoted strings may hold newlines)."""
    statements, current, quotes = [], "", 0
    for line in source.splitlines():
        current = f"{current}\n{line}" if current else line.strip()
        quotes += len(re.findall(r'(?<!\\)"', line))
        if quotes % 2 == 0:
            statements.append(current)
            current, quotes = "", 0
    return statements


def parse_dot(source: str) -> Dot:
    dot = Dot()
    stack: list[str | None] = []
    for stmt in _statements(source):
        if stmt.endswith("{"):
            match = re.match(rf"subgraph\s+({_ID})", stmt)
            name = _unquote(match.group(1)) if match else None
            if name is not None and name.startswith("cluster"):
                dot.clusters[name] = {}
                stack.append(name)
            else:  # a plain subgraph belongs to the cluster around it
                stack.append(None)
            continue
        if stmt == "}":
            if stack:
                stack.pop()
            continue
        current = next((c for c in reversed(stack) if c is not None), None)
        if stmt.startswith("graph [") and current is not None:
            dot.clusters[current].update(_attrs(stmt[len("graph ") :]))
            continue
        if stmt.startswith(("graph ", "node ", "edge ", "digraph")):
            continue
        if re.match(r"^\w+=", stmt):  # a graph attribute inside a cluster
            if current is not None:
                dot.clusters[current].update(_attrs(f"[{stmt}]"))
            continue
        edge = _EDGE.match(stmt)
        if edge:
            dot.edges.append(
                (_unquote(edge.group(1)), _unquote(edge.group(2)), _attrs(edge.group(3)))
            )
            continue
        node = _NODE.match(stmt)
        if node:
            node_id = _unquote(node.group(1))
            dot.nodes[node_id] = _attrs(node.group(2))
            if current is not None:
                dot.cluster_of[node_id] = current
    return dot
