"""Graph values: applying an op to them records a node instead of computing.

A `Symbol` is a handle on a node of a graph under construction. Recording lives here,
in `ops/`, so that passes such as autodiff can build graphs through the very same op
functions users call, without the frontend.

A value of another kind met while recording (an eager tensor during tracing) is
handed to the lifters that upper layers register with `register_lifter`.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from graphc.ir.attrs import attrs_problem
from graphc.ir.errors import GraphcError, GraphMismatchError, TensorTypeError, TracingError
from graphc.ir.graph import Graph, Node, active_graph
from graphc.ir.registry import OpDef
from graphc.ir.scope import current_scope
from graphc.ir.types import Shape, TensorType, is_float
from graphc.ops import dispatch, grad_state
from graphc.ops.methods import ValueMethods

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_STATIC_HINT = (
    "A static graph is built once, before any data is seen, so Python control flow "
    "cannot depend on the values flowing through it. "
)
_IF_HINT = _STATIC_HINT + (
    "Say it in the graph: gc.cond(pred, true_fn, false_fn, *operands) for an if, "
    "gc.while_loop(cond_fn, body_fn, init) for a while loop, gc.where(condition, a, b) "
    "to choose elementwise; or run the code eagerly."
)
_LOOP_HINT = _STATIC_HINT + (
    "Say it in the graph: gc.scan(f, init, xs) steps along the first axis of xs, "
    "gc.fori_loop(lower, upper, body_fn, init) repeats a body; or run the code eagerly."
)
_WHERE_HINT = _STATIC_HINT + (
    "Express the choice inside the graph with gc.where(condition, if_true, if_false) or "
    "gc.cond, or run the code eagerly."
)
_VALUE_HINT = (
    "A graph value has no data until the graph runs: keep computing with graphc's ops "
    "(gc.*: math.exp(x) is gc.exp(x), float(gc.sum(x)) stays gc.sum(x)) and return the "
    "value from the function, which gives it back as an array once the graph has run; "
    "to fill an array, build it with gc.stack, gc.concatenate or gc.where rather than "
    "assigning into numpy; or run the code eagerly."
)
_INDEX_HINT = (
    "A graph value has no data until the graph runs, so it cannot be a Python index: "
    "index with graphc's ops (gc.take(array, index, axis), or x[index] on a graph value), "
    "or pass a Python int."
)
_DIM_HINT = (
    "Loop in the graph instead: gc.scan(f, init, xs) steps along the first axis of xs (a "
    "`for t in range(T)` reading x[t] is a scan over x), gc.fori_loop(lower, upper, "
    "body_fn, init) repeats a body; or trace with a concrete size (an example array, or a "
    "gc.TensorSpec with a number where the dim is None)."
)


@functools.lru_cache(maxsize=1024)
def _inside_package(filename: str) -> bool:
    # abspath per frame per recorded node was a fifth of gc.gradients' time
    return os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)


def user_location() -> str | None:
    """`file:line` of the innermost caller outside the graphc package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _inside_package(filename):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


class SymbolicDim(str):
    """A symbolic dim read from a graph value's `.shape`: the str of its symbol (it
    compares, hashes, formats and pickles as that str), which refuses to be a number:
    `range(1, x.shape[0])` on a symbolic dim is a TracingError naming the dim and the
    value and suggesting gc.scan / gc.fori_loop, not a bare TypeError."""

    value: str  # what the error says it is the dim of: "axis 0 of graph value 'x' (f32[T,3])"

    def __new__(cls, symbol: str, value: str) -> SymbolicDim:
        dim = super().__new__(cls, symbol)
        dim.value = value
        return dim

    def __reduce__(self) -> tuple:  # a copy or a pickle is the plain str
        return str, (str(self),)

    def _no_size(self, what: str, hint: str = _DIM_HINT) -> TracingError:
        loc = user_location()
        where = f" at {loc}" if loc else ""
        return TracingError(
            f"dim {str(self)!r} ({self.value}){where} is symbolic: a static graph is built "
            f"before its size is known (when the graph runs), so it cannot be {what}. " + hint
        )

    def __index__(self) -> int:
        raise self._no_size("used as an int (by range(), as an index or a size)")

    def __int__(self) -> int:
        raise self._no_size("converted by int()")

    def __float__(self) -> float:
        raise self._no_size("converted by float()")

    def _arithmetic(self, other: Any) -> Any:
        if isinstance(other, str):  # text (a name built from the symbol) stays text
            return NotImplemented
        raise self._no_size(
            "computed with",
            "A dim is an int or one symbol, never an expression such as B*3: give reshape -1 "
            "for the dim it should infer, or a concrete size when tracing.",
        )

    def __add__(self, other: Any) -> Any:
        if isinstance(other, str):
            return str(self) + other
        return self._arithmetic(other)

    def __radd__(self, other: Any) -> Any:
        return self._arithmetic(other)

    __sub__ = __rsub__ = __truediv__ = __rtruediv__ = _arithmetic
    __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _arithmetic
    __mul__ = __rmul__ = _arithmetic  # str's would repeat the text: "T" * 2 == "TT"


