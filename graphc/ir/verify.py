"""The IR verifier: the invariants every graph keeps, checked in one walk.

`verify(graph)` walks the nodes in graph order, keeping the set of names defined so
far. Each node must belong to the graph, have a fresh name and a known kind, use
only values defined before it (a use of a later value is reported as a cycle when
the edges do form one), and agree with its op: arity, a complete set of attrs, and
a stored type equal to what the op's type rule gives on its inputs' stored types.
Graph-valued attrs (a fused node's body) are verified in turn. The checks of one
node (`node_problem`) are shared with the text and JSON loaders, which report them
with a line number or a field path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np

from graphc.ir.attrs import attrs_problem, same_attr, show_attr
from graphc.ir.errors import CycleError, GraphcError, UnknownOpError, VerifyError
from graphc.ir.graph import KINDS, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import OpDef, attrs_key, get_op
from graphc.ir.types import TensorType, TupleType


def verify(graph: Graph) -> None:
    """Check the IR invariants of `graph`; raise VerifyError (or CycleError) naming the node.

    >>> import graphc as gc
    >>> g = gc.Graph("g")
    >>> with g:
    ...     _ = gc.output(gc.exp(gc.placeholder("x", shape=(2,))))
    >>> gc.verify(g)  # returns None when the graph is well formed
    """
    _verify(graph, ())


@contextlib.contextmanager
def verified_on_failure(graph: Graph) -> Iterator[None]:
    """Run the block; if it fails, verify `graph`, so that a graph broken through the
    low-level API (a cycle, a node reading an output, a wrong declared type) gives
    verify's named error (chained to the block's) rather than the KeyError or mismatch
    the block met. A well-formed graph's own error passes on unchanged. For the walks
    that skip verifying up front (on a small graph verify costs as much as the walk)."""
    try:
        yield
    except Exception as exc:
        try:
            verify(graph)
        except VerifyError as problem:
            raise problem from exc
        raise


def _verify(graph: Graph, enclosing: tuple[Graph, ...]) -> None:
    """`verify`, for `graph` held (as a body) by the graphs `enclosing`, outermost first."""
    if not isinstance(graph.name, str):  # the text and JSON forms could not write it
        raise VerifyError(f"a graph's name must be a string, got {graph.name!r}")
    defined: set[str] = set()
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.graph is not graph:
            owner = "no graph" if node.graph is None else f"graph '{node.graph.name}'"
            raise VerifyError(
                f"{node.describe()} is listed in graph '{graph.name}' but belongs to {owner}"
            )
        if node.name in defined:
            raise VerifyError(
                f"{node.describe()}: the name '{node.name}' is used twice in '{graph.name}'"
            )
        if graph._by_name.get(node.name) is not node:
            raise VerifyError(
                f"{node.describe()} is not the node graph '{graph.name}' knows by that name"
            )
        for i, x in enumerate(node.inputs):
            if id(x) not in position or graph.nodes[position[id(x)]] is not x:
                raise VerifyError(
                    f"{node.describe()}: input {i} ({x.describe()}) is not a node of graph '{graph.name}'"
                )
            if x.name not in defined:
                cycle = find_cycle(node)
                if cycle:
                    raise CycleError(f"graph '{graph.name}' has a cycle: {' -> '.join(cycle)}")
                raise VerifyError(
                    f"{node.describe()}: input {i} ({x.describe()}) is used before it is defined"
                )
        for key, value in node.attrs.items():
            if isinstance(value, Graph):  # a body (fused, cond, scan...): before the type rule
                if value is graph or value in enclosing:
                    raise VerifyError(held_by_itself(node, key, value))
                try:
                    _verify(value, (*enclosing, graph))
                except VerifyError as exc:
                    raise type(exc)(f"{node.describe()}, attr '{key}': {exc}") from None
        problem = node_problem(node)
        if problem:
            raise VerifyError(f"{node.describe()}: {problem}")
        defined.add(node.name)
    if not enclosing:  # a body's dims may be its enclosing graph's
        problem = _free_symbols(graph)
        if problem:
            raise VerifyError(problem)
    if len(graph._by_name) != len(graph.nodes):
        raise VerifyError(
            f"graph '{graph.name}' knows {len(graph._by_name)} names for {len(graph.nodes)} nodes"
        )


def held_by_itself(node: Node, key: str, body: Graph) -> str:
    """The message for `node`'s attr `key` holding `body`, a graph around the node."""
    return (
        f"{node.describe()}, attr '{key}': graph '{body.name}' holds itself as a body "
        "(bodies nest, they cannot contain the graph around them)"
    )


