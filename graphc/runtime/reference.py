"""The reference interpreter: runs a graph node by node, as plainly as possible.

It is the oracle every optimization and the compiled runtime are tested against,
so it does nothing clever: each op's own kernel, on fresh arrays, in graph order.
Each value gets the memory layout the compiled plans give it (C-contiguous, but a
transpose's: see LAYOUT in plan.py), since matmul and reductions round by layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, NumericsError, ShapeError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import bound_attrs, get_op
from graphc.runtime.feeds import check_feeds


def check_finite(node: Node, value: np.ndarray) -> None:
    if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
        kind = "NaN" if np.isnan(value).any() else "inf"
        where = f" (created at {node.loc})" if node.loc else ""
        raise NumericsError(f"{node.describe()} produced {kind}{where}", node=node.name)


def run(graph: Graph, feeds: Mapping[str, Any], check_numerics: bool = False) -> list[np.ndarray]:
    """Run `graph` on `feeds` (placeholder name -> array); returns the outputs in order."""
    arrays, bindings = check_feeds(graph, feeds)
    values: dict[Node, np.ndarray] = dict(zip(graph.inputs, arrays))
    results = []
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            continue
        if node.kind == OUTPUT:
            results.append(np.array(values[node.inputs[0]], copy=True))
            continue
        assert node.kind == OP
        inputs = [values[x] for x in node.inputs]
        opdef = get_op(node.op)
        try:
            with np.errstate(all="ignore"):
                value = opdef.kernel(*inputs, **bound_attrs(node, bindings))
        except GraphcError as exc:
            exc.node = exc.node or node.name
            raise
        # (not ascontiguousarray: it makes 0-d arrays 1-d)
        value = np.asarray(value) if opdef.permutes else np.asarray(value, order="C")
        expected = node.type.bind(bindings)
        if value.shape != expected.shape or value.dtype != expected.dtype:
            # the oracle never hands on a value of another type than the graph declares
            # (a slice x[0:5] of a dim B fed with B=3; a kernel disagreeing with its rule)
            where = f" (created at {node.loc})" if node.loc else ""
            raise ShapeError(
                f"{node.describe()}{where} is declared {node.type}, i.e. {expected}, "
                f"but its kernel gave {value.dtype}{list(value.shape)}",
                node=node.name,
            )
        if check_numerics:
            check_finite(node, value)
        values[node] = value
    return results
