"""The text parser: reads exactly what `format_graph` prints (see graphc.ir.text).

The text is read line by line. A small regular-expression tokenizer splits a line
into names, strings, numbers and punctuation, and a recursive-descent reader turns
attribute literals into values; nothing is ever evaluated, so loading untrusted text
cannot run code. Every node is checked as it is read (its op exists, its inputs are
defined, its attrs are complete, its declared type is what the op's type rule gives),
and every error names the line.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ParseError
from graphc.ir.graph import Graph, Node
from graphc.ir.types import DTYPES, TensorType
from graphc.ir.verify import op_problem

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<b64>b64"[^"]*")
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<value>%(?:[A-Za-z0-9_][A-Za-z0-9_.]*|"(?:[^"\\]|\\.)*"))
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[()\[\]{},:=-])
    """,
    re.VERBOSE,
)
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Token:
    kind: str  # b64, string, value, number, ident, punct, end
    text: str


@dataclass(frozen=True)
class Base64Array:
    """A b64"..." literal: raw bytes whose dtype and shape come from the node's type."""

    data: bytes


class _Line:
    """The tokens of one line, read front to back."""

    def __init__(self, text: str, number: int) -> None:
        self.number = number
        self.tokens: list[Token] = []
        at = 0
        while at < len(text):
            match = _TOKEN.match(text, at)
            if match is None:
                raise self.error(f"unexpected character {text[at]!r} at column {at + 1}")
            if match.lastgroup != "space":
                self.tokens.append(Token(match.lastgroup, match.group()))  # type: ignore[arg-type]
            at = match.end()
        self.at = 0

    def error(self, message: str) -> ParseError:
        return ParseError(f"line {self.number}: {message}")

    def peek(self) -> Token:
        return self.tokens[self.at] if self.at < len(self.tokens) else Token("end", "end of line")

    def next(self) -> Token:
        token = self.peek()
        self.at += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek().kind in ("punct", "ident") and self.peek().text == text:
            self.at += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> None:
        if not self.accept(text):
            raise self.error(f"expected {what or repr(text)}, found {self.peek().text!r}")

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.peek().kind != kind:
            raise self.error(f"expected {what}, found {self.peek().text!r}")
        return self.next()

    def expect_end(self) -> None:
        if self.peek().kind != "end":
            raise self.error(f"unexpected {self.peek().text!r} after the end of the statement")

    # -- pieces --------------------------------------------------------------

    def value_name(self, what: str = "a value name (%name)") -> str:
        text = self.expect_kind("value", what).text[1:]
        return self.string(text) if text.startswith('"') else text

    def string(self, text: str) -> str:
        try:
            return json.loads(text)
        except ValueError:
            raise self.error(f"malformed string {text}") from None

    def type(self) -> TensorType:
        dtype = self.expect_kind("ident", "a type such as f32[B,3]").text
        if dtype not in DTYPES:
            raise self.error(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
        self.expect("[", "'[' opening the shape")
        dims: list[int | str] = []
        while not self.accept("]"):
            if dims:
                self.expect(",", "',' or ']' in the shape")
            token = self.next()
            if token.kind == "number" and _INT.fullmatch(token.text):
                dims.append(int(token.text))
            elif token.kind == "ident" and "." not in token.text:
                dims.append(token.text)
            else:
                raise self.error(f"expected a dim (an int or a symbol), found {token.text!r}")
        try:
            return TensorType(dims, dtype)
        except GraphcError as exc:
            raise self.error(f"bad type: {exc}") from None

    def literal(self) -> Any:
        token = self.next()
        if token.kind == "number":
            return int(token.text) if _INT.fullmatch(token.text) else float(token.text)
        if token.kind == "string":
            return self.string(token.text)
        if token.kind == "b64":
            try:
                return Base64Array(base64.b64decode(token.text[4:-1], validate=True))
            except binascii.Error:
                raise self.error('malformed base64 in b64"..."') from None
        if token.kind == "ident" and token.text in _NAMED_LITERALS:
            return _NAMED_LITERALS[token.text]
        if token.text == "-" and self.accept("inf"):
            return float("-inf")
        if token.text == "(":
            items = self._sequence(")")
            return tuple(items)
        if token.text == "[":
            return self._sequence("]")
        raise self.error(f"expected an attribute value, found {token.text!r}")

    def _sequence(self, close: str) -> list[Any]:
        items: list[Any] = []
        while not self.accept(close):
            if items:
                self.expect(",", f"',' or {close!r}")
                if self.accept(close):
                    break
            items.append(self.literal())
        return items


_NAMED_LITERALS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "nan": float("nan"),
    "inf": float("inf"),
    **DTYPES,
}


def parse(text: str) -> Graph:
    """Read a graph from its text form (what `print(graph)` shows).

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph double(%x: f32[3]) {
    ...   %mul: f32[3] = mul(%x, %x)
    ...   output %y = %mul
    ... }''')
    >>> [n.name for n in g.inputs], [n.name for n in g.outputs]
    (['x'], ['y'])
    """
    lines = [_Line(line, number) for number, line in _significant_lines(text)]
    if not lines:
        raise ParseError("line 1: expected 'graph NAME(...) {', found an empty text")
    graph = _header(lines[0])
    for line in lines[1:]:
        if line.accept("}"):
            line.expect_end()
            if line is not lines[-1]:
                extra = lines[lines.index(line) + 1]
                raise extra.error("unexpected text after the closing '}'")
            return graph
        if line.accept("output"):
            _output(graph, line)
        else:
            _op(graph, line)
    last = lines[-1].number if len(lines) > 1 else lines[0].number
    raise ParseError(f"line {last}: expected the closing '}}' of graph '{graph.name}'")


