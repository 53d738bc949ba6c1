"""Readability of big graphs: collapsed chains and repeats; fused nodes as clusters."""

from __future__ import annotations

import graphc as gc
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.viz import style
from graphc.viz.collapse import summarize
from tests.viz.dotsource import parse_dot


def chain_graph(length: int) -> Graph:
    g = gc.Graph("chain")
    with g:
        x = gc.placeholder("x", shape=("B",))
        for _ in range(length):
            x = gc.tanh(x) * 2
        gc.output(x, name="y")
    return g


def test_long_chains_collapse_into_one_node_with_a_count() -> None:
    g = chain_graph(20)  # 40 ops: tanh, mul, tanh, mul, ...
    dot = parse_dot(gc.viz.to_dot(g, max_chain=10).source)
    collapsed = [i for i in dot.nodes if "collapsed/" in i and not i.startswith("legend/")]
    assert len(collapsed) == 1
    # the chain's two ends stay; the 38 ops between them are summarised, period 2
    assert "(mul → tanh) × 19" in dot.label(collapsed[0])
    # (each step's product is named after the variable x holding it: x_1 ... x_20)
    assert "tanh" in dot.nodes and "x_20" in dot.nodes
    assert dot.edges_between("tanh", collapsed[0]) and dot.edges_between(collapsed[0], "x_20")
    # the constant 2s feeding only hidden ops went with them
    drawn_ops = [i for i in dot.nodes if not i.startswith(("legend/", "collapsed/"))]
    assert len(drawn_ops) < 10


def test_collapse_can_be_switched_off_and_leaves_short_chains() -> None:
    g = chain_graph(20)
    full = parse_dot(gc.viz.to_dot(g, max_chain=None).source)
    assert not [i for i in full.nodes if "collapsed/" in i]
    assert sum(1 for n in g.nodes if n.kind == "op") <= len(full.nodes)
    short = parse_dot(gc.viz.to_dot(chain_graph(3), max_chain=10).source)
    assert not [i for i in short.nodes if "collapsed/" in i]


def test_repeated_structures_collapse_with_a_count() -> None:
    g = gc.Graph("fan")
    with g:
        x = gc.placeholder("x", shape=(4,))
        parts = [gc.exp(x) for _ in range(9)]
        gc.output(gc.stack(parts), name="y")
    dot = parse_dot(gc.viz.to_dot(g, max_repeat=4).source)
    # stack reshapes each part: nine reshape(exp(x)) make two repeated groups of nine
    repeated = sorted(i for i in dot.nodes if i.startswith("repeated/"))
    assert repeated == ["repeated/exp", "repeated/reshape"]
    assert "exp × 9" in dot.label("repeated/exp")
    assert "reshape × 9" in dot.label("repeated/reshape")
    assert len(dot.edges_between("x", "repeated/exp")) == 1
    assert len(dot.edges_between("repeated/exp", "repeated/reshape")) == 1
    assert len(parse_dot(gc.viz.to_dot(g, max_repeat=None).source).nodes) > 18


def test_summaries_count_ops_when_there_is_no_period() -> None:
    assert summarize(["exp", "log", "exp", "exp"]) == "4 ops: exp ×3, log ×1"
    assert summarize(["add"] * 5) == "(add) × 5"


def fused_graph() -> Graph:
    """x -> fused(tanh(a) * b + 1) -> y, built by hand the way fusion shapes its nodes."""
    body = gc.Graph("body")
    with body:
        a = gc.placeholder("a", shape=("B", 3))
        b = gc.placeholder("b", shape=(3,))
        gc.output(gc.tanh(a) * b + 1, name="r")
    g = gc.Graph("outer")
    with g:
        gc.placeholder("x", shape=("B", 3))
        gc.placeholder("w", shape=(3,))
    t = TensorType(("B", 3), "float32")
    members = [{"name": n.name, "op": n.op, "loc": n.loc} for n in body.op_nodes]
    fused = g.add_op(
        "fused",
        [g.node("x"), g.node("w")],
        {"body": body},
        t,
        name="fused_tanh",
        meta={"members": members},
    )
    g.add_output(g.add_op("exp", [fused], {}, t), name="y")
    return g


def test_fused_nodes_are_clusters_showing_their_members() -> None:
    g = fused_graph()
    body = g.node("fused_tanh").attrs["body"]
    dot = parse_dot(gc.viz.to_dot(g).source)
    cluster = "cluster_fused_tanh/"
    assert cluster in dot.clusters
    ops = [n for n in body.op_nodes if not n.is_constant]  # its constant is a note, no op
    assert (
        "fused_tanh" in dot.clusters[cluster]["label"]
        and f"({len(ops)} ops)" in dot.clusters[cluster]["label"]
        and len(ops) == 3
    )
    members = {i for i, c in dot.cluster_of.items() if c == cluster}
    assert members == {f"fused_tanh/{n.name}" for n in body.op_nodes}
    assert {n.op for n in body.op_nodes} == {"tanh", "mul", "constant", "add"}
    # outer inputs enter at the members that read them; the result leaves from the last one
    assert dot.edges_between("x", "fused_tanh/tanh")[0]["label"] == "f32[B,3]"
    assert dot.edges_between("w", "fused_tanh/mul")
    assert dot.edges_between("fused_tanh/add", "exp")
    assert dot.edges_between("fused_tanh/tanh", "fused_tanh/mul")
    assert f">{style.LEGEND_TEXT['fused']}<" in dot.label(style.LEGEND_ID)
