"""graphc -> ONNX: `export_model` writes a Graph as a ModelProto.

Placeholders become graph inputs (symbolic dims as `dim_param`s), constants
initializers (Constant nodes inside subgraphs), and each op node one or more ONNX nodes
by its op's "onnx" rule: an entry of the table of ops that are one ONNX op (direct.py)
or an exporter function (exporters*.py). Ops graphc's gradient rules make are written as
their standard decomposition; a backend's fused nodes are refused (export the graph
before fusion); cond becomes If, while_loop and scan become Loop, their bodies subgraphs
that read outer values by name.

Symbolic dims inside shape arguments (a Reshape to (B, 12)) are computed in the model:
`Shape` of an input that has the dim, `Gather` of its axis, `Concat` with the known
ones, so the exported model runs at any size, as the graph does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op, register_rule
from graphc.ir.types import TensorType, TupleType, is_bfloat16, is_half, is_symbol
from graphc.ir.verify import verify
from graphc.onnx.importer import MAX_OPSET, OnnxError, onnx_elem_type, require_onnx

DEFAULT_OPSET = 17
Exporter = Callable[["Writer", Node, list[str]], list[str]]


def exporter(*ops: str) -> Callable[[Exporter], Exporter]:
    """Register the decorated function as the "onnx" rule of `ops`: the code that
    writes a node of each (ops that are one ONNX op are in direct.py's table)."""

    def register(fn: Exporter) -> Exporter:
        for op in ops:
            register_rule(op, "onnx", fn)
        return fn

    return register


def computed(w: Writer, node: Node, ins: list[str], first: int = 0) -> list[str]:
    """Inputs cast to the dtype the op computes in: ONNX ops take one element type
    where numpy promotes (int64 + float32, exp of an int)."""
    types = [x.type.dtype for x in node.inputs[first:]]
    comparison = get_op(node.op).has("comparison")
    target = np.result_type(*types) if comparison else node.type.dtype
    if comparison and target == np.bool_:
        target = np.dtype(np.int32)  # ONNX orders numbers, not bools
    return ins[:first] + [w.cast(n, t, target) for n, t in zip(ins[first:], types)]


class Writer:
    """One ONNX graph (the model's, or a body's) under construction."""

    _ids = itertools.count()

    def __init__(self, opset: int, outer: Writer | None = None, prefix: str = "") -> None:
        self.opset = opset
        self.outer = outer
        self.prefix = prefix
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.names: dict[Node, str] = {}
        self.carriers: dict[str, tuple[str, int]] = {}  # symbol -> (value name, axis)
        self.taken: set[str] = set() if outer is None else outer.taken

    # -- names and values ---------------------------------------------------------

    def fresh(self, base: str) -> str:
        name = f"{self.prefix}{base}"
        while name in self.taken:
            name = f"{self.prefix}{base}_{next(Writer._ids)}"
        self.taken.add(name)
        return name

    def bind(self, node: Node, name: str) -> None:
        self.names[node] = name
        for axis, d in enumerate(getattr(node.type, "shape", ())):
            if is_symbol(d) and d not in self.carriers:
                self.carriers[d] = (name, axis)

    def emit(
        self, op_type: str, inputs: Sequence[str], outputs: int = 1, **attrs: Any
    ) -> list[str]:
        from onnx import helper

        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(
            helper.make_node(op_type, list(inputs), names, name=self.fresh(f"n_{op_type}"), **attrs)
        )
        return names

    def one(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        return self.emit(op_type, inputs, 1, **attrs)[0]

    def const(self, array: Any, base: str = "const") -> str:
        from onnx import numpy_helper

        array = np.asarray(array)
        name = self.fresh(base)
        tensor = numpy_helper.from_array(np.asarray(array, order="C"), name)  # 0-d stays 0-d
        if self.outer is None:
            self.initializers.append(tensor)
        else:  # a subgraph: a Constant node (initializers of subgraphs are rarely accepted)
            from onnx import helper

            self.nodes.append(
                helper.make_node(
                    "Constant", [], [name], value=tensor, name=self.fresh("n_Constant")
                )
            )
        return name

    def cast(self, name: str, source: Any, target: Any) -> str:
        """`name` cast from dtype `source` to `target` (itself when they agree)."""
        if np.dtype(source) == np.dtype(target):
            return name
        return self.one("Cast", [name], to=onnx_elem_type(np.dtype(target)))

    def filled(self, shape: str, value: Any, dtype: Any) -> str:
        """A tensor of `dtype` whose shape is the 1-D int64 value `shape`, each element
        `value`: a ConstantOfShape (of float32, cast, for bfloat16 before opset 20)."""
        from onnx import numpy_helper

        dtype = np.dtype(dtype)
        made = np.dtype(np.float32) if is_bfloat16(dtype) and self.opset < 20 else dtype
        fill = numpy_helper.from_array(np.full((1,), value, dtype).astype(made))
        return self.cast(self.one("ConstantOfShape", [shape], value=fill), made, dtype)

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.asarray(list(values), np.int64), "ints")

    def carrier(self, symbol: str) -> tuple[str, int]:
        writer: Writer | None = self
        while writer is not None:
            if symbol in writer.carriers:
                return writer.carriers[symbol]
            writer = writer.outer
        raise OnnxError(f"export_model: no input carries the symbolic dim '{symbol}'")

    def shape(self, dims: Sequence[Any]) -> str:
        """An int64 1-D tensor of `dims`, computed in the model where a dim is symbolic."""
        if not any(is_symbol(d) for d in dims):
            return self.ints(dims)
        parts = []
        for d in dims:
            if is_symbol(d):
                value, axis = self.carrier(d)
                shape = self.one("Shape", [value])
                parts.append(self.one("Gather", [shape, self.ints([axis])], axis=0))
            else:
                parts.append(self.ints([d]))
        return self.one("Concat", parts, axis=0)

    def dim(self, d: Any) -> str:
        """A 0-d int64 tensor holding dim `d`."""
        if not is_symbol(d):
            return self.const(np.asarray(d, np.int64), "dim")
        return self.one("Squeeze", [self.shape([d]), self.ints([0])])

    # -- graphs ---------------------------------------------------------------------

    def write(self, graph: Graph, bound: dict[Node, str] | None = None) -> list[str]:
        """Write graph's op nodes (placeholders already bound, or bound to `bound`'s
        names); the names of its output values."""
        for p, name in (bound or {}).items():
            self.bind(p, name)
        read = {x for n in [*graph.nodes, *graph.outputs] for x in n.inputs}
        for node in graph.nodes:
            if node.kind != OP:
                continue
            ins = [self.names[x] for x in node.inputs]
            if node.is_constant:
                if node in read:  # (a constant nothing reads is not written)
                    self.bind(node, self.const(node.value, "const"))
                continue
            form = get_op(node.op).rules.get("onnx")  # a Direct or an exporter function
            if form is None and get_op(node.op).has("fusion"):
                raise OnnxError(
                    f"export_model: {node.describe()}: op '{node.op}' is a backend's fused "
                    "node (made by its fusion step: gc.fuse, gc.compile); export the graph "
                    "before fusion (the declared one, or gc.optimize's)"
                )
            if form is None:
                raise OnnxError(
                    f"export_model: {node.describe()}: op '{node.op}' has no ONNX form in graphc yet"
                )
            outs = self._widened(node, ins, form) if _in_float32(node) else form(self, node, ins)
            self.bind(node, outs[0])
            if len(outs) > 1 or isinstance(node.type, TupleType):  # `result` nodes pick one
                self.names[node] = outs  # type: ignore[assignment]
        return [self._output(o) for o in graph.outputs]

    def _widened(self, node: Node, ins: list[str], form: Any) -> list[str]:
        """An elementwise op on a 16-bit float written as graphc computes it: on its
        operands cast to float32, the result rounded once (ops/defop.py). ONNX's 16-bit
        forms would round each step of an op written as several (log1p, arctan2,
        sigmoid); many math ops have no bfloat16 form (Sin, Atan, Round: an invalid
        model) and IsInf none for 16-bit floats before opset 20; onnxruntime's CPU has
        no bfloat16 math and little float16."""
        wide = [_float32_type(x.type) for x in node.inputs]
        stand_ins = tuple(
            Node(x.name, x.kind, x.op, (), x.attrs, t) for x, t in zip(node.inputs, wide)
        )
        shadow = Node(
            node.name, node.kind, node.op, stand_ins, node.attrs, _float32_type(node.type)
        )
        cast = [self.cast(n, x.type.dtype, t.dtype) for n, x, t in zip(ins, node.inputs, wide)]
        out = form(self, shadow, cast)[0]
        return [self.cast(out, shadow.type.dtype, node.type.dtype)]

    def _output(self, o: Node) -> str:
        value = self.names[o.inputs[0]]
        return value  # type: ignore[return-value]

    def body(self, graph: Graph, bound: dict[Node, str], inputs: Sequence[Node] = ()) -> Any:
        """A GraphProto for a body: `bound` placeholders read outer names, `inputs`
        become the subgraph's own inputs (Loop's iteration count, carries)."""
        from onnx import helper

        writer = Writer(self.opset, outer=self, prefix=f"{graph.name}_{next(Writer._ids)}_")
        infos = []
        for p in inputs:
            name = writer.fresh(p.name)
            writer.bind(p, name)
            infos.append(value_info(name, p.type))
        outs = writer.write(graph, bound)
        outputs = []
        for o, value in zip(graph.outputs, outs):
            name = writer.one("Identity", [value])  # body outputs get names of their own
            outputs.append(value_info(name, o.type))
        return helper.make_graph(writer.nodes, writer.fresh(graph.name), infos, outputs), writer


def _in_float32(node: Node) -> bool:
    """Whether `node` is an elementwise op on a 16-bit float (a cast is written as it is)."""
    if not get_op(node.op).elementwise or node.op == "cast":
        return False
    return any(is_half(t.dtype) for t in [node.type, *(x.type for x in node.inputs)])


def _float32_type(t: TensorType) -> TensorType:
    return TensorType(t.shape, np.dtype(np.float32)) if is_half(t.dtype) else t


def _initializer(p: Node, value: Any) -> Any:
    from onnx import numpy_helper

    array = np.asarray(value)
    concrete = all(not is_symbol(d) for d in p.type.shape)
    if array.dtype != p.type.dtype or (concrete and array.shape != tuple(p.type.shape)):
        raise OnnxError(
            f"export_model: initializer for placeholder '{p.name}' ({p.type}) has dtype "
            f"{array.dtype} and shape {array.shape}"
        )
    return numpy_helper.from_array(np.ascontiguousarray(array), p.name)


def value_info(name: str, t: TensorType) -> Any:
    from onnx import helper

    dims = [d if is_symbol(d) else int(d) for d in t.shape]
    return helper.make_tensor_value_info(name, onnx_elem_type(t.dtype), dims)


def export_model(
    graph: Graph,
    path: Any = None,
    opset: int | None = None,
    initializers: Mapping[str, Any] | None = None,
) -> Any:
    """`graph` as an onnx.ModelProto (saved to `path` too when given), for opset
    `opset` (default 17). Placeholders are the inputs, outputs keep their names;
    placeholders named in `initializers` are written as initializers with those values
    instead (a traced model's weights: `initializers=gc.lifted_feeds(g)`).

    >>> import graphc as gc
    >>> g = gc.trace(lambda x: gc.tanh(x) * 2.0, gc.TensorSpec(("N", 3)))
    >>> model = gc.onnx.export_model(g)
    >>> [n.op_type for n in model.graph.node]
    ['Tanh', 'Mul', 'Identity']
    """
    require_onnx()
    import onnx
    from onnx import helper

    verify(graph)
    if not graph.outputs:  # a valid model by the checker, which onnxruntime refuses to load
        raise OnnxError(
            f"export_model: graph '{graph.name}' has no outputs; an ONNX model computes "
            "at least one (mark a value with gc.output)"
        )
    opset = DEFAULT_OPSET if opset is None else opset
    if not 13 <= opset <= MAX_OPSET:  # (a newer opset may mean something else by an op)
        raise OnnxError(
            f"export_model: opset {opset} is not supported; graphc writes opsets 13 to {MAX_OPSET}"
        )
    writer = Writer(opset)
    inputs = []
    fixed = dict(initializers or {})
    unknown = sorted(set(fixed) - {p.name for p in graph.inputs})
    if unknown:
        raise OnnxError(f"export_model: initializers {unknown} name no placeholder of the graph")
    for p in graph.inputs:
        writer.taken.add(p.name)
        writer.bind(p, p.name)
        if p.name in fixed:
            writer.initializers.append(_initializer(p, fixed[p.name]))
        else:
            inputs.append(value_info(p.name, p.type))
    # the outputs' names are the model's: no value written before them may take one
    writer.taken.update(o.name for o in graph.outputs)
    outs = writer.write(graph)
    outputs = []
    for o, value in zip(graph.outputs, outs):
        writer.nodes.append(
            helper.make_node("Identity", [value], [o.name], name=writer.fresh("n_output"))
        )
        outputs.append(value_info(o.name, o.type))
    onnx_graph = helper.make_graph(writer.nodes, graph.name, inputs, outputs, writer.initializers)
    model = helper.make_model(
        onnx_graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="graphc"
    )
    model.ir_version = min(model.ir_version, 10)  # what onnxruntime reads
    if path is not None:
        onnx.save(model, path)
    return model


__all__ = ["export_model"]
