"""Pictures of control flow: cond, scan and while_loop bodies as nested clusters."""

from __future__ import annotations

import re
from pathlib import Path

import graphc as gc
from graphc.cli import main
from graphc.viz import style
from tests.conftest import needs_dot
from tests.viz.dotsource import Dot, parse_dot

F = gc.TensorSpec


def rnn(h, xs, w):  # type: ignore[no-untyped-def]
    last, _ = gc.scan(lambda c, x: (gc.tanh(c @ w + x), c), h, xs)
    return gc.sum(last)


def rnn_graph() -> gc.Graph:
    return gc.trace(rnn, F((2, 3)), F((4, 2, 3)), F((3, 3)))


def pick(p, x, y):  # type: ignore[no-untyped-def]
    chosen = gc.cond(gc.sum(p) > 0, lambda a, b: a * b, lambda a, b: a - gc.exp(b), x, y)
    return gc.sum(chosen)


def pick_graph() -> gc.Graph:
    return gc.trace(pick, F((3,)), F((3,)), F((3,)))


def picture(obj: object, **options: object) -> Dot:
    return parse_dot(gc.viz.to_dot(obj, **options).source)


def cluster_parents(source: str) -> dict[str, str | None]:
    """Each cluster's enclosing cluster (None at the top), from the DOT text's nesting."""
    parents: dict[str, str | None] = {}
    stack: list[str | None] = []
    for line in source.splitlines():
        line = line.strip()
        if line.endswith("{") and line.startswith("subgraph"):
            match = re.match(r'subgraph\s+"?([^"{]*?)"?\s*\{', line)
            name = match.group(1) if match else None
            if name is not None and name.startswith("cluster"):
                parents[name] = next((c for c in reversed(stack) if c is not None), None)
                stack.append(name)
            else:
                stack.append(None)
        elif line == "}" and stack:
            stack.pop()
    return parents


def edge(dot: Dot, a: str, b: str) -> dict[str, str]:
    found = dot.edges_between(a, b)
    assert found, f"no edge {a} -> {b}"
    return found[0]


def test_scan_is_a_cluster_holding_its_body_with_the_carry_drawn_back() -> None:
    g = rnn_graph()
    source = gc.viz.to_dot(g).source
    dot, parents = parse_dot(source), cluster_parents(source)
    assert parents["cluster_scan/body/"] == "cluster_scan/"
    assert parents["cluster_scan/"] is None
    assert dot.clusters["cluster_scan/body/"]["label"] == "body: scan_body"
    # the head names the op and its length; the body's nodes sit in the body cluster
    assert dot.cluster_of["scan"] == "cluster_scan/" and "length=4" in dot.label("scan")
    body = {i for i, c in dot.cluster_of.items() if c == "cluster_scan/body/"}
    assert {"scan/body/carry0", "scan/body/x0", "scan/body/w", "scan/body/tanh"} <= body
    assert "carry 0" in dot.label("scan/body/carry0") and "x 0 [t]" in dot.label("scan/body/x0")
    # operands enter the cluster at the placeholders they feed (xs whole, sliced inside)
    assert edge(dot, "h", "scan/body/carry0")["label"] == "f32[2,3]"
    assert edge(dot, "xs", "scan/body/x0")["label"] == "f32[4,2,3]"
    assert edge(dot, "w", "scan/body/w")
    # the new carry goes back, dashed, to the carry placeholder
    back = edge(dot, "scan/body/out0", "scan/body/carry0")
    assert back["style"] == "dashed" and back["constraint"] == "false"
    assert back["label"] == "carry 0" and back["color"] == style.CONTROL_COLOR
    # result nodes are small nodes fed by the body outputs that give them
    # (the first is named after the variable `last` holding it)
    assert dot.nodes["last"]["shape"] == style.ROLES["result"]["shape"]
    assert "carry 0" in dot.label("last")
    assert edge(dot, "scan/body/out0", "last")
    assert edge(dot, "scan/body/out1", "result_1")["label"] == "stacked"
    assert edge(dot, "last", "sum")["label"] == "f32[2,3]"
    key = dot.label(style.LEGEND_ID)
    assert all(style.LEGEND_TEXT[r] in key for r in ("control", "result", "body_output"))


