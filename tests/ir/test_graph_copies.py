"""Copies of a Graph (copy.copy, copy.deepcopy, pickle): independent graphs of their own."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import graphc as gc


def small_graph() -> gc.Graph:
    g = gc.Graph("small")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        gc.output(gc.tanh(x) * 2, name="y")
    return g


@pytest.mark.parametrize(
    "make",
    [copy.copy, copy.deepcopy, lambda g: pickle.loads(pickle.dumps(g))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copy_is_another_graph_that_extends_alone(make) -> None:  # type: ignore[no-untyped-def]
    # copy.copy shared the node list and the name table, so extending the copy added to
    # the original nodes that belonged to the copy (verify failed on the original); every
    # copy kept the original's id, which keys the bodies being traced
    g = small_graph()
    before = str(g)
    c = make(g)
    assert c.id != g.id
    assert str(c) == before
    assert all(n.graph is c for n in c.nodes)
    with c:
        gc.output(gc.exp(gc.Symbol(c.node("x"))), name="e")
    gc.verify(g)
    gc.verify(c)
    assert str(g) == before
    xv = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    y, e = c(xv)
    np.testing.assert_allclose(y, np.tanh(xv) * 2, rtol=1e-6)
    np.testing.assert_allclose(e, np.exp(xv), rtol=1e-6)
    np.testing.assert_array_equal(g(xv), y)


def test_a_graph_name_that_is_no_str_is_neither_printed_nor_saved() -> None:
    # gc.Graph(3): print(g) was a bare TypeError, and to_json wrote a document that
    # from_json refuses ("name: expected a string")
    g = gc.Graph(3)  # type: ignore[arg-type]
    with g:
        gc.output(gc.placeholder("x", shape=(2,)), name="y")
    with pytest.raises(gc.GraphcError, match="graph's name must be a str to be printed, got 3"):
        str(g)
    with pytest.raises(gc.GraphcError, match="graph's name must be a str to be saved, got 3"):
        gc.to_json(g)


def test_a_graph_that_cannot_be_saved_leaves_the_file_as_it_was(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # gc.save opened (truncated) the file before encoding the graph: a failed save of
    # one graph emptied the file another had been saved to
    path = tmp_path / "model.json"
    good = small_graph()
    gc.save(good, path)
    saved = path.read_bytes()
    bad = gc.Graph(3)  # type: ignore[arg-type]
    with bad:
        gc.output(gc.placeholder("x", shape=(2,)), name="y")
    with pytest.raises(gc.GraphcError, match="to be saved"):
        gc.save(bad, path)
    assert path.read_bytes() == saved
    assert str(gc.load(path)) == str(good)
