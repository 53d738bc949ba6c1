"""JSON save/load: everything round-trips (attrs, constants bit-exact, meta); bad fields are named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import graphc as gc
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs


def sample() -> gc.Graph:
    g = gc.Graph("json sample")
    with g:
        x = gc.placeholder("x", shape=("B", 4), dtype="float64")
        m = gc.placeholder("m", shape=(1,), dtype="bool")
        c32 = gc.constant(
            np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32), name="c32"
        )
        y = gc.cast(x, "float32")[:, None, 1:3]
        gc.output(gc.sum(y, axis=(0, 2), keepdims=True), name="y_sum")
        gc.output(gc.clip(x, -np.inf, 1e-5), name="y_clip")
        gc.output(c32 * float("nan"), name="y_nan")
        gc.output(gc.where(m, gc.constant(np.array([[True], [False]])), False), name="y_where")
        gc.output(gc.constant(np.array([[1, -2]], np.int64), name="ints"), name="y_ints")
        gc.output(gc.constant(np.zeros((2, 0), np.float32), name="empty"), name="y_empty")
    return g


def assert_same_graph(g: Graph, g2: Graph) -> None:
    assert g2.name == g.name
    assert str(g2) == str(g)
    assert [n.name for n in g2] == [n.name for n in g]
    for a, b in zip(g, g2):
        assert (a.kind, a.op, a.type, a.meta) == (b.kind, b.op, b.type, b.meta), a.name
        assert [x.name for x in a.inputs] == [x.name for x in b.inputs]
        assert a.attrs.keys() == b.attrs.keys()
        for key, value in a.attrs.items():
            other = b.attrs[key]
            if isinstance(value, np.ndarray):
                assert value.dtype == other.dtype and value.shape == other.shape
                assert value.tobytes() == other.tobytes(), f"{a.name}.{key}"
                assert not other.flags.writeable
            else:
                assert type(value) is type(other) or np.isnan(value), f"{a.name}.{key}"


def test_round_trip_keeps_everything() -> None:
    g = sample()
    g2 = gc.from_json(gc.to_json(g))
    assert_same_graph(g, g2)
    assert __file__ in g2.node("x").meta["loc"]
    assert g2.node("c32").value.dtype == np.float32
    gc.verify(g2)
    feeds = random_feeds(g, seed=2)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        np.testing.assert_array_equal(a, b)


def test_document_shape_and_tags() -> None:
    doc = json.loads(gc.to_json(sample()))
    assert doc["format"] == "graphc" and doc["version"] == 1 and doc["name"] == "json sample"
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["x"]["type"] == {"shape": ["B", 4], "dtype": "f64"}
    assert by_name["sum"]["attrs"]["axis"] == {"tuple": [0, 2]}
    assert by_name["cast"]["attrs"]["dtype"] == {"dtype": "f32"}
    assert by_name["clip"]["attrs"]["a_min"] == {"float": "-inf"}
    assert set(by_name["c32"]["attrs"]["value"]) == {"dtype", "shape", "base64"}
    assert by_name["y_sum"]["inputs"] == ["sum"]


def test_meta_round_trips_and_unencodable_meta_is_dropped() -> None:
    g = gc.Graph("meta")
    x = g.add_placeholder("x", TensorType((2,)), meta={"loc": "a.py:1"})
    y = g.add_op(
        "neg", [x], {}, TensorType((2,)), meta={"grad_of": "f", "tag": (1, 2.5), "node": x}
    )
    g.add_output(y, "y")
    g2 = gc.from_json(gc.to_json(g))
    assert g2.node("x").meta == {"loc": "a.py:1"}
    assert g2.node("neg").meta == {"grad_of": "f", "tag": (1, 2.5)}


def test_save_and_load(tmp_path: Path) -> None:
    g = sample()
    path = tmp_path / "g.json"
    gc.save(g, path)
    assert_same_graph(g, gc.load(path))


@settings(max_examples=draws(20))
@given(random_graphs())
def test_random_graphs_round_trip(g: gc.Graph) -> None:
    g2 = gc.from_json(gc.to_json(g))
    assert str(g2) == str(g)
    feeds = random_feeds(g, seed=0)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        np.testing.assert_array_equal(a, b, err_msg=str(g))


# -- malformed documents -------------------------------------------------------------


def document() -> dict:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,))
        gc.output(gc.sum(gc.exp(x), axis=0), name="y")
    return json.loads(gc.to_json(g))


def edit(path: str, value: object) -> str:
    """The sample document with the field at `path` ("nodes.1.inputs.0") set (or deleted)."""
    doc = document()
    *parents, last = path.split(".")
    target: object = doc
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]  # type: ignore[index]
    key = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]  # type: ignore[attr-defined]
    else:
        target[key] = value  # type: ignore[index]
    return json.dumps(doc)


DELETE = object()

MALFORMED = {
    "unknown input": (edit("nodes.1.inputs.0", "foo"), "nodes[1].inputs[0]: unknown value 'foo'"),
    "later input": (edit("nodes.1.inputs.0", "sum"), "nodes[1].inputs[0]: unknown value 'sum'"),
    "unknown op": (edit("nodes.1.op", "frob"), "nodes[1] ('exp'): unknown op 'frob'"),
    "missing op": (edit("nodes.1.op", DELETE), "nodes[1].op"),
    "bad kind": (edit("nodes.1.kind", "input"), "nodes[1].kind"),
    "duplicate name": (edit("nodes.2.name", "x"), "nodes[2].name: the name 'x' is used twice"),
    "missing name": (edit("nodes.0.name", DELETE), "nodes[0].name"),
    "bad dtype": (edit("nodes.0.type.dtype", "c64"), "nodes[0].type.dtype: unknown dtype 'c64'"),
    "bad shape": (edit("nodes.0.type.shape", [3.5]), "nodes[0].type.shape"),
    "bad dim": (edit("nodes.0.type.shape", [-1]), "nodes[0].type.shape"),
    "wrong type": (edit("nodes.1.type.shape", [4]), "nodes[1] ('exp'): declared type f32[4]"),
    "bad tag": (edit("nodes.2.attrs.axis", {"set": [1]}), "nodes[2].attrs.axis: unknown tagged"),
    "missing attr": (edit("nodes.2.attrs.keepdims", DELETE), "missing ['keepdims']"),
    "bad float tag": (edit("nodes.2.attrs.axis", {"float": "big"}), "nodes[2].attrs.axis"),
    "unknown field": (edit("nodes.1.colour", "red"), "nodes[1]: unknown field(s) ['colour']"),
    "nodes not a list": (edit("nodes", {}), "nodes: expected a list"),
    "bad version": (edit("version", 99), "version: expected 1, got 99"),
    "wrong format": (edit("format", "onnx"), "format"),
    "missing graph name": (edit("name", DELETE), "name: expected a string"),
    "not json": ('{"format": "graphc",', "not valid JSON"),
    "output arity": (edit("nodes.3.inputs", []), "nodes[3] ('y'): an output has exactly one input"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_json_names_the_field(name: str) -> None:
    text, expected = MALFORMED[name]
    with pytest.raises(gc.ParseError) as info:
        gc.from_json(text)
    assert expected in str(info.value), str(info.value)


def constant_document(value: dict) -> str:
    return json.dumps(
        {
            "format": "graphc",
            "version": 1,
            "name": "c",
            "nodes": [
                {
                    "name": "c",
                    "kind": "op",
                    "op": "constant",
                    "inputs": [],
                    "attrs": {"value": value},
                    "type": {"shape": [2], "dtype": "f32"},
                }
            ],
        }
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"dtype": "f32", "shape": [2], "base64": "AAAA"}, "nodes[0].attrs.value.base64: 3 bytes"),
        ({"dtype": "f32", "shape": [2], "base64": "!!"}, "nodes[0].attrs.value.base64: malformed"),
        ({"dtype": "c64", "shape": [2], "base64": ""}, "nodes[0].attrs.value.dtype"),
        ({"dtype": "f32", "shape": [-2], "base64": ""}, "nodes[0].attrs.value.shape"),
        ({"dtype": "f64", "shape": [2], "base64": "A" * 22 + "=="}, "declared type f32[2]"),
        ({"tuple": [1.0, 2.0]}, "a constant's value must be an array"),
        ({"dtype": "bool", "shape": [2], "base64": "AQI="}, "base64: byte 1 of a bool array is 2"),
    ],
)
def test_malformed_constant_arrays_name_the_field(value: dict, expected: str) -> None:
    with pytest.raises(gc.ParseError) as info:
        gc.from_json(constant_document(value))
    assert expected in str(info.value), str(info.value)


def test_loading_never_unpickles() -> None:
    # a pickle-style payload is just an unknown tag, not something to execute
    text = constant_document({"py/reduce": "os.system", "args": ["echo hi"]})
    with pytest.raises(gc.ParseError, match="unknown tagged value"):
        gc.from_json(text)
