"""Tracing: run a Python function once on graph values and keep the graph it records.

`trace(fn, *specs)` opens a new Graph, declares one placeholder per parameter of
`fn` (named after the parameter), calls `fn` on those graph values, and marks what
it returns as outputs. Because the op functions record nodes when given graph
values, any function written with graphc ops, operators or eager-tensor methods
traces without change.

Eager tensors met while tracing (a model's parameters, captured by closure or
passed in `params=`) become placeholders too, appended after `fn`'s own inputs and
named after their attribute where one is known (`params=`' keys, or an nn module's
dotted path, "encoder.0.weight"; `param`, `param_1` otherwise). The
same tensor met twice is the same placeholder. `lifted_tensors(graph)` gives those
placeholders' tensors by name, and `lifted_feeds(graph)` their current values, so a
caller (`gc.jit`, nn) feeds them as `graph(*arrays, **lifted_feeds(graph))`.
While tracing, operations among eager tensors alone are recorded as well (not
computed eagerly; an open graph outranks eager tensors in dispatch), so a
parameter's transpose is a node fed by the parameter.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.frontend.declare import output
from graphc.frontend.names import make_room, naming_values
from graphc.ir.errors import GraphcError, ShapeError, TracingError
from graphc.ir.graph import PLACEHOLDER, Graph, Node
from graphc.ir.scope import value_name
from graphc.ir.types import TensorType, as_dim, as_dtype, format_shape
from graphc.ops import dispatch
from graphc.ops.symbolic import SYMBOLIC, Symbol, register_lifter, user_location


@dataclass(frozen=True)
class TensorSpec:
    """The shape and dtype of a traced input; None in a shape is a fresh symbolic dim.

    >>> import graphc as gc
    >>> gc.TensorSpec((None, 3)).dtype
    dtype('float32')
    """

    shape: tuple
    dtype: np.dtype

    def __init__(self, shape: Iterable[Any] = (), dtype: Any = "float32") -> None:
        if shape is None:  # tf.TensorSpec's unknown rank; it was taken for one dim
            raise ShapeError(
                "TensorSpec: shape None (an unknown rank) is not supported; give the dims, "
                "None for each size known only at run time: TensorSpec((None, 3))"
            )
        dims = (shape,) if isinstance(shape, (int, str, np.integer)) else tuple(shape)
        try:  # checked now, so the mistake is met where the spec is written
            dims = tuple(None if d is None else as_dim(d) for d in dims)
        except ShapeError as exc:
            raise ShapeError(
                f"TensorSpec: bad shape {dims}: {exc} (None is a size known only at run time)"
            ) from None
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", as_dtype(dtype))

    def to_type(self, fresh_dim: Callable[[int], str]) -> TensorType:
        return TensorType(
            (fresh_dim(axis) if d is None else d for axis, d in enumerate(self.shape)), self.dtype
        )


def as_spec(value: Any, what: str) -> TensorSpec:
    """A TensorSpec, from a spec or from an example value (its shape and dtype)."""
    if isinstance(value, TensorSpec):
        return value
    if isinstance(value, TensorType):
        return TensorSpec(value.shape, value.dtype)
    if isinstance(value, (bool, int, float)):
        return TensorSpec((), dispatch.weak_dtype(value, ()))
    if isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, str, type(None))) and not isinstance(v, bool) for v in value
    ):  # (3, 4) or ("B", 3): a shape, or an example of two ints? Said, not guessed
        example = (
            ""
            if any(isinstance(v, str) for v in value)
            else (f", or np.array({list(value)!r}) for an example array")
        )
        raise GraphcError(
            f"{what}: {value!r} looks like a shape; give gc.TensorSpec({tuple(value)!r}) for an "
            f"input of that shape{example}"
        )
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        try:
            array = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - any failure means "not an example"
            raise GraphcError(
                f"{what}: expected a gc.TensorSpec or an example array, got {type(value).__name__}"
            ) from exc
        shape, dtype = array.shape, array.dtype
    try:
        return TensorSpec(tuple(shape), dtype)
    except GraphcError as exc:
        raise type(exc)(
            f"{what}: expected a gc.TensorSpec or an example array, got a "
            f"{type(value).__name__} ({exc})"
        ) from None


# -- lifting eager tensors -------------------------------------------------------------


class _Trace:
    """The state of one trace in progress: its graph and the tensors lifted so far."""

    def __init__(self, graph: Graph, names: Mapping[int, str]) -> None:
        self.graph = graph
        self.names = dict(names)  # id(tensor) -> attribute name given by the caller
        self.lifted: dict[int, tuple[Any, Symbol]] = {}  # id(tensor) -> (tensor, placeholder)

    def lift(self, tensor: Any) -> Symbol:
        known = self.lifted.get(id(tensor))
        if known is not None:
            return known[1]
        name = self.names.get(id(tensor)) or value_name(tensor)
        if name is None or name in self.graph:
            name = self.graph.fresh_name(name or "param")
        node = self.graph.add_placeholder(
            name,
            TensorType(tensor.shape, tensor.dtype),
            meta={"loc": user_location(), "lifted": True},  # feed errors name lifted_feeds
        )
        symbol = Symbol(node)
        self.lifted[id(tensor)] = (tensor, symbol)
        return symbol


class _Tracing(threading.local):
    """The traces this thread has in progress, innermost last."""

    def __init__(self) -> None:
        self.traces: list[_Trace] = []


_TRACING = _Tracing()
_LIFTED: weakref.WeakKeyDictionary[Graph, dict[str, Any]] = weakref.WeakKeyDictionary()


def eager_tensor_type() -> type | None:
    """graphc.eager's Tensor class, if eager has been imported (no tensor exists otherwise)."""
    for module_name in ("graphc.eager", "graphc.eager.tensor"):
        tensor_type = getattr(sys.modules.get(module_name), "Tensor", None)
        if tensor_type is not None:
            return tensor_type
    return None


