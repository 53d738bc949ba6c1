"""`import_model`: read an ONNX model's graph node by node (see importer.py), after
checking its names are in single static assignment form (`check_names`)."""

from __future__ import annotations

import os
from collections.abc import Sequence, Set
from typing import Any

import numpy as np

from graphc.ir.graph import Graph, Node, active_graph
from graphc.ir.scope import path_scope
from graphc.ir.types import TensorType, is_float
from graphc.onnx.importer import (
    Context,
    OnnxError,
    Value,
    attributes,
    check_node,
    load,
    model_folder,
    node_label,
    opset_of,
    require_onnx,
    run_node,
    tensor_value,
    text,
    value_type,
)
from graphc.ops.symbolic import Symbol


def import_model(
    model: Any,
    as_placeholders: bool = False,
    name: str | None = None,
    fixed: dict[str, Any] | None = None,
    base_dir: str | os.PathLike | None = None,
    dims: dict[str, int] | None = None,
) -> Graph:
    """An ONNX model (a ModelProto, a path or bytes) as a graphc Graph.

    Inputs keep their names and `dim_param`s become symbolic dims; initializers become
    constants, or, with `as_placeholders=True`, placeholders after the inputs (for
    fine-tuning: `gc.gradients(g, wrt=[...])`), fed their values by `initializers(model)`.
    Outputs keep their names and order. `fixed` gives values for graph inputs that the
    graph's shapes depend on (a Reshape's shape, a Slice's starts fed as inputs): they
    become constants, as a static graph needs (an OnnxError names such an input,
    with `.needs`). `dims` gives sizes to the inputs' symbolic dims (by dim_param):
    graphc's symbolic dims are names, so a model computing a shape such as
    `batch * heads` (torch's MultiheadAttention) is read at a given batch size.
    External data is read from the model file's folder, or `base_dir`; a model given
    as bytes or a ModelProto reads no file unless `base_dir` is given.

    >>> import onnx
    >>> from onnx import helper, TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
    >>> m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])],
    ...     "relu", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    >>> import graphc as gc
    >>> print(gc.onnx.import_model(m))
    graph relu(%x: f32[N,2]) {
      %relu: f32[N,2] = relu(%x)
      output %y = %relu
    }
    """
    require_onnx()
    proto = load(model)
    opset = opset_of(proto)
    check_names(proto.graph)
    graph = Graph(name or text(proto.graph.name, "the graph's name") or "onnx_model")
    ctx = Context(graph, opset, base_dir=model_folder(model, base_dir))
    read_graph(ctx, proto.graph, as_placeholders, dict(fixed or {}), _sizes(dims))
    return graph


def _sizes(dims: dict[str, int] | None) -> dict[str, int]:
    sizes = {}
    for name, size in (dims or {}).items():
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise OnnxError(
                f"import_model: dims['{name}'] is {size!r}; a dim's size is an int >= 0"
            )
        sizes[name] = int(size)
    return sizes


def read_graph(
    ctx: Context,
    proto: Any,
    as_placeholders: bool,
    fixed: dict[str, Any],
    sizes: dict[str, int] | None = None,
) -> None:
    """Add the model's graph `proto` to ctx.graph: inputs, initializers, nodes, outputs;
    `sizes` gives sizes to symbolic dims of the inputs (by dim_param or symbol)."""
    graph, used = ctx.graph, {}
    env: dict[str, Value] = {}
    initializers = {t.name: t for t in proto.initializer}
    for info in proto.input:
        if info.name in initializers:
            continue  # an initializer also listed as an input (opset < 9 style): a constant
        t = value_type(info, used, f"graph input '{info.name}'", sizes)
        if info.name in fixed:
            env[info.name] = np.asarray(fixed[info.name], t.dtype)
            continue
        env[info.name] = Symbol(graph.add_placeholder(info.name, t))
    unknown = sorted(set(sizes or {}) - set(used) - set(used.values()))
    if unknown:
        raise OnnxError(
            f"import_model: dims names {unknown}, which no graph input has; the inputs' "
            f"symbolic dims are {sorted(used)}"
        )
    for t in proto.initializer:
        value = tensor_value(t, f"initializer '{t.name}'", ctx.base_dir)
        if as_placeholders and is_float(value.dtype):
            env[t.name] = Symbol(graph.add_placeholder(t.name, TensorType.of(value)))
        else:
            env[t.name] = value
    results = _read_nodes(ctx, proto, env)
    ctx.node = None
    for info, value in zip(proto.output, results):
        symbol = ctx.symbol(value)
        graph.add_output(symbol.node, _free(graph, info.name))