def node_problem(node: Node) -> str | None:
    """What is wrong with one node on its own (kind, arity, attrs, type), or None."""
    if node.kind not in KINDS:
        return f"unknown kind {node.kind!r}; expected one of {', '.join(KINDS)}"
    if node.kind == OUTPUT and len(node.inputs) == 1 and isinstance(node.inputs[0].type, TupleType):
        x = node.inputs[0]
        return (
            f"an output returns one tensor, but '{x.name}' has several results {x.type}; "
            f"output one of them, result(%{x.name}, index=k)"
        )
    if not isinstance(node.type, TensorType) and not (
        node.kind not in (PLACEHOLDER, OUTPUT) and isinstance(node.type, TupleType)
    ):
        return f"its type is {node.type!r}, not a TensorType"
    if node.kind == PLACEHOLDER:
        if node.inputs or node.op is not None or node.attrs:
            return "a placeholder has no inputs, op or attrs"
        return None
    if node.kind == OUTPUT:
        if len(node.inputs) != 1 or node.op is not None or node.attrs:
            return (
                f"an output has exactly one input and no op or attrs, got {len(node.inputs)} inputs"
            )
        problem = _outputs_used(node.inputs)
        if problem:
            return problem
        if node.type != node.inputs[0].type:
            return f"declared type {node.type} differs from its value's type {node.inputs[0].type}"
        return None
    return op_problem(node.op, node.inputs, node.attrs, node.type)


def op_problem(
    op: str | None, inputs: Sequence[Node], attrs: dict, declared: TensorType | TupleType
) -> str | None:
    """Check an op application against the registry and re-run its type rule."""
    problem = _outputs_used(inputs)
    if problem:
        return problem
    try:
        opdef = get_op(op)  # type: ignore[arg-type]
    except UnknownOpError:
        return f"unknown op {op!r}"
    if opdef.arity is not None and len(inputs) != opdef.arity:
        return f"op '{op}' takes {opdef.arity} input(s), got {len(inputs)}"
    if attrs.keys() != opdef.attrs.keys():
        missing = [key for key in opdef.attrs if key not in attrs]
        unknown = [key for key in attrs if key not in opdef.attrs]
        return f"op '{op}' expects attrs ({', '.join(opdef.attrs)}); missing {missing}, unknown {unknown}"
    if op == "constant" and not isinstance(attrs["value"], np.ndarray):
        return f"a constant's value must be an array, got {type(attrs['value']).__name__}"
    problem = attrs_problem(attrs)
    if problem:
        return problem
    types = [x.type for x in inputs]
    for i, (x, t) in enumerate(zip(inputs, types)):
        if isinstance(t, TupleType) and op != "result":
            return (
                f"input {i} ('{x.name}') has several results {t}; read one with "
                f"result(%{x.name}, index=k)"
            )
    plain = attrs_key(attrs)
    key = None if plain is None else (op, tuple(types), plain, declared)
    try:
        if key is not None and key in _WELL_TYPED:
            return None
    except TypeError:  # something unhashable where a type belongs: the rule will say
        key = None
    problem = _type_problem(opdef, types, attrs, declared)
    if problem is None and key is not None:
        if len(_WELL_TYPED) >= WELL_TYPED_SIZE:
            _WELL_TYPED.clear()
        _WELL_TYPED.add(key)
    return problem


