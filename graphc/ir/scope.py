"""Name scopes: where in the user's program a node was made, as a path ("encoder/0/linear").

A node appended to any graph while a scope is open on this thread gets
``meta["scope"]``, the open scope's "/"-separated path; outside every scope the key is
absent, and a node that already carries one (a copy made by a pass) keeps it.
`name_scope("encoder")` opens a scope inside the current one; `path_scope` opens an
absolute path (an nn module's attribute path, which does not depend on the module
calling it). Scopes are per thread, like the graphs being declared.

>>> import graphc as gc
>>> g = gc.Graph("scoped")
>>> with g:
...     x = gc.placeholder("x", shape=(2,))
...     with gc.name_scope("encoder"):
...         y = gc.tanh(x)
...     _ = gc.output(y * 2)
>>> [(n.name, n.meta.get("scope")) for n in g.op_nodes]
[('y', 'encoder'), ('const', None), ('mul', None)]
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from graphc.ir.errors import GraphcError

SEPARATOR = "/"


class _Scopes(threading.local):
    """The scopes open in this thread, innermost last, each as its whole path, and the
    names of outside values known there (an nn module's parameters, by id)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.values: list[dict[int, str]] = []


_SCOPES = _Scopes()


def current_scope() -> str | None:
    """The path of the innermost scope open in this thread, or None."""
    paths = _SCOPES.paths
    return paths[-1] if paths and paths[-1] else None


def _checked(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.strip(SEPARATOR):
        raise GraphcError(f"{what}: expected a non-empty name such as 'encoder', got {name!r}")
    return name.strip(SEPARATOR)


@contextmanager
def name_scope(name: str) -> Iterator[str]:
    """Put the nodes made inside under `name`, within the current scope; yields the path.

    >>> import graphc as gc
    >>> with gc.name_scope("encoder"), gc.name_scope("attn") as path:
    ...     path
    'encoder/attn'
    """
    name = _checked(name, "name_scope")
    outer = current_scope()
    with path_scope(f"{outer}{SEPARATOR}{name}" if outer else name) as path:
        yield path


@contextmanager
def path_scope(path: str | None) -> Iterator[str | None]:
    """Open the absolute scope `path` ("encoder/0"); None or "" opens no scope."""
    if not path:
        yield current_scope()
        return
    _SCOPES.paths.append(path)
    try:
        yield path
    finally:
        _SCOPES.paths.pop()


def stamp(node: Any) -> None:
    """Give a node appended now the open scope (Graph.append calls this)."""
    paths = _SCOPES.paths
    if paths and paths[-1] and "scope" not in node.meta:
        node.meta["scope"] = paths[-1]


@contextmanager
def known_values(names: dict[int, str]) -> Iterator[None]:
    """Let `value_name` find these names of outside values (id -> "encoder.0.weight")."""
    _SCOPES.values.append(names)
    try:
        yield
    finally:
        _SCOPES.values.pop()


def value_name(value: Any) -> str | None:
    """The name an open `known_values` gives `value` (innermost first), or None."""
    for names in reversed(_SCOPES.values):
        name = names.get(id(value))
        if name is not None:
            return name
    return None