def _read_nodes(ctx: Context, proto: Any, env: dict[str, Value]) -> list[Value]:
    """Read `proto`'s nodes into `env`; the values of its outputs."""
    results = {info.name for info in proto.output}  # their names go to output nodes
    for index, node in enumerate(proto.node):
        ctx.node, ctx.index, ctx.names = node, index, env
        check_node(ctx, node)
        inputs = []
        for name in node.input:
            if name and name not in env:
                raise ctx.error(f"input '{name}' is not defined before the node")
            inputs.append(env[name] if name else None)
        recorded_into = active_graph() or ctx.graph
        mark = len(recorded_into.nodes)
        with path_scope(_scope_of(node.name)):
            outputs = run_node(ctx, node, inputs, attributes(node, ctx))
        _keep_names(recorded_into.nodes[mark:], node, inputs, outputs, results)
        for name, value in zip(node.output, outputs):
            if name:
                env[name] = value
    results = []
    for info in proto.output:
        if info.name not in env:
            raise OnnxError(f"graph output '{info.name}'{ctx.scope} is computed by no node")
        results.append(env[info.name])
    return results


def read_body(ctx: Context, proto: Any, args: Sequence[Value]) -> list[Value]:
    """The outputs of subgraph `proto` (an If branch, a Loop or Scan body) for values
    `args` of its inputs; it reads the enclosing graphs' values by name. Called by a
    handler while a graphc body is being traced, so its ops record into that body."""
    if len(args) != len(proto.input):
        raise ctx.error(
            f"the body '{proto.name}' has {len(proto.input)} inputs, the node gives {len(args)}"
        )
    saved = (ctx.graph, ctx.node, ctx.index, ctx.scope, ctx.names)
    env = dict(ctx.names)
    scope = f" in body '{proto.name}' of {ctx.where()}"
    for t in proto.initializer:
        env[t.name] = tensor_value(t, f"initializer '{t.name}'{scope}", ctx.base_dir)
    env.update((info.name, value) for info, value in zip(proto.input, args))
    ctx.graph, ctx.scope = active_graph() or ctx.graph, scope
    try:
        return _read_nodes(ctx, proto, env)
    finally:
        ctx.graph, ctx.node, ctx.index, ctx.scope, ctx.names = saved


def _scope_of(node_name: str) -> str | None:
    """The scope of a node named as exporters name them ("/encoder/layers.0/MatMul" is
    in "encoder/layers.0"), or None."""
    if not isinstance(node_name, str):  # a name that is no UTF-8 text reads as bytes
        return None
    parts = [p for p in node_name.split("/") if p]
    return "/".join(parts[:-1]) if node_name.startswith("/") and len(parts) > 1 else None


def _keep_names(
    made: list[Node], node: Any, inputs: list[Value], outputs: list[Value], results: Set[str]
) -> None:
    """Name the nodes a handler `made` as the model names them: a constant made from a
    known input after that input (an initializer: "0.weight", not "const_2"), an op
    node giving one of the node's outputs after that output (unless a graph output,
    in `results`, has that name: the output node takes it). Generated names only (a
    name taken gets a suffix, as always)."""
    new = {id(n) for n in made}
    for name, value in zip(node.output, outputs):
        if name and name not in results and isinstance(value, Symbol) and id(value.node) in new:
            _rename_generated(value.node, name)
    constants = [n for n in made if n.is_constant]
    known = [(name, v) for name, v in zip(node.input, inputs) if name and _array(v)]
    unclaimed = []
    for n in constants:
        same = next((name for name, v in known if _same_array(v, n.value)), None)
        if same is None:
            unclaimed.append(n)
        else:
            _rename_generated(n, same)
    for n in unclaimed:  # made from one input (Gemm's transposed weight): its name too
        sized = [name for name, v in known if v.size == n.value.size and v.size > 1]
        if len(sized) == 1:
            _rename_generated(n, sized[0])


