"""Graph and Node: the IR every layer above shares.

A `Graph` is a list of `Node`s in topological order. There are three kinds of node,
as in torch.fx: ``placeholder`` (an input), ``op`` (an application of a registered
op; a constant is the ``constant`` op holding its array) and ``output``. Every node
carries the `TensorType` of the value it produces.

Nodes are treated as immutable once appended: passes build new graphs instead of
editing old ones, and the users of a node are derived (`Graph.users`), never kept
by hand, so no use-list can drift.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from graphc.ir.errors import GraphcError, GraphMismatchError, VerifyError
from graphc.ir.scope import stamp
from graphc.ir.types import TensorType

PLACEHOLDER, OP, OUTPUT = "placeholder", "op", "output"
KINDS = (PLACEHOLDER, OP, OUTPUT)

# graphs within graphs (a cond in a cond's branch, ...), the outermost counted: deeper
# nesting is refused when it is built, and by the loaders (graphc.ir.parse, serialize),
# so whatever graphc builds it can save and load back, and the passes' recursion over
# bodies stays far from Python's stack limit
MAX_NESTING = 64


class Node:
    """One value of a graph: its producer (kind, op, inputs, attrs) and its type.

    `meta` holds facts that do not change what the node computes: ``loc`` (the
    user's ``file:line`` that created it), ``scope`` (the name scope it was made in,
    "encoder/0/linear": ir/scope.py), ``grad_of`` (the forward node a backward node
    differentiates), ``members`` (a fused node's original nodes).
    """

    __slots__ = ("name", "kind", "op", "inputs", "attrs", "type", "meta", "graph")

    def __init__(
        self,
        name: str,
        kind: str,
        op: str | None,
        inputs: tuple[Node, ...],
        attrs: Mapping[str, Any],
        type: TensorType,
        meta: Mapping[str, Any] | None = None,
        graph: Graph | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = dict(attrs)
        # a subclass (a graph value's callable .type) is kept as the plain type: a node
        # holds no reference to a value, nor to that value's graph
        if type.__class__ is not TensorType and isinstance(type, TensorType):
            type = TensorType(type.shape, type.dtype)
        self.type = type
        self.meta = dict(meta or {})
        self.graph = graph

    @property
    def is_constant(self) -> bool:
        return self.kind == OP and self.op == "constant"

    @property
    def value(self) -> Any:
        """The array of a constant node."""
        return self.attrs["value"]

    @property
    def loc(self) -> str | None:
        return self.meta.get("loc")

    def describe(self) -> str:
        """A short phrase naming this node for error messages."""
        if self.kind == OP:
            return f"node '{self.name}' (op {self.op})"
        return f"{self.kind} '{self.name}'"

    def __repr__(self) -> str:
        what = self.op if self.kind == OP else self.kind
        return f"<Node {self.name}: {what} -> {self.type}>"


class Graph:
    """A static dataflow graph.

    >>> import numpy as np, graphc as gc
    >>> g = gc.Graph("double")
    >>> with g:
    ...     x = gc.placeholder("x", shape=(3,))
    ...     _ = gc.output(x * 2, name="y")
    >>> g(np.ones(3, np.float32))
    array([2., 2., 2.], dtype=float32)
    """

    _ids = itertools.count()

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.nodes: list[Node] = []
        self._by_name: dict[str, Node] = {}
        self._counters: dict[str, itertools.count] = {}
        self.id = next(Graph._ids)
        self.nesting = 1  # this graph and its deepest chain of bodies (MAX_NESTING)
        # what finished building it ("trace"): an op on its values outside `with graph:` is
        # then a value leaked from the finished function, refused (ops/symbolic.py)
        self.finished_by: str | None = None

    # -- building -------------------------------------------------------------

    def fresh_name(self, base: str) -> str:
        """A name not used yet in this graph, derived from `base` (fx style: add, add_1)."""
        if base not in self._by_name:
            return base
        counter = self._counters.setdefault(base, itertools.count(1))
        while True:
            name = f"{base}_{next(counter)}"
            if name not in self._by_name:
                return name

    def append(self, node: Node) -> Node:
        """Add a node whose inputs already belong to this graph."""
        if node.kind not in KINDS:
            raise VerifyError(f"node '{node.name}' has unknown kind {node.kind!r}")
        if not isinstance(node.name, str) or not node.name:
            raise VerifyError(f"a node's name must be a non-empty string, got {node.name!r}")
        if node.name in self._by_name:
            raise VerifyError(f"graph '{self.name}' already has a node named '{node.name}'")
        for i, x in enumerate(node.inputs):
            if not isinstance(x, Node):
                raise VerifyError(
                    f"{node.describe()}: input {i} is a {type(x).__name__}, not a Node of "
                    f"graph '{self.name}'"
                )
            if self._by_name.get(x.name) is not x:
                raise GraphMismatchError(
                    f"{node.describe()} uses {x.describe()}, which belongs to another graph "
                    f"than '{self.name}'"
                )
        deepest = self.nesting - 1  # of the bodies in this graph, this node's included
        for value in node.attrs.values():
            if isinstance(value, Graph) and value.nesting > deepest:
                deepest = value.nesting
        if deepest >= MAX_NESTING:
            raise VerifyError(
                f"{node.describe()} would nest graphs {deepest + 1} deep (bodies within "
                f"bodies); graphc builds and loads at most {MAX_NESTING}"
            )
        self.nesting = deepest + 1
        node.graph = self
        self.nodes.append(node)
        self._by_name[node.name] = node
        stamp(node)
        if _OBSERVER is not None:
            _OBSERVER.appended(node)
        return node

    def rename(self, node: Node, name: str) -> None:
        """Give this graph's `node` a new, unused name (its users hold the node, not the
        name, so they follow)."""
        if self._by_name.get(node.name) is not node:
            raise GraphMismatchError(f"{node.describe()} is not in graph '{self.name}'")
        if name in self._by_name:
            raise VerifyError(f"graph '{self.name}' already has a node named '{name}'")
        del self._by_name[node.name]
        node.name = name
        self._by_name[name] = node

    def discard_since(self, mark: int) -> None:
        """Drop the nodes appended after the first `mark` ones, for a builder that
        abandons what it began to record (nodes come in order, so none kept uses them)."""
        for node in self.nodes[mark:]:
            del self._by_name[node.name]
        del self.nodes[mark:]
        bodies = (v for n in self.nodes for v in n.attrs.values() if isinstance(v, Graph))
        self.nesting = 1 + max((b.nesting for b in bodies), default=0)

    def append_copy(self, node: Node, copies: dict[Node, Node]) -> Node:
        """Append a copy of another graph's `node` (same name, op, attrs, type, meta), its
        inputs mapped through `copies`, and record the copy there."""
        inputs = tuple(copies[x] for x in node.inputs)
        copy = Node(node.name, node.kind, node.op, inputs, node.attrs, node.type, node.meta)
        copies[node] = self.append(copy)
        return copies[node]

    def add_placeholder(self, name: str, type: TensorType, meta: Mapping | None = None) -> Node:
        return self.append(Node(name, PLACEHOLDER, None, (), {}, type, meta))

    def add_op(
        self,
        op: str,
        inputs: tuple[Node, ...] | list[Node],
        attrs: Mapping[str, Any],
        type: TensorType,
        name: str | None = None,
        meta: Mapping | None = None,
    ) -> Node:
        return self.append(
            Node(name or self.fresh_name(op), OP, op, tuple(inputs), attrs, type, meta)
        )

    def add_output(self, value: Node, name: str | None = None, meta: Mapping | None = None) -> Node:
        if not isinstance(value, Node):
            raise VerifyError(
                f"output '{name}': its value is a {type(value).__name__}, not a Node of "
                f"graph '{self.name}'"
            )
        return self.append(
            Node(name or self.fresh_name("out"), OUTPUT, None, (value,), {}, value.type, meta)
        )

    # -- copies ---------------------------------------------------------------

    def __copy__(self) -> Graph:
        """A graph of copies of these nodes (their attrs' values shared, as passes share
        them), which can be extended without changing this one."""
        copy = Graph(self.name)
        copies: dict[Node, Node] = {}
        for node in self.nodes:
            copy.append_copy(node, copies)
        copy.finished_by = self.finished_by
        return copy

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a deep copy or an unpickled graph is another graph: its own id (ids key the
        # bodies being traced), not one that may be the original's or another's
        self.__dict__.update(state)
        self.id = next(Graph._ids)

    # -- reading --------------------------------------------------------------

    @property
    def inputs(self) -> list[Node]:
        """The placeholders, in the order they were declared."""
        return [n for n in self.nodes if n.kind == PLACEHOLDER]

    @property
    def outputs(self) -> list[Node]:
        """The output nodes, in order; each has one input, the value it returns."""
        return [n for n in self.nodes if n.kind == OUTPUT]

    @property
    def op_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == OP]

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphcError(f"graph '{self.name}' has no node named '{name}'") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def users(self) -> dict[Node, list[Node]]:
        """Each node's users, derived from the inputs of every node."""
        result: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for x in n.inputs:
                result[x].append(n)
        return result

    # -- conveniences that live in other modules ------------------------------

    def __str__(self) -> str:
        from graphc.ir.text import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph '{self.name}': {len(self.inputs)} inputs, {len(self.op_nodes)} ops, {len(self.outputs)} outputs>"

    def __enter__(self) -> Graph:
        _declaring().append(self)
        if _OBSERVER is not None:
            _OBSERVER.entered(self)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if _OBSERVER is not None:
                _OBSERVER.exited(self)
        finally:
            graphs = _declaring()
            # the innermost entry: `with g: with h: with g:` leaves h open after the inner g
            del graphs[len(graphs) - 1 - graphs[::-1].index(self)]

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        """On arrays: run the graph. On graph values: inline it into their graph.
        (`self` is positional only, so a placeholder may be named "self".)"""
        if _CALL_HANDLER is None:
            raise GraphcError("import graphc to call a Graph")
        return _CALL_HANDLER(self, args, kwargs)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # for reading: a constant's megabytes of base64 would stall a notebook, and a
        # notebook keeps every line of a long graph's text in its file beside the picture
        from graphc.ir.text import format_graph

        bundle = {"text/plain": _shortened(format_graph(self, brief=True))}
        if _MIME_HANDLER is not None:
            bundle.update(_MIME_HANDLER(self))
        return bundle


