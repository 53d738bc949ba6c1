"""JSON save and load of a graph with its constants; no pickle, nothing executed on load.

The document is ``{"format": "graphc", "version": 1, "name": ..., "nodes": [...]}``.
Each node is an object with ``name``, ``kind``, ``type`` (``{"shape": [...],
"dtype": "f32"}``, or a list of those for a node with several results) and, as they apply, ``op``, ``inputs`` (names of earlier nodes),
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

from graphc.ir.attrs import INT64_MAX, INT64_MIN, MAX_DEPTH
from graphc.ir.errors import DTypeError, GraphcError, ParseError, VerifyError
from graphc.ir.graph import KINDS, MAX_NESTING, OP, PLACEHOLDER, Graph, Node
from graphc.ir.literals import as_text, bool_bytes_problem, short
from graphc.ir.registry import read_attrs
from graphc.ir.types import DTYPES, MAX_RANK, TensorType, TupleType, dtype_name, known_dtype
from graphc.ir.verify import held_by_itself, node_problem

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


def decode_value(data: Any, field: str, depth: int = 0, nesting: int = 1) -> Any:
    """The inverse of `encode_value`; `field` names where `data` sits, for errors.

    `depth` counts the lists and tuples around `data` within its attribute, `nesting` the
    graphs around it: past MAX_DEPTH or MAX_NESTING it is an error (the JSON parser itself
    allows nesting as deep as the stack goes).
    """
    if data is None or isinstance(data, (bool, str)):
        return data
    if isinstance(data, (int, _HugeInt)):
        if isinstance(data, _HugeInt) or not INT64_MIN <= data <= INT64_MAX:
            raise ParseError(f"{field}: the integer {data!r} does not fit int64")
        return data
    if isinstance(data, float):
        if not math.isfinite(data):  # 1e999, or JSON's non-standard NaN and Infinity
            raise ParseError(
                f"{field}: {data!r} is not a finite number; non-finite floats are written "
                '{"float": "nan"}, {"float": "inf"} or {"float": "-inf"}'
            )
        return data
    if depth >= MAX_DEPTH:
        raise ParseError(f"{field}: lists and tuples nested more than {MAX_DEPTH} deep")
    if isinstance(data, list):
        return [decode_value(v, f"{field}[{i}]", depth + 1, nesting) for i, v in enumerate(data)]
    if not isinstance(data, dict):
        raise ParseError(f"{field}: unexpected JSON value {short(repr(data))}")
    keys = set(data)
    if keys == {"tuple"} and isinstance(data["tuple"], list):
        items = data["tuple"]
        return tuple(
            decode_value(v, f"{field}.tuple[{i}]", depth + 1, nesting) for i, v in enumerate(items)
        )
    if keys == {"float"} and data["float"] in ("nan", "inf", "-inf"):
        return float(data["float"])
    if keys == {"dtype"}:
        return _dtype(data["dtype"], f"{field}.dtype")
    if keys == {"dtype", "shape", "base64"}:
        return _array(data, field)
    if keys == {"graph"}:
        return graph_from_document(data["graph"], f"{field}.graph.", nesting + 1)
    raise ParseError(f"{field}: unknown tagged value with keys {short(repr(sorted(keys)))}")


def _dtype(name: Any, field: str) -> np.dtype:
    try:
        known = known_dtype(name) if isinstance(name, str) else None
    except DTypeError as exc:  # bf16 without ml_dtypes
        raise ParseError(f"{field}: {exc}") from None
    if known is None:
        raise ParseError(
            f"{field}: unknown dtype {short(repr(name))}; expected one of {', '.join(DTYPES)}"
        )
    return known


def _shape(data: Any, field: str) -> tuple:
    if not isinstance(data, list):
        raise ParseError(f"{field}: expected a list of dims, got {short(repr(data))}")
    if len(data) > MAX_RANK:
        raise ParseError(f"{field}: at most {MAX_RANK} dims (numpy's limit), got {len(data)}")
    return tuple(data)


def _array(data: dict, field: str) -> np.ndarray:
    dtype = _dtype(data["dtype"], f"{field}.dtype")
    shape = _shape(data["shape"], f"{field}.shape")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ParseError(
            f"{field}.shape: an array's shape holds non-negative ints, got {short(repr(shape))}"
        )
    try:
        TensorType(shape, dtype)  # the limits on dims and sizes, before any arithmetic
    except GraphcError as exc:
        raise ParseError(f"{field}.shape: {exc}") from None
    if not isinstance(data["base64"], str):
        raise ParseError(f"{field}.base64: expected a string of base64")
    try:
        raw = base64.b64decode(data["base64"], validate=True)
    except (binascii.Error, ValueError):
        raise ParseError(f"{field}.base64: malformed base64") from None
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        raise ParseError(
            f"{field}.base64: {len(raw)} bytes, shape {shape} of {dtype} needs {expected}"
        )
    problem = bool_bytes_problem(raw, dtype)
    if problem:
        raise ParseError(f"{field}.base64: {problem}")
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
    """The graph as JSON data (the document `to_json` writes). A body that is one of the
    graphs around it (built through the low-level API) is a VerifyError naming the node:
    its document would hold itself without end."""
    return _document(graph, ())


def _document(graph: Graph, enclosing: tuple[Graph, ...]) -> dict[str, Any]:
    """`graph_document` of `graph`, a body within the graphs `enclosing`."""
    enclosing = (*enclosing, graph)
    if not isinstance(graph.name, str):  # else written, then refused by from_json
        raise GraphcError(f"a graph's name must be a str to be saved, got {graph.name!r}")
    nodes = []
    for node in graph.nodes:
        entry: dict[str, Any] = {"name": node.name, "kind": node.kind}
        if node.kind == OP:
            entry["op"] = node.op
        if node.kind != PLACEHOLDER:
            entry["inputs"] = [x.name for x in node.inputs]
        if node.kind == OP:
            try:
                entry["attrs"] = {
                    key: _encode_attr(node, key, v, enclosing) for key, v in node.attrs.items()
                }
            except _UnencodableError as exc:
                raise GraphcError(f"{node.describe()}: {exc}") from None
        entry["type"] = _encode_type(node.type)
        meta = _encodable_meta(node)
        if meta:
            entry["meta"] = meta
        nodes.append(entry)
    return {"format": FORMAT, "version": VERSION, "name": graph.name, "nodes": nodes}


def _encode_attr(node: Node, key: str, value: Any, enclosing: tuple[Graph, ...]) -> Any:
    if not isinstance(value, Graph):
        return encode_value(value)
    if any(value is around for around in enclosing):
        raise VerifyError(held_by_itself(node, key, value))
    return {"graph": _document(value, enclosing)}


def _encodable_meta(node: Node) -> dict[str, Any]:
    meta = {}
    for key, value in node.meta.items():
        try:
            meta[key] = encode_value(value)
        except _UnencodableError:
            continue  # e.g. references to nodes of other graphs: not part of the file
    return meta


def from_json(text: str | bytes) -> Graph:
    """Rebuild a graph from `to_json` output; malformed input raises ParseError naming the field."""
    text = as_text(text, "the JSON")
    try:
        document = json.loads(text, parse_int=_json_int)
    except ValueError as exc:
        hint = ""
        if text.lstrip().startswith("graph "):  # the text form, print(g)'s
            hint = "; this is a graph in the text form: read it with gc.parse(text)"
        raise ParseError(f"not valid JSON: {exc}{hint}") from None
    except RecursionError:  # json's own parser recurses once per level of nesting
        raise ParseError("not valid JSON: nested too deeply for the JSON parser") from None
    return graph_from_document(document)


class _HugeInt:
    """A JSON integer of more digits than int64 has, kept as text: int() of thousands of
    digits is slow and then refused. Every field check rejects it, naming the field."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return short(self.text)


