"""`gc.jit`: trace once per input signature, compile, cache, run.

The cache key of a call is its signature: each argument's shape and dtype, the
value of each Python scalar argument (static, as in tf.function), plus the identity of the eager tensors the caller names as parameters (`params=` or a
module's `named_parameters()`). Eager tensors that tracing lifts from a closure are
fed their current values at every call, so in-place updates (an optimizer step)
are seen without retracing; replacing such a tensor by a new object is not seen
unless it is named in `params`.

Python scalars (int, float, bool) are static rather than inputs: traced as placeholders
they would be strongly typed, so `x * n` on a float32 `x` would give float64 and
`if flag:` or `axis=n` could not run. Pass a numpy scalar to make a value an input.
`static_argnums` / `static_argnames` hold other arguments static, as in `jax.jit`: any
hashable value (a string, a shape tuple, a function), passed to the function as it is
at trace time; each combination of static values has its own cache (`Statics`).

Arguments and results may be pytrees (tuples, lists, dicts, namedtuples, None, registered
types: graphc/ops/pytree.py), as in `jax.jit`: each array leaf is an input, each Python
scalar leaf static, and the structure is part of the cache key. Called on graph values
(inside `gc.trace`, `gc.vmap`, `gc.grad`, a loop body or another jitted function), a
jitted function is inlined: its ops join the graph being built.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from graphc.frontend.trace import (
    TensorSpec,
    eager_tensor_type,
    graph_name,
    lifted_tensors,
    module_parameters,
    parameter_names,
    tensor_value,
    trace,
)
from graphc.ir.errors import DTypeError
from graphc.ir.graph import Graph, active_graph
from graphc.ops.dispatch import is_python_scalar, weak_dtype
from graphc.ops.pytree import (
    LEAF,
    TreeDef,
    leaf_paths,
    num_leaves,
    tree_flatten,
    tree_unflatten,
)
from graphc.ops.random import KEY, fresh_key
from graphc.ops.symbolic import Symbol
from graphc.runtime.executable import Executable
from graphc.runtime.executable import compile as compile_graph


class CacheInfo(NamedTuple):
    """How a jitted function's cache has been used: traces = misses."""

    hits: int
    misses: int
    size: int


@dataclass
class _Entry:
    graph: Graph
    executable: Executable  # fed positionally: the arguments' arrays, then the lifted tensors'
    # what feeds each lifted placeholder, in placeholder order, called once per call: an
    # eager tensor's current array, or a fresh dropout key
    lifted: list[Callable[[], np.ndarray]]
    structure: Any  # the result's pytree structure: its leaves are the graph's outputs

    def pack(self, result: Any) -> Any:
        results = result if len(self.graph.outputs) > 1 else (result,)
        return tree_unflatten(self.structure, results[: num_leaves(self.structure)])


def static_key(value: Any) -> Any:
    """A static scalar as a cache key that tells values apart exactly: 0.0 and -0.0 are
    two traces (1/x differs), and a NaN equals itself (else every call would retrace)."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, complex):
        return (value.real.hex(), value.imag.hex())
    return value


def _as_array(value: Any, tree: TreeDef, k: int) -> np.ndarray:
    """Leaf `k` of the call's (args, kwargs) structure `tree` as an array."""
    if type(value) is np.ndarray:  # the common case, first
        return value
    tensor_type = eager_tensor_type()
    if tensor_type is not None and isinstance(value, tensor_type):
        return tensor_value(value)
    if is_python_scalar(value):
        return np.asarray(value, dtype=weak_dtype(value, ()))
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged sequence of an unregistered type
        array = np.empty(0, object)
    if array.dtype == object:
        paths = leaf_paths(tree.children[0], "args") + leaf_paths(tree.children[1], "kwargs")
        raise DTypeError(
            f"gc.jit: {paths[k]} is not an array (got {type(value).__name__}): arguments are "
            "arrays, numbers, eager tensors, or pytrees of them (tuples, lists, dicts, "
            "namedtuples, None, types registered with gc.register_pytree_node); hold any "
            "other value static with static_argnums or static_argnames (a method's self: "
            "static_argnums=0)"
        )
    return array


def _tracing(leaves: list[Any]) -> bool:
    """Is this call part of a graph being built (graph values among the arguments, or a
    graph open in this thread)?"""
    return active_graph() is not None or any(isinstance(leaf, Symbol) for leaf in leaves)