# numpy computes `array + value` with its ufunc, which hands it to __array_ufunc__: these
# ufuncs are Python's operators, answered as the operator (reflected when the graph value
# is the right operand), as they were when numpy deferred to __radd__ by __array_priority__
_OPERATOR_UFUNCS = {
    np.add: ("__add__", "__radd__"),
    np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"),
    np.divide: ("__truediv__", "__rtruediv__"),
    np.power: ("__pow__", "__rpow__"),
    np.remainder: ("__mod__", "__rmod__"),
    np.floor_divide: ("__floordiv__", "__rfloordiv__"),
    np.matmul: ("__matmul__", "__rmatmul__"),
    np.less: ("__lt__", "__gt__"),
    np.less_equal: ("__le__", "__ge__"),
    np.greater: ("__gt__", "__lt__"),
    np.greater_equal: ("__ge__", "__le__"),
    np.equal: ("__eq__", "__eq__"),
    np.not_equal: ("__ne__", "__ne__"),
}


def graphc_counterpart(numpy_name: str) -> str | None:
    """The name of graphc's op function for numpy's function `numpy_name`, if any (graphc
    spells numpy's functions by their names: gc.dot, gc.arctan, gc.amax)."""
    from graphc import ops  # the package of op functions, complete once anything runs

    if numpy_name in ops.__all__ and callable(getattr(ops, numpy_name)):
        return numpy_name
    return None


def _plain_dims(value: Any) -> Any:
    """`value` with every SymbolicDim in it a plain str, as nodes hold dims."""
    if isinstance(value, SymbolicDim):
        return str(value)
    if type(value) in (tuple, list):
        return type(value)(_plain_dims(v) for v in value)
    return value


