"""The ONNX backend node tests the onnx package generates offline, by op type."""

from __future__ import annotations

import collections
import warnings
from collections.abc import Iterator
from typing import Any


def load_cases() -> list[Any]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():  # the case generators warn about their own overflows
        warnings.simplefilter("ignore")
        return load_model_tests(kind="node")


def op_types(graph: Any) -> Iterator[str]:
    """Every op type in `graph`, its subgraphs included."""
    for node in graph.node:
        yield node.op_type
        for attribute in node.attribute:
            if attribute.g.node:
                yield from op_types(attribute.g)
            for sub in attribute.graphs:
                yield from op_types(sub)


def main_op(case: Any) -> str:
    """The op type a case is named after (its last node: 'expanded' variants come first)."""
    return case.model.graph.node[-1].op_type if case.model.graph.node else "?"


def by_op_type(cases: list[Any]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = collections.defaultdict(list)
    for case in cases:
        groups[main_op(case)].append(case)
    return groups
