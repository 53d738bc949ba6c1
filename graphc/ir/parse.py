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
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graphc.ir.attrs import INT64_MAX, INT64_MIN, MAX_DEPTH
from graphc.ir.errors import DTypeError, GraphcError, ParseError
from graphc.ir.graph import MAX_NESTING, OUTPUT, Graph, Node
from graphc.ir.literals import Base64Array, array_from_literal, as_text, short
from graphc.ir.registry import read_attrs
from graphc.ir.types import DTYPES, TensorType, TupleType, known_dtype
from graphc.ir.verify import node_problem, op_problem

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\f\v]+)
  | (?P<comment>\#[^\n]*)
  | (?P<nl>\n)
  | (?P<b64>b64"[^"\n]*")
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<value>%(?:[A-Za-z0-9_][A-Za-z0-9_.]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<number>-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[()\[\]{},:=-])
    """,
    re.VERBOSE,
)
_INT = re.compile(r"-?[0-9]+")  # ASCII digits: \d (and int()) take those of any script
UINT64_MAX = 2**64 - 1


@dataclass(frozen=True)
class Token:
    kind: str  # b64, string, value, number, ident, punct, nl, end
    text: str
    line: int


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
        self.depth = 0  # of nested tuples and lists within an attribute, against MAX_DEPTH
        self.nesting = 0  # of graphs, against MAX_NESTING

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
        name = self.string(text) if text.startswith('"') else text
        if not name:
            raise self.error('a value name cannot be empty (%"")', self.tokens[self.at - 1].line)
        return name

    def string(self, text: str) -> str:
        try:
            return json.loads(text)
        except ValueError:
            raise self.error(f"malformed string {text}") from None

    def value_type(self) -> TensorType | TupleType:
        """A node's type: a tensor type, or (t1, t2, ...) for a node with several results."""
        if not self.accept("("):
            return self.type()
        items: list[TensorType] = []
        while not self.accept(")"):
            if items and not self.accept(","):
                raise self.error("expected ',' or ')' in a tuple type")
            if self.peek().text == ")":
                continue  # the trailing comma of (f32[3],)
            items.append(self.type())
        return TupleType(items)

    def type(self) -> TensorType:
        dtype = self.expect_kind("ident", "a type such as f32[B,3]").text
        try:
            known = known_dtype(dtype)
        except DTypeError as exc:  # bf16 without ml_dtypes
            raise self.error(f"dtype {dtype!r}: {exc}") from None
        if known is None:
            raise self.error(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
        self.expect("[", "'[' opening the shape")
        dims: list[int | str] = []
        while not self.accept("]"):
            if dims:
                self.expect(",", "',' or ']' in the shape")
            token = self.next()
            if token.kind == "number" and _INT.fullmatch(token.text):
                dims.append(self.integer(token))
            elif token.kind == "ident" and "." not in token.text:
                dims.append(token.text)
            else:
                raise self.error(f"expected a dim (an int or a symbol), found {token.text!r}")
        try:
            return TensorType(dims, dtype)
        except GraphcError as exc:
            raise self.error(f"bad type: {exc}") from None

    def integer(self, token: Token, largest: int = INT64_MAX) -> int:
        """An int token that fits int64, or up to `largest` (a longer one is never
        converted: no huge ints)."""
        digits = token.text.lstrip("-").lstrip("0")
        value = int(token.text) if len(digits) <= len(str(largest)) else None
        if value is None or not INT64_MIN <= value <= largest:
            fits = "int64" if largest == INT64_MAX else "int64 or uint64"
            raise self.error(f"the integer {short(token.text)} does not fit {fits}", token.line)
        return value

    def number(self, token: Token) -> int | float:
        if _INT.fullmatch(token.text):
            # a literal may be a uint64 constant's element; an int attr above int64 is
            # refused by verify, as from any other source
            return self.integer(token, UINT64_MAX)
        value = float(token.text)
        if math.isinf(value):  # the printer writes inf; a finite literal must stay finite
            raise self.error(f"the number {short(token.text)} is too large for a float", token.line)
        return value

    def nested(self) -> None:
        """Enter a tuple or list; deeper than MAX_DEPTH is an error, not a stack overflow."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"tuples and lists nested more than {MAX_DEPTH} deep")

    def literal(self) -> Any:
        if self.peek().kind == "ident" and self.peek().text == "graph":
            return self.graph()  # a subgraph attribute, e.g. the body of a fused node
        token = self.next()
        if token.kind == "number":
            return self.number(token)
        if token.kind == "string":
            return self.string(token.text)
        if token.kind == "b64":
            try:
                return Base64Array(base64.b64decode(token.text[4:-1], validate=True))
            except ValueError:  # binascii.Error, or a character outside ASCII
                raise self.error('malformed base64 in b64"..."') from None
        if token.kind == "ident" and token.text in _NAMED_LITERALS:
            return _NAMED_LITERALS[token.text]
        if token.kind == "ident" and token.text == "bf16":  # a dtype attr, as f32 above
            try:
                return known_dtype(token.text)
            except DTypeError as exc:
                raise self.error(str(exc)) from None
        if token.text == "-" and self.accept("inf"):
            return float("-inf")
        if token.kind == "punct" and token.text in "([":
            self.nested()
            items = self._sequence(")" if token.text == "(" else "]")
            self.depth -= 1
            return tuple(items) if token.text == "(" else items
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
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"graphs nested more than {MAX_NESTING} deep")
        outer_depth, self.depth = self.depth, 0
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
        self.nesting -= 1
        self.depth = outer_depth
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
        line = self.peek().line
        value = self._lookup(graph, self.value_name("the output's value (%name)"))
        problem = node_problem(Node(name, OUTPUT, None, (value,), {}, value.type))
        if problem:
            raise self.error(f"output '{name}': {problem}", line)
        graph.add_output(value, name)

    def _op(self, graph: Graph) -> None:
        line = self.peek().line
        name = self.value_name("a node (%name: type = op(...)), 'output' or '}'")
        self._fresh(graph, name)
        self.expect(":", f"':' and the type of '%{name}'")
        declared = self.value_type()
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

        if op == "constant" and "value" in attrs:
            attrs["value"] = array_from_literal(attrs["value"], declared, error)
        for key, value in attrs.items():
            if isinstance(value, Base64Array) and op != "constant":
                raise error(f"attribute '{key}': b64\"...\" is only allowed as a constant's value")
        attrs = read_attrs(op, attrs)
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


def parse(text: str | bytes) -> Graph:
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
    text = as_text(text)
    body = text.lstrip()
    if body.startswith("{"):  # to_json's document, not print(graph)'s text
        line = text[: len(text) - len(body)].count("\n") + 1
        raise ParseError(
            f"line {line}: expected 'graph NAME(...) {{', found '{{'; this looks like a "
            "graph's JSON form: read it with gc.from_json(text)"
        )
    reader = _Reader(text)
    reader.skip_newlines()
    if reader.peek().kind == "end":
        raise reader.error("expected 'graph NAME(...) {', found an empty text")
    graph = reader.graph()
    reader.skip_newlines()
    if reader.peek().kind != "end":
        raise reader.error("unexpected text after the closing '}'")
    return graph


__all__: Sequence[str] = ["parse"]