class ValueType(TensorType):
    """A graph value's `.type` read by the user's code: its node's TensorType (equal to
    it, hashed and printed as it, pickled as a plain one) that called is torch's
    Tensor.type method, as on an eager tensor: ``x.type()`` names the dtype,
    ``x.type(dtype)`` casts (`ValueMethods.type`).

    graphc's own code reads the plain TensorType (`Symbol.type`): it stores the types it
    reads in the nodes it makes, and in the type rules' caches, where one holding its
    value would keep that value's graph alive and fail the exact type checks
    (from_networkx)."""

    _value: Symbol

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorType):
            return self.shape == other.shape and self.dtype == other.dtype
        return NotImplemented

    __hash__ = TensorType.__hash__

    def __call__(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        return ValueMethods.type(self._value, dtype, non_blocking)


def _value_type(value: Symbol, t: TensorType) -> ValueType:
    typed = object.__new__(ValueType)
    typed.__dict__.update(t.__dict__)  # (frozen: its fields are set as __init__ sets them)
    typed.__dict__["_value"] = value
    return typed


class Symbol(ValueMethods):
    """A value in a graph being declared or traced (the result of an op on graph values)."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def graph(self) -> Graph:
        assert self.node.graph is not None
        return self.node.graph

    @property
    def type(self) -> Any:
        """The value's TensorType; read outside graphc, a ValueType: callable, as torch's
        Tensor.type method (see there)."""
        t = self.node.type
        if type(t) is not TensorType or _inside_package(sys._getframe(1).f_code.co_filename):
            return t  # (several results have no one dtype to cast)
        return _value_type(self, t)

    @property
    def shape(self) -> Shape:
        shape = self.node.type.shape
        if all(isinstance(d, int) for d in shape):
            return shape
        return tuple(
            SymbolicDim(d, f"axis {axis} of graph value '{self.node.name}' ({self.node.type})")
            if isinstance(d, str)
            else d
            for axis, d in enumerate(shape)
        )

    @property
    def dtype(self) -> np.dtype:
        return self.node.type.dtype

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def made_by(self) -> str | None:
        """The op that computes this value (None for a placeholder)."""
        return self.node.op

    def detach(self) -> Symbol:
        """This value with no gradient through it: torch's detach, in a graph
        gc.stop_gradient's node (an integer value carries none: itself)."""
        return _detached(self) if is_float(self.dtype) else self

    def __repr__(self) -> str:
        return f"<graph value {self.node.name}: {self.node.type} in graph '{self.graph.name}'>"

    def _no_data(self, what: str, hint: str = _WHERE_HINT) -> TracingError:
        loc = user_location()
        where = f" at {loc}" if loc else ""
        return TracingError(
            f"{what} of graph value '{self.node.name}' ({self.node.type}){where} needs its data. "
            + hint
        )

    def __bool__(self) -> bool:
        raise self._no_data("bool() (an `if` or `while` on it)", _IF_HINT)

    def __len__(self) -> int:
        return self._first_dim("counted by len()", "len() of")

    def __iter__(self) -> Any:
        # a known length: the loop unrolls, as in JAX
        first = self._first_dim(
            "the length of an iteration (a `for` over the value)", "iteration over"
        )
        return (self[i] for i in range(first))

    def _first_dim(self, what: str, call: str) -> int:
        """The size of axis 0, which len() and iteration need: a TracingError naming the
        dim when it is symbolic (its size comes from the feeds), or the value when it is
        0-d: it has no axis 0, a TypeError as torch's on a 0-d tensor and the eager
        Tensor's."""
        shape = self.shape
        if not shape:
            raise TensorTypeError(
                f"{call} a 0-d tensor: graph value '{self.node.name}' ({self.node.type}) has "
                "no dim to count or iterate along; use the value itself, or x.reshape(1) for "
                "a vector of one element"
            )
        first = shape[0]
        if isinstance(first, SymbolicDim):
            raise first._no_size(what)
        return first  # type: ignore[return-value]

    def __index__(self) -> int:
        raise self._no_data("use as an index", _INDEX_HINT)

    def __float__(self) -> float:
        raise self._no_data("float() (math.* functions call it)", _VALUE_HINT)

    def __int__(self) -> int:
        raise self._no_data("int()", _VALUE_HINT)

    def __complex__(self) -> complex:
        raise self._no_data("complex()", _VALUE_HINT)

    def item(self) -> Any:
        raise self._no_data(".item()", _VALUE_HINT)

    def numpy(self) -> Any:
        raise self._no_data(".numpy()", _VALUE_HINT)

    def tolist(self) -> Any:
        raise self._no_data(".tolist()", _VALUE_HINT)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._no_data("conversion to a numpy array", _VALUE_HINT)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        names = _OPERATOR_UFUNCS.get(ufunc)
        if names is not None and method == "__call__" and len(inputs) == 2 and not kwargs:
            x, y = inputs
            return getattr(x, names[0])(y) if isinstance(x, Symbol) else getattr(y, names[1])(x)
        call = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        raise self._numpy_call(f"numpy.{call}", ufunc.__name__)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if func is np.shape or func is np.ndim:  # they read no data
            shape = args[0].shape if isinstance(args[0], Symbol) else np.shape(args[0])
            return tuple(shape) if func is np.shape else len(shape)
        raise self._numpy_call(f"numpy.{func.__name__}", func.__name__)

    def _numpy_call(self, call: str, numpy_name: str) -> TracingError:
        name = graphc_counterpart(numpy_name)
        if name is not None:
            hint = (
                f"Use gc.{name}, graphc's op of the same name: it records a node on graph "
                "values (and computes on arrays and eager tensors alike)."
            )
        else:
            hint = (
                f"graphc has no op named {numpy_name}: write it with graphc's ops (gc.*), "
                "which record nodes, or run the code eagerly."
            )
        why = "numpy computes on data, which a graph value has none of until the graph runs. "
        return self._no_data(call, why + hint)

    def _immutable(self, what: str) -> TracingError:
        loc = user_location()
        where = f" at {loc}" if loc else ""
        return TracingError(
            f"{what} on graph value '{self.node.name}' ({self.node.type}){where}: graph values "
            "are immutable; compute a new value instead (y = x * 2 rather than x.mul_(2); "
            "gc.where(mask, new, x) to replace some elements)"
        )

    def __setitem__(self, index: Any, value: Any) -> None:
        raise self._immutable("item assignment")

    def __getattr__(self, name: str) -> Any:
        # eager code traced by gc.trace may call in-place tensor methods (add_, mul_, ...)
        if name.endswith("_") and not name.startswith("_"):
            raise self._immutable(f"in-place method .{name}()")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


_LIFTERS: list[Callable[[Any, Graph], Symbol | None]] = []


def register_lifter(lifter: Callable[[Any, Graph], Symbol | None]) -> None:
    """Let an upper layer turn foreign values (eager tensors) into graph values."""
    _LIFTERS.append(lifter)


def add_constant(graph: Graph, value: Any, name: str | None = None) -> Symbol:
    # a private, read-only, C-contiguous copy: the caller's array may change, and a
    # value's memory order is the runtime's (see LAYOUT in runtime/plan.py)
    array = np.array(value, order="C")
    array.flags.writeable = False
    node = graph.add_op(
        "constant",
        (),
        {"value": array},
        TensorType.of(array),
        name=name or graph.fresh_name("const"),
        meta={"loc": user_location()},
    )
    return Symbol(node)


# per graph, the constants made for the Python and numpy scalars its ops read, by
# (dtype, bits, name scope): `x * 1.5` a thousand times makes one constant, not a
# thousand for CSE to merge (a traced chain of 5,000 ops held 2,500 of them)
_SCALARS: weakref.WeakKeyDictionary[Graph, dict[tuple, Node]] = weakref.WeakKeyDictionary()


def _scalar_constant(graph: Graph, array: np.ndarray) -> Symbol:
    """The graph's constant for the 0-d `array`: one made before for the same value in
    the same scope if it is still in the graph, else a new one."""
    key = (array.dtype.str, array.tobytes(), current_scope())
    known = _SCALARS.setdefault(graph, {})
    node = known.get(key)
    if node is not None and node.name in graph and graph.node(node.name) is node:
        return Symbol(node)
    symbol = add_constant(graph, array)
    known[key] = symbol.node
    return symbol


class SymbolicKind:
    priority = 100

    def _graph(self, peers: Sequence[Any] = ()) -> Graph:
        graph = active_graph()  # first: a body being traced keeps its own constants
        if graph is not None:
            return graph
        for x in peers:
            if isinstance(x, Symbol):
                return x.graph
        if graph is None:
            raise GraphcError("no graph is being declared (use `with graph:`)")
        return graph

    def lift(self, value: Any, dtype: np.dtype | None, peers: Sequence[Any]) -> Symbol:
        if isinstance(value, Symbol):
            return value
        graph = self._graph(peers)
        if graph.finished_by is not None and active_graph() is None:
            return value  # apply refuses the op, naming the leaked value: add nothing to it
        root = outermost(graph)
        for lifter in _LIFTERS:
            # a foreign value (an eager tensor) read in a body becomes a placeholder of the
            # traced graph around it, captured into the body like any outer value
            lifted = lifter(value, root)
            if lifted is None:
                continue
            captured = capture(lifted, graph) if lifted.graph is not graph else None
            return lifted if captured is None else captured
        array = dispatch.NUMPY.lift(value, dtype)
        if np.ndim(array) == 0:
            return _scalar_constant(graph, array)
        return add_constant(graph, array)

    def apply(self, opdef: OpDef, inputs: list[Symbol], attrs: dict[str, Any]) -> Symbol:
        active = active_graph()
        # (with no graph open, the graph of the first graph value: lift left the other
        # operands of a finished graph's value as they are)
        leaked = next((x for x in inputs if isinstance(x, Symbol)), None)
        graph = (
            active
            if active is not None
            else (leaked.graph if leaked is not None else self._graph())
        )
        if active is None and graph.finished_by is not None:
            x = leaked
            raise TracingError(
                f"op '{opdef.name}' on graph value '{x.node.name}' ({x.node.type}) at "
                f"{user_location()}: the value belongs to graph '{graph.name}', whose "
                f"{graph.finished_by} has finished, so it has no data and takes no more ops "
                "(a value kept from the traced function, as JAX's leaked tracer): return it "
                "from the function instead, or add to the graph inside `with graph:`"
            )
        for k, x in enumerate(inputs):
            if x.graph is not graph:
                inner = capture(x, graph)
                if inner is not None:  # a body being traced reads an outer value
                    inputs[k] = inner
                    continue
                raise graph_mismatch(f"op '{opdef.name}'", x, graph, active is not None)
        attrs = {key: _plain_dims(value) for key, value in attrs.items()}
        attrs, out_type = dispatch.prepare(opdef, [x.node.type for x in inputs], attrs)
        problem = attrs_problem(attrs)  # what verify would refuse later, refused here
        if problem:
            raise GraphcError(f"op '{opdef.name}': {problem}")
        node = graph.add_op(
            opdef.name, [x.node for x in inputs], attrs, out_type, meta={"loc": user_location()}
        )
        if not grad_state.STATE.enabled:
            if _held_under_no_grad(node):
                return _detached(Symbol(node))
            node.meta[_NO_GRADIENT] = True  # computed under no_grad from held values only
        return Symbol(node)


SYMBOLIC = SymbolicKind()


def graph_mismatch(who: str, x: Symbol, graph: Graph, declaring: bool) -> GraphMismatchError:
    """The error for `who` (an op, gc.output) given value `x` of another graph than
    `graph` (the graph being declared, or the one an op's other inputs belong to): which
    graphs, told apart when they share a name, and what the user can do instead."""
    theirs = f"graph '{x.graph.name}'"
    ours = f"graph '{graph.name}'"
    if x.graph.name == graph.name:  # gc.Graph()'s default name, or a name given twice
        theirs, ours = f"one gc.Graph named '{graph.name}'", f"another named '{graph.name}' too"
        hint = (
            ' (name each graph, gc.Graph("encoder"), to tell them apart in messages like this one)'
        )
    else:
        hint = ""
    where = "is being declared" if declaring else "holds the op's other inputs"
    return GraphMismatchError(
        f"{who}: value '{x.node.name}' belongs to {theirs}, but {ours} {where}{hint}. "
        "A graph's ops and outputs take its own values only: compute the value in this graph, feed "
        "it in as a placeholder of this graph (gc.placeholder), or call the other graph "
        "on this graph's values (a Graph called on graph values inlines itself)"
    )


# meta of a node recorded under no_grad whose inputs carry no gradient: none flows
# from it either (a chain of ops under no_grad is held once, at its start)
_NO_GRADIENT = "no_gradient"


def _held_under_no_grad(node: Node) -> bool:
    """Does a node recorded under no_grad need holding behind stop_gradient: a floating
    point value computed from one that may carry a gradient (not a constant, not a
    value held already, nor one computed under no_grad from such values)?"""
    if not isinstance(node.type, TensorType) or not is_float(node.type.dtype):
        return False
    return any(
        is_float(x.type.dtype)
        and not x.is_constant
        and not x.meta.get(_NO_GRADIENT)
        and not _is_held(x)
        for x in node.inputs
        if isinstance(x.type, TensorType)
    )


def _is_held(node: Node) -> bool:
    from graphc.ops.custom import zero_backward  # custom.py records through this module

    return zero_backward(node)


def _detached(value: Symbol) -> Symbol:
    """`value` behind stop_gradient's node, recorded in grad mode (its own ops are not
    to be held again)."""
    from graphc.ops.custom import stop_gradient

    saved, grad_state.STATE.enabled = grad_state.STATE.enabled, True
    try:
        return stop_gradient(value)
    finally:
        grad_state.STATE.enabled = saved


class _BodyTraces(threading.local):
    """The bodies this thread is tracing: body graph id -> (enclosing graph, captures)."""

    def __init__(self) -> None:
        self.open: dict[int, tuple[Graph, dict[Node, Node]]] = {}


_BODIES = _BodyTraces()


@contextmanager
def tracing_body(body: Graph, parent: Graph) -> Iterator[dict[Node, Node]]:
    """Declare `body` (as `with body:`) inside `parent`: a value of `parent`, or of a
    graph around it, that the body's ops read becomes a new placeholder of the body.
    Yields the captures (outer node -> body placeholder), in the order they were made;
    the caller passes the outer values in as extra operands (closure conversion)."""
    captures: dict[Node, Node] = {}
    _BODIES.open[body.id] = (parent, captures)
    try:
        with body:
            yield captures
    finally:
        del _BODIES.open[body.id]


def enclosing(graph: Graph) -> list[Graph]:
    """`graph`, then the graphs around it while it is a body being traced, outermost last."""
    chain = [graph]
    while (entry := _BODIES.open.get(chain[-1].id)) is not None:
        chain.append(entry[0])
    return chain


def outermost(graph: Graph) -> Graph:
    """The graph around `graph` and every body being traced inside it (`graph` itself
    when it is no body being traced)."""
    return enclosing(graph)[-1]


def capture(x: Symbol, graph: Graph) -> Symbol | None:
    """`x`, a value of a graph enclosing the body `graph`, as a placeholder of `graph`
    (bodies in between capture it too); None if `graph` is no body inside x's graph."""
    entry = _BODIES.open.get(graph.id)
    if entry is None:
        return None
    parent, captures = entry
    if x.graph is not parent:
        outer = capture(x, parent)
        if outer is None:
            return None
        x = outer
    node = captures.get(x.node)
    if node is None:
        node = graph.add_placeholder(
            graph.fresh_name(x.node.name), x.node.type, meta=dict(x.node.meta)
        )
        captures[x.node] = node
    return Symbol(node)


dispatch.register_value_kind(Symbol, SYMBOLIC)
dispatch.set_context_kind(lambda: SYMBOLIC if active_graph() is not None else None)
