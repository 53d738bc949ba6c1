"""The smallest pictures: an empty graph, placeholders alone, 0-d values, symbolic
dims, int and bool dtypes."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import graphc as gc
from graphc.viz import style
from tests.conftest import needs_dot
from tests.viz.dotsource import parse_dot


@needs_dot
def test_an_empty_graph_says_it_is_empty_rather_than_drawing_nothing() -> None:
    source = gc.viz.to_dot(gc.Graph("nothing")).source
    svg = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True)
    assert svg.returncode == 0 and "graph nothing: no nodes yet" in svg.stdout


def test_placeholders_alone_show_their_types() -> None:
    g = gc.Graph("inputs")
    with g:
        gc.placeholder("x", shape=())
        gc.placeholder("mask", shape=("B", "T"), dtype="bool")
        gc.placeholder("ids", shape=("B",), dtype="int64")
    dot = parse_dot(gc.viz.to_dot(g).source)
    shown = {name: dot.label(name) for name in ("x", "mask", "ids")}
    for name, type_ in (("x", "f32[]"), ("mask", "bool[B,T]"), ("ids", "i64[B]")):
        assert f"<b>{name}</b>" in shown[name] and type_ in shown[name]
    assert "empty" not in dot.nodes


def test_int_bool_and_0d_values_label_their_edges() -> None:
    g = gc.Graph("mixed")
    with g:
        b = gc.placeholder("b", shape=("B",), dtype="bool")
        i = gc.placeholder("i", shape=("B",), dtype="int64")
        gc.output(gc.where(b, i, np.int64(0)), name="picked")
        gc.output(gc.constant(np.float32(3.5), name="c"), name="three")
    dot = parse_dot(gc.viz.to_dot(g).source)
    labels = {(a, z): attrs.get("label") for a, z, attrs in dot.edges}
    where = next(n.name for n in g.nodes if n.op == "where")
    assert labels[("b", where)] == str(g.node("b").type) == "bool[B]"
    assert labels[("i", where)] == "i64[B]"
    assert labels[("c", "three")] == "f32[]" and "<b>3.5</b>" in dot.label("c")
    assert style.LEGEND_ID in dot.nodes


def test_a_graph_with_a_cycle_is_a_named_error_not_a_key_error() -> None:
    """A pass under development can leave a cycle; drawing it said KeyError(<Node z>)."""
    g = gc.Graph("cyc")
    with g:
        x = gc.placeholder("x", shape=(2,))
        gc.output(gc.neg(gc.relu(x)), name="out")
    relu = next(n for n in g.nodes if n.op == "relu")
    neg = next(n for n in g.nodes if n.op == "neg")
    relu.inputs = (neg,)  # what a faulty rewrite could do
    with pytest.raises(gc.CycleError, match="has a cycle"):
        gc.viz.to_dot(g)


def test_a_graph_holding_itself_as_a_body_is_a_named_error_not_a_recursion_error() -> None:
    """A cond whose branch is the graph around it (the low-level API allows it): drawing
    it recursed until Python's limit."""
    g = gc.trace(lambda p, x: gc.cond(p, gc.neg, gc.exp, x), gc.TensorSpec((), "bool"), np.ones(2))
    cond = next(n for n in g.nodes if n.op == "cond")
    cond.attrs["then_body"] = g
    with pytest.raises(gc.VerifyError, match=rf"node '{cond.name}'.*holds itself as a body"):
        gc.viz.to_dot(g)