# a displayed graph's text longer than this many lines shows its head and tail (as
# numpy and pandas shorten a long array or table); str(g) and print(g) give every line
DISPLAY_LINES = 100
DISPLAY_HEAD, DISPLAY_TAIL = 60, 20


def _shortened(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= DISPLAY_LINES:
        return text
    left_out = len(lines) - DISPLAY_HEAD - DISPLAY_TAIL
    marker = f"  ... {left_out} lines left out: print(g) shows the whole graph ..."
    return "\n".join([*lines[:DISPLAY_HEAD], marker, *lines[-DISPLAY_TAIL:]])


class _Declaring(threading.local):
    """The graphs this thread is declaring, innermost last (`with g:` pushes, leaving
    pops). Per thread: another thread's ops on plain arrays must not record into them."""

    def __init__(self) -> None:
        self.graphs: list[Graph] = []


_STATE = _Declaring()


def _declaring() -> list[Graph]:
    return _STATE.graphs


# Upper layers install these: running/inlining a Graph and rendering it need code
# that the IR must not import.
_CALL_HANDLER: Callable[[Graph, tuple, dict], Any] | None = None
_MIME_HANDLER: Callable[[Any], dict[str, str]] | None = None
# told of graphs entered and left with `with graph:` and of every node appended, in the
# thread doing it (the frontend names values after the user's variables this way)
_OBSERVER: Any = None


def active_graph() -> Graph | None:
    """The innermost graph this thread opened with `with graph:`, or None."""
    graphs = _STATE.graphs
    return graphs[-1] if graphs else None


def expect_graph(obj: Any, what: str) -> Graph:
    """`obj` if it is a Graph; otherwise an error saying how to get one (callers pass
    functions here the way torch.compile takes them)."""
    if not isinstance(obj, Graph):
        hint = "; trace it first with gc.trace(fn, *specs), or use gc.jit(fn)"
        raise GraphcError(
            f"{what}: expected a gc.Graph, got {type(obj).__name__}"
            + (hint if callable(obj) else "")
        )
    return obj


def set_call_handler(handler: Callable[[Graph, tuple, dict], Any]) -> None:
    global _CALL_HANDLER
    _CALL_HANDLER = handler


def set_observer(observer: Any) -> None:
    """Install the object whose `entered(graph)`, `exited(graph)` and `appended(node)` are
    called as graphs are declared and built."""
    global _OBSERVER
    _OBSERVER = observer


def set_mime_handler(handler: Callable[[Any], dict[str, str]]) -> None:
    global _MIME_HANDLER
    _MIME_HANDLER = handler


def rich_display(obj: Any) -> dict[str, str]:
    """Pictures of `obj` for notebooks from the installed handler (graphc.viz), or none."""
    return _MIME_HANDLER(obj) if _MIME_HANDLER is not None else {}
