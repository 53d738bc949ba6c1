"""JSON save and load of a graph with its constants; no pickle, nothing executed on load.

The document is ``{"format": "graphc", "version": 1, "name": ..., "nodes": [...]}``.
Each node is an object with ``name``, ``kind``, ``type`` (``{"shape": [...],
"dtype": "f32"}``) and, as they apply, ``op``, ``inputs`` (names of earlier nodes),
``attrs`` and ``meta``. Values JSON lacks are tagged objects:

    (1, 2)          {"tuple": [1, 2]}
    nan, inf        {"float": "nan"} / {"float": "inf"} / {"float": "-inf"}
    dtype float32   {"dtype": "f32"}
    an array        {"dtype": "f32", "shape": [2, 3], "base64": "..."}  (little-endian bytes)
    a Graph         {"graph": {"format": "graphc", ...}}  (a fused node's body, nested)

Only meta entries that can be encoded this way are kept (``loc``, ``grad_of``, ...).
Loading checks every field and names the bad one: ``nodes[3].inputs[0]: unknown
value 'foo'``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ParseError
from graphc.ir.graph import KINDS, OP, PLACEHOLDER, Graph, Node
from graphc.ir.types import DTYPES, TensorType, dtype_name
from graphc.ir.verify import node_problem

FORMAT = "graphc"
VERSION = 1


class _UnencodableError(Exception):
    pass


def encode_value(value: Any) -> Any:
    """An attribute or meta value as JSON data (tagged where JSON has no form for it)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, str):
        return value
    if isinstance(value, np.dtype):
        return {"dtype": _dtype_name(value)}
    if isinstance(value, tuple):
        return {"tuple": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, Graph):  # a fused node's body
        return {"graph": graph_document(value)}
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"), copy=False)
        return {
            "dtype": _dtype_name(value.dtype),
            "shape": list(value.shape),
            "base64": base64.b64encode(data.tobytes()).decode("ascii"),
        }
    raise _UnencodableError(f"cannot encode {value!r} of type {type(value).__name__}")


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return dtype_name(dtype)
    except KeyError:
        raise _UnencodableError(f"dtype {dtype} is not one graphc supports") from None


def decode_value(data: Any, field: str) -> Any:
    """The inverse of `encode_value`; `field` names where `data` sits, for errors."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode_value(v, f"{field}[{i}]") for i, v in enumerate(data)]
    if not isinstance(data, dict):
        raise ParseError(f"{field}: unexpected JSON value {data!r}")
    keys = set(data)
    if keys == {"tuple"} and isinstance(data["tuple"], list):
        return tuple(decode_value(v, f"{field}.tuple[{i}]") for i, v in enumerate(data["tuple"]))
    if keys == {"float"} and data["float"] in ("nan", "inf", "-inf"):
        return float(data["float"])
    if keys == {"dtype"}:
        return _dtype(data["dtype"], f"{field}.dtype")
    if keys == {"dtype", "shape", "base64"}:
        return _array(data, field)
    if keys == {"graph"}:
        return graph_from_document(data["graph"], f"{field}.graph.")
    raise ParseError(f"{field}: unknown tagged value with keys {sorted(keys)}")


def _dtype(name: Any, field: str) -> np.dtype:
    if name not in DTYPES:
        raise ParseError(f"{field}: unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return DTYPES[name]


def _shape(data: Any, field: str) -> tuple:
    if not isinstance(data, list):
        raise ParseError(f"{field}: expected a list of dims, got {data!r}")
    return tuple(data)


def _array(data: dict, field: str) -> np.ndarray:
    dtype = _dtype(data["dtype"], f"{field}.dtype")
    shape = _shape(data["shape"], f"{field}.shape")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ParseError(f"{field}.shape: an array's shape holds non-negative ints, got {shape}")
    try:
        raw = base64.b64decode(data["base64"], validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ParseError(f"{field}.base64: malformed base64") from None
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise ParseError(
            f"{field}.base64: {len(raw)} bytes, shape {shape} of {dtype} needs {expected}"
        )
    array = np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    array.flags.writeable = False
    return array


def to_json(graph: Graph, indent: int | None = 1) -> str:
    """The graph as a JSON document (see the module docstring for its form).

    >>> import graphc as gc
    >>> g = gc.Graph("g")
    >>> with g:
    ...     _ = gc.output(gc.exp(gc.placeholder("x", shape=(2,))), name="y")
    >>> str(gc.from_json(gc.to_json(g))) == str(g)
    True
    """
    return json.dumps(graph_document(graph), indent=indent, allow_nan=False)


def graph_document(graph: Graph) -> dict[str, Any]:
    """The graph as JSON data (the document `to_json` writes)."""
    nodes = []
    for node in graph.nodes:
        entry: dict[str, Any] = {"name": node.name, "kind": node.kind}
        if node.kind == OP:
            entry["op"] = node.op
        if node.kind != PLACEHOLDER:
            entry["inputs"] = [x.name for x in node.inputs]
        if node.kind == OP:
            try:
                entry["attrs"] = {key: encode_value(v) for key, v in node.attrs.items()}
            except _UnencodableError as exc:
                raise GraphcError(f"{node.describe()}: {exc}") from None
        entry["type"] = {"shape": list(node.type.shape), "dtype": dtype_name(node.type.dtype)}
        meta = _encodable_meta(node)
        if meta:
            entry["meta"] = meta
        nodes.append(entry)
    return {"format": FORMAT, "version": VERSION, "name": graph.name, "nodes": nodes}


def _encodable_meta(node: Node) -> dict[str, Any]:
    meta = {}
    for key, value in node.meta.items():
        try:
            meta[key] = encode_value(value)
        except _UnencodableError:
            continue  # e.g. references to nodes of other graphs: not part of the file
    return meta


def from_json(text: str) -> Graph:
    """Rebuild a graph from `to_json` output; malformed input raises ParseError naming the field."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"not valid JSON: {exc}") from None
    return graph_from_document(document)


