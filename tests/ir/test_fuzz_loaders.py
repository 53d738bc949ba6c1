"""Fuzzing the loaders: mutated graph texts and JSON documents either fail as graphc
errors or load as graphs that verify and round-trip.

The seeds are the valid graphs of every op case (tests/op_cases.py) and random graphs
(tests/strategies.py); the mutations delete, duplicate and replace characters and
tokens, nest deeply, swap numbers for huge or non-finite ones, change dtypes and
names, and (for JSON) replace any value of the document tree. Whatever comes out,
loading raises ParseError or VerifyError, or gives a graph that passes `gc.verify`
and prints, parses and serializes back to the same text. Never another exception.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from tests.budget import draws
from tests.op_cases import all_cases, build_graph
from tests.strategies import random_graphs

LOAD_ERRORS = (gc.ParseError, gc.VerifyError)

# pieces of text a mutation may insert: syntax, edge numbers, dtypes, names, escapes
TOKENS = [
    *'()[]{},:=%#"\\\n-.',
    "9" * 25,
    "9" * 5000,
    str(2**63),
    str(-(2**63) - 1),
    "1e999",
    "-1e999",
    "1e-400",
    "-0.0",
    "0",
    "-1",
    "1.5",
    "1.",
    "nan",
    "inf",
    "-inf",
    "None",
    "True",
    "False",
    "f32",
    "f64",
    "i32",
    "i64",
    "bool",
    "f16",
    "graph",
    "output",
    "constant",
    "fused",
    '"a\\nb"',
    '"\\ud800"',
    '"\\u0000"',
    '"%"',
    '""',
    '%""',
    '%"a\\"b"',
    "%x0",
    "%out",
    "%ü",
    'b64"AAAA"',
    'b64"!!"',
    "B",
    "ü",
    "\u2028",
    "\r",
    "\t",
]
_TOKEN = re.compile(r'%"(?:[^"\\\n]|\\.)*"|"(?:[^"\\\n]|\\.)*"|%?[\w.]+|-?\d[\w.+-]*|\S')


@functools.cache
def seed_texts() -> list[str]:
    return sorted({str(build_graph(case)) for case in all_cases()})


@st.composite
def mutated_text(draw: Any, base: str | None = None) -> str:
    """A seed text (or `base`) after one to four random edits.

    Hypothesis picks the seed text and a random seed; the edits themselves come from
    `random.Random`, whose positions spread evenly (hypothesis favours small ints, so
    its positions would mostly break the header).
    """
    text = draw(st.sampled_from(seed_texts())) if base is None else base
    rng = random.Random(draw(st.integers(0, 2**64)))
    for _ in range(rng.randint(1, 4)):
        text = rng.choice(_EDITS)(rng, text)
    return text


def _position(rng: random.Random, text: str) -> int:
    """A place in the text, usually inside a node's line (the header breaks more easily)."""
    if rng.random() < 0.8 and "\n" in text:
        first = text.index("\n") + 1
        return rng.randint(first, len(text))
    return rng.randint(0, len(text))


def _delete_chars(rng: random.Random, text: str) -> str:
    at = _position(rng, text)
    return text[:at] + text[at + rng.randint(1, 8) :]


def _duplicate_chars(rng: random.Random, text: str) -> str:
    at = _position(rng, text)
    piece = text[at : at + rng.randint(1, 40)]
    return text[:at] + piece * rng.randint(2, 3) + text[at:]


def _insert(rng: random.Random, text: str) -> str:
    at = _position(rng, text)
    if rng.random() < 0.7:
        piece = rng.choice(TOKENS)
    else:
        piece = "".join(
            chr(rng.choice([rng.randint(0, 127), rng.randint(0, 0x10FFFF)])) for _ in range(3)
        )
    return text[:at] + piece + text[at:]


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN.finditer(text))


def _some_token(rng: random.Random, tokens: list[re.Match]) -> re.Match:
    """Usually a token past the header, for the reason `_position` gives."""
    body = [t for t in tokens if t.start() > tokens[0].string.find("\n")]
    return rng.choice(body if body and rng.random() < 0.8 else tokens)


def _replace_token(rng: random.Random, text: str) -> str:
    tokens = _tokens(text)
    if not tokens:
        return text
    token = _some_token(rng, tokens)
    piece = rng.choice(TOKENS + [t.group() for t in tokens])
    if rng.random() < 0.4:  # delete or duplicate the token instead
        piece = rng.choice(["", token.group() * 2])
    return text[: token.start()] + piece + text[token.end() :]


def _swap_number(rng: random.Random, text: str) -> str:
    numbers = [t for t in _tokens(text) if re.fullmatch(r"-?\d[\w.+-]*", t.group())]
    if not numbers:
        return text
    token = rng.choice(numbers)
    huge = rng.choice(
        [
            "9" * 25,
            str(2**63),
            "1e999",
            "1e39",
            "3000000000",
            "-0.0",
            "0.5",
            str(rng.randint(-(2**70), 2**70)),
            repr(rng.uniform(-1e308, 1e308)),
            str(rng.randint(-3, 3)),
        ]
    )
    return text[: token.start()] + huge + text[token.end() :]


def _swap_word(rng: random.Random, text: str) -> str:
    """A dtype, op or value name replaced by another."""
    words = [t for t in _tokens(text) if re.fullmatch(r"%?[A-Za-z_][\w.]*", t.group())]
    if not words:
        return text
    token = _some_token(rng, words)
    other = rng.choice(
        [t.group() for t in words]
        + ["f32", "f64", "i32", "i64", "bool", "%" + json.dumps(rng.choice(TOKENS))]
    )
    return text[: token.start()] + other + text[token.end() :]


