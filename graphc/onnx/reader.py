"""`import_model`: read an ONNX model's graph node by node (see importer.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import TensorType
from graphc.onnx.importer import (
    Context,
    OnnxError,
    Value,
    attributes,
    load,
    opset_of,
    run_node,
    tensor_value,
    value_type,
)
from graphc.ops.symbolic import Symbol


def import_model(
    model: Any,
    as_placeholders: bool = False,
    name: str | None = None,
    fixed: dict[str, Any] | None = None,
) -> Graph:
    """An ONNX model (a ModelProto, a path or bytes) as a graphc Graph.

    Inputs keep their names and `dim_param`s become symbolic dims; initializers become
    constants, or, with `as_placeholders=True`, placeholders after the inputs (for
    fine-tuning: `gc.gradients(g, wrt=[...])`), fed their values by `initializers(model)`.
    Outputs keep their names and order. `fixed` gives values for graph inputs that the
    graph's shapes depend on (a Reshape's shape, a Slice's starts fed as inputs): they
    become constants, as a static graph needs (an OnnxError names such an input,
    with `.needs`).

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
    proto = load(model)
    graph = Graph(name or proto.graph.name or "onnx_model")
    ctx = Context(graph, opset_of(proto))
    read_graph(ctx, proto.graph, as_placeholders, dict(fixed or {}))
    return graph


def read_graph(
    ctx: Context,
    proto: Any,
    as_placeholders: bool,
    fixed: dict[str, Any],
) -> None:
    """Add the model's graph `proto` to ctx.graph: inputs, initializers, nodes, outputs."""
    graph, used = ctx.graph, {}
    env: dict[str, Value] = {}
    initializers = {t.name: t for t in proto.initializer}
    for info in proto.input:
        if info.name in initializers:
            continue  # an initializer also listed as an input (opset < 9 style): a constant
        t = value_type(info, used, f"graph input '{info.name}'")
        if info.name in fixed:
            env[info.name] = np.asarray(fixed[info.name], t.dtype)
            continue
        env[info.name] = Symbol(graph.add_placeholder(info.name, t))
    for t in proto.initializer:
        value = tensor_value(t, f"initializer '{t.name}'")
        if as_placeholders and value.dtype.kind == "f":
            env[t.name] = Symbol(graph.add_placeholder(t.name, TensorType.of(value)))
        else:
            env[t.name] = value
    results = _read_nodes(ctx, proto, env)
    ctx.node = None
    for info, value in zip(proto.output, results):
        symbol = ctx.symbol(value)
        _free(graph, info.name)
        graph.add_output(symbol.node, info.name)


def _read_nodes(ctx: Context, proto: Any, env: dict[str, Value]) -> list[Value]:
    """Read `proto`'s nodes into `env`; the values of its outputs."""
    for index, node in enumerate(proto.node):
        ctx.node, ctx.index, ctx.names = node, index, env
        inputs = []
        for name in node.input:
            if name and name not in env:
                raise ctx.error(f"input '{name}' is not defined before the node")
            inputs.append(env[name] if name else None)
        outputs = run_node(ctx, node, inputs, attributes(node, ctx))
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
    env.update((t.name, tensor_value(t, f"initializer '{t.name}'")) for t in proto.initializer)
    env.update((info.name, value) for info, value in zip(proto.input, args))
    ctx.graph = active_graph() or ctx.graph
    ctx.scope = f" in body '{proto.name}' of {ctx.where()}"
    try:
        return _read_nodes(ctx, proto, env)
    finally:
        ctx.graph, ctx.node, ctx.index, ctx.scope, ctx.names = saved


def _free(graph: Graph, name: str) -> None:
    """Make `name` free for an output: an op node that holds it takes a fresh name
    (op nodes get their names from their ops, ONNX outputs theirs from the model)."""
    if name not in graph:
        return
    node = graph.node(name)
    if node.kind == "placeholder":
        return  # an input returned as it is: the output gets the name below
    graph.rename(node, graph.fresh_name(f"{name}_value"))


def initializers(model: Any) -> dict[str, np.ndarray]:
    """The model's initializers by name, as arrays (feeds for as_placeholders=True)."""
    proto = load(model)
    return {t.name: tensor_value(t, f"initializer '{t.name}'") for t in proto.graph.initializer}