def call_leaf_names(fn: Callable[..., Any], tree: TreeDef) -> list[str]:
    """A placeholder name for each leaf of the (args, kwargs) structure: the parameter's
    name (the keyword's) for an argument that is one array, else that name and the leaf's
    path (`p['w']` is `p_w`), made unique."""
    positional, keywords = tree.children
    tops = parameter_names(fn, len(positional.children))
    paths = [
        path for top, child in zip(tops, positional.children) for path in leaf_paths(child, top)
    ]
    if keywords is not None:
        paths += [
            path
            for key, child in zip(keywords.aux, keywords.children)
            for path in leaf_paths(child, str(key))
        ]
    names: list[str] = []
    for path in paths:
        base = re.sub(r"\W+", "_", path).strip("_") or "arg"
        name, k = base, 1
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def trace_call(
    fn: Callable[..., Any],
    specs: list[TensorSpec],
    static_at: dict[int, Any],
    tree: TreeDef,
    params: Mapping[str, Any] | None = None,
) -> tuple[Graph, Any]:
    """`fn` traced on a call whose (args, kwargs) structure is `tree`: a placeholder per
    spec, the leaves at `static_at` given as they are; the graph (placeholders named by
    `call_leaf_names`) and the result's structure, whose leaves are its first outputs."""
    structure: list[Any] = []
    count = len(specs) + len(static_at)  # leaves

    def recording(*values: Any) -> Any:
        inputs = iter(values)
        leaves = [static_at[i] if i in static_at else next(inputs) for i in range(count)]
        args, kwargs = tree_unflatten(tree, leaves)
        result = fn(*args, **kwargs)
        out_leaves, out_tree = tree_flatten(result)
        _check_results(fn, out_leaves, out_tree)
        structure.append(out_tree)
        if not out_leaves:  # (), None: a graph has an output, so one the caller never sees
            return np.bool_(False)
        keys = out_tree.aux if isinstance(out_tree, TreeDef) else None
        if isinstance(result, Mapping) and all(c == LEAF for c in out_tree.children):
            return dict(zip(keys, out_leaves))  # outputs named by their keys
        return result if out_tree == LEAF else tuple(out_leaves)

    functools.update_wrapper(recording, fn, updated=())
    names = [n for i, n in enumerate(call_leaf_names(fn, tree)) if i not in static_at]
    recording.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
    )  # placeholders keep the names of the parameters they stand for
    graph = trace(recording, *specs, name=graph_name(fn), params=params)
    return graph, structure[0]


def _check_results(fn: Callable[..., Any], leaves: list[Any], tree: TreeDef) -> None:
    """Each leaf of a traced call's result is a value a graph can output (JAX's check):
    else an error naming the leaf, not the constant lifting's complaint about a dtype."""
    tensor_type = eager_tensor_type()
    for leaf, path in zip(leaves, leaf_paths(tree, "result")):
        if isinstance(leaf, (Symbol, np.ndarray, np.generic)) or is_python_scalar(leaf):
            continue
        if tensor_type is not None and isinstance(leaf, tensor_type):
            continue
        raise DTypeError(
            f"{getattr(fn, '__name__', 'fn')} returned a {type(leaf).__name__} at {path}; "
            "a traced function returns arrays, numbers or pytrees of them"
        )


