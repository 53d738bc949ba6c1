"""Forward mode drawn in its own words: a `gc.tangents` graph has tangent inputs,
tangent ops reading primal values (nothing is saved: both run in one pass) and
tangent outputs, where a gradient graph has cotangent inputs and saved values."""

from __future__ import annotations

from pathlib import Path

import graphc as gc
from graphc.viz import style
from tests.viz.dotsource import parse_dot
from tests.viz.test_view import page_data


def tanh_xw_tangents() -> gc.Graph:
    f = gc.trace(lambda x, w: gc.tanh(x @ w), gc.TensorSpec((4, 3)), gc.TensorSpec((3, 2)))
    return gc.tangents(f, wrt=["w"])


def test_a_forward_mode_graph_has_tangent_inputs_and_no_saved_values() -> None:
    g = tanh_xw_tangents()
    dot = parse_dot(gc.viz.to_dot(g).source)
    # the tangent input looks like a gradient graph's seed, not like the primal inputs
    assert dot.nodes["tan_w"]["fillcolor"] == style.ROLES["seed"]["fillcolor"]
    assert dot.nodes["x"]["fillcolor"] == style.ROLES["placeholder"]["fillcolor"]
    tangent_op = next(n for n in g.nodes if n.meta.get("grad_of") == "matmul")
    (from_tangent,) = dot.edges_between("tan_w", tangent_op.name)
    (from_primal,) = dot.edges_between("x", tangent_op.name)
    assert from_tangent["color"] == style.BACKWARD_COLOR
    assert from_primal["color"] == style.SAVED_COLOR
    # a value read by a tangent op is a primal value, never "saved"; the legend says
    # tangent, not backward or gradient
    labels = [attrs.get("label", "") for _, _, attrs in dot.edges]
    assert not any(label.startswith("saved") for label in labels)
    key = dot.label(style.LEGEND_ID)
    assert "tangent op" in key and "tangent input" in key and "tangent output" in key
    assert "primal value read by a tangent op" in key
    assert "backward" not in key and "gradient" not in key


def test_a_gradient_graph_keeps_its_words() -> None:
    f = gc.trace(lambda x, w: gc.sum(gc.tanh(x @ w)), gc.TensorSpec((4, 3)), gc.TensorSpec((3, 2)))
    key = parse_dot(gc.viz.to_dot(gc.gradients(f, wrt=["w"])).source).label(style.LEGEND_ID)
    assert "backward op" in key and "saved value read by backward" in key
    assert "tangent" not in key


def test_the_viewer_colours_a_tangent_input_as_the_pictures_do(tmp_path: Path) -> None:
    page = gc.viz.view(tanh_xw_tangents(), tmp_path / "jvp.html")
    (view,) = page_data(page)["views"]
    roles = {n["n"]: n["r"] for n in view["nodes"]}
    assert roles["tan_w"] == "seed" and roles["x"] == "input" and roles["w"] == "input"
