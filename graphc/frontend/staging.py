"""Staging a function for a transformation: `f` traced into a closed sub-graph typed
like its arguments, and the transformed graph replayed where the call happened.

`stage(f, args, positions, what)` traces `f` into a body whose placeholders are the
leaves of the arguments at `positions` (named after `f`'s parameters, typed like the
arguments, symbolic dims kept); values of an enclosing graph that `f` reads are
captured as extra placeholders (graphc/ops/closure.py). A transformation turns that
body into another graph with the same placeholders (and some of its own), and
`Staged.run` replays it into the graph being built (`inline`), feeding the
arguments and the captured values, so the transformation leaves ordinary ops there.

`OnArrays` gives a transformation written for graph values to arrays and eager
tensors: it traces the staging once per signature into a graph (gc.jit's cache:
shapes, dtypes and the values of static arguments), compiles it and runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.frontend.call import inline
from graphc.frontend.jit import Jitted, static_key
from graphc.frontend.trace import parameter_names
from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.graph import Graph, Node, active_graph
from graphc.ops.closure import fn_name, graph_of, lift, trace_body
from graphc.ops.dispatch import is_python_scalar, kind_of, weak_dtype
from graphc.ops.grad_state import grad_enabled
from graphc.ops.pytree import Tree, flatten, unflatten
from graphc.ops.symbolic import Symbol
from graphc.passes.dce import eliminate_dead_code


@dataclass
class Staged:
    """`f` traced into a closed body: the body, the values to feed it, its result tree."""

    body: Graph
    feeds: dict[str, Any]  # body placeholder -> value of the enclosing graph
    traced: list[str]  # the placeholders of the traced argument leaves, in leaf order
    leaf_args: list[int]  # the argument position of each traced leaf
    out_tree: Tree
    parent: Graph

    def run(self, graph: Graph, extra: dict[str, Any] | None = None, first: int = 0) -> list[Any]:
        """`graph` (the body, transformed) replayed into the enclosing graph, from its
        output `first` on (the nodes only earlier outputs need are not replayed)."""
        feeds = {**self.feeds, **(extra or {})}
        if first:
            graph = _outputs_from(graph, first)
        if active_graph() is None:
            with self.parent:
                return inline(graph, feeds)
        return inline(graph, feeds)


def _outputs_from(graph: Graph, first: int) -> Graph:
    """`graph` without its first `first` outputs and the nodes only they need."""
    dropped = set(graph.outputs[:first])
    kept = Graph(graph.name)
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        if n not in dropped:
            kept.append_copy(n, copies)
    return eliminate_dead_code(kept)


def stage(f: Callable[..., Any], args: tuple, positions: Sequence[int], what: str) -> Staged:
    """Trace `f(*args)` into a body whose placeholders are the leaves of the arguments
    at `positions` (typed like them); other arguments are passed as they are."""
    leaves_by_arg = {i: flatten(args[i]) for i in positions}
    all_leaves = [leaf for i in positions for leaf in leaves_by_arg[i][0]]
    others = [leaf for i, a in enumerate(args) if i not in leaves_by_arg for leaf in flatten(a)[0]]
    parent = graph_of([*all_leaves, *others])
    assert parent is not None, "staging needs an enclosing graph"
    symbols = [lift(v, parent) for v in all_leaves]
    names = leaf_names(f, args, positions)
    inputs = [(name, symbol.type) for name, symbol in zip(names, symbols)]
    leaf_args = [i for i in positions for _ in leaves_by_arg[i][0]]
    out_trees: list[Tree] = []

    def call(values: list[Symbol]) -> list[Any]:
        # A Python int or bool reaches `f` as itself: it is never differentiated, and a
        # placeholder would type it strongly (int64), so `x * 2` of a float32 x would be
        # float64, where the same code outside the transformation (and JAX's) is float32.
        # Its placeholder stays, unused, so the leaves keep their positions.
        values = [leaf if is_python_int(leaf) else v for leaf, v in zip(all_leaves, values)]
        new_args = list(args)
        start = 0
        for i in positions:
            count = len(leaves_by_arg[i][0])
            new_args[i] = unflatten(leaves_by_arg[i][1], values[start : start + count])
            start += count
        out_leaves, out_tree = flatten(f(*new_args))
        out_trees.append(out_tree)
        return out_leaves

    with grad_enabled():  # differentiated next: an outer no_grad is not the function's
        traced = trace_body(fn_name(f, what), parent, inputs, call, what)
    body = traced.body
    placeholders = [p.name for p in body.inputs[: len(inputs)]]
    feeds: dict[str, Any] = dict(zip(placeholders, symbols))
    feeds.update({inner.name: Symbol(outer) for outer, inner in traced.captures.items()})
    return Staged(body, feeds, placeholders, leaf_args, out_trees[0], parent)


def is_python_int(leaf: Any) -> bool:
    """A Python int or bool (not a float: a float may be differentiated)."""
    return is_python_scalar(leaf) and isinstance(leaf, (int, bool))


def leaf_names(f: Callable[..., Any], args: tuple, positions: Sequence[int]) -> list[str]:
    """A placeholder name per leaf of the arguments at `positions`: the parameter's
    name, with the leaf's index when the argument has several leaves."""
    arg_names = parameter_names(f, len(args))
    names = []
    for i in positions:
        count = len(flatten(args[i])[0])
        names += [arg_names[i] if count == 1 else f"{arg_names[i]}_{k}" for k in range(count)]
    return names