def graph_from_document(document: Any, prefix: str = "") -> Graph:
    """The inverse of `graph_document`; `prefix` is where a nested document sits."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ParseError(f'{prefix}format: expected a JSON object with "format": "graphc"')
    if document.get("version") != VERSION:
        raise ParseError(f"{prefix}version: expected {VERSION}, got {document.get('version')!r}")
    name = document.get("name")
    if not isinstance(name, str):
        raise ParseError(f"{prefix}name: expected a string, got {name!r}")
    nodes = document.get("nodes")
    if not isinstance(nodes, list):
        raise ParseError(f"{prefix}nodes: expected a list of nodes")
    graph = Graph(name)
    for i, entry in enumerate(nodes):
        _load_node(graph, entry, f"{prefix}nodes[{i}]")
    return graph


def _load_node(graph: Graph, entry: Any, field: str) -> None:
    if not isinstance(entry, dict):
        raise ParseError(f"{field}: expected an object, got {entry!r}")
    known = {"name", "kind", "op", "inputs", "attrs", "type", "meta"}
    if set(entry) - known:
        raise ParseError(f"{field}: unknown field(s) {sorted(set(entry) - known)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(f"{field}.name: expected a non-empty string, got {name!r}")
    if name in graph:
        raise ParseError(f"{field}.name: the name '{name}' is used twice")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ParseError(f"{field}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    op = entry.get("op")
    if (kind == OP) != isinstance(op, str):
        raise ParseError(f"{field}.op: an op node needs an op name, other kinds none; got {op!r}")
    inputs_data = entry.get("inputs", [])
    if not isinstance(inputs_data, list):
        raise ParseError(f"{field}.inputs: expected a list of names, got {inputs_data!r}")
    inputs = []
    for j, x in enumerate(inputs_data):
        if not isinstance(x, str) or x not in graph:
            raise ParseError(f"{field}.inputs[{j}]: unknown value {x!r} (not an earlier node)")
        inputs.append(graph.node(x))
    attrs_data = entry.get("attrs", {})
    if not isinstance(attrs_data, dict):
        raise ParseError(f"{field}.attrs: expected an object, got {attrs_data!r}")
    attrs = {key: decode_value(v, f"{field}.attrs.{key}") for key, v in attrs_data.items()}
    meta_data = entry.get("meta", {})
    if not isinstance(meta_data, dict):
        raise ParseError(f"{field}.meta: expected an object, got {meta_data!r}")
    meta = {key: decode_value(v, f"{field}.meta.{key}") for key, v in meta_data.items()}
    node = Node(
        name, kind, op, tuple(inputs), attrs, _type(entry.get("type"), f"{field}.type"), meta
    )
    problem = node_problem(node)
    if problem:
        raise ParseError(f"{field} ('{name}'): {problem}")
    graph.append(node)


def _type(data: Any, field: str) -> TensorType:
    if not isinstance(data, dict) or set(data) != {"shape", "dtype"}:
        raise ParseError(f'{field}: expected {{"shape": [...], "dtype": ...}}, got {data!r}')
    dtype = _dtype(data["dtype"], f"{field}.dtype")
    shape = _shape(data["shape"], f"{field}.shape")
    if any(isinstance(d, bool) or not isinstance(d, (int, str)) for d in shape):
        raise ParseError(f"{field}.shape: dims are ints or symbol names, got {shape}")
    try:
        return TensorType(shape, dtype)
    except GraphcError as exc:
        raise ParseError(f"{field}.shape: {exc}") from None


def save(graph: Graph, path: str | os.PathLike) -> None:
    """Write `graph` as JSON to `path` (see `to_json`)."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(to_json(graph))


def load(path: str | os.PathLike) -> Graph:
    """Read a graph written by `save`; nothing in the file is executed."""
    with open(path, encoding="utf-8") as file:
        return from_json(file.read())
