"""Common subexpression elimination.

Algorithm: one forward walk over the topological order with a table from a node's
key to the first new node with that key. The key of a pure op node is its op, its
attrs (by value; arrays by dtype, shape and bytes, hashed on a sample of the bytes
and compared whole, never copied; nested graphs by their text)
and its inputs' identities after replacement; inputs of commutative ops are sorted,
since x*y and y*x are the same value bit for bit. A constant's key is its value, so
two equal constants become one. Invariant: two nodes with equal keys compute equal
values, so a node whose key is in the table is replaced by the earlier node; the
walk visits inputs first, so chains of duplicates collapse in one walk. Near-linear
(one hash per node; an array is hashed on a sample and compared whole only when hashes
match, so an equal pair costs one pass over it). A graph with no two
equal keys is returned as it is, uncopied.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.passes.builder import GraphBuilder
from graphc.passes.report import PassLog

# what the log tallies; merged ops (unlike constants) can expose new algebra (x - x)
MERGED_OPS = "merged a repeated op"
MERGED_CONSTANTS = "merged an equal constant"


SAMPLE = 4096  # bytes of an array that its key hashes


class ArrayKey:
    """An array as a hashable key, equal exactly when dtype, shape and bytes are, without
    a copy of the bytes (a model's weights would otherwise be held twice while CSE runs):
    hashed on an evenly spaced sample of its bytes, compared whole when hashes match."""

    __slots__ = ("array", "raw", "_hash")

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.ascontiguousarray(array)
        self.raw = self.array.reshape(-1).view(np.uint8)  # (no copy: C-contiguous)
        step = max(1, self.raw.size // SAMPLE)
        sample = self.raw[::step][:SAMPLE].tobytes()
        self._hash = hash((self.array.dtype.str, self.array.shape, self.raw.size, sample))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayKey) or self._hash != other._hash:
            return False
        a, b = self.array, other.array
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(self.raw, other.raw)


def attr_key(value: Any) -> Any:
    """A hashable stand-in for an attribute value, equal exactly when the values are."""
    if isinstance(value, np.ndarray):
        return ArrayKey(value)
    if isinstance(value, (float, np.floating)):
        # repr tells 0.0 from -0.0 and makes nan equal to itself
        return ("float", repr(float(value)) if not math.isnan(value) else "nan")
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(attr_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, attr_key(v)) for k, v in value.items())))
    if isinstance(value, Graph):
        return ("graph", str(value))
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.item())
    return (type(value).__name__, value)


def node_key(node: Node, inputs: tuple[Node, ...]) -> tuple:
    ids = tuple(map(id, inputs))
    if "commutative" in get_op(node.op).props:  # f(x, y) and f(y, x) are one value
        ids = tuple(sorted(ids))
    attrs = node.attrs
    if attrs:
        return (node.op, node.type, ids, tuple(sorted((k, attr_key(attrs[k])) for k in attrs)))
    return (node.op, node.type, ids, ())


def eliminate_common_subexpressions(graph: Graph, log: PassLog | None = None) -> Graph:
    """A copy of `graph` where each repeated computation (and equal constant) appears once.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2]) {
    ...   %a: f32[2] = exp(%x)
    ...   %b: f32[2] = exp(%x)
    ...   %c: f32[2] = add(%a, %b)
    ...   output %y = %c
    ... }''')
    >>> print(gc.passes.eliminate_common_subexpressions(g))
    graph g(%x: f32[2]) {
      %a: f32[2] = exp(%x)
      %c: f32[2] = add(%a, %a)
      output %y = %c
    }
    """
    if not _repeats(graph):
        return graph  # nothing to merge: no copy (a long traced chain, say)
    builder = GraphBuilder(graph)
    new: dict[Node, Node] = {}
    seen: dict[tuple, Node] = {}
    merged = Counter()
    for node in graph.nodes:
        inputs = tuple(new[x] for x in node.inputs)
        if node.kind == OP and get_op(node.op).pure:
            key = node_key(node, inputs)
            found = seen.get(key)
            if found is not None:
                new[node] = found
                merged[MERGED_CONSTANTS if node.is_constant else MERGED_OPS] += 1
                continue
            new[node] = seen[key] = builder.copy(node, inputs)
        else:
            new[node] = builder.copy(node, inputs)
    if log is not None:
        for what, n in merged.items():
            log.count(what, n)
    return builder.graph


def _repeats(graph: Graph) -> bool:
    """Whether two nodes of `graph` have one key (the walk below would merge them).
    Until the first merge the walk's new inputs are the old ones, so the old nodes'
    keys are the walk's."""
    seen: set[tuple] = set()
    for node in graph.nodes:
        if node.kind == OP and get_op(node.op).pure:
            key = node_key(node, node.inputs)
            if key in seen:
                return True
            seen.add(key)
    return False
