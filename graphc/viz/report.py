"""Pass by pass: pictures of what each optimization pass changed."""

from __future__ import annotations

from typing import Any

import graphviz

from graphc.viz.painter import Options


def is_report(obj: Any) -> bool:
    return hasattr(obj, "passes") and hasattr(obj, "level")


def report_to_dot(report: Any, options: Options) -> graphviz.Digraph:
    raise NotImplementedError
