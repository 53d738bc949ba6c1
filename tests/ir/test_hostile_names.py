"""Graph and value names of any characters round-trip exactly through text, JSON and
networkx: newlines, quotes, backslashes, '#', '%', unicode (lone surrogates too),
empty graph names, keywords, numbers and very long strings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from tests.budget import draws

HOSTILE = [
    "a\nb",
    "a\r\nb",
    'q"uote',
    '"',
    "'",
    "back\\slash",
    "\\",
    '\\"',
    "#hash",
    "x # comment",
    "%pct",
    "%",
    "ünïcödé",
    "😀",
    "\ud800",  # a lone surrogate
    "\x00",
    "\u2028",
    "\t",
    " ",
    "a b",
    "1e5",
    "-1",
    "0",
    "graph",
    "output",
    "None",
    "inf",
    "f32[2]",
    "}",
    "{",
    "=",
    ")",
    "x" * 100_000,
]


def named(graph_name: str, value_name: str) -> gc.Graph:
    g = gc.Graph(graph_name)
    with g:
        x = gc.placeholder(value_name, shape=(2,))
        c = gc.constant(np.array([1.0, 2.0], np.float32), name=value_name + "c")
        y = gc.exp(x * c)
        gc.output(y, name=value_name + "\n out")
        gc.output(gc.sum(y), name=value_name + "#")
    return g


def assert_round_trips(g: gc.Graph, tmp_path: Path | None = None) -> None:
    text = str(g)
    names = [n.name for n in g]
    copies = [
        gc.parse(text),
        gc.parse(text.encode()),
        gc.from_json(gc.to_json(g)),
        gc.from_networkx(gc.to_networkx(g)),
    ]
    if tmp_path is not None:
        gc.save(g, tmp_path / "g.json")
        copies.append(gc.load(tmp_path / "g.json"))
    for copy in copies:
        gc.verify(copy)
        assert copy.name == g.name
        assert [n.name for n in copy] == names
        assert str(copy) == text


@pytest.mark.parametrize("name", HOSTILE, ids=lambda s: repr(s)[:20])
def test_hostile_names_round_trip(name: str, tmp_path: Path) -> None:
    g = named(name, name)
    assert_round_trips(g, tmp_path)
    # each line of the text holds one statement: names never break a line
    assert len(str(g).splitlines()) == len(g.nodes) - len(g.inputs) + 2


def test_empty_graph_name_round_trips() -> None:
    assert_round_trips(named("", "x"))


def test_hostile_names_inside_a_fused_body() -> None:
    g = gc.Graph('outer "\n# %')
    with g:
        x = gc.placeholder('x"\n#', shape=(2, 3))
        y = gc.placeholder("y\\", shape=(3,))
        gc.output(gc.tanh(gc.exp(x * y) + y), name="o\n")
    fused = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    assert any(n.op == "fused" for n in fused.op_nodes), str(fused)
    assert_round_trips(fused)


@settings(max_examples=draws(100))
@given(st.text(min_size=0, max_size=12), st.text(min_size=1, max_size=12))
def test_any_names_round_trip(graph_name: str, value_name: str) -> None:
    assert_round_trips(named(graph_name, value_name))


def test_empty_value_names_are_refused_everywhere() -> None:
    with pytest.raises(gc.ParseError, match="cannot be empty"):
        gc.parse('graph g(%"": f32[2]) {\n}')
    doc = gc.to_json(named("g", "x")).replace('"name": "x"', '"name": ""', 1)
    with pytest.raises(gc.ParseError, match="non-empty string"):
        gc.from_json(doc)
