"""The text form of a graph: what `print(graph)` shows and `parse` reads back.

    graph affine(%x: f32[B,3], %w: f32[3,2]) {
      %b: f32[2] = constant(value=[0.0, 0.0])
      %matmul: f32[B,2] = matmul(%x, %w)
      %mean: f32[] = mean(%matmul, axis=None, keepdims=False)
      output %loss = %mean
    }

One line per node, in graph order: ``%name: type = op(%inputs..., attr=value...)``;
placeholders appear in the header, outputs as ``output %name = %value``. A graph
name that is not an identifier, or a value name with other characters than letters,
digits, ``_`` and ``.``, is printed as a JSON string (``graph "my net"``, ``%"a b"``).
Attribute
values are Python-like literals (None, True, ints, floats, "strings", tuples); dtypes
are bare short names (f32). A constant's array is a nested list when it is small and
``b64"..."`` (its raw little-endian bytes) when larger, or when it holds a NaN other
than the one ``nan`` reads back as (a sign bit or a payload), so the text is exact. A
Graph-valued attribute (the body of a ``fused`` node) is a nested block, indented:

      %fused: f32[B,3] = fused(%x, %w, body=graph body(%x: f32[B,3], %w: f32[3]) {
        %add: f32[B,3] = add(%x, %w)
        output %out = %add
      })
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.types import DTYPES, dtype_name, is_float

INLINE_LIMIT = 16  # constants with more elements are printed as base64

GRAPH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VALUE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")


def format_graph_name(name: str) -> str:
    if not isinstance(name, str):  # gc.Graph(3): verify refuses it too
        raise GraphcError(f"a graph's name must be a str to be printed, got {name!r}")
    return name if GRAPH_NAME.fullmatch(name) else json.dumps(name)


def format_value_name(name: str) -> str:
    """A value reference: %name, or %"..." when the name has unusual characters."""
    return "%" + (name if VALUE_NAME.fullmatch(name) else json.dumps(name))


def format_value(value: Any) -> str:
    """One attribute value as text."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return str(bool(value)) if value is not None else "None"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, np.dtype):
        return dtype_name(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, np.ndarray):
        return format_array(value)
    if isinstance(value, Graph):  # a fused node's body: a nested block over several lines
        return format_graph(value)
    raise TypeError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def format_array(array: np.ndarray) -> str:
    if array.size > INLINE_LIMIT or _odd_nans(array):
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
        return 'b64"' + base64.b64encode(data.tobytes()).decode("ascii") + '"'
    return _format_nested(array)


def _odd_nans(array: np.ndarray) -> bool:
    """Whether `array` holds a NaN whose bits differ from what the literal `nan` reads back
    as (numpy's quiet NaN of the dtype): -nan, or a payload, which only b64 keeps."""
    if not is_float(array.dtype):
        return False
    nans = array[np.isnan(array)]
    if nans.size == 0:
        return False
    unsigned = np.dtype(f"u{array.dtype.itemsize}")
    canonical = np.array(np.nan, array.dtype).view(unsigned)
    return bool(np.any(nans.view(unsigned) != canonical))


def _format_nested(array: np.ndarray) -> str:
    if array.ndim == 0:
        item = array.item()
        return format_value(item)
    return "[" + ", ".join(_format_nested(a) for a in array) + "]"


def format_node(node: Node, brief: bool = False) -> str:
    return _format_node(node, brief, () if node.graph is None else (node.graph,))


def _format_node(node: Node, brief: bool, enclosing: tuple[Graph, ...]) -> str:
    """`format_node` of a node in the innermost of the graphs `enclosing`."""
    if node.kind == OUTPUT:
        return f"output {format_value_name(node.name)} = {format_value_name(node.inputs[0].name)}"
    assert node.kind == OP
    parts = [format_value_name(x.name) for x in node.inputs]
    parts += [f"{key}={_attr_text(value, brief, enclosing)}" for key, value in node.attrs.items()]
    return f"{format_value_name(node.name)}: {node.type} = {node.op}({', '.join(parts)})"


def format_graph(graph: Graph, brief: bool = False) -> str:
    """The graph's text, which `parse` reads back; or, `brief`, for reading only: an
    array of more than INLINE_LIMIT elements (a model's weights, megabytes of base64)
    shown as its count and range.

    A body that is one of the graphs around it (built through the low-level API; verify
    refuses it) is printed ``<recursive: name>``, which `parse` refuses, rather than
    printed again without end."""
    return _format_graph(graph, brief, ())


def _format_graph(graph: Graph, brief: bool, enclosing: tuple[Graph, ...]) -> str:
    enclosing = (*enclosing, graph)
    params = ", ".join(f"{format_value_name(p.name)}: {p.type}" for p in graph.inputs)
    lines = [f"graph {format_graph_name(graph.name)}({params}) {{"]
    lines += [
        "  " + _format_node(n, brief, enclosing).replace("\n", "\n  ")
        for n in graph.nodes
        if n.kind != PLACEHOLDER
    ]
    lines.append("}")
    return "\n".join(lines)


def _attr_text(value: Any, brief: bool, enclosing: tuple[Graph, ...]) -> str:
    if brief and isinstance(value, np.ndarray) and value.size > INLINE_LIMIT:
        return _summary(value)
    if isinstance(value, Graph):
        if any(value is around for around in enclosing):
            return f"<recursive: {format_graph_name(value.name)}>"
        return _format_graph(value, brief, enclosing)
    return format_value(value)


def _summary(array: np.ndarray) -> str:
    """`<600 values in [-0.18, 0.18]>`: what an array holds, not the array."""
    shown = f"<{array.size} values"
    numbers = array.astype(np.float64) if is_float(array.dtype) else array
    if array.dtype.kind in "biuf" or is_float(array.dtype):
        finite = numbers[np.isfinite(numbers)] if is_float(array.dtype) else numbers
        if finite.size:
            low, high = finite.min().item(), finite.max().item()
            shown += f" in [{low:.4g}, {high:.4g}]"
        if finite.size < array.size:
            shown += ", some not finite"
    return shown + ">"


__all__ = [
    "DTYPES",
    "format_graph",
    "format_graph_name",
    "format_node",
    "format_value",
    "format_value_name",
]