def test_cond_draws_its_branches_side_by_side_with_the_predicate_at_its_head() -> None:
    source = gc.viz.to_dot(pick_graph()).source
    dot, parents = parse_dot(source), cluster_parents(source)
    assert parents["cluster_cond/true/"] == parents["cluster_cond/false/"] == "cluster_cond/"
    assert dot.clusters["cluster_cond/true/"]["label"].startswith("true: ")
    assert dot.clusters["cluster_cond/false/"]["label"].startswith("false: ")
    # the true branch is written first, so it is drawn on the left
    assert source.index("cluster_cond/true/") < source.index("cluster_cond/false/")
    assert dot.nodes["cond"]["shape"] == style.ROLES["control"]["shape"]
    assert edge(dot, "gt", "cond")["label"] == "bool[]"
    for branch in ("true", "false"):  # every operand enters both branches
        assert edge(dot, "x", f"cond/{branch}/x0")
        assert edge(dot, "y", f"cond/{branch}/x1")
        assert edge(dot, f"cond/{branch}/out0", "chosen")  # the variable holding it
    assert dot.cluster_of["cond/true/mul"] == "cluster_cond/true/"
    assert dot.cluster_of["cond/false/exp"] == "cluster_cond/false/"


def nested(p, h, xs, w):  # type: ignore[no-untyped-def]
    def outer_true(h, xs):  # type: ignore[no-untyped-def]
        def step(c, x):  # type: ignore[no-untyped-def]
            inner = gc.cond(gc.sum(x) > 0, lambda a: gc.tanh(a @ w), lambda a: a * 0.5, c)
            return inner + x, gc.sum(inner)

        last, _ = gc.scan(step, h, xs)
        return last

    return gc.sum(gc.cond(gc.sum(p) > 0, outer_true, lambda h, xs: h - 1.0, h, xs))


def test_cond_in_scan_in_cond_nests_as_clusters() -> None:
    g = gc.trace(nested, F(()), F((2, 3)), F((5, 2, 3)), F((3, 3)))
    source = gc.viz.to_dot(g).source
    dot, parents = parse_dot(source), cluster_parents(source)
    inner = "cluster_cond/true/scan/body/cond/true/"
    chain = [inner]
    while parents[chain[-1]] is not None:
        chain.append(parents[chain[-1]])  # type: ignore[arg-type]
    assert chain == [
        inner,
        "cluster_cond/true/scan/body/cond/",
        "cluster_cond/true/scan/body/",
        "cluster_cond/true/scan/",
        "cluster_cond/true/",
        "cluster_cond/",
    ]
    assert dot.cluster_of["cond/true/scan/body/cond/true/matmul"] == inner
    # a captured outer value reaches the innermost body through each level's placeholder
    assert edge(dot, "w", "cond/true/w")
    assert edge(dot, "cond/true/w", "cond/true/scan/body/w")
    assert edge(dot, "cond/true/scan/body/w", "cond/true/scan/body/cond/true/w")
    # each level's results leave its own cluster
    assert edge(dot, "cond/true/scan/body/cond/true/out0", "cond/true/scan/body/inner")
    assert edge(dot, "cond/true/scan/body/out0", "cond/true/scan/body/carry0")


