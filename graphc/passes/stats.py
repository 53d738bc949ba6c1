"""Graph statistics: nodes by op, parameters, constants and a FLOP estimate.

The FLOP estimate sums each op's own cost rule (`OpDef.flops`); symbolic dims are
bound by `bindings`, and those left unbound count as 1 (the text says which dims were
taken as 1). The inputs' elements are exact in the free dims: a sum of products
(`3*T + 3`), since an input's size is its dims' product.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType, TupleType


@dataclass
class GraphStats:
    """What `graph_statistics` found; `str()` is the table `graphc inspect` prints."""

    name: str
    nodes: int
    ops_by_name: Counter = field(default_factory=Counter)
    inputs: list[tuple[str, TensorType]] = field(default_factory=list)
    input_elements: int = 0
    constant_elements: int = 0
    flops: int = 0
    free_dims: tuple[str, ...] = ()
    input_free_dims: tuple[str, ...] = ()  # unbound dims of the inputs (counted as 1)
    input_expression: str = ""  # the inputs' elements in their unbound dims ("3*T + 3")

    def __str__(self) -> str:
        ops = sum(self.ops_by_name.values())
        lines = [f"graph '{self.name}': {self.nodes} nodes, {ops} ops"]
        lines += [f"  {n:>5}  {op}" for op, n in self.ops_by_name.most_common()]
        count = self.input_expression or f"{self.input_elements:,}"
        lines.append(f"parameters (inputs): {len(self.inputs)}, {count} elements")
        lines += [f"  %{name}: {t}" for name, t in self.inputs]
        lines.append(f"constants: {self.constant_elements:,} elements")
        taken = ", ".join(f"{d} = 1" for d in self.free_dims)
        lines.append(f"FLOP estimate: {self.flops:,}" + (f" (with {taken})" if taken else ""))
        return "\n".join(lines)


def _bound(t: TensorType, bindings: Mapping[str, int]) -> TensorType:
    return t.with_shape(bindings.get(d, 1) if isinstance(d, str) else d for d in t.shape)


def _control_flops(node: Node, bindings: Mapping[str, int]) -> int:
    """A control-flow node's FLOPs from its bodies: the costlier branch of a cond, the
    body times the length of a scan, one iteration of a while_loop (its trip count is
    known only at run time); a `result` node reads a value and costs nothing."""

    def per_body() -> list[int]:  # only for the ops below: other tuple nodes cost nothing
        return [graph_statistics(node.attrs[k], bindings).flops for k in get_op(node.op).bodies]

    if node.op == "cond":
        return max(per_body())
    if node.op == "scan":
        length = node.attrs["length"]
        steps = bindings.get(length, 1) if isinstance(length, str) else length
        return steps * sum(per_body())
    if node.op == "while_loop":
        return sum(per_body())
    return 0


def graph_statistics(graph: Graph, bindings: Mapping[str, int] | None = None) -> GraphStats:
    """Count ops, parameters and constants, and estimate FLOPs.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[B,3], %w: f32[3,2]) {
    ...   %m: f32[B,2] = matmul(%x, %w)
    ...   output %y = %m
    ... }''')
    >>> graph_statistics(g, {"B": 10}).flops
    120
    """
    bindings = dict(bindings or {})
    stats = GraphStats(graph.name, len(graph.nodes))
    free: set[str] = set()
    for node in graph.nodes:
        free.update(d for d in node.type.symbols if d not in bindings)
        if node.kind != OP:
            continue
        stats.ops_by_name[node.op] += 1
        if node.is_constant:
            stats.constant_elements += node.value.size
            continue
        if isinstance(node.type, TupleType) or node.op == "result":
            stats.flops += _control_flops(node, bindings)
            continue
        out = _bound(node.type, bindings)
        ins = [_bound(x.type, bindings) for x in node.inputs]
        stats.flops += get_op(node.op).flops(out, *ins, **node.attrs)
    input_free: set[str] = set()
    for p in graph.inputs:
        stats.inputs.append((p.name, p.type))
        stats.input_elements += _bound(p.type, bindings).size or 0
        input_free.update(d for d in p.type.symbols if d not in bindings)
    stats.free_dims = tuple(sorted(free))
    stats.input_free_dims = tuple(sorted(input_free))
    if input_free:
        stats.input_expression = _elements(graph.inputs, bindings)
    return stats


def _elements(inputs: list[Node], bindings: Mapping[str, int]) -> str:
    """The inputs' total size as a sum of products of their unbound dims ("3*T + 3")."""
    terms: Counter = Counter()  # sorted unbound dims -> their coefficient
    for p in inputs:
        coefficient, dims = 1, []
        for d in p.type.shape:
            if isinstance(d, str) and d not in bindings:
                dims.append(d)
            else:
                coefficient *= bindings[d] if isinstance(d, str) else d
        terms[tuple(sorted(dims))] += coefficient
    parts = []
    for dims, c in sorted(terms.items(), key=lambda item: (-len(item[0]), item[0])):
        if c:
            parts.append("*".join(([f"{c:,}"] if c != 1 or not dims else []) + list(dims)))
    return " + ".join(parts) or "0"
