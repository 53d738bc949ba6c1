"""Each user mistake gives a graphc error that names the culprit."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import Node
from graphc.ir.types import TensorType
from graphc.ops.dispatch import bind


def small_graph() -> gc.Graph:
    g = gc.Graph("small")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        w = gc.placeholder("w", shape=(3, 2))
        gc.output(x @ w, name="y")
    return g


def test_missing_feed_names_placeholder() -> None:
    with pytest.raises(gc.FeedError, match="'w'"):
        small_graph()(x=np.ones((2, 3), np.float32))


def test_extra_feed_names_it() -> None:
    g = small_graph()
    with pytest.raises(gc.FeedError, match="'z'"):
        g(x=np.ones((2, 3), np.float32), w=np.ones((3, 2), np.float32), z=1)


def test_wrong_shape_names_placeholder_and_shapes() -> None:
    with pytest.raises(gc.FeedError, match=r"'w' expects shape \(3, 2\), got \(2, 2\)"):
        small_graph()(x=np.ones((2, 3), np.float32), w=np.ones((2, 2), np.float32))


def test_wrong_rank_names_placeholder() -> None:
    with pytest.raises(gc.FeedError, match=r"'x' expects shape \(B, 3\)"):
        small_graph()(x=np.ones(3, np.float32), w=np.ones((3, 2), np.float32))


def test_wrong_dtype_names_placeholder_and_dtypes() -> None:
    with pytest.raises(gc.FeedError, match="'x' expects dtype float32, got .*float64"):
        small_graph()(x=np.ones((2, 3)), w=np.ones((3, 2), np.float32))


def test_inconsistent_symbolic_dim() -> None:
    g = gc.Graph("sym")
    with g:
        a = gc.placeholder("a", shape=("B",))
        b = gc.placeholder("b", shape=("B",))
        gc.output(a + b)
    with pytest.raises(gc.FeedError, match="'b'.*B is 3 here but 2"):
        g(a=np.ones(2, np.float32), b=np.ones(3, np.float32))


def test_fed_twice() -> None:
    with pytest.raises(gc.FeedError, match="'x' was fed twice"):
        small_graph()(np.ones((2, 3), np.float32), x=np.ones((2, 3), np.float32))


def test_op_shape_mismatch_names_op_and_shapes() -> None:
    with gc.Graph("bad"):
        x = gc.placeholder("x", shape=(2, 3))
        w = gc.placeholder("w", shape=(4, 2))
        with pytest.raises(gc.ShapeError, match=r"matmul.*\(2, 3\).*\(4, 2\)"):
            x @ w


def test_symbolic_dim_against_int_is_an_error() -> None:
    with gc.Graph("bad"):
        x = gc.placeholder("x", shape=("B",))
        y = gc.placeholder("y", shape=(3,))
        with pytest.raises(gc.ShapeError, match=r"add.*'B' against 3"):
            x + y


def test_symbolic_dim_broadcasts_with_one() -> None:
    with gc.Graph("ok"):
        x = gc.placeholder("x", shape=("B", 1))
        y = gc.placeholder("y", shape=(1, 4))
        assert (x + y).shape == ("B", 4)


def test_dtype_mismatch_names_op() -> None:
    with gc.Graph("bad"):
        x = gc.placeholder("x", shape=(2,), dtype="bool")
        with pytest.raises(gc.DTypeError, match="sub"):
            x - x


def test_unknown_op_names_it() -> None:
    with pytest.raises(gc.UnknownOpError, match="'frobnicate'"):
        bind("frobnicate", np.ones(2))


def test_unknown_attribute_names_op_and_attribute() -> None:
    with pytest.raises(gc.GraphcError, match=r"sum.*\['axes'\]"):
        gc.sum(np.ones(2), axes=0)


def test_value_from_another_graph() -> None:
    g1 = gc.Graph("one")
    with g1:
        x = gc.placeholder("x", shape=(2,))
    g2 = gc.Graph("two")
    with g2:
        y = gc.placeholder("y", shape=(2,))
        with pytest.raises(gc.GraphMismatchError, match="'x'.*'one'.*'two'"):
            x + y
        with pytest.raises(gc.GraphMismatchError, match="'x'.*'one'"):
            gc.output(x)


def test_node_with_foreign_input_is_rejected() -> None:
    g1 = gc.Graph("one")
    with g1:
        x = gc.placeholder("x", shape=(2,))
    g2 = gc.Graph("two")
    with pytest.raises(gc.GraphMismatchError, match="'x'"):
        g2.append(Node("bad", "op", "neg", (x.node,), {}, TensorType((2,))))


def test_duplicate_names() -> None:
    with gc.Graph("dup"):
        gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.GraphcError, match="'x'"):
            gc.placeholder("x", shape=(2,))


def test_declaring_outside_a_graph() -> None:
    with pytest.raises(gc.GraphcError, match="with gc.Graph"):
        gc.placeholder("x", shape=(2,))


def test_branching_on_a_graph_value_explains_the_limit() -> None:
    with gc.Graph("branch"):
        x = gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.TracingError, match="gc.where"):
            if gc.sum(x) > 0:
                pass


def test_unsupported_dtype() -> None:
    with gc.Graph("dt"), pytest.raises(gc.DTypeError, match="complex128"):
        gc.placeholder("x", shape=(2,), dtype="complex128")


def test_placeholder_shape_as_one_dim_or_bad_shape() -> None:
    with gc.Graph("shapes"):
        assert gc.placeholder("n", shape=3).type.shape == (3,)
        # a symbol name is one dim, not one dim per character
        assert gc.placeholder("s", shape="BC").type.shape == ("BC",)
        with pytest.raises(gc.ShapeError, match="placeholder 'x'.*-1"):
            gc.placeholder("x", shape=(-1, 2))
        with pytest.raises(gc.ShapeError, match="placeholder 'u'.*None"):
            gc.placeholder("u", shape=None)