def _json_int(text: str) -> int | _HugeInt:
    return _HugeInt(text) if len(text.lstrip("-")) > 19 else int(text)


def graph_from_document(document: Any, prefix: str = "", nesting: int = 1) -> Graph:
    """The inverse of `graph_document`; `prefix` is where a nested document sits and
    `nesting` how many graphs hold it, itself included."""
    if nesting > MAX_NESTING:
        raise ParseError(f"{prefix}: graphs nested more than {MAX_NESTING} deep")
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ParseError(f'{prefix}format: expected a JSON object with "format": "graphc"')
    version = document.get("version")
    if type(version) is not int or version != VERSION:  # not true, not 1.0
        raise ParseError(f"{prefix}version: expected {VERSION}, got {short(repr(version))}")
    name = document.get("name")
    if not isinstance(name, str):
        raise ParseError(f"{prefix}name: expected a string, got {short(repr(name))}")
    nodes = document.get("nodes")
    if not isinstance(nodes, list):
        raise ParseError(f"{prefix}nodes: expected a list of nodes")
    graph = Graph(name)
    for i, entry in enumerate(nodes):
        _load_node(graph, entry, f"{prefix}nodes[{i}]", nesting)
    return graph


def _load_node(graph: Graph, entry: Any, field: str, nesting: int) -> None:
    if not isinstance(entry, dict):
        raise ParseError(f"{field}: expected an object, got {short(repr(entry))}")
    known = {"name", "kind", "op", "inputs", "attrs", "type", "meta"}
    if set(entry) - known:
        unknown = sorted(set(entry) - known)
        raise ParseError(f"{field}: unknown field(s) {short(repr(unknown))}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(f"{field}.name: expected a non-empty string, got {short(repr(name))}")
    if name in graph:
        raise ParseError(f"{field}.name: the name '{name}' is used twice")
    kind = entry.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise ParseError(
            f"{field}.kind: expected one of {', '.join(KINDS)}, got {short(repr(kind))}"
        )
    op = entry.get("op")
    if (kind == OP) != isinstance(op, str):
        raise ParseError(
            f"{field}.op: an op node needs an op name, other kinds none; got {short(repr(op))}"
        )
    inputs_data = entry.get("inputs", [])
    if not isinstance(inputs_data, list):
        raise ParseError(
            f"{field}.inputs: expected a list of names, got {short(repr(inputs_data))}"
        )
    inputs = []
    for j, x in enumerate(inputs_data):
        if not isinstance(x, str) or x not in graph:
            raise ParseError(
                f"{field}.inputs[{j}]: unknown value {short(repr(x))} (not an earlier node)"
            )
        inputs.append(graph.node(x))
    attrs_data = entry.get("attrs", {})
    if not isinstance(attrs_data, dict):
        raise ParseError(f"{field}.attrs: expected an object, got {short(repr(attrs_data))}")
    attrs = {
        key: decode_value(v, f"{field}.attrs.{key}", 0, nesting) for key, v in attrs_data.items()
    }
    if kind == OP:
        attrs = read_attrs(op, attrs)
    meta_data = entry.get("meta", {})
    if not isinstance(meta_data, dict):
        raise ParseError(f"{field}.meta: expected an object, got {short(repr(meta_data))}")
    meta = {key: decode_value(v, f"{field}.meta.{key}", 0, nesting) for key, v in meta_data.items()}
    node = Node(
        name, kind, op, tuple(inputs), attrs, _type(entry.get("type"), f"{field}.type"), meta
    )
    problem = node_problem(node)
    if problem:
        raise ParseError(f"{field} ('{name}'): {problem}")
    graph.append(node)


def _encode_type(t: TensorType | TupleType) -> Any:
    if isinstance(t, TupleType):  # a node with several results: a list of their types
        return [_encode_type(item) for item in t.items]
    return {"shape": list(t.shape), "dtype": dtype_name(t.dtype)}


def _type(data: Any, field: str) -> TensorType | TupleType:
    if isinstance(data, list):
        return TupleType(_tensor_type(item, f"{field}[{i}]") for i, item in enumerate(data))
    return _tensor_type(data, field)


def _tensor_type(data: Any, field: str) -> TensorType:
    if not isinstance(data, dict) or set(data) != {"shape", "dtype"}:
        shown = short(repr(data))
        raise ParseError(f'{field}: expected {{"shape": [...], "dtype": ...}}, got {shown}')
    dtype = _dtype(data["dtype"], f"{field}.dtype")
    shape = _shape(data["shape"], f"{field}.shape")
    if any(isinstance(d, bool) or not isinstance(d, (int, str)) for d in shape):
        raise ParseError(f"{field}.shape: dims are ints or symbol names, got {short(repr(shape))}")
    try:
        return TensorType(shape, dtype)
    except GraphcError as exc:
        raise ParseError(f"{field}.shape: {exc}") from None


def save(graph: Graph, path: str | os.PathLike) -> None:
    """Write `graph` as JSON to `path` (see `to_json`)."""
    text = to_json(graph)  # first: a graph that cannot be written leaves the file as it was
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def load(path: str | os.PathLike) -> Graph:
    """Read a graph written by `save`; nothing in the file is executed."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        return from_json(data)
    except ParseError as exc:
        raise ParseError(f"{os.fspath(path)}: {exc}") from None
