"""Malformed graph text: each mistake raises ParseError naming the line and what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import graphc as gc

GOOD = """\
graph g(%x: f32[B,3], %w: f32[3,2]) {
  %matmul: f32[B,2] = matmul(%x, %w)
  %sum: f32[B] = sum(%matmul, axis=(1,), keepdims=False)
  output %y = %sum
}"""


def broken(line: int, replacement: str) -> str:
    """GOOD with its `line` (1-based) replaced."""
    lines = GOOD.splitlines()
    lines[line - 1] = replacement
    return "\n".join(lines)


def test_good_text_parses() -> None:
    assert str(gc.parse(GOOD)) == GOOD


CASES = {
    "unknown op": (
        broken(2, "  %matmul: f32[B,2] = frobnicate(%x, %w)"),
        2,
        "unknown op 'frobnicate'",
    ),
    "undefined value": (broken(2, "  %matmul: f32[B,2] = matmul(%x, %v)"), 2, "unknown value '%v'"),
    "use before definition": (
        broken(2, "  %matmul: f32[B,2] = matmul(%x, %sum)"),
        2,
        "unknown value '%sum'",
    ),
    "undefined output value": (broken(4, "  output %y = %nothing"), 4, "unknown value '%nothing'"),
    "duplicate op name": (
        broken(3, "  %matmul: f32[B] = sum(%matmul, axis=(1,), keepdims=False)"),
        3,
        "'matmul' is defined twice",
    ),
    "duplicate placeholder": (
        broken(1, "graph g(%x: f32[B,3], %x: f32[3,2]) {"),
        1,
        "'x' is defined twice",
    ),
    "duplicate output name": (broken(4, "  output %x = %sum"), 4, "'x' is defined twice"),
    "unknown dtype": (
        broken(1, "graph g(%x: c64[B,3], %w: f32[3,2]) {"),
        1,
        "unknown dtype 'c64'",
    ),
    "bad dim": (broken(1, "graph g(%x: f32[B,3.5], %w: f32[3,2]) {"), 1, "expected a dim"),
    "negative dim": (broken(1, "graph g(%x: f32[B,-3], %w: f32[3,2]) {"), 1, "bad type"),
    "unclosed shape": (broken(1, "graph g(%x: f32[B,3, %w: f32[3,2]) {"), 1, "expected a dim"),
    "missing type": (broken(2, "  %matmul = matmul(%x, %w)"), 2, "expected ':'"),
    "bad attr literal": (
        broken(3, "  %sum: f32[B] = sum(%matmul, axis=one, keepdims=False)"),
        3,
        "expected an attribute value",
    ),
    "code in attr": (
        broken(3, '  %sum: f32[B] = sum(%matmul, axis=__import__("os"), keepdims=False)'),
        3,
        "expected an attribute value",
    ),
    "double comma in tuple": (
        broken(3, "  %sum: f32[B] = sum(%matmul, axis=(1,,), keepdims=False)"),
        3,
        "expected an attribute value",
    ),
    "unclosed tuple": (
        broken(3, "  %sum: f32[B] = sum(%matmul, axis=(1, keepdims=False)"),
        3,
        "found 'keepdims'",
    ),
    "unknown attr": (
        broken(3, "  %sum: f32[B] = sum(%matmul, axis=(1,), keepdims=False, foo=1)"),
        3,
        "unknown ['foo']",
    ),
    "missing attr": (
        broken(3, "  %sum: f32[B] = sum(%matmul, axis=(1,))"),
        3,
        "missing ['keepdims']",
    ),
    "attr twice": (
        broken(3, "  %sum: f32[B] = sum(%matmul, axis=(1,), axis=(1,))"),
        3,
        "'axis' is given twice",
    ),
    "input after attr": (
        broken(3, "  %sum: f32[B] = sum(axis=(1,), %matmul, keepdims=False)"),
        3,
        "before attributes",
    ),
    "wrong declared type": (
        broken(2, "  %matmul: f32[B,3] = matmul(%x, %w)"),
        2,
        "node 'matmul': declared type f32[B,3]",
    ),
    "type rule fails": (
        broken(2, "  %matmul: f32[B,2] = matmul(%w, %w)"),
        2,
        "node 'matmul': the type rule",
    ),
    "arity": (broken(2, "  %matmul: f32[B,2] = matmul(%x)"), 2, "takes 2 input(s), got 1"),
    "missing closing brace": ("\n".join(GOOD.splitlines()[:-1]), 4, "closing '}'"),
    "text after brace": (GOOD + "\n  %z: f32[] = neg(%y)", 6, "after the closing '}'"),
    "trailing tokens": (broken(4, "  output %y = %sum %sum"), 4, "unexpected '%sum'"),
    "bad header": (
        broken(1, "grph g(%x: f32[B,3], %w: f32[3,2]) {"),
        1,
        "expected 'graph NAME(...) {'",
    ),
    "header without brace": (broken(1, "graph g(%x: f32[B,3], %w: f32[3,2])"), 1, "'{' opening"),
    "bad character": (
        broken(2, "  %matmul: f32[B,2] = matmul(%x; %w)"),
        2,
        "unexpected character ';'",
    ),
    "bad string escape": (
        broken(1, 'graph "g\\q"(%x: f32[B,3], %w: f32[3,2]) {'),
        1,
        "malformed string",
    ),
    "attr of the wrong kind": (
        broken(3, '  %sum: f32[B] = sum(%matmul, axis="one", keepdims=False)'),
        3,
        "node 'sum': bad attrs for 'sum': sum: an axis must be an int",
    ),
    "empty text": ("", 1, "empty text"),
    "a JSON document": ('\n{"format": "graphc", "version": 1}', 2, "gc.from_json(text)"),
    "digits of another script": (
        broken(1, "graph g(%x: f32[B,\u0663], %w: f32[3,2]) {"),
        1,
        "unexpected character '\u0663'",
    ),
}

CONSTANT_CASES = {
    "constant shape": ("%c: f32[3] = constant(value=[1.0, 2.0])", "shape (2,)"),
    "constant element type": ("%c: i64[2] = constant(value=[1, 2.5])", "2.5"),
    "bool constant": ("%c: bool[1] = constant(value=[1])", "does not fit dtype bool"),
    "b64 length": ('%c: f32[2] = constant(value=b64"AAAAAA==")', "4 bytes"),
    "b64 malformed": ('%c: f32[1] = constant(value=b64"!!!")', "malformed base64"),
    "b64 not ascii": ('%c: f32[1] = constant(value=b64"AAAA\u00e9A==")', "malformed base64"),
    "b64 outside constant": ('%c: f32[3] = full_like(%x, value=b64"AAAAAA==")', "only allowed"),
    "symbolic constant": ("%c: f32[B] = constant(value=[1.0])", "concrete type"),
    "b64 bool of another byte": ('%c: bool[2] = constant(value=b64"AQI=")', "bytes 0 and 1"),
    "full-width digits": ("%c: i64[] = constant(value=\uff11\uff12)", "unexpected character"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_text_names_the_line(name: str) -> None:
    text, line, expected = CASES[name]
    with pytest.raises(gc.ParseError) as info:
        gc.parse(text)
    message = str(info.value)
    assert message.startswith(f"line {line}:"), message
    assert expected in message, message


@pytest.mark.parametrize("name", list(CONSTANT_CASES))
def test_malformed_constants_name_the_line(name: str) -> None:
    node, expected = CONSTANT_CASES[name]
    text = f"graph g(%x: f32[3]) {{\n  {node}\n  output %y = %c\n}}"
    with pytest.raises(gc.ParseError) as info:
        gc.parse(text)
    message = str(info.value)
    assert message.startswith("line 2:"), message
    assert expected in message, message


def test_parse_error_is_a_value_error_and_a_graphc_error() -> None:
    with pytest.raises(ValueError):
        gc.parse("nonsense")
    with pytest.raises(gc.GraphcError):
        gc.parse("nonsense")


def test_a_path_is_refused_with_what_to_pass_instead(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text(GOOD)
    for load in (gc.parse, gc.from_json):
        with pytest.raises(gc.ParseError, match="read_text"):
            load(path)  # type: ignore[arg-type]
    assert str(gc.parse(path.read_text())) == GOOD


def test_a_non_canonical_dtype_attr_is_shown_as_the_text_writes_it() -> None:
    text = 'graph g(%x: f32[3]) {\n  %c: f64[3] = cast(%x, dtype="f64")\n  output %y = %c\n}'
    with pytest.raises(gc.ParseError, match=r"""is 'f64', but its canonical form .* is f64$"""):
        gc.parse(text)
    assert str(gc.parse(text.replace('"f64"', "f64"))) == text.replace('"f64"', "f64")


SAVED_BEFORE_IGNORE_INDEX = """\
graph g(%y: i64[4]) {
  %h: f32[4,3] = one_hot(%y, num_classes=3, dtype=f32)
  output %out = %h
}"""


def test_an_attr_whose_default_is_none_may_be_left_out_of_a_file() -> None:
    """A graph saved before one_hot had ignore_index loads, from text and from JSON: an
    attr whose default is None reads as None when a file leaves it out (and prints in
    the op's order); one without a default is still a named error."""
    g = gc.parse(SAVED_BEFORE_IGNORE_INDEX)
    assert g.node("h").attrs == {
        "num_classes": 3,
        "dtype": np.dtype("float32"),
        "ignore_index": None,
    }
    assert "one_hot(%y, num_classes=3, dtype=f32, ignore_index=None)" in str(g)
    doc = json.loads(gc.to_json(g))
    for entry in doc["nodes"]:
        if entry.get("op") == "one_hot":
            del entry["attrs"]["ignore_index"]
    assert gc.from_json(json.dumps(doc)).node("h").attrs == g.node("h").attrs
    with pytest.raises(gc.ParseError, match=r"missing \['num_classes'\]"):
        gc.parse(SAVED_BEFORE_IGNORE_INDEX.replace("num_classes=3, ", ""))
