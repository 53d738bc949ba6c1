"""Pytrees as far as lists and tuples go: the values of nested lists and tuples (None
an empty subtree), and the structure to rebuild them, for gc.cond / gc.scan /
gc.while_loop's operands, carries and results.

>>> leaves, tree = flatten((1, [2, None], 3))
>>> leaves, show_tree(tree)
([1, 2, 3], '(x, [x, None], x)')
>>> unflatten(tree, ["a", "b", "c"])
('a', ['b', None], 'c')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Tree = Any  # a leaf (the string "*"), None, or (list | tuple, [subtrees])


def flatten(value: Any) -> tuple[list[Any], Tree]:
    """The leaves of nested lists and tuples, and the structure to rebuild them."""
    if value is None:
        return [], None
    if isinstance(value, (list, tuple)):
        leaves: list[Any] = []
        subtrees = []
        for item in value:
            item_leaves, subtree = flatten(item)
            leaves += item_leaves
            subtrees.append(subtree)
        return leaves, (type(value), subtrees)
    return [value], "*"


def unflatten(tree: Tree, leaves: Sequence[Any]) -> Any:
    it = iter(leaves)

    def build(t: Tree) -> Any:
        if t is None:
            return None
        if t == "*":
            return next(it)
        kind, subtrees = t
        return kind(build(s) for s in subtrees)

    return build(tree)


def show_tree(tree: Tree) -> str:
    if tree is None:
        return "None"
    if tree == "*":
        return "x"
    kind, subtrees = tree
    inner = ", ".join(show_tree(s) for s in subtrees)
    return f"[{inner}]" if kind is list else f"({inner}{',' if len(subtrees) == 1 else ''})"
