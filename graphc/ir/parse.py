"""The text parser: reads exactly what `format_graph` prints (see graphc.ir.text).

A small regular-expression tokenizer splits the text into names, strings, numbers,
punctuation and newlines (which end statements), and a recursive-descent reader
turns them into nodes and attribute values; a ``graph ... { ... }`` block may itself
be an attribute value (the body of a fused node). Nothing is ever evaluated, so
loading untrusted text cannot run code. Every node is checked as it is read (its op exists, its inputs are
defined, its attrs are complete, its declared type is what the op's type rule gives),
and every error names the line.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ParseError
from graphc.ir.graph import Graph, Node
from graphc.ir.types import DTYPES, TensorType
from graphc.ir.verify import op_problem

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\f\v]+)
  | (?P<comment>\#[^\n]*)
  | (?P<nl>\n)
  | (?P<b64>b64"[^"\n]*")
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<value>%(?:[A-Za-z0-9_][A-Za-z0-9_.]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[()\[\]{},:=-])
    """,
    re.VERBOSE,
)
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Token:
    kind: str  # b64, string, value, number, ident, punct, nl, end
    text: str
    line: int


@dataclass(frozen=True)
class Base64Array:
    """A b64"..." literal: raw bytes whose dtype and shape come from the node's type."""

    data: bytes


class _Reader:
    """The tokens of the whole text, read front to back; newlines end statements."""

    def __init__(self, text: str) -> None:
        self.tokens: list[Token] = []
        line, at = 1, 0
        while at < len(text):
            match = _TOKEN.match(text, at)
            if match is None:
                column = at - text.rfind("\n", 0, at)
                raise ParseError(
                    f"line {line}: unexpected character {text[at]!r} at column {column}"
                )
            kind = match.lastgroup
            if kind == "nl":
                self.tokens.append(Token("nl", "end of line", line))
                line += 1
            elif kind not in ("space", "comment"):
                self.tokens.append(Token(kind, match.group(), line))  # type: ignore[arg-type]
            at = match.end()
        self.last_line = max(line - 1, 1) if text.endswith("\n") else line
        self.at = 0

    def error(self, message: str, line: int | None = None) -> ParseError:
        return ParseError(f"line {self.peek().line if line is None else line}: {message}")

    def peek(self) -> Token:
        if self.at < len(self.tokens):
            return self.tokens[self.at]
        return Token("end", "end of text", max(self.last_line, 1))

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

    def skip_newlines(self) -> None:
        while self.peek().kind == "nl":
            self.at += 1

    def end_statement(self) -> None:
        if self.peek().kind not in ("nl", "end"):
            raise self.error(f"unexpected {self.peek().text!r} after the end of the statement")
        self.skip_newlines()

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
        if self.peek().kind == "ident" and self.peek().text == "graph":
            return self.graph()  # a subgraph attribute, e.g. the body of a fused node
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
        self.at -= 1
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

    # -- statements ----------------------------------------------------------

    def graph(self) -> Graph:
        """``graph NAME(%placeholders...) {`` statements ``}`` (leaves what follows '}')."""
        self.expect("graph", "'graph NAME(...) {'")
        token = self.next()
        if token.kind == "ident" and "." not in token.text:
            graph = Graph(token.text)
        elif token.kind == "string":
            graph = Graph(self.string(token.text))
        else:
            self.at -= 1
            raise self.error(f"expected the graph's name, found {token.text!r}")
        self.expect("(", "'(' opening the placeholders")
        while not self.accept(")"):
            if graph.nodes:
                self.expect(",", "',' or ')' after a placeholder")
            name = self.value_name("a placeholder (%name: type)")
            self.expect(":", f"':' and the type of placeholder '{name}'")
            self._fresh(graph, name)
            graph.add_placeholder(name, self.type())
        self.expect("{", "'{' opening the graph's body")
        self.end_statement()
        while not self.accept("}"):
            if self.peek().kind == "end":
                raise self.error(f"expected the closing '}}' of graph '{graph.name}'")
            if self.accept("output"):
                self._output(graph)
            else:
                self._op(graph)
            self.end_statement()
        return graph

    def _fresh(self, graph: Graph, name: str) -> None:
        if name in graph:
            raise self.error(f"the name '{name}' is defined twice")

    def _lookup(self, graph: Graph, name: str) -> Node:
        if name not in graph:
            raise self.error(f"unknown value '%{name}' (not defined on an earlier line)")
        return graph.node(name)

    def _output(self, graph: Graph) -> None:
        name = self.value_name("the output's name (%name)")
        self._fresh(graph, name)
        self.expect("=", "'=' after the output's name")
        value = self._lookup(graph, self.value_name("the output's value (%name)"))
        graph.add_output(value, name)

    def _op(self, graph: Graph) -> None:
        line = self.peek().line
        name = self.value_name("a node (%name: type = op(...)), 'output' or '}'")
        self._fresh(graph, name)
        self.expect(":", f"':' and the type of '%{name}'")
        declared = self.type()
        self.expect("=", f"'=' after the type of '%{name}'")
        op = self.expect_kind("ident", f"the op of '%{name}'").text
        self.expect("(", f"'(' after op '{op}'")
        inputs: list[Node] = []
        attrs: dict[str, Any] = {}
        while not self.accept(")"):
            if inputs or attrs:
                self.expect(",", "',' or ')' in the arguments")
            if self.peek().kind == "value":
                if attrs:
                    raise self.error("inputs must come before attributes")
                inputs.append(self._lookup(graph, self.value_name()))
                continue
            key = self.expect_kind("ident", "an input (%name) or an attribute (key=value)").text
            if key in attrs:
                raise self.error(f"attribute '{key}' is given twice")
            self.expect("=", f"'=' after attribute '{key}'")
            attrs[key] = self.literal()

        def error(message: str) -> ParseError:
            return self.error(message, line)

        attrs = {key: _attr_value(op, key, value, declared, error) for key, value in attrs.items()}
        problem = op_problem(op, inputs, attrs, declared)
        if problem:
            raise error(f"node '{name}': {problem}")
        graph.add_op(op, inputs, attrs, declared, name=name)


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
    reader = _Reader(text)
    reader.skip_newlines()
    if reader.peek().kind == "end":
        raise reader.error("expected 'graph NAME(...) {', found an empty text")
    graph = reader.graph()
    reader.skip_newlines()
    if reader.peek().kind != "end":
        raise reader.error("unexpected text after the closing '}'")
    return graph


def _attr_value(
    op: str, key: str, value: Any, declared: TensorType, error: Callable[[str], ParseError]
) -> Any:
    """Turn array literals into arrays; a constant's declared type gives dtype and shape."""
    if op == "constant" and key == "value":
        return array_from_literal(value, declared, error)
    if isinstance(value, Base64Array):
        raise error(f"attribute '{key}': b64\"...\" is only allowed as a constant's value")
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
