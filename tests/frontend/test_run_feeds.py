"""gc.run's feeds as TF1 users give them: a dict keyed by name or by placeholder."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def double_graph() -> tuple[gc.Graph, gc.Symbol, gc.Symbol]:
    g = gc.Graph("double")
    with g:
        x = gc.placeholder("x", shape=("B",))
        y = x * 2
        gc.output(y, name="y")
    return g, x, y


def test_feeds_keyed_by_the_placeholder_value() -> None:
    # TF1's sess.run(y, feed_dict={x: value}): a graph value as the key was a DTypeError
    # about dtype <U1 (the key compared with the names, elementwise)
    g, x, _ = double_graph()
    xv = np.arange(3, dtype=np.float32)
    (by_value,) = gc.run(g, {x: xv})
    (by_node,) = gc.run(g, {x.node: xv})
    np.testing.assert_array_equal(by_value, xv * 2)
    np.testing.assert_array_equal(by_node, xv * 2)
    with pytest.raises(gc.FeedError, match="placeholder 'x' was fed twice"):
        gc.run(g, {x: xv, "x": xv})


def test_feeds_that_are_no_placeholders_are_named() -> None:
    g, x, y = double_graph()
    other, x2, _ = double_graph()
    xv = np.ones(2, np.float32)
    with pytest.raises(
        gc.FeedError, match=r"node 'mul' \(op mul\) is fed, but only the placeholders"
    ):
        gc.run(g, {x: xv, y: xv})
    with pytest.raises(gc.FeedError, match="placeholder 'x' of graph 'double' is fed"):
        gc.run(g, {x2: xv})
    with pytest.raises(gc.FeedError, match="a feed's key is a placeholder's name .* got a int"):
        gc.run(g, {0: xv})
    # a list or None were a ValueError about an array's truth value and a TypeError
    for feeds in ([xv], None):
        with pytest.raises(gc.FeedError, match=r"feeds map placeholder names to arrays, as \{'x'"):
            gc.run(g, feeds)  # type: ignore[arg-type]


def test_running_what_is_no_graph_says_what_to_do() -> None:
    g, _, y = double_graph()
    with pytest.raises(gc.GraphcError, match="got the graph value 'mul'; mark it with gc.output"):
        gc.run(y, {"x": np.ones(2, np.float32)})  # type: ignore[arg-type]
    with pytest.raises(gc.GraphcError, match="gc.run: expected a gc.Graph, got function"):
        gc.run(lambda x: x, {"x": np.ones(2, np.float32)})  # type: ignore[arg-type]


def test_fetch_any_value_as_tf1_sess_run_does() -> None:
    # gc.run returned only the outputs: an intermediate value (TF1's sess.run(h),
    # PyTensor's h.eval()) needed the graph edited to output it
    g = gc.Graph("mlp")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        w = gc.placeholder("w", shape=(3, 2))
        h = gc.relu(x @ w)
        gc.output(gc.sum(h), name="loss")
    xv = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    wv = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    before = str(g)
    h_value, x_value, loss = gc.run(g, {x: xv, w: wv}, fetch=[h, "x", "loss"])
    np.testing.assert_allclose(h_value, np.maximum(xv @ wv, 0), rtol=1e-6)
    np.testing.assert_array_equal(x_value, xv)
    np.testing.assert_allclose(loss, np.maximum(xv @ wv, 0).sum(), rtol=1e-6)
    assert str(g) == before  # the graph is not edited
    with pytest.raises(gc.GraphcError, match="cannot fetch 'nope'"):
        gc.run(g, {x: xv, w: wv}, fetch=["nope"])
    with pytest.raises(gc.GraphcError, match="fetch is a list"):
        gc.run(g, {x: xv, w: wv}, fetch=h)  # type: ignore[arg-type]
