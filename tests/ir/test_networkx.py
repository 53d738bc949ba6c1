"""networkx export/import: structure and attributes survive; cycles are named."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

import graphc as gc
from graphc.ir.types import TensorType
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs


def sample() -> gc.Graph:
    g = gc.Graph("nx")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        w = gc.placeholder("w", shape=(3, 2))
        y = x @ w
        gc.output(gc.sum(y * y, axis=1), name="loss")
        gc.output(y, name="y")
    return g


def test_export_nodes_and_edges() -> None:
    g = sample()
    d = gc.to_networkx(g)
    assert isinstance(d, nx.DiGraph)
    assert list(d.nodes) == [n.name for n in g]
    assert d.graph["name"] == "nx"
    node = d.nodes["sum"]
    assert node["kind"] == "op" and node["op"] == "sum"
    assert node["attrs"] == {"axis": (1,), "keepdims": False}
    assert node["type"] == TensorType(("B",), "float32")
    assert __file__ in node["meta"]["loc"]
    assert d.edges["matmul", "mul"]["positions"] == [0, 1]  # y * y uses one value twice
    assert d.edges["w", "matmul"]["positions"] == [1]
    assert nx.is_directed_acyclic_graph(d)


def test_round_trip_keeps_order_names_and_meta() -> None:
    g = sample()
    g2 = gc.from_networkx(gc.to_networkx(g))
    assert str(g2) == str(g)
    assert [n.name for n in g2] == [n.name for n in g]
    assert [n.meta for n in g2] == [n.meta for n in g]
    assert gc.from_networkx(gc.to_networkx(g), name="renamed").name == "renamed"
    gc.verify(g2)


def test_import_reorders_into_a_topological_order() -> None:
    d = gc.to_networkx(sample())
    shuffled = nx.DiGraph(name="nx")
    for key in reversed(list(d.nodes)):
        data = dict(d.nodes[key])
        del data["index"]  # without positions, the insertion order is only a tie-breaker
        shuffled.add_node(key, **data)
    shuffled.add_edges_from(d.edges(data=True))
    g2 = gc.from_networkx(shuffled)
    gc.verify(g2)
    assert {n.name for n in g2} == set(d.nodes)


def test_cycle_raises_naming_its_nodes() -> None:
    d = gc.to_networkx(sample())
    d.add_edge("mul", "matmul", positions=[2])
    with pytest.raises(gc.CycleError) as info:
        gc.from_networkx(d)
    assert "matmul" in str(info.value) and "mul" in str(info.value)


def test_bad_positions_are_named() -> None:
    d = gc.to_networkx(sample())
    d.edges["w", "matmul"]["positions"] = [0]
    with pytest.raises(gc.VerifyError, match="'matmul'.*position 0 is given twice"):
        gc.from_networkx(d)
    d.edges["w", "matmul"]["positions"] = [5]
    with pytest.raises(gc.VerifyError, match="'matmul'.*not 0..1"):
        gc.from_networkx(d)
    del d.edges["w", "matmul"]["positions"]
    with pytest.raises(gc.VerifyError, match="'w' -> 'matmul'"):
        gc.from_networkx(d)


def test_bad_node_data_is_named() -> None:
    d = gc.to_networkx(sample())
    d.nodes["sum"]["type"] = "f32[B]"
    with pytest.raises(gc.VerifyError, match="'sum'.*TensorType"):
        gc.from_networkx(d)
    d = gc.to_networkx(sample())
    d.nodes["sum"]["type"] = TensorType((7,))
    with pytest.raises(gc.VerifyError, match="'sum'.*declared type"):
        gc.from_networkx(d)
    d = gc.to_networkx(sample())
    d.nodes["x"]["kind"] = "input"
    with pytest.raises(gc.VerifyError, match="'x'.*kind"):
        gc.from_networkx(d)


@settings(max_examples=draws(15))
@given(random_graphs(min_ops=5, max_ops=20))
def test_random_graphs_round_trip(g: gc.Graph) -> None:
    g2 = gc.from_networkx(gc.to_networkx(g))
    assert str(g2) == str(g)
    feeds = random_feeds(g, seed=0)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        np.testing.assert_array_equal(a, b, err_msg=str(g))


@pytest.mark.slow  # a child interpreter importing graphc: about a second
def test_importing_graphc_does_not_import_networkx() -> None:
    """networkx is for to_networkx and from_networkx only, and importing it took a fifth
    of graphc's import time: it is imported when one of them is first called."""
    import subprocess
    import sys

    check = (
        "import sys, graphc; assert 'networkx' not in sys.modules; "
        "g = graphc.parse('graph g(%x: f32[2]) {\\n  output %y = %x\\n}'); "
        "print(graphc.from_networkx(graphc.to_networkx(g)).name, 'networkx' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["g", "True"]


def test_a_node_given_a_graph_values_type_holds_the_plain_type() -> None:
    """A graph value's .type read by user code is callable (torch's Tensor.type), a
    TensorType subclass holding the value: a node made with it keeps the plain type, so
    it refers to no value of another graph and round-trips through networkx (whose
    import checks the type exactly: 'got TensorType(f32[3])' before)."""
    g = gc.Graph("g")
    with g:
        y = gc.placeholder("y", (3,))
        gc.output(y * 2)
    assert type(y.type) is not TensorType and y.type == TensorType((3,), "float32")
    g.add_placeholder("z", y.type)
    assert type(g.node("z").type) is TensorType
    back = gc.from_networkx(gc.to_networkx(g))
    assert back.node("z").type == TensorType((3,), "float32")