def test_while_loop_draws_its_condition_and_body_and_loops_back() -> None:
    def grow(x):  # type: ignore[no-untyped-def]
        return gc.while_loop(lambda c: gc.sum(c) < 10.0, lambda c: c * 2.0, x)

    dot = picture(gc.trace(grow, F((3,))))
    condition, body = "cluster_while_loop/condition/", "cluster_while_loop/body/"
    assert dot.clusters[condition]["label"].startswith("condition: ")
    assert dot.clusters[body]["label"].startswith("body: ")
    assert edge(dot, "x", "while_loop/condition/carry0")
    assert edge(dot, "x", "while_loop/body/carry0")
    # the new carry goes to the condition and to the body; the test goes to the head
    for target in ("while_loop/condition/carry0", "while_loop/body/carry0"):
        assert edge(dot, "while_loop/body/out0", target)["style"] == "dashed"
    assert edge(dot, "while_loop/condition/out0", "while_loop")["label"] == "go on?"
    assert edge(dot, "while_loop/body/out0", "result")


def test_joint_gradient_colours_the_backward_scan_and_links_it_to_the_forward_scan() -> None:
    gg = gc.gradients(rnn_graph(), wrt=["h", "w"])
    backward_scan = next(n for n in gg.op_nodes if n.op == "scan" and "grad_of" in n.meta)
    name = backward_scan.name
    dot = picture(gg)
    fill = style.ROLES["backward"]["fillcolor"]
    assert dot.nodes[name]["fillcolor"] == fill and "∂ of scan" in dot.label(name)
    assert dot.clusters[f"cluster_{name}/"]["color"] == style.BACKWARD_COLOR
    assert dot.clusters["cluster_scan/"]["color"] == style.CONTROL_COLOR
    # the backward body is a cluster too, its ops backward, the forward body's not
    body = backward_scan.attrs["body"]
    for op in body.op_nodes:
        node = dot.nodes[f"{name}/body/{op.name}"]
        assert dot.cluster_of[f"{name}/body/{op.name}"] == f"cluster_{name}/body/"
        assert op.is_constant or node["fillcolor"] == fill
    assert dot.nodes["scan/body/tanh"]["fillcolor"] == style.ROLES["op"]["fillcolor"]
    # its carries are cotangents; the forward values it reads per step are saved
    assert dot.nodes[f"{name}/body/ct_out0"]["fillcolor"] == style.ROLES["seed"]["fillcolor"]
    saved = dot.nodes[f"{name}/body/tanh"]
    assert saved["color"] == style.SAVED_COLOR and "saved" in saved["label"]
    feeding = [
        (a, e) for a, b, e in dot.edges if b == f"{name}/body/tanh" and e.get("style") != "invis"
    ]
    assert len(feeding) == 1 and feeding[0][1]["color"] == style.SAVED_COLOR
    assert gg.node(feeding[0][0]).op == "result"  # a result of the forward scan
    assert edge(dot, f"{name}/body/ct_carry", f"{name}/body/ct_out0")["style"] == "dashed"
    # one backward -> forward link for the scan rule, from the backward scan's head
    link = edge(dot, name, "scan")
    assert link["style"] == "dashed" and link["arrowhead"] == "empty"
    assert not [a for a, b, _ in dot.edges if b == "scan" and a.startswith("result")]


def test_split_pair_draws_both_scans_as_clusters_in_their_halves() -> None:
    forward, backward = gc.split_backward(rnn_graph(), wrt=["h", "w"])
    source = gc.viz.to_dot((forward, backward)).source
    dot, parents = parse_dot(source), cluster_parents(source)
    name = next(n.name for n in backward.op_nodes if n.op == "scan")
    assert parents["cluster_forward/scan/"] == "cluster_forward/"
    assert parents[f"cluster_backward/{name}/"] == "cluster_backward/"
    assert parents[f"cluster_backward/{name}/body/"] == f"cluster_backward/{name}/"
    assert edge(dot, f"backward/{name}", "forward/scan")["style"] == "dashed"
    assert dot.nodes[f"backward/{name}/body/tanh"]["color"] == style.SAVED_COLOR


