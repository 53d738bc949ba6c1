"""Pictures of static graphs: forward, joint gradient and (forward, backward) pairs."""

from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
from graphc.viz import style
from tests.viz.dotsource import Dot, parse_dot


def tutorial_graph() -> gc.Graph:
    """y = (x + w)(w + 1), the tutorials' example, with a symbolic batch dim."""
    g = gc.Graph("tutorial")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        w = gc.placeholder("w", shape=(3,))
        gc.output(gc.sum((x + w) * (w + 1)), name="y")
    return g


def picture(obj: object, **options: object) -> Dot:
    return parse_dot(gc.viz.to_dot(obj, **options).source)


def ids_with(dot: Dot, **attrs: str) -> set[str]:
    return {
        node_id
        for node_id, node in dot.nodes.items()
        if not node_id.startswith("legend/") and all(node.get(k) == v for k, v in attrs.items())
    }


def test_forward_graph_draws_each_kind_in_its_own_shape() -> None:
    dot = picture(tutorial_graph())
    shapes = {kind: style.ROLES[kind]["shape"] for kind in ("placeholder", "constant", "output")}
    assert ids_with(dot, shape=shapes["placeholder"]) == {"x", "w"}
    assert ids_with(dot, shape=shapes["output"]) == {"y"}
    constants = ids_with(dot, shape=shapes["constant"])
    assert len(constants) == 1 and "<b>1</b>" in dot.label(constants.pop())
    ops = {dot.label(i).split("</b>")[0].removeprefix("<b>") for i in ids_with(dot, shape="box")}
    assert ops == {"add", "mul", "sum"}
    # the shapes are distinct, so a reader can tell the kinds apart
    assert len(set(shapes.values()) | {style.ROLES["op"]["shape"]}) == 4


def test_edges_carry_shape_and_dtype_with_symbolic_dims_by_name() -> None:
    dot = picture(tutorial_graph())
    labels = {(a, b): attrs["label"] for a, b, attrs in dot.edges if not a.startswith("legend/")}
    assert labels[("x", "add")] == "f32[B,3]"
    assert labels[("w", "add")] == "f32[3]"
    assert labels[("sum", "y")] == "f32[]"
    unlabelled = picture(tutorial_graph(), edge_labels=False)
    assert all(
        "label" not in attrs for a, _, attrs in unlabelled.edges if not a.startswith("legend/")
    )


def test_tooltips_name_the_users_source_line() -> None:
    dot = picture(tutorial_graph())
    assert "test_graphs.py:" in dot.nodes["mul"]["tooltip"]
    assert "f32[B,3]" in dot.nodes["mul"]["tooltip"]


def test_legend_lists_the_roles_in_the_picture() -> None:
    dot = picture(tutorial_graph())
    key = dot.label(style.LEGEND_ID)
    for role in ("placeholder", "constant", "op", "output"):
        assert f">{style.LEGEND_TEXT[role]}<" in key
    assert style.LEGEND_TEXT["backward"] not in key  # nothing backward in a forward graph
    assert style.LEGEND_ID not in picture(tutorial_graph(), legend=False).nodes


def test_the_legend_is_one_compact_table_two_entries_a_row() -> None:
    dot = picture(gc.gradients(tutorial_graph(), wrt=["w"], seeds=True))
    legend = [i for i in dot.nodes if i.startswith("legend/")]
    assert legend == [style.LEGEND_ID]  # one node: no cluster of sample nodes and edges
    key = dot.label(style.LEGEND_ID)
    rows = key.count("<tr>") - 1  # the title's row aside
    entries = key.count('align="left">') - 1
    assert entries >= 6 and rows == (entries + 1) // 2
    assert f">{style.EDGE_TEXT['grad_of']}<" in key  # edge kinds are listed too
    assert dot.nodes[style.LEGEND_ID]["shape"] == "plaintext"


def test_joint_graph_colours_backward_nodes_and_links_them_to_forward_nodes() -> None:
    g = tutorial_graph()
    gg = gc.gradients(g, wrt=["x", "w"])
    dot = picture(gg)
    backward_fill = style.ROLES["backward"]["fillcolor"]
    backward = {n.name for n in gg.nodes if "grad_of" in n.meta and n.kind == "op"}
    backward -= {n.name for n in gg.nodes if n.is_constant}
    assert backward and backward == ids_with(dot, fillcolor=backward_fill, shape="box")
    links = [(a, b) for a, b, attrs in dot.edges if attrs.get("style") == "dashed"]
    links = [(a, b) for a, b in links if not a.startswith("legend/")]
    # one link per forward node whose rule made backward ops, from one of those ops
    for target in {gg.node(name).meta["grad_of"] for name in backward}:
        sources = {a for a, b in links if b == target}
        assert sources & {n for n in backward if gg.node(n).meta["grad_of"] == target}, target
    for name in backward:
        assert f"∂ of {gg.node(name).meta['grad_of']}" in dot.label(name)
    for grad, wrt in (("grad_x", "x"), ("grad_w", "w")):
        assert (grad, wrt) in links
    assert all(gg.node(b).kind != "op" or "grad_of" not in gg.node(b).meta for _, b in links)


