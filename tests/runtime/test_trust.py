"""Executables that do not trust what they are handed: graphs, updates, feeds, shapes."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import Node


def _affine() -> gc.Graph:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        gc.output(gc.exp(x) * 2.0, name="y")
    return g


def test_compile_verifies_graphs_edited_through_the_low_level_api() -> None:
    g = _affine()
    exp = next(n for n in g.op_nodes if n.op == "exp")
    exp.type = exp.type.with_shape((4,))  # a wrong declared type, written by hand
    with pytest.raises(gc.VerifyError, match="exp"):
        gc.compile(g)
    g = _affine()
    g.append(
        Node("bad", "op", "sum", (g.node("x"),), {"axis": 7, "keepdims": False}, g.node("x").type)
    )
    with pytest.raises(gc.VerifyError, match="bad"):
        gc.compile(g)


def _stateful(update: str) -> gc.Graph:
    g = gc.Graph("g")
    with g:
        w = gc.placeholder("w", shape=(3,), dtype="float64")
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        gc.output(w, name="w_out")
        gc.output(w * 1.0, name="w_same")
        gc.output(gc.sum(w * x), name="loss")
        new = {"full": w - x, "scalar": gc.sum(w - x)}[update]
        gc.output(new, name="w_new")
    return g


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_an_output_that_is_the_state_returns_the_value_before_the_update(opt_level: int) -> None:
    exe = gc.compile(_stateful("full"), opt_level=opt_level, updates={"w": "w_new"})
    exe.set_state(w=np.ones(3))
    for step in range(3):
        w_out, w_same, loss = exe(np.full(3, 0.25))
        want = 1.0 - 0.25 * step
        np.testing.assert_array_equal(w_out, np.full(3, want))
        np.testing.assert_array_equal(w_same, np.full(3, want))
        assert loss == 3 * 0.25 * want
        np.testing.assert_array_equal(exe.state["w"], np.full(3, want - 0.25))
        assert not np.shares_memory(w_out, w_same)


def test_an_update_must_have_the_state_type() -> None:
    with pytest.raises(gc.GraphcError, match="exactly its state's shape"):
        gc.compile(_stateful("scalar"), updates={"w": "w_new"})


def test_explain_with_example_state_leaves_the_state_alone() -> None:
    g = gc.Graph("g")
    with g:
        w = gc.placeholder("w", shape=("N",), dtype="float64")
        x = gc.placeholder("x", shape=("N",), dtype="float64")
        gc.output(gc.sum(w * x), name="loss")
        gc.output(w - x, name="w_new")
    exe = gc.compile(g, updates={"w": "w_new"})
    exe.set_state(w=np.arange(3.0))
    text = exe.explain(np.ones(5), w=np.zeros(5))  # another size: shows that plan
    assert "N=5" in text
    exe.source(np.ones(3), w=np.full(3, 9.0))
    exe.plan(np.ones(3), w=np.full(3, 9.0))
    np.testing.assert_array_equal(exe.state["w"], np.arange(3.0))
    exe(np.ones(3))
    np.testing.assert_array_equal(exe.state["w"], np.arange(3.0) - 1)


class _Duck:
    """Claims one shape and dtype; its data is another shape."""

    shape = (3,)
    dtype = np.dtype(np.float64)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return np.ones(4)


def test_the_fast_path_trusts_only_real_arrays() -> None:
    exe = gc.compile(_affine(), wait=True)  # (its final tier: one set of kernels)
    exe(np.zeros(3))  # the plan for shape (3,) float64 exists now
    with pytest.raises(gc.FeedError, match="expects shape"):
        exe(_Duck())
    view = np.arange(6.0)[::2]
    # the view read as a contiguous copy of it is (exp's bits are the backend's)
    np.testing.assert_array_equal(exe(view), exe(view.copy()))
    np.testing.assert_allclose(exe(view), np.exp(view) * 2.0, rtol=1e-15)


def test_a_slice_of_a_symbolic_dim_that_does_not_fit_is_an_error_not_a_wrong_shape() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        gc.output(x[0:5] * 2, name="y")
    for opt_level in (0, 2):
        exe = gc.compile(g, opt_level=opt_level)
        assert exe(np.ones((6, 3), np.float32)).shape == (5, 3)
        with pytest.raises(gc.ShapeError, match="slice"):
            exe(np.ones((3, 3), np.float32))
    with pytest.raises(gc.ShapeError, match="slice"):
        gc.run(g, {"x": np.ones((3, 3), np.float32)})


def test_an_error_of_a_node_no_output_needs_may_vanish_at_o1_and_names_its_node() -> None:
    # full_like reads only its input's type: at O1 it folds and the slice goes, so the
    # slice past the fed size (B = 1 < 2) is reported at O0 only (docs/trust.md)
    g = gc.parse("""
    graph g(%x: f32[B], %i: i64[]) {
      %s: f32[1,2] = slice(%x, index="None,0:2")
      %z: f32[1,2] = full_like(%s, value=0.0)
      %h: f32[3] = one_hot(%i, num_classes=3, dtype=f32)
      %u: f32[3] = full_like(%h, value=1.0)
      output %y = %z
      output %v = %u
    }""")
    feeds = {"x": np.ones(1, np.float32), "i": np.array(5)}
    with pytest.raises(gc.ShapeError) as caught:
        gc.run(g, feeds)
    assert caught.value.node == "s"
    with pytest.raises(gc.ShapeError):
        gc.compile(g, opt_level=0)(**feeds)
    feeds["x"] = np.ones(2, np.float32)
    with pytest.raises(gc.IndexRangeError) as caught:
        gc.run(g, feeds)
    assert caught.value.node == "h"  # the kernel's own error, given the node's name
    y, v = gc.compile(g, opt_level=1)(**feeds)
    assert y.tolist() == [[0.0, 0.0]] and v.tolist() == [1.0, 1.0, 1.0]
