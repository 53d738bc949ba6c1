"""The ONNX backend node tests the onnx package generates offline, by op type."""

from __future__ import annotations

import collections
import importlib
import pkgutil
import warnings
from collections.abc import Iterator
from typing import Any

from tests.budget import full

# the onnx package (1.17 on) makes its node cases when they are loaded, running its
# reference implementation; these generators run its pure-Python pooling, 7 of the 8.6 s
# that loading every case took here. The quick run leaves their cases (pooling,
# tested against torch in tests/ops) to `--rest` and `--full`.
SLOW_GENERATORS = ("averagepool", "lppool", "maxpool")


def load_cases() -> list[Any]:
    import onnx.backend.test.case.node as generators
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():  # the case generators warn about their own overflows
        warnings.simplefilter("ignore")
        if full() or not hasattr(generators, "_NodeTestCases"):
            return load_model_tests(kind="node")
        for module in pkgutil.iter_modules(generators.__path__):
            if module.name not in SLOW_GENERATORS:
                importlib.import_module(f"{generators.__name__}.{module.name}")
        return list(generators._NodeTestCases)


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
