"""Pass-by-pass pictures from optimization reports, and `graphc render` / `graphc demo`."""

from __future__ import annotations

from pathlib import Path

import pytest

import graphc as gc
from graphc.cli import main
from graphc.viz import style
from graphc.viz.command import optimized_graph, parse_spec
from graphc.viz.report import diff_graph
from tests.viz.dotsource import parse_dot

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tutorial_graph.py"


def mlp_joint() -> gc.Graph:
    def mlp(x, w1, w2):  # type: ignore[no-untyped-def]
        return gc.mean(gc.relu(x @ w1) @ w2 * 1.0)

    g = gc.trace(mlp, gc.TensorSpec(("B", 4)), gc.TensorSpec((4, 8)), gc.TensorSpec((8, 2)))
    return gc.gradients(g, wrt=["w1", "w2"])


def test_diff_marks_removed_and_added_nodes_by_name_and_structure() -> None:
    g = mlp_joint()
    optimized, report = gc.optimize(g, 2, explain=True)
    log = report.passes[-1]
    union, roles = diff_graph(report.passes[0].before, optimized)
    removed = {n for n, r in roles.items() if r == "removed"}
    added = {n for n, r in roles.items() if r == "added"}
    assert removed and added
    for name in added:
        assert name in optimized
    for name in removed:
        assert name.removesuffix("_before") in report.passes[0].before
    assert len(union) == len(optimized) + len(removed)
    kept = [n for n in union.nodes if n.name not in roles]
    assert all(n.name in optimized for n in kept)
    assert log.after is optimized


def test_report_sheet_has_a_cluster_per_changing_pass_with_grey_and_green_nodes() -> None:
    _, report = optimized_graph(mlp_joint(), 2, fuse="numpy")  # the passes, then fusion
    dot = parse_dot(gc.viz.to_dot(report).source)
    passes = [c for c in dot.clusters if c.startswith("cluster_pass")]
    assert passes
    fills = {n.get("fillcolor") for i, n in dot.nodes.items() if not i.startswith("legend/")}
    colors = {n.get("color") for i, n in dot.nodes.items() if not i.startswith("legend/")}
    assert style.ROLES["added"]["fillcolor"] in fills
    assert style.REMOVED_COLOR in colors
    fused = [
        c for c in dot.clusters if "fused" in c or "epilogue" in dot.clusters[c].get("label", "")
    ]
    assert fused or any("matmul_epilogue" in n.get("label", "") for n in dot.nodes.values())
    pictures = gc.viz.pass_pictures(report)
    assert [name.split("-", 1)[1] for name, _ in pictures] == [
        log.name for log in report.passes if diff_graph(log.before, log.after)[1]
    ]


def test_o2_graph_draws_fused_nodes_as_clusters() -> None:
    optimized = gc.optimize(mlp_joint(), 2)
    fused = [n for n in optimized.op_nodes if isinstance(n.attrs.get("body"), gc.Graph)]
    dot = parse_dot(gc.viz.to_dot(optimized).source)
    for n in fused:
        assert f"cluster_{n.name}/" in dot.clusters
        members = {i for i, c in dot.cluster_of.items() if c == f"cluster_{n.name}/"}
        assert members == {f"{n.name}/{m.name}" for m in n.attrs["body"].op_nodes}


def test_spec_parsing() -> None:
    spec = parse_spec("B,3:float64")
    assert spec.shape == ("B", 3) and str(spec.dtype) == "float64"
    assert parse_spec(":int64").shape == () and parse_spec("2").shape == (2,)
    with pytest.raises(gc.GraphcError, match="--spec"):
        parse_spec("3:complex64")


