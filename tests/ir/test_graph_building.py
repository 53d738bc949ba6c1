"""Building graphs: names, membership, errors naming the culprit."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.types import TensorType

F3 = TensorType((3,), "float32")


def test_fresh_names_follow_fx_style() -> None:
    g = Graph("g")
    x = g.add_placeholder("x", F3)
    a = g.add_op("neg", [x], {}, F3)
    b = g.add_op("neg", [a], {}, F3)
    c = g.add_op("neg", [b], {}, F3, name="neg_2")
    d = g.add_op("neg", [c], {}, F3)
    assert [a.name, b.name, c.name, d.name] == ["neg", "neg_1", "neg_2", "neg_3"]
    assert all(n.graph is g for n in g)


def test_inputs_outputs_and_users_are_derived() -> None:
    g = Graph("g")
    x = g.add_placeholder("x", F3)
    y = g.add_op("mul", [x, x], {}, F3)
    out = g.add_output(y, "y")
    assert g.inputs == [x] and g.outputs == [out] and g.op_nodes == [y]
    assert g.users()[x] == [y, y]
    assert out.type == y.type and out.inputs == (y,)


def test_duplicate_name_is_an_error_naming_it() -> None:
    g = Graph("g")
    g.add_placeholder("x", F3)
    with pytest.raises(gc.VerifyError, match="'x'"):
        g.add_placeholder("x", F3)


def test_input_from_another_graph_is_a_mismatch() -> None:
    g1, g2 = Graph("one"), Graph("two")
    x = g1.add_placeholder("x", F3)
    with pytest.raises(gc.GraphMismatchError, match="'x'.*'two'"):
        g2.add_op("neg", [x], {}, F3)


def test_unknown_kind_is_rejected() -> None:
    g = Graph("g")
    with pytest.raises(gc.VerifyError, match="kind"):
        g.append(Node("x", "input", None, (), {}, F3))


def test_missing_node_lookup_names_graph_and_node() -> None:
    g = Graph("g")
    with pytest.raises(gc.GraphcError, match="'g'.*'nope'"):
        g.node("nope")


def test_mixing_values_of_two_declared_graphs_names_both() -> None:
    g1, g2 = gc.Graph("first"), gc.Graph("second")
    with g1:
        x = gc.placeholder("x", shape=(3,))
    with g2:
        y = gc.placeholder("y", shape=(3,))
    with pytest.raises(gc.GraphMismatchError) as info:
        gc.add(x, y)
    assert "first" in str(info.value) and "second" in str(info.value)


def test_placeholder_outside_a_graph_says_how_to_open_one() -> None:
    with pytest.raises(gc.GraphcError, match="with gc.Graph"):
        gc.placeholder("x", shape=(3,))


def test_declared_nodes_record_their_location() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,))
        y = gc.exp(x)
        gc.output(y, name="y")
    assert all(__file__ in n.meta["loc"] for n in g)
    assert g.node("exp").kind == OP


def test_constants_are_private_read_only_copies() -> None:
    array = np.arange(3, dtype=np.float32)
    g = gc.Graph("g")
    with g:
        c = gc.constant(array, name="c")
    array[0] = 100
    assert c.node.value[0] == 0
    assert not c.node.value.flags.writeable


def test_rename_keeps_users_and_refuses_a_taken_name() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2,), "float32")
        y = gc.exp(x)
        gc.output(y + 1.0, name="out")
    node = g.node("y")  # named after the variable holding it
    g.rename(node, "e")
    assert "y" not in g and g.node("e") is node
    assert "%e: f32[2] = exp(%x)" in str(g) and "add(%e" in str(g)
    gc.verify(g)
    with pytest.raises(gc.VerifyError, match="already has a node named 'x'"):
        g.rename(node, "x")


def test_discard_since_drops_only_unused_tail_nodes() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2,), "float32")
        y = gc.exp(x)
    mark = len(g.nodes)
    with g:
        gc.tanh(y)
        gc.sin(y)
    g.discard_since(mark)
    assert [n.name for n in g.nodes] == ["x", "y"] and "tanh" not in g
    with g:
        gc.output(gc.tanh(y), name="out")  # the name is free again
    gc.verify(g)