def _significant_lines(text: str) -> list[tuple[int, str]]:
    return [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _header(line: _Line) -> Graph:
    line.expect("graph", "'graph NAME(...) {'")
    token = line.next()
    if token.kind == "ident" and "." not in token.text:
        graph = Graph(token.text)
    elif token.kind == "string":
        graph = Graph(line.string(token.text))
    else:
        raise line.error(f"expected the graph's name, found {token.text!r}")
    line.expect("(", "'(' opening the placeholders")
    while not line.accept(")"):
        if graph.nodes:
            line.expect(",", "',' or ')' after a placeholder")
        name = line.value_name("a placeholder (%name: type)")
        line.expect(":", f"':' and the type of placeholder '{name}'")
        _fresh(graph, name, line)
        graph.add_placeholder(name, line.type())
    line.expect("{", "'{' opening the graph's body")
    line.expect_end()
    return graph


def _fresh(graph: Graph, name: str, line: _Line) -> None:
    if name in graph:
        raise line.error(f"the name '{name}' is defined twice")


def _lookup(graph: Graph, name: str, line: _Line) -> Node:
    if name not in graph:
        raise line.error(f"unknown value '%{name}' (not defined on an earlier line)")
    return graph.node(name)


def _output(graph: Graph, line: _Line) -> None:
    name = line.value_name("the output's name (%name)")
    _fresh(graph, name, line)
    line.expect("=", "'=' after the output's name")
    value = _lookup(graph, line.value_name("the output's value (%name)"), line)
    line.expect_end()
    graph.add_output(value, name)


def _op(graph: Graph, line: _Line) -> None:
    name = line.value_name("a node (%name: type = op(...)), 'output' or '}'")
    _fresh(graph, name, line)
    line.expect(":", f"':' and the type of '%{name}'")
    declared = line.type()
    line.expect("=", f"'=' after the type of '%{name}'")
    op = line.expect_kind("ident", f"the op of '%{name}'").text
    line.expect("(", f"'(' after op '{op}'")
    inputs: list[Node] = []
    attrs: dict[str, Any] = {}
    while not line.accept(")"):
        if inputs or attrs:
            line.expect(",", "',' or ')' in the arguments")
        if line.peek().kind == "value":
            if attrs:
                raise line.error("inputs must come before attributes")
            inputs.append(_lookup(graph, line.value_name(), line))
            continue
        key = line.expect_kind("ident", "an input (%name) or an attribute (key=value)").text
        if key in attrs:
            raise line.error(f"attribute '{key}' is given twice")
        line.expect("=", f"'=' after attribute '{key}'")
        attrs[key] = line.literal()
    line.expect_end()
    attrs = {key: _attr_value(op, key, value, declared, line) for key, value in attrs.items()}
    problem = op_problem(op, inputs, attrs, declared)
    if problem:
        raise line.error(f"node '{name}': {problem}")
    graph.add_op(op, inputs, attrs, declared, name=name)


def _attr_value(op: str, key: str, value: Any, declared: TensorType, line: _Line) -> Any:
    """Turn array literals into arrays; a constant's declared type gives dtype and shape."""
    if op == "constant" and key == "value":
        return array_from_literal(value, declared, line.error)
    if isinstance(value, Base64Array):
        raise line.error(f"attribute '{key}': b64\"...\" is only allowed as a constant's value")
    if isinstance(value, list):
        return np.array(value)
    return value


def array_from_literal(value: Any, declared: TensorType, error: Any) -> np.ndarray:
    """A read-only array of the declared type from a nested list, scalar or base64 bytes."""
    if not declared.is_concrete:
        raise error(f"a constant must have a concrete type, not {declared}")
    shape = tuple(int(d) for d in declared.shape)
    dtype = declared.dtype
    if isinstance(value, Base64Array):
        expected = declared.size * dtype.itemsize  # type: ignore[operator]
        if len(value.data) != expected:
            raise error(f"b64 data holds {len(value.data)} bytes, {declared} needs {expected}")
        array = np.frombuffer(value.data, dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    else:
        _check_scalars(value, dtype, error)
        array = np.array(value, dtype=dtype)
        if array.shape != shape:
            if array.size != 0 or declared.size != 0:
                raise error(f"the value has shape {array.shape}, the declared type {declared}")
            array = array.reshape(shape)
    array.flags.writeable = False
    return array


def _check_scalars(value: Any, dtype: np.dtype, error: Any) -> None:
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_scalars(item, dtype, error)
        return
    if dtype == np.bool_:
        ok = isinstance(value, bool)
    elif np.issubdtype(dtype, np.integer):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        raise error(f"the element {value!r} does not fit dtype {dtype}")


__all__: Sequence[str] = ["parse", "array_from_literal"]