def eval_shape(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shape and dtype of each leaf of `f(*args, **kwargs)`, as `gc.TensorSpec`s in
    the result's structure, found by tracing `f` as `gc.jit` would, without running it
    (`jax.eval_shape`). Each array leaf of the arguments may be an array, an eager tensor
    or a `gc.TensorSpec` (a None dim is symbolic, and so are the result dims it makes);
    Python numbers are static, as in `gc.jit`, so they stay weakly typed. Any other
    object with `shape` and `dtype` (a `jax.ShapeDtypeStruct`) stands for an array.

    >>> import numpy as np, graphc as gc
    >>> gc.eval_shape(lambda x, w: {"y": x @ w}, gc.TensorSpec((None, 3)), np.ones((3, 2)))
    {'y': TensorSpec(shape=('x_0', 2), dtype=dtype('float64'))}
    """
    leaves, tree = tree_flatten((args, kwargs))
    static_at = {k: leaf for k, leaf in enumerate(leaves) if is_python_scalar(leaf)}
    specs = []
    for k, leaf in enumerate(leaves):
        if k not in static_at:
            described = isinstance(leaf, TensorSpec) or (
                hasattr(leaf, "shape") and hasattr(leaf, "dtype")
            )
            array = leaf if described else _as_array(leaf, tree, k)
            specs.append(TensorSpec(tuple(array.shape), np.dtype(array.dtype)))
    graph, structure = trace_call(f, specs, static_at, tree)
    types = [TensorSpec(o.type.shape, o.type.dtype) for o in graph.outputs]
    return tree_unflatten(structure, types[: num_leaves(structure)])


# the types of a call's arguments that need no pytree walk (numpy's scalar types too)
_PLAIN = frozenset(
    [np.ndarray, np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64]
    + [np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
)
_FLAT_TREES: dict[int, TreeDef] = {}


def _flat_tree(count: int) -> TreeDef:
    """The structure of a call of `count` plain arguments, as tree_flatten gives it."""
    _FLAT_TREES[count] = tree_flatten((tuple(range(count)), {}))[1]
    return _FLAT_TREES[count]


class Jitted:
    """A function that runs as a compiled graph; see `jit`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        params: Mapping[str, Any] | None = None,
        static: Statics | None = None,
        owner: Any = None,
    ) -> None:
        self.fn = fn
        self.params = params
        self._static = static  # the arguments held static (static_argnums/static_argnames)
        self._by_static: dict[tuple, Jitted] = {}  # their values -> the function of the rest
        self._owner = fn if owner is None else owner  # whose named_parameters() are params
        self._cache: dict[tuple, _Entry] = {}
        self._hits = 0
        self._misses = 0
        # updated=(): fn's __dict__ (another Jitted's fn and cache) must not become ours
        functools.update_wrapper(self, fn, updated=())  # type: ignore[arg-type]

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A jitted function in a class body is a method, as JAX's: `obj.f(x)` calls
        it with `obj` first (hold `self` static with static_argnums=0, or make the class
        a pytree)."""
        if instance is None:
            return self
        return functools.partial(self, instance)

    def _named_params(self) -> dict[str, Any]:
        return dict(self.params) if self.params is not None else module_parameters(self._owner)

    def signature(self, arrays: list[np.ndarray], statics: tuple = (), tree: Any = None) -> tuple:
        params = self._named_params()
        return (
            tuple((a.shape, a.dtype.str) for a in arrays),
            tuple((name, id(t)) for name, t in params.items()),
            tuple((i, kind, static_key(value)) for i, kind, value in statics),
            tree,
        )

    @staticmethod
    def _split(leaves: list[Any], tree: TreeDef) -> tuple[list[np.ndarray], tuple]:
        """The arrays fed as inputs, and (leaf index, type, value) of each static scalar,
        of the leaves of the call's (args, kwargs)."""
        statics = tuple(
            (i, type(a).__name__, a) for i, a in enumerate(leaves) if is_python_scalar(a)
        )
        arrays = [_as_array(a, tree, k) for k, a in enumerate(leaves) if not is_python_scalar(a)]
        return arrays, statics

    def _entry(self, arrays: list[np.ndarray], statics: tuple, tree: TreeDef) -> _Entry:
        """The cached trace for this signature, traced and compiled on a miss."""
        key = self.signature(arrays, statics, tree)
        try:
            entry = self._cache.get(key)
        except TypeError:  # a registered type's aux data that cannot be hashed
            raise DTypeError(
                "gc.jit: the arguments' structure cannot be a cache key (a registered "
                "pytree type's aux data must be hashable, as in JAX)"
            ) from None
        if entry is None:
            self._misses += 1
            entry = self._cache[key] = self._build(arrays, statics, tree)
        else:
            self._hits += 1
        return entry

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        if self._static is not None:
            if _tracing(tree_flatten((args, kwargs))[0]):
                return self.fn(*args, **kwargs)  # inlined, the static values as given
            args, kwargs, rest = self._of_the_rest(args, kwargs)
            return rest(*args, **kwargs)
        if not kwargs and active_graph() is None and all(type(a) in _PLAIN for a in args):
            # the common call, arrays and numpy scalars only: nothing to flatten or convert
            tree = _FLAT_TREES.get(len(args)) or _flat_tree(len(args))
            arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in args]
            entry = self._entry(arrays, (), tree)
            lifted = (feed() for feed in entry.lifted)
            return entry.pack(entry.executable(*arrays, *lifted))
        leaves, tree = tree_flatten((args, kwargs))
        if _tracing(leaves):
            return self.fn(*args, **kwargs)  # inlined into the graph being built, as jax.jit is
        arrays, statics = self._split(leaves, tree)
        entry = self._entry(arrays, statics, tree)
        lifted = (feed() for feed in entry.lifted)
        return entry.pack(entry.executable(*arrays, *lifted))

    def _build(self, arrays: list[np.ndarray], statics: tuple, tree: TreeDef) -> _Entry:
        specs = [TensorSpec(a.shape, a.dtype) for a in arrays]
        static_at = {i: value for i, _, value in statics}
        graph, structure = trace_call(self.fn, specs, static_at, tree, self._named_params())
        by_name = lifted_tensors(graph)
        # the dropout key is fresh per call, from the generator eager's draws use (as eager
        # dropout draws one: `manual_seed` makes calls repeatable)
        lifted = [
            fresh_key if p.name == KEY else functools.partial(tensor_value, by_name[p.name])
            for p in graph.inputs[len(arrays) :]
        ]
        return _Entry(graph, compile_graph(graph), lifted, structure)

    def _of_the_rest(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, Jitted]:
        """The call's other arguments, and the jitted function of them that the static
        ones' values make (one per combination of values, made on first use)."""
        assert self._static is not None
        args, kwargs, at, given = self._static.split(args, kwargs)
        key = tuple((k, type(v).__name__, static_key(v)) for k, v in given.items())
        try:
            rest = self._by_static.get(key)
        except TypeError:
            raise DTypeError(self._static.unhashable(given)) from None
        if rest is None:
            rest = self._by_static[key] = Jitted(
                self._static.bind(self.fn, at, given), self.params, owner=self._owner
            )
        return args, kwargs, rest

    def cache_info(self) -> CacheInfo:
        """Hits, misses (traces) and entries, over every combination of static values."""
        parts = [self, *self._by_static.values()]
        return CacheInfo(
            sum(j._hits for j in parts),
            sum(j._misses for j in parts),
            sum(len(j._cache) for j in parts),
        )

    def graph_for(self, *args: Any, **kwargs: Any) -> Graph:
        """The traced graph that a call with these arguments runs (tracing if needed)."""
        if self._static is not None:
            args, kwargs, rest = self._of_the_rest(args, kwargs)
            return rest.graph_for(*args, **kwargs)
        leaves, tree = tree_flatten((args, kwargs))
        return self._entry(*self._split(leaves, tree), tree).graph


