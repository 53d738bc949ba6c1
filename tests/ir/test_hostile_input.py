"""Hostile input to the loaders: deep nesting, huge numbers, bad dtypes, bad encodings.

Each used to escape as a raw RecursionError, ValueError, TypeError, OverflowError or
UnicodeDecodeError (or to load changed); each is now a ParseError naming the line or
field, or a VerifyError naming the DiGraph node.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

import graphc as gc
from graphc.ir.types import TensorType

TEXT = """\
graph g(%x: f32[2,3]) {
  %r: f32[2] = sum(%x, axis=(1,), keepdims=False)
  %c: f32[2] = constant(value=[1.0, 2.0])
  %a: f32[2] = add(%r, %c)
  output %o = %a
}"""


def fused_nest(levels: int) -> str:
    body = "graph b(%x: f32[2]) {\n%n: f32[2] = neg(%x)\noutput %o = %n\n}"
    for i in range(levels):
        body = f"graph b{i}(%x: f32[2]) {{\n%f: f32[2] = fused(%x, body={body})\noutput %o = %f\n}}"
    return body


def constant(value: str, type_: str = "f32[1]") -> str:
    return f"graph g() {{\n  %c: {type_} = constant(value={value})\n  output %o = %c\n}}"


# text, the line the error names, a piece of the message
BAD_TEXT: dict[str, tuple[Any, int, str]] = {
    "deep tuple": (TEXT.replace("(1,)", "(" * 100_000 + ")" * 100_000), 2, "nested more than 64"),
    "deep list": (constant("[" * 5000 + "]" * 5000), 2, "nested more than 64"),
    "deep graphs": (fused_nest(200), 65, "nested more than 64"),
    "ragged constant": (constant("[[1.0, 2.0], [3.0]]", "f32[2,2]"), 2, "not a nested list"),
    "int of 5000 digits": (TEXT.replace("(1,)", "(" + "9" * 5000 + ",)"), 2, "does not fit int64"),
    "int past int64": (TEXT.replace("(1,)", f"({2**63},)"), 2, "does not fit int64"),
    "dim of 5000 digits": (TEXT.replace("f32[2,3]", "f32[2," + "9" * 5000 + "]"), 1, "int64"),
    "dims past an array's bytes": (
        TEXT.replace("f32[2,3]", f"f32[2,{2**62}]"),
        1,
        "more bytes than an array can hold",
    ),
    "rank past numpy's": (TEXT.replace("f32[2,3]", "f32[" + ",".join("1" * 65) + "]"), 1, "64"),
    "float overflowing to inf": (TEXT.replace("(1,)", "1e999"), 2, "too large for a float"),
    "f32 element overflowing": (constant("[1e39]"), 2, "element 1e+39 does not fit dtype f32"),
    "i32 element wrapping": (constant("[3000000000]", "i32[1]"), 2, "does not fit dtype i32"),
    "i64 element past int64": (constant(f"[{2**64}]", "i64[1]"), 2, "does not fit int64"),
    "list where a dtype goes": (TEXT.replace("keepdims=False", "keepdims=[f32]"), 2, "list"),
    "list attr": (TEXT.replace("(1,)", "[1]"), 2, "cannot hold a list"),
    "not UTF-8": (TEXT.encode() + b"\n\xff", 7, "not UTF-8"),
    "empty name": (TEXT.replace("%r", '%""'), 2, "cannot be empty"),
}


@pytest.mark.parametrize("name", list(BAD_TEXT))
def test_hostile_text_is_a_parse_error_naming_the_line(name: str) -> None:
    text, line, expected = BAD_TEXT[name]
    with pytest.raises(gc.ParseError) as info:
        gc.parse(text)
    message = str(info.value)
    assert message.startswith(f"line {line}:"), message
    assert expected in message, message
    assert len(message) < 400, message  # huge input is quoted short


@pytest.mark.parametrize("value", [None, 5, ["graph"], object()])
def test_text_that_is_not_text(value: Any) -> None:
    with pytest.raises(gc.ParseError, match="as a str or bytes"):
        gc.parse(value)


def test_utf8_bytes_parse() -> None:
    assert str(gc.parse(TEXT.encode())) == TEXT


def test_nesting_up_to_the_limit_still_loads() -> None:
    g = gc.parse(fused_nest(60))
    gc.verify(g)
    assert str(gc.from_json(gc.to_json(g))) == str(g)
    assert g(np.ones(2, np.float32)).tolist() == [-1.0, -1.0]


# -- JSON --------------------------------------------------------------------


def document() -> dict:
    return json.loads(gc.to_json(gc.parse(TEXT)))


def mutated(change: Any) -> str:
    doc = copy.deepcopy(document())
    change(doc)
    return json.dumps(doc)


def set_in(path: tuple, value: Any) -> Any:
    def change(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value

    return change


def wrap_in_fused(doc: dict, times: int) -> dict:
    for _ in range(times):
        f2 = {"shape": [2], "dtype": "f32"}
        doc = {
            "format": "graphc",
            "version": 1,
            "name": "w",
            "nodes": [
                {"name": "x", "kind": "placeholder", "type": f2},
                {
                    "name": "f",
                    "kind": "op",
                    "op": "fused",
                    "inputs": ["x"],
                    "attrs": {"body": {"graph": doc}},
                    "type": f2,
                },
                {"name": "o", "kind": "output", "inputs": ["f"], "type": f2},
            ],
        }
    return doc


AXIS = ("nodes", 1, "attrs", "axis")
VALUE = ("nodes", 2, "attrs", "value")
BAD_JSON: dict[str, tuple[Any, str]] = {
    "deep arrays": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "deep objects": ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
    "deep attr": (
        mutated(set_in(AXIS, json.loads("[" * 500 + "]" * 500))),
        "nodes[1].attrs.axis[0][0]",
    ),
    "deep meta": (
        mutated(set_in(("nodes", 1, "meta"), {"loc": json.loads("[" * 200 + "]" * 200)})),
        "nodes[1].meta.loc",
    ),
    "deep fused bodies": (
        json.dumps(wrap_in_fused(json.loads(gc.to_json(gc.parse(fused_nest(1)))), 100)),
        "nested more than 64",
    ),
    "int past int64": (mutated(set_in(AXIS, {"tuple": [2**70]})), "axis.tuple[0]: the integer"),
    "int of 5000 digits": (
        gc.to_json(gc.parse(TEXT)).replace('"keepdims": false', '"keepdims": ' + "9" * 5000),
        "nodes[1].attrs.keepdims: the integer 99999",
    ),
    "1e999": (
        gc.to_json(gc.parse(TEXT)).replace('"keepdims": false', '"keepdims": 1e999'),
        "nodes[1].attrs.keepdims: inf is not a finite number",
    ),
    "bare NaN": (
        gc.to_json(gc.parse(TEXT)).replace('"keepdims": false', '"keepdims": NaN'),
        "nodes[1].attrs.keepdims: nan is not a finite number",
    ),
    "dtype as a list": (mutated(set_in(("nodes", 0, "type", "dtype"), ["f32"])), "type.dtype"),
    "dtype as an object": (mutated(set_in(("nodes", 0, "type", "dtype"), {"a": 1})), "dtype"),
    "attr dtype as a list": (mutated(set_in(AXIS, {"dtype": ["f32"]})), "axis.dtype"),
    "dim past int64": (mutated(set_in(("nodes", 0, "type", "shape"), [2, 2**80])), "type.shape"),
    "dims past an array": (
        mutated(set_in(("nodes", 0, "type", "shape"), [2**62, 2**62])),
        "nodes[0].type.shape: the type f32",
    ),
    "rank past numpy's": (mutated(set_in(("nodes", 0, "type", "shape"), [1] * 65)), "64 dims"),
    "array shape past int64": (mutated(set_in((*VALUE, "shape"), [2**70])), "value.shape"),
    "array bytes overflow": (mutated(set_in((*VALUE, "shape"), [2**40, 2**40])), "value.shape"),
    "base64 not a string": (mutated(set_in((*VALUE, "base64"), 5)), "value.base64"),
    "version true": (mutated(set_in(("version",), True)), "version: expected 1, got True"),
    "version 1.0": (mutated(set_in(("version",), 1.0)), "version: expected 1, got 1.0"),
    "kind as a list": (mutated(set_in(("nodes", 0, "kind"), ["op"])), "nodes[0].kind"),
    "kind as an object": (mutated(set_in(("nodes", 0, "kind"), {})), "nodes[0].kind"),
    "non-canonical attr": (mutated(set_in(AXIS, {"tuple": [-1]})), "canonical form"),
    "not UTF-8": (gc.to_json(gc.parse(TEXT)).encode() + b"\xff", "not UTF-8"),
    "UTF-16": (gc.to_json(gc.parse(TEXT)).encode("utf-16"), "not UTF-8"),
    "not text": (5, "as a str or bytes"),
}


@pytest.mark.parametrize("name", list(BAD_JSON))
def test_hostile_json_is_a_parse_error_naming_the_field(name: str) -> None:
    text, expected = BAD_JSON[name]
    with pytest.raises(gc.ParseError) as info:
        gc.from_json(text)
    assert expected in str(info.value), str(info.value)
    assert len(str(info.value)) < 2000  # huge input is quoted short (paths may be long)


def test_load_of_a_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_bytes(b'{"format": "graphc", "name": "\xff"}')
    with pytest.raises(gc.ParseError, match=r"graph\.json: line 1: the JSON is not UTF-8"):
        gc.load(path)


def test_json_bytes_load() -> None:
    g = gc.parse(TEXT)
    assert str(gc.from_json(gc.to_json(g).encode())) == TEXT


# -- networkx ------------------------------------------------------------------


def digraph() -> nx.DiGraph:
    return gc.to_networkx(gc.parse(TEXT))


def set_node(key: str, field: str, value: Any) -> nx.DiGraph:
    d = digraph()
    d.nodes[key][field] = value
    return d


def with_positions(value: Any) -> nx.DiGraph:
    d = digraph()
    d.edges["x", "r"]["positions"] = value
    return d


def relabelled(mapping: dict) -> nx.DiGraph:
    return nx.relabel_nodes(digraph(), mapping)


BAD_DIGRAPHS: dict[str, tuple[nx.DiGraph, str]] = {
    "op as a list": (set_node("r", "op", ["sum"]), "'op' must be an op name"),
    "kind as a list": (set_node("r", "kind", ["op"]), "kind ['op']"),
    "attrs as a list": (set_node("r", "attrs", [("axis", 1)]), "'attrs' must be a dict"),
    "attr keys not strings": (set_node("r", "attrs", {1: 2}), "keyed by strings"),
    "meta as a string": (set_node("r", "meta", "loc"), "'meta' must be a dict"),
    "non-canonical attr": (set_node("r", "attrs", {"axis": (-1,), "keepdims": False}), "canon"),
    "numpy attr": (
        set_node("r", "attrs", {"axis": (np.int64(1),), "keepdims": False}),
        "axis",
    ),
    "positions as an int": (with_positions(1), "'positions' must list input positions"),
    "positions as strings": (with_positions(["0"]), "'positions' must list"),
    "negative position": (with_positions([-1]), "'positions' must list"),
    "int key": (relabelled({"r": 7}), "keys must be non-empty strings"),
    "empty key": (relabelled({"r": ""}), "keys must be non-empty strings"),
    "type subclass lookalike": (set_node("r", "type", "f32[2]"), "must be a TensorType"),
}


@pytest.mark.parametrize("name", list(BAD_DIGRAPHS))
def test_odd_digraph_data_is_a_verify_error_naming_the_node(name: str) -> None:
    d, expected = BAD_DIGRAPHS[name]
    with pytest.raises(gc.VerifyError) as info:
        gc.from_networkx(d)
    assert expected in str(info.value), str(info.value)


def test_digraph_name_must_be_a_string() -> None:
    d = digraph()
    d.graph["name"] = ("not", "a", "name")
    with pytest.raises(gc.VerifyError, match="name must be a string"):
        gc.from_networkx(d)


def test_digraph_fused_body_is_verified() -> None:
    g = gc.parse(fused_nest(1))
    d = gc.to_networkx(g)
    body = d.nodes["f"]["attrs"]["body"]
    body.nodes[1].type = TensorType((3,))  # the body's neg now claims the wrong type
    with pytest.raises(gc.VerifyError, match="DiGraph node 'f', attr 'body'"):
        gc.from_networkx(d)


# -- the limits behind the messages ------------------------------------------------


def test_type_limits() -> None:
    with pytest.raises(gc.ShapeError, match="at most 2\\*\\*63 - 1"):
        TensorType((2**63,))
    with pytest.raises(gc.ShapeError, match="more bytes"):
        TensorType((2**61, 2), "f64")
    with pytest.raises(gc.ShapeError, match="more bytes"):
        TensorType((0, 2**62, 2**62))  # numpy refuses these dims even with a zero among them
    assert TensorType((2**30, 2**30)).size == 2**60
    with pytest.raises(gc.ShapeError, match="a dim must be an int or a symbol"):
        TensorType(("B\n",))
    for dtype in (["f32"], {"names": ["a"], "formats": ["f4"]}, ("f4", 2)):
        with pytest.raises(gc.DTypeError, match="not a dtype"):
            TensorType((2,), dtype)
