"""ONNX -> graphc: a ModelProto (or a file) becomes a Graph.

Graph inputs become placeholders named as in the model (their `dim_param`s symbolic
dims), initializers constants (or placeholders with `as_placeholders=True`), and each
node is built by its op type's handler (graphc/onnx/handlers*.py) with graphc's own
op functions. The handlers see three kinds of value:

- a graph value (`Symbol`), when the value depends on the inputs;
- a numpy array, when it is known at import (an initializer, a Constant, or a node
  all of whose inputs are known): the op functions then compute it with numpy, so
  constant subgraphs fold as they are read;
- a `Dims` array (numpy, dtype object) of ints and symbol names: the shape of a value
  whose type has symbolic dims (`Shape` of an input with a batch dim). The shape
  computations exporters write (Shape -> Gather -> Concat -> Reshape) run on these at
  import, so a Reshape gets a shape graphc can type, and the graph is as clean as a
  traced one. Where a shape depends on data, a handler says so, naming the node.

Every problem is an `OnnxError` naming the node (its name, or its op type and index),
the op type, the opset and what is supported. Nothing is approximated silently.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import DTYPES, TensorType
from graphc.ops.symbolic import Symbol, add_constant

Value = Any  # Symbol | np.ndarray (known) | Dims (np.ndarray of object)
Handler = Callable[["Context", Sequence[Value], dict[str, Any]], Sequence[Value]]


class OnnxError(GraphcError, NotImplementedError):
    """An ONNX model graphc cannot import or export as asked (op, opset, attr, dtype).

    `needs`: the graph input whose value the import needs to know (a shape or axes given
    as an input): import again with `fixed={name: value}` to make it a constant.
    `needs_counter`: what the import needs to know is computed inside a loop body from
    its carried values (a slice at the loop counter): a loop unrolled could know it."""

    needs: str | None = None
    needs_counter: bool = False


# op type -> [(since opset, handler)], newest first
HANDLERS: dict[str, list[tuple[int, Handler]]] = {}


def handler(*op_types: str, since: int = 1) -> Callable[[Handler], Handler]:
    """Register `fn` for `op_types` from opset `since` on."""

    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            entries = HANDLERS.setdefault(op_type, [])
            entries.append((since, fn))
            entries.sort(key=lambda e: -e[0])
        return fn

    return register


def supported_op_types() -> list[str]:
    return sorted(HANDLERS)


# -- dtypes -----------------------------------------------------------------------------

_ONNX_DTYPES = {1: "float32", 11: "float64", 6: "int32", 7: "int64", 9: "bool"}
_NAMES = {
    1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
    14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16",
}  # fmt: skip


def numpy_dtype(elem_type: int, where: str) -> np.dtype:
    """graphc's dtype for an ONNX element type, or an OnnxError naming both."""
    if elem_type in _ONNX_DTYPES:
        return np.dtype(_ONNX_DTYPES[elem_type])
    name = _NAMES.get(elem_type, f"element type {elem_type}")
    raise OnnxError(f"{where}: element type {name} is not supported; {SUPPORTED_TYPES}")


SUPPORTED_TYPES = "graphc supports tensors of FLOAT, DOUBLE, INT32, INT64 and BOOL"


def onnx_elem_type(dtype: np.dtype) -> int:
    for code, name in _ONNX_DTYPES.items():
        if np.dtype(name) == dtype:
            return code
    raise OnnxError(f"dtype {dtype} has no ONNX element type graphc writes")


# -- the import context -----------------------------------------------------------------


@dataclass
class Context:
    """What a handler may use: the graph, the node being read, its opset."""

    graph: Graph
    opset: int
    node: Any = None
    index: int = 0
    scope: str = ""
    names: dict[str, Value] = field(default_factory=dict)  # the values read so far, by name
    top: Graph | None = None  # the model's graph (ctx.graph is a body's while one is read)

    def __post_init__(self) -> None:
        self.top = self.top or self.graph

    def where(self) -> str:
        node = self.node
        label = f"node '{node.name}'" if node is not None and node.name else f"node {self.index}"
        op = node.op_type if node is not None else "?"
        return f"{label} ({op}, opset {self.opset}){self.scope}"

    def recording(self) -> Any:
        """A context in which ops record nodes even on known inputs (for ops whose
        result is sized by symbolic dims, which numpy cannot compute at import)."""
        return nullcontext() if active_graph() is not None else self.graph

    def error(self, message: str) -> OnnxError:
        return OnnxError(f"{self.where()}: {message}")

    def symbol(self, value: Value) -> Symbol:
        """`value` as a graph value (a known array becomes a constant)."""
        if isinstance(value, Symbol):
            return value
        if is_dims(value):
            raise self.error("a shape with symbolic dims is used as data; graphc cannot compute it")
        return add_constant(self.graph, np.asarray(value))