def test_unrolled_loop_collapses_and_the_scan_shows_one_step() -> None:
    def unrolled(h, xs, w):  # type: ignore[no-untyped-def]
        for t in range(20):
            h = gc.tanh(h @ w + xs[t])
        return gc.sum(h)

    g = gc.trace(unrolled, F((2, 3)), F((20, 2, 3)), F((3, 3)))
    dot = picture(g)
    collapsed = [i for i in dot.nodes if i.startswith("collapsed/")]
    assert len(collapsed) == 1
    assert "(matmul → add → tanh) × 19" in dot.label(collapsed[0])
    # each step's slice of xs hides with its step: xs and w feed the summary once
    assert len(dot.edges_between("xs", collapsed[0])) == 1
    assert len(dot.edges_between("w", collapsed[0])) == 1
    assert edge(dot, collapsed[0], "sum")
    drawn = [i for i in dot.nodes if not i.startswith("legend/")]
    assert len(drawn) < 15 < len(g)
    assert not [i for i in picture(rnn_graph()).nodes if "collapsed/" in i]
    assert len(picture(g, max_chain=None).nodes) > len(g) - 5


def test_long_chains_inside_a_body_collapse_inside_its_cluster() -> None:
    def deep(h, xs):  # type: ignore[no-untyped-def]
        def step(c, x):  # type: ignore[no-untyped-def]
            for _ in range(15):
                c = gc.tanh(c) * 2.0
            return c + x, None

        return gc.sum(gc.scan(step, h, xs)[0])

    dot = picture(gc.trace(deep, F((3,)), F((4, 3))))
    collapsed = [i for i in dot.nodes if "collapsed/" in i and not i.startswith("legend/")]
    assert len(collapsed) == 1 and collapsed[0].startswith("scan/body/")
    assert dot.cluster_of[collapsed[0]] == "cluster_scan/body/"
    assert "(tanh → mul) × 14" in dot.label(collapsed[0])


def test_pass_pictures_of_a_graph_with_a_scan_mark_the_rewritten_bodies() -> None:
    gg = gc.gradients(rnn_graph(), wrt=["h", "w"])
    _, report = gc.optimize(gg, 2, explain=True)
    pictures = gc.viz.pass_pictures(report)
    assert pictures
    sheet = picture(report)
    scans = [c for c in sheet.clusters if re.fullmatch(r"cluster_pass\d+/scan\w*/", c)]
    assert scans
    added = style.ROLES["added"]["fillcolor"]
    removed = style.ROLES["removed"]["color"]
    colours = {n.get("fillcolor") for n in sheet.nodes.values()}
    colours |= {n.get("color") for n in sheet.nodes.values()}
    assert added in colours and removed in colours


@needs_dot
def test_render_draws_scans_and_conds_forward_and_backward(tmp_path: Path) -> None:
    g, pair = rnn_graph(), gc.split_backward(rnn_graph(), wrt=["h", "w"])
    for k, obj in enumerate((g, pair, gc.gradients(pick_graph(), wrt=["x", "y"]))):
        path = gc.viz.render(obj, tmp_path / f"control{k}.svg")
        svg = path.read_text()
        assert path.suffix == ".svg" and svg.lstrip().startswith(("<?xml", "<svg"))
        assert "body: scan_body" in svg or "true: true_fn" in svg
    assert "false: false_fn_grad" in svg and "true: true_fn_grad" in svg


@needs_dot
def test_render_command_draws_a_scan_with_its_backward(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "rnn_module.py"
    module.write_text(
        "import graphc as gc\n\n\n"
        "def rnn(h, xs, w):\n"
        "    last, _ = gc.scan(lambda c, x: (gc.tanh(c @ w + x), c), h, xs)\n"
        "    return gc.sum(last)\n"
    )
    out = tmp_path / "rnn.svg"
    specs = ["--spec", "B,3", "--spec", "T,B,3", "--spec", "3,3"]
    argv = ["render", f"{module}:rnn", *specs, "-o", str(out), "--backward", "--opt-level", "2"]
    assert main(argv) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    svg = out.read_text()
    assert "scan_body_fwd" in svg and "scan_body_bwd" in svg and "length=T" in svg