def test_render_command_writes_forward_backward_and_pass_pictures(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    specs = ["--spec", ":float32", "--spec", ":float32"]
    out = tmp_path / "f.dot"
    assert main(["render", f"{EXAMPLE}:f", *specs, "-o", str(out)]) == 0
    dot = parse_dot(out.read_text())
    assert {"x", "w", "a", "b", "mul", "out"} <= set(dot.nodes)  # a and b: f's variables
    back = tmp_path / "b.dot"
    argv = ["render", f"{EXAMPLE}:f", *specs, "-o", str(back), "--backward", "--opt-level", "2"]
    argv += ["--fuse", "numpy"]
    assert main([*argv, "--passes"]) == 0
    dot = parse_dot(back.read_text())
    assert {"cluster_forward/", "cluster_backward/"} <= set(dot.clusters)
    printed = capsys.readouterr().out
    assert f"wrote {back}" in printed
    assert any(p.name.startswith("b-pass-") for p in tmp_path.iterdir())


def test_render_command_reports_user_mistakes(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["render", "no_such_module_here:f", "-o", "x.svg"]) == 2
    assert "cannot import module 'no_such_module_here'" in capsys.readouterr().err
    assert main(["render", f"{EXAMPLE}:missing", "-o", "x.svg"]) == 2
    assert "has no function 'missing'" in capsys.readouterr().err
    assert main(["render", f"{EXAMPLE}:f", "--spec", ":float32", "-o", "x.svg"]) == 2
    capsys.readouterr()
    specs = ["--spec", ":float32", "--spec", ":float32"]
    assert main(["render", f"{EXAMPLE}:f", *specs, "--fuse", "numpy", "-o", "x.svg"]) == 2
    assert "--fuse needs --opt-level N" in capsys.readouterr().err


def test_demo_renders_forward_and_backward_pictures(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    files = sorted(p.name for p in tmp_path.iterdir())
    suffix = ".svg" if gc.viz.have_dot() else ".dot"
    assert files == [f"affine-backward{suffix}", f"affine-forward{suffix}"]
    for name in files:
        assert str(tmp_path / name) in printed
        assert (tmp_path / name).stat().st_size > 100


def scan_gradients() -> gc.Graph:
    def step(h, x):  # type: ignore[no-untyped-def]
        h = gc.tanh(h * 0.5 + x)
        return h, gc.sin(h)

    def f(xs, h0):  # type: ignore[no-untyped-def]
        return gc.sum(gc.scan(step, h0, xs)[1] * 1.0)

    g = gc.trace(f, gc.TensorSpec((5, 3)), gc.TensorSpec((3,)))
    return gc.gradients(g, wrt=["h0"])


def test_a_report_too_big_to_read_is_collapsed_bodies_and_all() -> None:
    """A report draws the graph once per pass that changed it: past `max_nodes` in all
    it is collapsed like a graph, and its loops are drawn as single nodes (an LSTM's
    report was 9,000 lines of DOT that dot took four minutes over)."""
    _, report = gc.optimize(scan_gradients(), 2, explain=True)
    whole = parse_dot(gc.viz.to_dot(report).source)
    assert any("/body" in name for name in whole.clusters)  # the bodies, drawn
    small = gc.viz.to_dot(report, max_nodes=20).source
    dot = parse_dot(small)
    assert not any("/body" in name for name in dot.clusters) and len(dot.nodes) < len(whole.nodes)
    heads = [i for i, attrs in dot.nodes.items() if attrs.get("shape") == "hexagon"]
    assert heads and all("nodes in its bodies, not drawn" in dot.label(i) for i in heads)
    assert "graphc view" in small and "bodies in its cluster" not in small  # none drawn
    # a collapsed loop's results are read along edges that say their type
    scan = next(n for n in report.passes[-1].after.nodes if n.op == "scan")
    results = [n for n in report.passes[-1].after.nodes if n.op == "result" and n.inputs[0] is scan]
    for pass_ in range(1, len(report.passes) + 1):
        for r in results:
            for attrs in dot.edges_between(f"pass{pass_}/{scan.name}", f"pass{pass_}/{r.name}"):
                assert attrs["label"] == str(r.type)
    assert any(
        dot.edges_between(f"pass{p}/{scan.name}", f"pass{p}/{r.name}")
        for p in (1, 2, 3)
        for r in results
    )


def test_a_fused_group_counts_the_ops_drawn_in_it_not_its_constants() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        return gc.tanh(x) * 1.5 + 0.5

    fused, _ = gc.fuse(gc.trace(f, gc.TensorSpec(("B", 3))), backend="numpy", explain=True)
    [group] = [n for n in fused.op_nodes if isinstance(n.attrs.get("body"), gc.Graph)]
    ops = [m for m in group.attrs["body"].op_nodes if not m.is_constant]
    assert len(ops) == 3 and len(group.attrs["body"].op_nodes) == 5  # tanh, mul, add; 1.5, 0.5
    label = parse_dot(gc.viz.to_dot(fused).source).clusters[f"cluster_{group.name}/"]["label"]
    assert label.endswith("(3 ops)")