def _lift_eager(value: Any, graph: Graph) -> Symbol | None:
    tensor_type = eager_tensor_type()
    if tensor_type is None or not isinstance(value, tensor_type):
        return None
    for trace_state in reversed(_TRACING.traces):
        if trace_state.graph is graph:
            return trace_state.lift(value)
    raise TracingError(
        f"an eager tensor of shape {format_shape(value.shape)} was mixed with values of graph "
        f"'{graph.name}', which is declared, not traced; feed it through a placeholder or use "
        "gc.trace"
    )


register_lifter(_lift_eager)


def lifted_tensors(graph: Graph) -> dict[str, Any]:
    """The eager tensors that tracing turned into placeholders of `graph`, by name.

    Empty for graphs that were declared, or traced without meeting an eager tensor.
    """
    return dict(_LIFTED.get(graph, {}))


def tensor_value(tensor: Any) -> np.ndarray:
    """The current array of an eager tensor (detached: feeding needs no tape)."""
    return np.asarray(tensor.detach().numpy())


def lifted_feeds(graph: Graph) -> dict[str, np.ndarray]:
    """The current values of `graph`'s lifted eager tensors, by placeholder name.

    >>> import numpy as np, graphc as gc, graphc.eager as ge
    >>> w = ge.ones(2, requires_grad=True)
    >>> g = gc.trace(lambda x: x * w, gc.TensorSpec((2,)), params={"w": w})
    >>> g(np.ones(2, np.float32), **gc.lifted_feeds(g))
    array([1., 1.], dtype=float32)
    """
    return {name: tensor_value(t) for name, t in lifted_tensors(graph).items()}


# -- trace -------------------------------------------------------------------------------------


def parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    """Placeholder names for `count` positional inputs of `fn`, from its signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and some callables have no signature
        params = []
    names: list[str] = []
    for p in params:
        if len(names) == count:
            break
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            names.extend(f"{p.name}_{i}" for i in range(count - len(names)))
        elif p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    names.extend(f"arg{i}" for i in range(len(names), count))
    return names


def _check_arity(fn: Callable[..., Any], count: int, name: str) -> None:
    """One spec per positional input: say so before `fn` fails with a bare TypeError."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to check against
        return
    try:
        signature.bind(*range(count))
    except TypeError as exc:
        raise TracingError(
            f"trace: {name} cannot be called with {count} input(s), one per spec given: {exc}"
        ) from None


def module_parameters(fn: Any) -> dict[str, Any]:
    """A module's `named_parameters()` as a dict (dotted names); {} for other callables."""
    named = getattr(fn, "named_parameters", None)
    return dict(named()) if callable(named) else {}