def _array(value: Value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype != object


def _same_array(value: Value, array: np.ndarray) -> bool:
    return (
        value.shape == array.shape and value.dtype == array.dtype and np.array_equal(value, array)
    )


def _rename_generated(node: Node, name: str) -> None:
    graph = node.graph
    generated = node.name == node.op or node.name.startswith(f"{node.op}_")
    if node.is_constant:
        generated = node.name == "const" or node.name.startswith("const_")
    if graph is not None and generated:
        graph.rename(node, graph.fresh_name(name))


def _free(graph: Graph, name: str) -> str:
    """The name an output of ONNX name `name` takes: `name`, which an op node holding it
    gives up for a fresh one (op nodes get their names from their ops, ONNX outputs theirs
    from the model), or, for a graph input listed as an output too (the inputs keep
    their names: they are fed by them), `name`_output."""
    if name not in graph:
        return name
    node = graph.node(name)
    if node.kind == "placeholder":
        return graph.fresh_name(f"{name}_output")
    graph.rename(node, graph.fresh_name(f"{name}_value"))
    return name


def initializers(model: Any, base_dir: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """The model's initializers by name, as arrays (feeds for as_placeholders=True);
    external data is read as by `import_model`."""
    proto = load(model)
    folder = model_folder(model, base_dir)
    return {
        t.name: tensor_value(t, f"initializer '{t.name}'", folder) for t in proto.graph.initializer
    }


def check_names(proto: Any, outer: Set[str] = frozenset(), scope: str = "") -> None:
    """The checks onnx.checker and onnxruntime make of a graph's names before running it,
    so that graphc reads no model they refuse: single static assignment (each value is
    defined once in its graph: by a graph input, an initializer or one node output; an
    initializer may also be listed as an input), no node output naming a value of an
    enclosing graph, every node input and graph output defined before it is used (a body
    sees the values its node sees). Bodies are checked whether or not the import reads
    them (an If on a known condition reads one branch)."""
    defined: dict[str, str] = {}  # value name -> what defines it

    def define(name: str, what: str, enclosing_too: bool) -> None:
        text(name, f"{what}{scope}: the value name")
        first = defined.get(name)
        if first is None and enclosing_too and name in outer:
            first = "a value of an enclosing graph"
        if first is not None:
            raise OnnxError(f"value '{name}'{scope} is defined twice: by {first} and by {what}")
        defined[name] = what

    if proto.sparse_initializer:
        name = proto.sparse_initializer[0].values.name
        raise OnnxError(f"initializer '{name}'{scope} is sparse; graphc reads dense ones only")
    for info in proto.input:
        define(info.name, f"graph input '{info.name}'", False)
    listed = {info.name for info in proto.input}
    for t in proto.initializer:
        if t.name in listed:  # an initializer also listed as an input (IR < 4), once
            listed.discard(t.name)
            continue
        define(t.name, f"initializer '{t.name}'", False)
    for index, node in enumerate(proto.node):
        label = node_label(node, index) + scope
        for name in node.input:
            if name and name not in defined and name not in outer:
                raise OnnxError(
                    f"{label}: input '{name}' is not defined before the node (by a graph "
                    "input, an initializer or an earlier node)"
                )
        bodies = [a.g for a in node.attribute if a.HasField("g")]
        bodies += [g for a in node.attribute for g in a.graphs]
        for body in bodies:
            check_names(body, outer | defined.keys(), f" in body '{body.name}' of {label}")
        for name in node.output:
            if name:
                define(name, label, True)
    for info in proto.output:
        text(info.name, f"graph output{scope}: the name")
        if info.name not in defined and info.name not in outer:
            raise OnnxError(f"graph output '{info.name}'{scope} is computed by no node")
