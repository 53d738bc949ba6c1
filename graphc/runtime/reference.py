"""The reference interpreter: runs a graph node by node, as plainly as possible.

It is the oracle every optimization and the compiled runtime are tested against,
so it does nothing clever: the feeds are checked, then `graphc.ops.body.evaluate`
runs each op's own kernel, on fresh arrays, in graph order. Each value gets the memory
layout the compiled plans give it (C-contiguous, but a transpose's: see LAYOUT in
plan.py), since matmul and reductions round by layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphc.ir.errors import VerifyError
from graphc.ir.graph import Graph
from graphc.ir.verify import verify
from graphc.ops.body import check_finite, evaluate
from graphc.runtime.feeds import check_feeds

__all__ = ["check_finite", "run"]


def run(graph: Graph, feeds: Mapping[str, Any], check_numerics: bool = False) -> list[np.ndarray]:
    """Run `graph` on `feeds` (placeholder name -> array); returns the outputs in order.

    A graph edited through the low-level API may break the IR's invariants (an op given
    one input of two, a cycle): a VerifyError naming the node, as gc.compile gives."""
    arrays, bindings = check_feeds(graph, feeds)
    try:
        return evaluate(graph, arrays, bindings, check_numerics)
    except Exception as exc:
        # verified only on failure: on a small graph verify costs half as much as a run
        # of the oracle, and a well-formed graph's own errors (a NaN, an index out of
        # range) pass on unchanged
        try:
            verify(graph)
        except VerifyError as problem:
            raise problem from exc
        raise
