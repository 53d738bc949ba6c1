"""Eager tapes: a tensor's recorded backward graph, drawn as the tutorials draw it.

Starting from a tensor's `grad_fn`, walk `next_functions` (pairs of node and output
index) breadth first. Each backward node becomes a grey box named like PyTorch's
(``MulBackward0``); a leaf's `AccumulateGrad` node is linked from a blue box for
the leaf tensor (its `variable`), and the tensor we started from is a green box
linked from its `grad_fn`. Edges point the way values flowed forward, as in
torchviz, so the picture reads top to bottom like the program.

Only the tape's public face is used (`grad_fn`, `next_functions`, `name()`,
`variable`, `shape`, `dtype`), so this module needs no import of `graphc.eager`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import graphviz
import numpy as np

from graphc.ir.errors import GraphcError
from graphc.viz import style
from graphc.viz.painter import Options


def is_tensor(obj: Any) -> bool:
    """Does `obj` look like an eager tensor (it has a tape to draw)?"""
    return hasattr(obj, "grad_fn") and hasattr(obj, "requires_grad") and hasattr(obj, "shape")


def tensor_type(tensor: Any) -> str:
    """``f32[2,3]``, as static graphs label their edges."""
    from graphc.ir.types import TensorType

    try:
        return str(TensorType(tuple(tensor.shape), np.dtype(tensor.dtype)))
    except Exception:  # an unsupported dtype still deserves a picture
        return f"{np.dtype(tensor.dtype)}{list(tensor.shape)}"


def node_name(fn: Any) -> str:
    name = getattr(fn, "name", None)
    return name() if callable(name) else type(fn).__name__


class TapePainter:
    """Paints the tape behind one tensor; `names` labels leaves by their variable names."""

    def __init__(self, options: Options, names: Mapping[int, str]) -> None:
        self.options = options
        self.names = names
        self.roles: set[str] = set()
        self.edge_kinds: set[str] = set()

    def tensor_label(self, tensor: Any, fallback: str) -> str:
        name = self.names.get(id(tensor), fallback)
        return style.html_label(name, tensor_type(tensor))

    def node(
        self, dot: graphviz.Digraph, node_id: str, label: str, role: str, tip: str = ""
    ) -> None:
        self.roles.add(role)
        dot.node(node_id, label, **style.node_attrs(role, tooltip=tip or None))

    def edge(self, dot: graphviz.Digraph, a: str, b: str, label: str | None = None) -> None:
        self.edge_kinds.add("data")
        shown = label if self.options.edge_labels else None
        dot.edge(a, b, **style.edge_attrs("data", label=shown))

    def paint(self, dot: graphviz.Digraph, root: Any) -> None:
        # ids number the tape's objects in visit order, so the same tape always gives
        # the same DOT text (Python's id() would change from run to run)
        ids: dict[int, str] = {}

        def ident(obj: Any, kind: str) -> str:
            return ids.setdefault(id(obj), f"{kind}/{len(ids)}")

        root_id = ident(root, "tensor")
        root_role = "root" if root.grad_fn is not None else "tensor"
        self.node(dot, root_id, self.tensor_label(root, "result"), root_role)
        if root.grad_fn is None:
            return
        limit = self.options.max_tape_nodes
        total = count_backward_nodes(root.grad_fn)
        more_id = "more"  # stands for the backward nodes past the limit
        if limit is not None and total > limit:
            label = style.plain(f"… {total - max(limit, 1)} more backward nodes")
            self.node(dot, more_id, label, "collapsed")
        queue = deque([root.grad_fn])
        ident(root.grad_fn, "fn")
        drawn = 1
        while queue:
            fn = queue.popleft()
            fn_id = ids[id(fn)]
            leaf = getattr(fn, "variable", None)
            if leaf is not None:
                self.node(dot, fn_id, style.html_label(node_name(fn)), "accumulate")
                leaf_id = ident(leaf, "tensor")
                self.node(dot, leaf_id, self.tensor_label(leaf, "leaf"), "tensor")
                self.edge(dot, leaf_id, fn_id, tensor_type(leaf))
            else:
                self.node(dot, fn_id, style.html_label(node_name(fn)), "grad_fn")
            linked_more = False
            for next_fn, _index in getattr(fn, "next_functions", ()):
                if next_fn is None:
                    continue  # an input that needs no gradient
                if id(next_fn) not in ids:
                    if limit is not None and drawn >= limit:  # past the guard: counted
                        if not linked_more:
                            self.edge(dot, more_id, fn_id)
                            linked_more = True
                        continue
                    ident(next_fn, "fn")
                    queue.append(next_fn)
                    drawn += 1
                self.edge(dot, ids[id(next_fn)], fn_id)
        self.edge(dot, ids[id(root.grad_fn)], root_id, tensor_type(root))


def count_backward_nodes(grad_fn: Any) -> int:
    """The backward nodes reachable from `grad_fn`, AccumulateGrad nodes included."""
    seen = {id(grad_fn)}
    todo = [grad_fn]
    while todo:
        for next_fn, _index in getattr(todo.pop(), "next_functions", ()):
            if next_fn is not None and id(next_fn) not in seen:
                seen.add(id(next_fn))
                todo.append(next_fn)
    return len(seen)


def tensor_to_dot(tensor: Any, options: Options) -> graphviz.Digraph:
    """The tape that produced `tensor`; `options.names` maps names to leaf tensors."""
    dot = style.new_digraph("tape", options.rankdir)
    for name, t in (options.names or {}).items():
        if not is_tensor(t):  # it would label nothing, silently
            raise GraphcError(
                f"to_dot: names[{name!r}] is a {type(t).__name__}; names maps a label to an "
                "eager Tensor of the tape, e.g. names={'w': w}"
            )
    names = {id(t): name for name, t in (options.names or {}).items()}
    painter = TapePainter(options, names)
    painter.paint(dot, tensor)
    title = options.title
    limit = options.max_tape_nodes
    if limit is not None and tensor.grad_fn is not None:
        total = count_backward_nodes(tensor.grad_fn)
        if total > limit:
            hint = (
                f"a tape of {total} backward nodes: the {max(limit, 1)} nearest the result "
                "are drawn (max_tape_nodes=None draws all; dot may take minutes)"
            )
            title = f"{title}\n{hint}" if title else hint
    if title:
        dot.attr(label=style.plain(*title.split("\n")), labelloc="t", fontsize="14")
    if options.legend:
        style.add_legend(dot, painter.roles, sorted(painter.edge_kinds))
    return dot