def _free_symbols(graph: Graph) -> str | None:
    """A symbolic dim's size comes from the feeds: one that no placeholder's type holds
    (gc.zeros(("C", 3)) in a graph fed only "B") has no size when the graph runs."""
    bound = {d for p in graph.inputs for d in p.type.symbols}
    for node in graph.nodes:
        free = [d for d in node.type.symbols if d not in bound]
        if free:
            return (
                f"{node.describe()} has type {node.type}, but no placeholder of graph "
                f"'{graph.name}' has the symbolic dim {free[0]!r}, so it has no size when the "
                "graph runs (a symbol's size comes from the feeds)"
            )
    return None


def _outputs_used(inputs: Sequence[Node]) -> str | None:
    """An output node is a graph's sink, as in torch.fx: it marks a value and is none, so
    no node may take it as an input (the interpreter and the planner hold no value for
    it)."""
    for i, x in enumerate(inputs):
        if x.kind == OUTPUT:
            value = f"'%{x.inputs[0].name}'" if x.inputs else "the value it marks"
            return f"input {i} is output '{x.name}', which is no value; use {value}"
    return None


# op applications whose attrs are canonical and whose type rule gives the declared type,
# by (op, input types, plain attrs, declared type): a graph repeats a few of them, and a
# compile verifies every node of the graph it is given
_WELL_TYPED: set[tuple] = set()
WELL_TYPED_SIZE = 4096


def _type_problem(
    opdef: OpDef, types: list[TensorType], attrs: dict, declared: TensorType | TupleType
) -> str | None:
    """The attrs are canonical and the type rule gives the declared type, or what is wrong."""
    op = opdef.name
    if opdef.canonicalize is not None:
        problem = _canonical_problem(opdef, types, attrs)
        if problem:
            return problem
    try:
        inferred = opdef.infer(*types, **attrs)
    except GraphcError as exc:
        return f"the type rule of '{op}' fails: {exc}"
    except Exception as exc:  # malformed attrs (from a file, say) may break a rule in other ways
        return f"the type rule of '{op}' fails on these attrs: {type(exc).__name__}: {exc}"
    if inferred != declared:
        return f"declared type {declared} but the type rule of '{op}' gives {inferred}"
    return None


def _canonical_problem(opdef: OpDef, types: list[TensorType], attrs: dict) -> str | None:
    """The attrs must be what the op's own canonicalization makes of them: a graph
    holding another spelling (axis=(-1,), keepdims=1) may type-check and run wrong."""
    try:
        canonical = opdef.canonicalize(*types, **attrs)  # type: ignore[misc]
    except GraphcError as exc:
        return f"bad attrs for '{opdef.name}': {exc}"
    except Exception as exc:  # attrs from a file may break a rule in other ways
        return f"bad attrs for '{opdef.name}': {type(exc).__name__}: {exc}"
    for key, value in attrs.items():
        if key not in canonical or not same_attr(value, canonical[key]):
            want = show_attr(canonical.get(key), value) if key in canonical else "missing"
            return (
                f"attr '{key}' is {show_attr(value, canonical.get(key))}, but its canonical form "
                f"for inputs ({', '.join(map(str, types))}) is {want}"
            )
    return None


def find_cycle(start: Node) -> list[str]:
    """Names along a cycle through the inputs reachable from `start`, or [] if none.

    An iterative depth-first walk, so that long chains do not hit Python's recursion limit.
    """
    on_path: dict[int, int] = {id(start): 0}
    path: list[Node] = [start]
    pending = [iter(start.inputs)]
    done: set[int] = set()
    while pending:
        x = next(pending[-1], None)
        if x is None:
            node = path.pop()
            pending.pop()
            del on_path[id(node)]
            done.add(id(node))
        elif id(x) in on_path:
            return [n.name for n in path[on_path[id(x)] :]] + [x.name]
        elif id(x) not in done:
            on_path[id(x)] = len(path)
            path.append(x)
            pending.append(iter(x.inputs))
    return []