# -- running on arrays ---------------------------------------------------------------------


class OnArrays:
    """Run a transformation given on graph values on arrays: staged into a graph by
    gc.jit (one trace and compile per signature), or on eager tensors' values."""

    def __init__(
        self, on_values: Callable[..., Any], name: str, dynamic: Callable[[int, int], bool]
    ) -> None:
        self.on_values = on_values
        self.name = name
        # whether the argument at a position (of how many) is an input even as a Python scalar
        self.dynamic = dynamic
        # per argument structure and static values: the jitted function, and the
        # structure of its result per signature it was traced for
        self._cache: list[tuple[Tree, tuple, Jitted, dict[tuple, Tree], list[Tree]]] = []

    def __call__(self, *args: Any) -> Any:
        leaves, tree = flatten(args)
        if graph_of(leaves) is not None:
            return self.on_values(*args)
        eager = next((kind_of(v) for v in leaves if kind_of(v) is not None), None)
        positions = [i for i, a in enumerate(args) for _ in flatten(a)[0]]
        arrays, statics = [], []
        for k, (leaf, position) in enumerate(zip(leaves, positions)):
            if is_python_int(leaf) or (
                is_python_scalar(leaf) and not self.dynamic(position, len(args))
            ):  # static, so weakly typed in the trace (a Python int is never differentiated)
                statics.append((k, type(leaf).__name__, leaf))
            elif is_python_scalar(leaf):
                arrays.append(np.asarray(leaf, weak_dtype(leaf, ())))
            elif isinstance(leaf, (np.ndarray, np.generic)) or kind_of(leaf) is not None:
                arrays.append(as_array(leaf))
            elif self.dynamic(position, len(args)):  # differentiated: it must be numbers
                raise DTypeError(
                    f"{self.name}: argument {position} holds a {type(leaf).__name__}, which is "
                    "no array; differentiated arguments are arrays, numbers or pytrees of them "
                    "(pass other values outside them, e.g. out of grad's argnums)"
                )
            else:  # a string, a callable: static, as a Python scalar
                statics.append((k, type(leaf).__name__, leaf))
        jitted, out_trees, traced = self._jitted(tree, tuple(statics), len(leaves))
        signature = jitted.signature(arrays)
        results = tuple(np.asarray(r) for r in jitted(*arrays))  # a scalar plan's too
        if signature not in out_trees:  # this call traced it
            out_trees[signature] = traced.pop()
        out_tree = out_trees[signature]
        if eager is not None:
            results = tuple(eager.lift(r, None, ()) for r in results)
        return unflatten(out_tree, list(results))

    def _jitted(
        self, tree: Tree, statics: tuple, count: int
    ) -> tuple[Jitted, dict[tuple, Tree], list[Tree]]:
        """The jitted function for this structure and these static values, the result
        structures it has given by signature, and the list its next trace adds to."""
        key = tuple((k, kind, static_key(value)) for k, kind, value in statics)
        for known_tree, known_key, jitted, out_trees, traced in self._cache:
            if known_tree == tree and known_key == key:
                return jitted, out_trees, traced
        out_trees: dict[tuple, Tree] = {}
        traced: list[Tree] = []
        static_at = {k: value for k, _, value in statics}

        def flat(*values: Any) -> tuple:
            it = iter(values)
            leaves = [static_at[k] if k in static_at else next(it) for k in range(count)]
            out_leaves, out_tree = flatten(self.on_values(*unflatten(tree, leaves)))
            if not out_leaves:
                raise GraphcError(f"{self.name}: the result holds no arrays")
            traced.append(out_tree)
            return tuple(out_leaves)

        flat.__name__ = self.name
        jitted = Jitted(flat)
        self._cache.append((tree, key, jitted, out_trees, traced))
        return jitted, out_trees, traced


def as_array(value: Any) -> np.ndarray:
    if kind_of(value) is not None and hasattr(value, "detach"):
        return np.asarray(value.detach().numpy())
    return np.asarray(value)


def as_tuple(results: Any) -> tuple:
    """An executable's results as a tuple of arrays (one output comes alone)."""
    items = results if isinstance(results, tuple) else (results,)
    return tuple(np.asarray(r) for r in items)