def _nest(rng: random.Random, text: str) -> str:
    """Brackets around a token, one to two hundred (or two thousand) deep."""
    tokens = _tokens(text)
    if not tokens:
        return text
    token = _some_token(rng, tokens)
    depth = rng.choice([rng.randint(1, 3), rng.randint(1, 200), 2000])
    opening = rng.choice("([")
    closing = ")" if opening == "(" else "]"
    inner = token.group() + ("," if opening == "(" else "")
    return text[: token.start()] + opening * depth + inner + closing * depth + text[token.end() :]


# attribute values a mutation may put after `key=`
ATTR_VALUES = [
    "(" * 2000 + ")" * 2000,
    "[" * 2000 + "]" * 2000,
    "(" * 70 + "1," + ")" * 70,
    "[f32]",
    "[1, 2]",
    "[[1.0], [2.0, 3.0]]",
    "9" * 5000,
    str(2**63),
    "1e999",
    "-1e999",
    "(-1,)",
    "(1, 0)",
    "(0, 0)",
    "-1",
    "1.0",
    "0",
    "1",
    "True",
    "None",
    "nan",
    '"x"',
    '"0:1:0"',
    '"01"',
    '"::-1"',
    '"9999999999999999999999"',
    "f64",
    "bool",
    'b64"AAAAAA=="',
    "graph g() {\n}",
    "graph g(%a: f32[2]) {\n%n: f32[2] = neg(%a)\noutput %o = %n\n}",
]


def _replace_attr_value(rng: random.Random, text: str) -> str:
    """The value after some `key=` (the start of it: the rest may dangle) replaced."""
    keys = list(re.finditer(r"\w=", text))
    if not keys:
        return text
    at = rng.choice(keys).end()
    tokens = _tokens(text[at:])
    end = at + (tokens[0].end() if tokens else 0)
    if text[at : at + 1] in "([" and rng.random() < 0.7:  # the whole bracketed value
        depth, end = 0, at
        for end in range(at, len(text)):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(text[end], 0)
            if depth == 0:
                break
        end += 1
    return text[:at] + rng.choice(ATTR_VALUES) + text[end:]


_EDITS = [
    _replace_attr_value,
    _replace_attr_value,
    _replace_attr_value,
    _delete_chars,
    _duplicate_chars,
    _insert,
    _replace_token,
    _replace_token,
    _swap_number,
    _swap_number,
    _swap_word,
    _nest,
]


def check_loaded(g: gc.Graph) -> None:
    """A graph that loaded is a good graph: it verifies and round-trips exactly."""
    gc.verify(g)
    text = str(g)
    again = gc.parse(text)
    assert str(again) == text
    assert str(gc.from_json(gc.to_json(g))) == text
    assert str(gc.from_networkx(gc.to_networkx(g))) == text


def load_text(text: str | bytes) -> None:
    try:
        g = gc.parse(text)
    except LOAD_ERRORS:
        return
    check_loaded(g)


def load_json(text: str | bytes) -> None:
    try:
        g = gc.from_json(text)
    except LOAD_ERRORS:
        return
    check_loaded(g)


@settings(max_examples=draws(400))
@given(mutated_text())
def test_mutated_op_case_texts(text: str) -> None:
    load_text(text)


@settings(max_examples=draws(60))
@given(st.data(), random_graphs(min_ops=3, max_ops=10, symbolic=True))
def test_mutated_random_graph_texts(data: Any, g: gc.Graph) -> None:
    load_text(data.draw(mutated_text(str(g))))


@settings(max_examples=draws(150))
@given(mutated_text(), st.binary(max_size=4), st.integers(0, 10**6))
def test_mutated_bytes(text: str, junk: bytes, at: int) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    at %= len(raw) + 1
    load_text(raw[:at] + junk + raw[at:])


# -- JSON ----------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2, 2**31, 2**63, -(2**63) - 1, 2**70, 0.5, -0.0, 1e308])
    | st.floats()
    | st.sampled_from(["", "f32", "f64", "i64", "bool", "x0", "out", "nan", "a\nb", "%", "op"])
    | st.sampled_from(
        [
            {"tuple": []},
            {"tuple": [-1]},
            {"float": "nan"},
            {"float": "-inf"},
            {"dtype": "f64"},
            {"dtype": ["f32"]},
            {"dtype": "f32", "shape": [1], "base64": "AAAAAA=="},
            {"dtype": "f32", "shape": [2**62, 4], "base64": ""},
            {"graph": {}},
        ]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def _paths(data: Any, path: tuple = ()) -> list[tuple]:
    """Every place in a JSON tree, as a path of keys and indices."""
    found = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += _paths(value, (*path, i))
    return found


@st.composite
def mutated_document(draw: Any) -> str:
    document = json.loads(gc.to_json(build_graph(draw(st.sampled_from(all_cases())))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(document)[1:]))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "nest"]))
        key = path[-1]
        if action == "replace":
            # a copy: sampled_from hands out its own objects, which later edits would change
            parent[key] = copy.deepcopy(draw(JSON_VALUES))
        elif action == "delete":
            del parent[key]
        elif action == "duplicate" and isinstance(parent, list):
            parent.insert(key, parent[key])
        else:
            for _ in range(draw(st.integers(1, 100))):
                parent[key] = draw(st.sampled_from([[parent[key]], {"tuple": [parent[key]]}]))
    text = json.dumps(document, indent=draw(st.sampled_from([None, 1])))
    if draw(st.booleans()):  # and now edits to the JSON text itself
        rng = random.Random(draw(st.integers(0, 2**64)))
        for _ in range(rng.randint(1, 3)):
            text = rng.choice([_delete_chars, _insert, _swap_number])(rng, text)
    return text


@settings(max_examples=draws(400))
@given(mutated_document())
def test_mutated_json_documents(text: str) -> None:
    load_json(text)