class Statics:
    """The arguments of a jitted function held static (`static_argnums`, `static_argnames`),
    as JAX does: each argument named one way is found the other way too through the
    function's signature, so it is static whether passed by position or by keyword. A
    static value is part of the cache key (it must be hashable) and reaches the function
    as it is: a Python value at trace time, never a graph input."""

    def __init__(self, fn: Callable[..., Any], nums: Any, names: Any, what: str = "static") -> None:
        nums = (nums,) if isinstance(nums, (int, np.integer)) else tuple(nums or ())
        names = (names,) if isinstance(names, str) else tuple(names or ())
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in nums):
            raise DTypeError(f"gc.jit: {what}_argnums must be ints, got {nums!r}")
        if not all(isinstance(n, str) for n in names):
            raise DTypeError(f"gc.jit: {what}_argnames must be strings, got {names!r}")
        try:
            parameters = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):  # no signature: the positions and names as given
            parameters = []
        positional = [
            p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        at: set[int] = set()
        name = getattr(fn, "__name__", "fn")
        var_positional = any(p.kind == p.VAR_POSITIONAL for p in parameters)
        for n in nums:
            n = int(n)
            if n < 0:  # from the end of the positional parameters, as JAX
                if not positional or n < -len(positional):
                    raise DTypeError(
                        f"gc.jit: {what}_argnums {n} counts from the end of the function's "
                        f"{len(positional)} positional parameter(s)"
                    )
                n += len(positional)
            elif parameters and not var_positional and n >= len(positional):
                raise DTypeError(  # as JAX: else the number silently holds nothing static
                    f"gc.jit: {what}_argnums {n} is past the {len(positional)} positional "
                    f"parameter(s) of '{name}' ({[p.name for p in positional]}); count from 0"
                )
            at.add(n)
        known = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        for p in parameters:  # names that no keyword argument can give, as JAX refuses them
            if p.name in names and p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
                raise DTypeError(
                    f"gc.jit: {what}_argnames names '{p.name}', a {p.kind.description} "
                    f"parameter of '{name}', which no keyword argument can give; name it "
                    f"by position ({what}_argnums)"
                    if p.kind == p.POSITIONAL_ONLY
                    else f"gc.jit: {what}_argnames names '{p.name}', the {p.kind.description} "
                    f"parameter of '{name}'; name the parameters themselves"
                )
        if parameters and not any(p.kind == p.VAR_KEYWORD for p in parameters):
            unknown = sorted(set(names) - known)
            if unknown:
                raise DTypeError(
                    f"gc.jit: {what}_argnames {unknown} name no parameter of "
                    f"'{name}' (its parameters: {sorted(known)})"
                )
        self.nums = frozenset(at | {k for k, p in enumerate(positional) if p.name in names})
        self.names = frozenset(
            set(names)
            | {p.name for k, p in enumerate(positional) if k in at and p.kind != p.POSITIONAL_ONLY}
        )
        self.parameters = parameters
        self.positional = positional

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, list[int], dict]:
        """(the other positional arguments, the other keywords, the positions taken out,
        the static values by position or keyword name)."""
        at = [k for k in range(len(args)) if k in self.nums]
        given: dict[Any, Any] = {k: args[k] for k in at}
        given.update({name: kwargs[name] for name in sorted(self.names) if name in kwargs})
        rest_args = tuple(a for k, a in enumerate(args) if k not in self.nums)
        rest_kwargs = {name: v for name, v in kwargs.items() if name not in self.names}
        return rest_args, rest_kwargs, at, given

    def bind(self, fn: Callable[..., Any], at: list[int], given: dict) -> Callable[..., Any]:
        """`fn` of the other arguments, the static values put back where they were."""
        positions = {k: given[k] for k in at}
        keywords = {k: v for k, v in given.items() if isinstance(k, str)}

        def rest(*args: Any, **kwargs: Any) -> Any:
            full, others = [], iter(args)
            for k in range(len(args) + len(positions)):
                full.append(positions[k] if k in positions else next(others))
            return fn(*full, **kwargs, **keywords)

        functools.update_wrapper(rest, fn, updated=())
        if self.parameters:  # placeholders keep the names of the other parameters
            taken = {self.positional[k].name for k in at if k < len(self.positional)}
            rest.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
                [p for p in self.parameters if p.name not in taken and p.name not in keywords]
            )
        return rest

    def unhashable(self, given: dict) -> str:
        """The error for static values that cannot be a cache key, naming the first."""
        for k, v in given.items():
            try:
                hash(v)
            except TypeError:
                if isinstance(k, str):
                    where = f"keyword argument '{k}'"
                elif k < len(self.positional):
                    where = f"argument {k} ('{self.positional[k].name}')"
                else:
                    where = f"argument {k}"
                return (
                    f"gc.jit: static {where} is a {type(v).__name__}, which cannot be hashed; "
                    "a static value is part of the cache key (pass a tuple for a list; an "
                    "array is an input, not static)"
                )
        return "gc.jit: a static argument cannot be hashed"