def _named_parameters(fn: Any, params: Mapping[str, Any] | None) -> dict[int, str]:
    """id(tensor) -> name, from `params` or from a module's `named_parameters()`."""
    if params is None:
        params = module_parameters(fn)
    return {id(t): name for name, t in params.items()}


def _output_items(result: Any) -> list[tuple[str | None, Any]]:
    if isinstance(result, Mapping):
        return [(str(k), v) for k, v in result.items()]
    if isinstance(result, (tuple, list)):
        return [(None, v) for v in result]
    return [(None, result)]


def _placeholders_first(graph: Graph) -> Graph:
    """The same graph with every placeholder before the first op (lifted ones come late)."""
    ordered = [n for n in graph.nodes if n.kind == PLACEHOLDER]
    ordered += [n for n in graph.nodes if n.kind != PLACEHOLDER]
    if ordered == graph.nodes:
        return graph
    result = Graph(graph.name)
    copies: dict[Node, Node] = {}
    for n in ordered:
        result.append_copy(n, copies)
    return result


def graph_name(fn: Callable[..., Any]) -> str:
    """The name of a graph traced from `fn`: its ``__name__`` ("lambda" for a lambda),
    through functools.partial to the function it wraps, else the class name of a callable
    object (an nn module: "Sequential", as torch.fx names a GraphModule by its class)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name:
        name = type(fn).__name__
    return name.replace("<lambda>", "lambda")


def trace(
    fn: Callable[..., Any],
    *specs: Any,
    name: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> Graph:
    """Trace `fn` on inputs described by `specs` into a Graph.

    Each spec is a `gc.TensorSpec(shape, dtype)` or an example array. Returning a
    tuple gives several outputs (out, out_1, ...); returning a dict names them.
    `params` names eager tensors that `fn` uses, so their placeholders get those names.

    >>> import numpy as np, graphc as gc
    >>> g = gc.trace(lambda x, w: gc.relu(x @ w), gc.TensorSpec((None, 3)), np.ones((3, 2)))
    >>> [p.name for p in g.inputs], str(g.inputs[0].type)
    (['x', 'w'], 'f32[x_0,3]')
    """
    if name is not None and not isinstance(name, str):
        raise GraphcError(f"trace: expected a str as the graph's name, got {name!r}")
    graph = Graph(name or graph_name(fn))
    _check_arity(fn, len(specs), graph.name)
    input_names = parameter_names(fn, len(specs))
    state = _Trace(graph, _named_parameters(fn, params))
    with graph:
        args = []
        for input_name, spec in zip(input_names, specs):
            spec = as_spec(spec, f"trace: input '{input_name}'")

            node = graph.add_placeholder(
                input_name,
                spec.to_type(lambda axis, base=input_name: f"{base}_{axis}"),
                meta={"loc": user_location()},
            )
            args.append(Symbol(node))
        _TRACING.traces.append(state)
        try:
            with naming_values(sys._getframe()):
                result = fn(*args)
                items = _output_items(result)
                for position, (out_name, value) in enumerate(items):
                    if isinstance(value, (tuple, list, Mapping)):
                        # else lifting it as a constant asks a graph value for its data
                        raise TracingError(
                            f"trace: output {out_name or position} is a {type(value).__name__}; "
                            "outputs do not nest: return a flat tuple or a dict of values"
                        )
                    _mark_output(graph, value, out_name)
        finally:
            _TRACING.traces.remove(state)
    if not graph.outputs:
        raise TracingError(f"trace: {graph.name} returned nothing to output")
    graph.finished_by = "trace"  # (the values the function kept belong to this one)
    graph = _placeholders_first(graph)
    graph.finished_by = "trace"
    _LIFTED[graph] = {sym.name: tensor for tensor, sym in state.lifted.values()}
    return graph


def _mark_output(graph: Graph, value: Any, out_name: str | None) -> None:
    if value is None:
        raise TracingError(f"trace: {graph.name} returned None as an output")
    symbol = value if isinstance(value, Symbol) else SYMBOLIC.lift(value, None, ())
    if out_name is not None:
        make_room(graph, out_name, symbol.node)
    if out_name is not None and out_name in graph:
        clash = graph.node(out_name)
        raise TracingError(
            f"trace: output name '{out_name}' is already taken by {clash.describe()}; "
            "choose another key"
        )
    output(symbol, out_name)
