"""Eager tapes: a tensor's recorded grad_fn graph, as the tutorials draw it."""

from __future__ import annotations

from typing import Any

import graphviz

from graphc.viz.painter import Options


def is_tensor(obj: Any) -> bool:
    return hasattr(obj, "grad_fn") and hasattr(obj, "requires_grad")


def tensor_to_dot(tensor: Any, options: Options) -> graphviz.Digraph:
    raise NotImplementedError