def test_joint_graph_marks_saved_activations_where_backward_reads_them() -> None:
    gg = gc.gradients(tutorial_graph(), wrt=["w"])
    dot = picture(gg)
    saved = [(a, b, e) for a, b, e in dot.edges if e.get("color") == style.SAVED_COLOR]
    saved = [(a, b, e) for a, b, e in saved if not a.startswith("legend/")]
    assert saved
    for a, b, attrs in saved:
        assert "grad_of" not in gg.node(a).meta and "grad_of" in gg.node(b).meta
        assert attrs["label"].startswith("saved f32[")
    # every forward value a backward op reads is marked
    read = {
        (x.name, n.name)
        for n in gg.nodes
        if n.kind == "op" and "grad_of" in n.meta
        for x in n.inputs
        if "grad_of" not in x.meta and not x.is_constant
    }
    assert read == {(a, b) for a, b, _ in saved}


def test_split_pair_draws_two_clusters_linked_by_saved_values() -> None:
    forward, backward = gc.split_backward(tutorial_graph(), wrt=["w"])
    dot = picture((forward, backward))
    assert {"cluster_forward/", "cluster_backward/"} <= set(dot.clusters)
    assert dot.cluster_of["forward/mul"] == "cluster_forward/"
    saved_inputs = [p for p in backward.inputs if not p.name.startswith("ct_")]
    assert saved_inputs
    for p in saved_inputs:
        node = dot.nodes[f"backward/{p.name}"]
        assert node["color"] == style.SAVED_COLOR and "saved" in node["label"]
        feeding = [a for a, b, _ in dot.edges if b == f"backward/{p.name}"]
        assert feeding == [f"forward/saved_{p.name}"]
    seed = dot.nodes["backward/ct_y"]
    assert seed["fillcolor"] == style.ROLES["seed"]["fillcolor"]
    for target in {n.meta["grad_of"] for n in backward.op_nodes if not n.is_constant}:
        links = [
            e for a, b, e in dot.edges if b == f"forward/{target}" and a.startswith("backward/")
        ]
        assert links and all(e["style"] == "dashed" for e in links), target


def test_unknown_objects_and_options_raise_graphc_errors() -> None:
    with pytest.raises(gc.GraphcError, match="cannot draw a int"):
        gc.viz.to_dot(3)
    with pytest.raises(gc.GraphcError, match="unknown option.*colour"):
        gc.viz.to_dot(tutorial_graph(), colour="red")
    # a function is the commonest wrong thing to draw: say how to get its graph
    with pytest.raises(gc.GraphcError, match=r"trace a function first: gc\.trace\(fn"):
        gc.viz.to_dot(lambda x: x * 2)
    with pytest.raises(gc.GraphcError, match=r"fn\.graph_for\(\*args\)"):
        gc.viz.render(gc.jit(lambda x: x * 2), "f.svg")


def test_option_values_dot_would_ignore_or_crash_on_are_refused() -> None:
    # dot draws an unknown rankdir top to bottom without a word; a title that is no
    # str failed deep inside with an AttributeError
    for options, message in [
        ({"rankdir": "XY"}, "rankdir must be one of TB, LR, BT, RL, got 'XY'"),
        ({"title": 5}, "title must be a str, got int 5"),
        ({"max_nodes": -5}, "max_nodes must be a whole number >= 0 or None, got -5"),
        ({"max_chain": 2.5}, "max_chain must be a whole number"),
    ]:
        with pytest.raises(gc.GraphcError, match=re.escape(message)):
            gc.viz.to_dot(tutorial_graph(), **options)


def test_rankdir_is_read_in_either_case() -> None:
    source = gc.viz.to_dot(tutorial_graph(), rankdir="lr").source
    assert "rankdir=LR" in source.splitlines()[1]


def test_small_constants_show_their_value_and_large_ones_their_type() -> None:
    g = gc.Graph("consts")
    with g:
        x = gc.placeholder("x", shape=(8,))
        big = gc.constant(np.arange(8, dtype=np.float32), name="table")
        gc.output(x * big + 0.5, name="y")
    dot = picture(g)
    assert "f32[8]" in dot.label("table")
    assert any("<b>0.5</b>" in dot.label(i) for i in ids_with(dot, shape="note"))


def test_many_attributes_wrap_into_short_lines_and_none_is_cut() -> None:
    """A conv's or a pool's five attributes made one detail line as wide as three boxes;
    they now wrap, a few to a line, each attribute whole."""
    g = gc.Graph("conv")
    with g:
        x = gc.placeholder("x", shape=("B", 1, 8, 8))
        w = gc.placeholder("w", shape=(4, 1, 3, 3))
        gc.output(gc.conv2d(x, w, stride=(1, 1), padding=(1, 1, 1, 1)), name="y")
    conv = next(n for n in g.nodes if n.op == "conv2d")
    label = parse_dot(gc.viz.to_dot(g).source).label(conv.name)
    lines = re.findall(r'<font point-size="9" color="#555555">([^<]*)</font>', label)
    shown = [f"{k}={v}" for k, v in conv.attrs.items() if len(f"{k}={v}") <= 24]
    assert len(shown) >= 3 and len(lines) >= 2
    assert all(len(line) <= 40 for line in lines)
    assert all(any(a in line for line in lines) for a in shown)