def jit(
    fn: Callable[..., Any] | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    donate_argnames: str | Sequence[str] = (),
) -> Any:
    """Compile `fn` on first call for each input signature (shapes, dtypes), then reuse it.

    Arguments and results may be pytrees (tuples, lists, dicts, namedtuples, None,
    registered classes), as in `jax.jit`: each array leaf is an input and the structure
    is part of the signature. Python scalars (int, float, bool) are static: each value
    gets its own trace and cache entry (pass a numpy scalar to make it an input).
    `params` names the eager tensors `fn` reads as parameters (by default a module's
    `named_parameters()`); eager tensors it closes over are read afresh at every call.
    Called on graph values (inside `gc.trace`, `gc.vmap`, `gc.grad` or another jitted
    function), it is inlined into the graph being built. `cache_info()` counts hits
    and misses. `static_argnums` / `static_argnames` hold arguments static as in
    `jax.jit` (any hashable value: a string, a tuple, a callable; each value traces
    once). `donate_argnums` / `donate_argnames` are accepted for JAX's sake and change
    nothing: a compiled plan never writes into a caller's array. More in the module
    doc of `graphc.frontend.jit`.

    >>> import numpy as np, graphc as gc
    >>> f = gc.jit(lambda x: gc.relu(x) * 2)
    >>> f(np.array([-1.0, 2.0], np.float32))
    array([0., 4.], dtype=float32)
    >>> f.cache_info().misses
    1

    Without `fn` it is a decorator, as `jax.jit(static_argnums=0)` is:

    >>> @gc.jit(static_argnums=0)
    ... def scaled(n, x):
    ...     return x * n
    >>> scaled(3, np.float32(2.0))
    array(6., dtype=float32)
    """
    if fn is None:
        return functools.partial(
            jit, params=params, static_argnums=static_argnums, static_argnames=static_argnames
        )
    Statics(
        fn, donate_argnums, donate_argnames, "donate"
    )  # checked as JAX checks them, then unused
    if not callable(fn):
        raise DTypeError(f"gc.jit: expected a function to compile, got {type(fn).__name__}")
    if static_argnums == () and static_argnames == ():
        return Jitted(fn, params)
    return Jitted(fn, params, Statics(fn, static_argnums, static_argnames))
