"""Names as users write them: whatever a placeholder, node, scope, graph or title is
called, the DOT text parses and the picture shows that name (as the text IR writes a
control character: a newline in a name is drawn as ``\\n``)."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import graphc as gc
from graphc.viz import style
from tests.conftest import needs_dot
from tests.viz.dotsource import parse_dot

SVG = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"

# each is a trap for DOT text, a graphviz escape or an HTML label
NAMES = [
    'say "hi"',
    "back\\slash",
    "ends\\",
    "new\nline",
    "tab\tbed",
    "<b>bold</b>",
    "<x>",
    "fish & &amp; chips",
    "{braces}",
    "x->y",
    "port:name",
    "%22",
    '"',
    ".dot",
    "\\N\\G\\l\\n",
    "ünï€ødé 名前",
    "node",
]


def svg_of(source: str) -> ET.Element:
    done = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ET.fromstring(done.stdout)


def texts(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{SVG}text")]


def tooltips(svg: ET.Element) -> list[str]:
    return [a.get(XLINK_TITLE) or "" for a in svg.iter(f"{SVG}a")]


def named_graph(name: str = 'g "1" \\') -> gc.Graph:
    g = gc.Graph(name)
    with g:
        total = None
        for k, text in enumerate(NAMES):
            p = gc.placeholder(text, shape=(2,))
            with gc.name_scope(f"scope {text}"):
                y = gc.exp(p) * float(k + 1)
            total = y if total is None else total + y
        gc.output(gc.sum(total), name='loss "L" <\\>')
    return g


def test_node_ids_stay_one_to_one_and_never_start_with_percent() -> None:
    # graphviz takes an id starting with "%" for an anonymous node of its own
    ids = [style.dot_id(name) for name in NAMES + ["%2E", "%", "%%", "a%3Ab"]]
    assert len(set(ids)) == len(ids)
    assert not any(i.startswith("%") for i in ids)
    assert all(c not in i for i in ids for c in ':"\\<>\n\t')


@needs_dot
def test_every_name_is_drawn_as_written() -> None:
    g = named_graph()
    title = 'my <title> & "quotes" \\'
    svg = svg_of(
        gc.viz.to_dot(g, title=title, max_repeat=None, max_chain=None, legend=False).source
    )
    shown, tips = texts(svg), tooltips(svg)
    # each node is drawn as one of its own (none lost to a clashing or anonymous id),
    # named and hovered with its name as written
    assert len(svg.findall(f".//{SVG}g[@class='node']")) == len(g.nodes)
    for name in NAMES:
        assert style.visible(name) in shown, name
        assert any(t.startswith(f"{style.visible(name, None)} = placeholder") for t in tips), name
    assert 'loss "L" <\\>' in shown
    assert 'my <title> & "quotes" \\' in shown


@needs_dot
def test_names_in_clusters_and_summaries_are_drawn_as_written() -> None:
    g = named_graph()
    # the size guard's picture: one summary node per name scope
    shown = texts(svg_of(gc.viz.to_dot(g, max_nodes=5).source))
    for name in NAMES:
        assert f"scope {style.visible(name, None)}" in shown, name
    # forward and backward side by side: the graph's name is in the cluster titles
    shown = texts(svg_of(gc.viz.to_dot(gc.split_backward(g, wrt=[NAMES[0], NAMES[3]])).source))
    assert any(t.startswith('forward: g "1" \\') for t in shown)


@needs_dot
def test_a_body_and_a_control_node_with_odd_names() -> None:
    def step(h: gc.Symbol, x: gc.Symbol) -> tuple[gc.Symbol, gc.Symbol]:
        h = gc.tanh(h + x)
        return h, h

    step.__name__ = 'step \\G <&amp;> "1"'  # the body graph's name, in its cluster's title
    g = gc.Graph("<scan> & \\G")
    with g:
        xs = gc.placeholder('xs "seq"', shape=(4, 3))
        h0 = gc.placeholder("h\\0", shape=(3,))
        last, ys = gc.scan(step, h0, xs)
        gc.output(gc.sum(ys) + gc.sum(last), name="out&amp;")
    shown = texts(svg_of(gc.viz.to_dot(g).source))
    for name in ('xs "seq"', "h\\0", "out&amp;", 'body: step \\G <&amp;> "1"'):
        assert name in shown


def test_a_long_name_is_cut_in_the_middle_and_kept_whole_in_the_tooltip() -> None:
    name = "encoder_layer_" * 10 + "weight_7"
    g = gc.Graph("long")
    with g:
        gc.output(gc.placeholder(name, shape=(2,)) * 2, name="y")
    source = gc.viz.to_dot(g).source
    shown = style.visible(name)
    assert len(shown) == style.LONGEST_NAME and shown.startswith("encoder_layer_")
    assert shown.endswith("weight_7") and f"<b>{shown}</b>" in source
    assert f"{name} = placeholder" in source


def test_a_long_body_name_does_not_widen_its_cluster() -> None:
    def step(h: gc.Symbol, x: gc.Symbol) -> tuple[gc.Symbol, gc.Symbol]:
        return h + x, h

    step.__name__ = "recurrent_cell_" * 12 + "step"
    g = gc.trace(
        lambda xs, h0: gc.scan(step, h0, xs)[1], gc.TensorSpec((4, 3)), gc.TensorSpec((3,))
    )
    labels = [a.get("label", "") for a in parse_dot(gc.viz.to_dot(g).source).clusters.values()]
    body = next(label for label in labels if label.startswith("body: "))
    assert len(body) <= style.LONGEST_DETAIL and body.endswith("cell_step")
