"""Graphs built node by node with Graph.add_placeholder / add_op / add_output."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.types import TensorType

T3 = TensorType((3,))


def test_an_input_that_is_no_node_is_named() -> None:
    # add_op(..., ["x"]) and add_output("x") were AttributeErrors on 'str'
    g = gc.Graph("h")
    g.add_placeholder("x", T3)
    with pytest.raises(gc.VerifyError, match="node 'exp' .*input 0 is a str, not a Node"):
        g.add_op("exp", ["x"], {}, T3)
    with pytest.raises(gc.VerifyError, match="output 'o'.* a str, not a Node"):
        g.add_output("x", "o")  # type: ignore[arg-type]
    assert [n.name for n in g.nodes] == ["x"]


def test_notebook_display_summarizes_big_constants() -> None:
    # the text/plain of a notebook's display was the whole base64 of every constant
    values = np.arange(100_000, dtype=np.float32)
    g = gc.Graph("big")
    with g:
        x = gc.placeholder("x", shape=(100_000,))
        gc.output(x + gc.constant(values, name="w"), name="y")
    shown = g._repr_mimebundle_()["text/plain"]
    assert len(shown) < 1000
    assert f"<{values.size} values in [0, " in shown
    assert gc.parse(str(g)).node("w").value.tobytes() == values.tobytes()  # str is whole


def test_notebook_display_shortens_a_long_graph() -> None:
    """A notebook keeps a cell's text beside its picture: a 2,000-node graph's display
    is its head and tail (numpy and pandas shorten long values so), print() is whole."""
    g = gc.Graph("long")
    with g:
        x = gc.placeholder("x", shape=(3,))
        for _ in range(2000):
            x = gc.tanh(x)
        gc.output(x, name="y")
    text = str(g)
    shown = g._repr_mimebundle_()["text/plain"]
    lines = shown.split("\n")
    assert len(lines) == 60 + 1 + 20
    assert lines[:60] == text.split("\n")[:60] and lines[-20:] == text.split("\n")[-20:]
    assert f"{len(text.split(chr(10))) - 80} lines left out: print(g)" in lines[60]
    small = gc.Graph("small")
    with small:
        gc.output(gc.tanh(gc.placeholder("x", shape=(3,))), name="y")
    assert small._repr_mimebundle_()["text/plain"] == str(small)  # short: whole


def arity_broken() -> gc.Graph:
    g = gc.Graph("arity")
    x = g.add_placeholder("x", T3)
    g.add_output(g.add_op("add", [x], {}, T3), "y")  # add takes two inputs
    return g


def cycle_broken() -> gc.Graph:
    g = gc.Graph("cycle")
    x = g.add_placeholder("x", T3)
    a = g.add_op("exp", [x], {}, T3)
    b = g.add_op("exp", [a], {}, T3)
    g.add_output(b, "y")
    a.inputs = (b,)  # nodes are not to be edited; a user of the low-level API may
    return g


def type_broken() -> gc.Graph:
    g = gc.Graph("typed")
    x = g.add_placeholder("x", T3)
    g.add_output(g.add_op("exp", [x], {}, TensorType((4,))), "y")
    return g


@pytest.mark.parametrize(
    "make, error, message",
    [
        (arity_broken, gc.VerifyError, "node 'add' .*takes 2 input"),
        (cycle_broken, gc.CycleError, "cycle: exp -> exp_1 -> exp"),
        (type_broken, gc.VerifyError, "node 'exp' .*type rule of 'exp' gives f32\\[3\\]"),
    ],
)
def test_running_a_malformed_graph_is_a_verify_error(make, error, message) -> None:  # type: ignore[no-untyped-def]
    # gc.run and g(...) ran the kernels regardless: a bare TypeError from add's kernel,
    # a KeyError for the cycle; gc.compile verified already
    xv = np.ones(3, np.float32)
    for run in (lambda g: gc.run(g, {"x": xv}), lambda g: g(xv), gc.compile):
        with pytest.raises(error, match=message):
            run(make())


def test_an_output_used_as_a_value_is_refused_by_verify_and_the_loaders() -> None:
    # verify, parse and from_json took an op reading an output node; running it was a
    # KeyError (no value is held for an output)
    g = gc.Graph("sink")
    x = g.add_placeholder("x", T3)
    marked = g.add_output(x, "o")
    g.add_output(g.add_op("exp", [marked], {}, T3), "e")
    message = "input 0 is output 'o', which is no value; use '%x'"
    with pytest.raises(gc.VerifyError, match=message):
        gc.verify(g)
    with pytest.raises(gc.VerifyError, match=message):
        g(np.ones(3, np.float32))
    with pytest.raises(gc.ParseError, match="line 3: node 'exp': " + message):
        gc.parse(str(g))
    with pytest.raises(gc.ParseError, match=r"nodes\[2\] \('exp'\): " + message):
        gc.from_json(gc.to_json(g))
