"""`gc.vmap`: a function written for one example, run on a batch of them (JAX's vmap).

`vmap(f, in_axes, out_axes)(*args)` traces `f` once on one example's types (each
argument with its batch axis removed), batches the traced graph with
`graphc.passes.vmap_graph`, and then

- on arrays (numpy, Python scalars) compiles and runs the batched graph, once per
  signature (the arguments' structure, shapes and dtypes, as gc.jit: arrays `f`
  closes over are constants of that trace);
- on graph values (inside gc.trace, gc.jit, a loop or branch body) or eager tensors
  inlines it (graphc/frontend/call.py), so the batched computation becomes part of
  the graph being built and composes with the other transformations: gradients of a
  vmapped function, and vmap of a gradient (per-example gradients).

Values `f` reads from outside (a graph value of the enclosing trace) are captured as
unbatched inputs. `in_axes` is an int, None, or a structure matching the arguments'
(a tuple with an entry per argument, each an int, None or a prefix of the argument's
own structure: the same container, a registered class or dataclass with the same aux
data, or a namedtuple, holding ints, None or deeper prefixes); `out_axes` likewise
for the results. A function returning no array (None, an empty tuple) gives that
structure back, as jax.vmap does.

A `gc.cond` whose predicate differs per example runs both branches on every example
and then takes each example's own result (graphc/ops/batching.py), as jax.vmap does.
So a branch also runs on the examples that do not take it, and must not fail there:
`cond(i < 3, lambda j: gc.take(table, j), ...)` fails for i = 5 under vmap (take
refuses an index out of range, where JAX's clamps), though not example by example;
clip the index (`gc.take(table, gc.clip(j, 0, 2))`). An error raised while running
such branches says so.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from graphc.frontend.call import inline
from graphc.frontend.jit import static_key
from graphc.frontend.staging import as_tuple
from graphc.frontend.trace import TensorSpec, lifted_feeds, trace
from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.ops.batching import BOTH_BRANCHES, VmapError
from graphc.ops.closure import fn_name, graph_of, trace_body
from graphc.ops.dispatch import dtype_of, is_python_scalar, kind_of, weak_dtype
from graphc.ops.pytree import Tree, TreeDef, flatten, leaf_paths, unflatten
from graphc.ops.symbolic import Symbol
from graphc.passes.vmap import vmap_graph
from graphc.runtime.executable import compile as compile_graph


def _leaf_axes(axes: Any, value: Any, where: str, what: str = "in_axes") -> list[Any]:
    """One axis per leaf of `value`, from `axes` (`what`: in_axes or out_axes), a prefix
    of its structure (JAX's rule: an int or None stands for every leaf beneath it; a
    container, the same container: its type and aux data, a registered class's or a
    dataclass's included, with an entry per child). A tuple or list fits any tuple or
    list (a namedtuple too), and a mapping any mapping with the same keys."""
    if axes is None or isinstance(axes, int) and not isinstance(axes, bool):
        return [axes] * len(flatten(value)[0])
    subject = "argument" if what == "in_axes" else "function's result"
    axis_items, axis_tree = _children(axes)
    items, tree = _children(value)
    if not isinstance(axis_tree, TreeDef):  # a bool, a float, an array: no axis, no prefix
        raise VmapError(
            f"vmap: {where}: {what} entries are ints (axes), None or containers of them, "
            f"got {_show(axes)} ({type(axes).__name__})"
        )
    if isinstance(axes, Mapping) and isinstance(value, Mapping) and isinstance(tree, TreeDef):
        if set(axes) != set(value):
            raise VmapError(
                f"vmap: {where}: {what} has keys {sorted(axes)} but the {subject} has "
                f"keys {sorted(value)}"
            )
        out: list[Any] = []
        for key in _flatten_order(value):
            out += _leaf_axes(axes[key], value[key], f"{where}[{key!r}]", what)
        return out
    sequences = isinstance(axes, (tuple, list)) and isinstance(value, (tuple, list))
    if not sequences and not (
        isinstance(axis_tree, TreeDef) and isinstance(tree, TreeDef) and axis_tree.kind is tree.kind
    ):
        shown = type(value).__name__ if isinstance(tree, TreeDef) else "a leaf"
        raise VmapError(
            f"vmap: {where}: {what} entry {_show(axes)} does not match the {subject}'s structure "
            f"({shown}); give an int, None or the same structure"
        )
    if len(axis_items) != len(items):
        raise VmapError(
            f"vmap: {where}: {what} has {len(axis_items)} entries but the {subject} has "
            f"{len(items)}"
        )
    if not sequences and axis_tree.aux != tree.aux:
        raise VmapError(
            f"vmap: {where}: {what} entry {_show(axes)} has the aux data {axis_tree.aux!r} but "
            f"the {subject}'s {type(value).__name__} has {tree.aux!r} (the static fields of "
            "a registered class belong to its structure: give the same)"
        )
    out = []
    for a, v, path in zip(axis_items, items, leaf_paths(tree, where)):
        out += _leaf_axes(a, v, path, what)
    return out


def _show(axes: Any) -> str:
    """An axes entry for an error: its repr, or its type's name if that is object's."""
    if type(axes).__repr__ is object.__repr__:
        return f"(a {type(axes).__name__})"
    return repr(axes)


def _children(value: Any) -> tuple[list[Any], Tree]:
    """A container's children and its structure one level deep (each child a leaf,
    however deep it goes); a leaf itself and LEAF for what is no container."""
    return flatten(value, is_leaf=lambda child: child is not value)


def _flatten_order(value: Mapping) -> list[Any]:
    """A mapping's keys in the order flatten visits its values (sorted for a dict, as
    inserted for an OrderedDict): those of a copy holding each key under itself."""
    probe = copy.copy(value)
    for key in list(probe):
        probe[key] = key  # type: ignore[index]
    return _children(probe)[0]


def _shape(value: Any) -> tuple:
    if is_python_scalar(value):
        return ()
    return tuple(getattr(value, "shape", np.shape(value)))


def _dtype(value: Any) -> Any:
    return weak_dtype(value, ()) if is_python_scalar(value) else dtype_of(value)


def _batch_size(leaves: list[Any], axes: list[Any], names: list[str], axis_size: Any) -> Any:
    """The common size of the batched axes (checked), or `axis_size`."""
    size, first = axis_size, None
    for leaf, axis, name in zip(leaves, axes, names):
        if axis is None:
            continue
        shape = _shape(leaf)
        if not -len(shape) <= axis < len(shape):
            raise VmapError(
                f"vmap: in_axes {axis} is out of range for argument {name} of shape "
                f"{shape} (rank {len(shape)})"
            )
        dim = shape[axis]
        if size is None:
            size, first = dim, name
        elif dim != size:
            raise VmapError(
                f"vmap: inconsistent batch sizes: argument {name} has {dim} along its "
                f"in_axes {axis}, but {first or 'axis_size'} gives {size}"
            )
    if size is None:
        raise VmapError("vmap: in_axes batches no argument; batch at least one, or give axis_size")
    return size


def _is_array(leaf: Any) -> bool:
    """An array, graph value or eager tensor (anything else in the arguments is static)."""
    return isinstance(leaf, (np.ndarray, np.generic, Symbol)) or kind_of(leaf) is not None


def _per_example(leaf: Any, axis: Any) -> TensorType:
    shape = _shape(leaf)
    if axis is not None:
        axis %= len(shape)
        shape = shape[:axis] + shape[axis + 1 :]
    return TensorType(tuple(str(d) if isinstance(d, str) else int(d) for d in shape), _dtype(leaf))


def vmap(
    f: Callable[..., Any],
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_size: int | None = None,
) -> Callable[..., Any]:
    """`f` mapped over a batch axis of its arguments (JAX's `jax.vmap`).

    Args:
        f: the function of one example; its arguments and results may be pytrees.
        in_axes: the axis each argument is batched along: an int (negative counts
            from the end) for every array leaf, None for a value shared by every
            example, or a tuple with one entry per positional argument, each an int,
            None or a prefix of that argument's structure (the same tuple, list, dict,
            namedtuple, registered class or dataclass, holding ints, None or deeper
            prefixes). Keyword arguments are batched along axis 0.
        out_axes: where each result's batch axis goes, in the same forms as in_axes,
            for the results' structure; None for a result that is the same for every
            example (an error if it differs per example).
        axis_size: the batch size, needed when in_axes batches no argument (the
            results are then broadcast over it); otherwise it must equal the batched
            axes' size.

    >>> import numpy as np, graphc as gc
    >>> def dot(x, w):
    ...     return gc.sum(x * w)
    >>> xs, w = np.ones((4, 3), np.float32), np.arange(3, dtype=np.float32)
    >>> gc.vmap(dot, in_axes=(0, None))(xs, w)
    array([3., 3., 3., 3.], dtype=float32)
    >>> gc.vmap(lambda w: w * 2, in_axes=None, axis_size=2)(w)
    array([[0., 2., 4.],
           [0., 2., 4.]], dtype=float32)
    """
    if not callable(f):
        raise VmapError(f"vmap: expected a function to batch, got {type(f).__name__}")

    @functools.wraps(f, updated=())  # not f's __dict__: a Jitted's fn and cache stay its own
    def batched(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = flatten(args)
        keyword_leaves, keyword_tree = flatten(kwargs)  # batched on axis 0, as in JAX
        axes_tuple = in_axes if isinstance(in_axes, (tuple, list)) else None
        if axes_tuple is not None and len(axes_tuple) != len(args):
            note = (
                f"; the keyword arguments {sorted(kwargs)} have no entry there: they are "
                "batched along axis 0 (pass them by position to give their axes)"
                if kwargs
                else ""
            )
            raise VmapError(
                f"vmap: in_axes has {len(axes_tuple)} entries for {len(args)} arguments of "
                f"{fn_name(f, 'f')}; give one per positional argument (or one int/None for "
                f"all){note}"
            )
        axes = _leaf_axes(tuple(in_axes) if axes_tuple is not None else in_axes, args, "args")
        names = leaf_paths(tree, "args") + leaf_paths(keyword_tree, "kwargs")
        axes += [0] * len(keyword_leaves)
        count, every_leaf = len(leaves), leaves + keyword_leaves
        tree = (tree, keyword_tree)
        size = _batch_size(every_leaf, axes, names, axis_size)
        # an unbatched Python scalar is passed as it is, weakly typed (as gc.jit's static
        # scalars): traced as a placeholder it would be an int64 or float32 value; so is
        # any other unbatched value that is no array (a function, a string), as in JAX
        static = {
            k: leaf
            for k, (leaf, axis) in enumerate(zip(every_leaf, axes))
            if axis is None and (is_python_scalar(leaf) or not _is_array(leaf))
        }
        fed = [k for k in range(len(every_leaf)) if k not in static]
        leaves = [every_leaf[k] for k in fed]
        axes, names = [axes[k] for k in fed], [names[k] for k in fed]
        types = [_per_example(leaf, axis) for leaf, axis in zip(leaves, axes)]
        out_tree: list[Any] = [None]

        def flat(symbols: list[Any]) -> tuple:
            inputs = iter(symbols)
            full = [static[k] if k in static else next(inputs) for k in range(len(every_leaf))]
            positional = unflatten(tree[0], full[:count])
            result = f(*positional, **unflatten(tree[1], full[count:]))
            out_leaves, out_tree[0] = flatten(result)
            if not out_leaves:  # None, (), {}: nothing to batch (a graph needs an output)
                raise _NoResultError
            return tuple(out_leaves)

        outer = graph_of(leaves)  # the graph being built (arrays inside a trace too)
        statics = tuple((k, type(v).__name__, static_key(v)) for k, v in static.items())
        key = _signature((tree, statics), types, axes, size) if outer is None else None
        if key is not None and key in compiled:  # arrays of a signature met before
            body, executable, out_tree[0], conds = compiled[key]
            with _branch_hint(conds):
                results = as_tuple(executable(*leaves, *lifted_feeds(body).values()))
            return unflatten(out_tree[0], list(results))
        try:
            if outer is not None:
                name = fn_name(f, "vmapped")
                traced = trace_body(name, outer, list(zip(names, types)), flat, "vmap")
                body, feeds_extra = traced.body, [Symbol(node) for node in traced.captures]
            else:
                body = _trace_arrays(f, flat, types, names)
                feeds_extra = list(lifted_feeds(body).values())
        except _NoResultError:  # as jax.vmap: the same structure back, its out_axes checked
            _out_axes(out_axes, out_tree[0], 0)
            return unflatten(out_tree[0], [])
        out_leaf_axes = _out_axes(out_axes, out_tree[0], len(body.outputs))
        in_all = [_normal(a, len(t.shape)) for a, t in zip(axes, types)]
        in_all += [None] * (len(body.inputs) - len(types))
        vmapped = vmap_graph(body, in_all, out_leaf_axes, axis_size=size)
        feeds = dict(zip([p.name for p in vmapped.inputs], [*leaves, *feeds_extra]))
        conds = _both_branches(vmapped)
        with _branch_hint(conds):
            if any(kind_of(v) is not None for v in feeds.values()):
                results = inline(vmapped, feeds)
            elif key is not None:
                executable = compile_graph(vmapped)
                compiled[key] = (body, executable, out_tree[0], conds)
                results = list(as_tuple(executable(*feeds.values())))
            else:
                results = list(as_tuple(vmapped(**feeds)))
        return unflatten(out_tree[0], results)

    # on arrays: one trace, batching and compile per signature (as gc.jit)
    compiled: dict[tuple, tuple[Graph, Any, Any, dict[str, str]]] = {}
    return batched


def _both_branches(graph: Graph) -> dict[str, str]:
    """Node name -> per-example cond name, for the nodes computing the branches of a cond
    whose predicate is batched (graphc/ops/batching.py's cond rule marks them)."""
    return {n.name: n.meta[BOTH_BRANCHES] for n in graph.nodes if BOTH_BRANCHES in n.meta}


@contextlib.contextmanager
def _branch_hint(conds: dict[str, str]) -> Iterator[None]:
    """An error raised while running a batched graph with such branches says that under
    vmap a branch runs on every example, so it may fail on one that does not take it
    (certainly, when the runner names a branch's node as the one that failed)."""
    try:
        yield
    except GraphcError as exc:
        if not conds or isinstance(exc, VmapError):
            raise
        names = ", ".join(f"'{c}'" for c in sorted(set(conds.values())))
        lead = (
            f"it comes from a branch of cond {conds[exc.node]!r}"
            if exc.node in conds
            else f"it may come from a branch of cond {names}"
        )
        hint = (
            f"(vmap: {lead}, whose predicate differs per example: under gc.vmap both "
            "branches run on every example, as in jax.vmap, and each example then takes "
            "its own result, so a branch must not fail on the examples that do not take it; "
            "make its inputs valid for every example, e.g. gc.clip an index into range)"
        )
        raise type(exc)(f"{exc} {hint}", node=exc.node) from exc


class _NoResultError(Exception):
    """The function returned no array (None, an empty tuple): there is no graph to batch."""


def _signature(tree: Any, types: list[TensorType], axes: list[Any], size: Any) -> tuple | None:
    """The cache key of a call on arrays, or None when its structure is unhashable."""
    key = (tree, tuple(types), tuple(axes), size)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _normal(axis: Any, rank: int) -> Any:
    """An in_axes entry (of the batched argument, rank `rank` + 1) as non-negative."""
    return None if axis is None else axis % (rank + 1)


def _trace_arrays(
    f: Callable[..., Any],
    flat: Callable[[list[Any]], tuple],
    types: list[TensorType],
    names: list[str],
) -> Graph:
    specs = [TensorSpec(t.shape, t.dtype) for t in types]

    def positional(*symbols: Any) -> tuple:
        return flat(list(symbols))

    positional.__name__ = fn_name(f, "vmapped")
    return trace(positional, *specs)


def _out_axes(out_axes: Any, tree: Any, count: int) -> list[Any]:
    """One out axis per output leaf, from `out_axes`, a prefix of the results' structure."""
    if out_axes is None or isinstance(out_axes, int) and not isinstance(out_axes, bool):
        return [out_axes] * count
    structure = unflatten(tree, [0] * count)
    return _leaf_axes(out_axes, structure, "results", "out_axes")


__all__ = ["vmap"]