def is_dims(value: Value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def known(value: Value) -> bool:
    return isinstance(value, np.ndarray)


def ints(ctx: Context, value: Value, what: str) -> list[Any]:
    """A known 1-D int value (or dims) as a list; an error naming `what` otherwise."""
    if not isinstance(value, np.ndarray):
        raise needs_known(ctx, value, what)
    return [d if isinstance(d, str) else int(d) for d in np.asarray(value).reshape(-1)]


def needs_known(ctx: Context, value: Value, what: str) -> OnnxError:
    """The error for a value the import must know but that depends on graph inputs:
    it names them (`.needs`: the first), so a caller can fix them (`fixed=`)."""
    node = getattr(value, "node", None)
    if node is not None and node.graph is not ctx.top:
        error = ctx.error(
            f"{what} is computed in the body from its loop-carried or captured values; "
            "graphc needs it known when the model is imported"
        )
        error.needs_counter = True
        return error
    inputs = placeholders_of(value)
    if not inputs:
        return ctx.error(f"{what} must be known when the model is imported (it depends on data)")
    error = ctx.error(
        f"{what} depends on the graph input(s) {inputs}: a static graph must know it when the "
        f"model is imported; pass fixed={{'{inputs[0]}': value, ...}} to import_model"
    )
    error.needs = inputs[0]
    return error


def placeholders_of(value: Value) -> list[str]:
    """The names of the placeholders a graph value depends on, in graph order."""
    node = getattr(value, "node", None)
    if node is None:
        return []
    seen, stack, found = set(), [node], []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.kind == "placeholder":
            found.append(n.name)
        stack.extend(n.inputs)
    order = {n.name: k for k, n in enumerate(node.graph.inputs)}
    return sorted(found, key=lambda name: order.get(name, 0))


# -- reading models ---------------------------------------------------------------------

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def symbol_name(dim_param: str, used: dict[str, str]) -> str:
    """A graphc symbol for an ONNX dim_param (which may be any string)."""
    if dim_param in used:
        return used[dim_param]
    name = dim_param if _SYMBOL.fullmatch(dim_param) else re.sub(r"\W", "_", dim_param)
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = "d_" + name
    used[dim_param] = name
    return name


def value_type(info: Any, used: dict[str, str], where: str) -> TensorType:
    tensor = info.type.tensor_type
    if not info.type.HasField("tensor_type"):
        kind = info.type.WhichOneof("value")
        raise OnnxError(f"{where}: type {kind} is not supported; {SUPPORTED_TYPES}")
    dims: list[Any] = []
    for k, d in enumerate(tensor.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(symbol_name(d.dim_param or f"{info.name}_{k}", used))
    return TensorType(dims, numpy_dtype(tensor.elem_type, where))


def load(model: Any) -> Any:
    """A ModelProto from a ModelProto, a path (with external data beside it) or bytes."""
    import onnx

    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model), load_external_data=True)
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    if not isinstance(model, onnx.ModelProto):
        raise OnnxError(
            f"import_model: expected an onnx.ModelProto or a path, got {type(model).__name__}"
        )
    return model


def opset_of(model: Any) -> int:
    """The default domain's opset (a node of another domain is refused when it is read)."""
    versions = {o.domain: o.version for o in model.opset_import}
    return versions.get("", versions.get("ai.onnx", 1))


def attributes(node: Any, ctx: Context) -> dict[str, Any]:
    import onnx

    result = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            result[a.name] = a.g
        elif a.type == onnx.AttributeProto.TENSOR:
            result[a.name] = tensor_value(a.t, ctx.where())
        else:
            result[a.name] = onnx.helper.get_attribute_value(a)
        if isinstance(result[a.name], bytes):
            result[a.name] = result[a.name].decode()
    return result


def tensor_value(tensor: Any, where: str) -> np.ndarray:
    from onnx import numpy_helper

    dtype = numpy_dtype(tensor.data_type, where)
    array = numpy_helper.to_array(tensor)
    return np.array(array, dtype=dtype, copy=True)


def _plain(value: Value) -> Value:
    if is_dims(value) and not any(isinstance(d, str) for d in value.reshape(-1)):
        return np.asarray(value, np.int64)
    return value


def run_node(ctx: Context, node: Any, inputs: list[Value], attrs: dict[str, Any]) -> list[Value]:
    entries = HANDLERS.get(node.op_type)
    if entries is None:
        raise ctx.error(
            f"op type {node.op_type} is not supported; see graphc.onnx.supported_op_types()"
        )
    if node.domain not in ("", "ai.onnx"):
        raise ctx.error(f"domain '{node.domain}' is not supported")
    # dims with no symbol left among them (a slice of a symbolic shape) are plain ints
    inputs = [_plain(v) for v in inputs]
    for since, fn in entries:
        if since <= ctx.opset:
            try:
                outputs = list(fn(ctx, inputs, attrs))
            except OnnxError:
                raise
            except GraphcError as exc:
                raise ctx.error(str(exc)) from None
            return [_plain(v) for v in outputs]
    raise ctx.error(f"{node.op_type} is supported from opset {entries[-1][0]} on")


DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
