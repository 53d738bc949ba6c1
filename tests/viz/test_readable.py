"""Static pictures that stay readable: `render --wrt`, unrolled steps collapsed with a
count, and the size guard (a collapsed picture and a hint to `graphc view`)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.cli import main
from graphc.viz import files
from graphc.viz.painter import VIEW_HINT
from tests.conftest import needs_dot
from tests.viz.dotsource import Dot, parse_dot

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tutorial_graph.py"
SPECS = ["--spec", ":float32", "--spec", ":float32"]


def drawn(dot: Dot) -> list[str]:
    return [i for i in dot.nodes if not i.startswith("legend/")]


def render_dot(tmp_path: Path, *argv: str) -> Dot:
    out = tmp_path / "picture.dot"
    assert main(["render", f"{EXAMPLE}:f", *SPECS, "-o", str(out), *argv]) == 0
    return parse_dot(out.read_text())


# -- render --wrt ------------------------------------------------------------------------


def test_wrt_draws_only_the_gradients_asked_for(tmp_path: Path) -> None:
    every = set(render_dot(tmp_path, "--backward").nodes)
    assert {"backward/grad_x", "backward/grad_w"} <= every
    only_w = set(render_dot(tmp_path, "--backward", "--wrt", "w").nodes)
    assert "backward/grad_w" in only_w and "backward/grad_x" not in only_w
    assert len(only_w) < len(every)


def test_wrt_takes_a_comma_list_or_repeats(tmp_path: Path) -> None:
    listed = set(render_dot(tmp_path, "--backward", "--wrt", "x,w").nodes)
    repeated = set(render_dot(tmp_path, "--backward", "--wrt", "x", "--wrt", "w").nodes)
    assert listed == repeated
    assert {"backward/grad_x", "backward/grad_w"} <= listed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backward", "--wrt", "ww"], r"--wrt ww: 'f' has no input named 'ww'.* x, w"),
        (["--wrt", "w"], r"--wrt says which gradients --backward draws: add --backward"),
    ],
)
def test_wrt_mistakes_are_named_with_the_fix(
    tmp_path: Path, capsys: Any, argv: list[str], message: str
) -> None:
    out = tmp_path / "picture.dot"
    assert main(["render", f"{EXAMPLE}:f", *SPECS, "-o", str(out), *argv]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_wrt_refuses_an_integer_input(tmp_path: Path, capsys: Any) -> None:
    module = tmp_path / "indexed.py"
    module.write_text("def f(x, i):\n    return x * i\n")
    argv = ["render", f"{module}:f", "--spec", "3", "--spec", ":int64", "-o", "p.dot"]
    assert main([*argv, "--backward", "--wrt", "i"]) == 2
    assert "has no floating-point input named 'i'; its floating-point inputs are x" in (
        capsys.readouterr().err
    )


# -- unrolled steps ------------------------------------------------------------------------


def rnn_loop(xs: Any, h0: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    def step(h: Any, x: Any) -> Any:
        i2h = x @ w_ih
        h2h = h @ w_hh
        next_h = gc.tanh(i2h + h2h + b)
        return next_h

    h = h0
    for t in range(xs.shape[0]):
        h = step(h, xs[t])
    return gc.mean(h * h)


def unrolled(steps: int) -> gc.Graph:
    shapes = [(steps, 4, 3), (4, 8), (3, 8), (8, 8), (8,)]
    return gc.trace(rnn_loop, *[gc.TensorSpec(s) for s in shapes])


def pair_picture(steps: int, **options: Any) -> Dot:
    pair = gc.split_backward(unrolled(steps), wrt=["w_ih", "w_hh", "b"])
    return parse_dot(gc.viz.to_dot(pair, **options).source)


def test_the_backward_of_an_unrolled_loop_is_one_group_with_a_count() -> None:
    dot = pair_picture(20)
    steps = [i for i in drawn(dot) if i.startswith("backward/steps/")]
    assert steps, "the backward's steps are not collapsed"
    label = max((dot.label(i) for i in steps), key=len)
    count = re.search(r"\) × (\d+) …", label)
    assert count and 15 <= int(count.group(1)) <= 19  # the steps hidden behind it
    # the forward's steps too, each named by the program's variables at both ends
    forward = [dot.label(i) for i in drawn(dot) if i.startswith("forward/")]
    assert any(re.search(r"× 19 …\\nx_1 … next_h_19", label) for label in forward)


def test_the_values_saved_at_each_step_hide_in_the_group() -> None:
    dot = pair_picture(20)
    saved = [i for i in drawn(dot) if re.fullmatch(r"forward/saved_next_h_\d+", i)]
    assert saved == []  # the first step's saved_next_h stays, the others are in the group
    assert "forward/saved_next_h" in dot.nodes


def test_summaries_get_no_gradient_links_but_drawn_nodes_keep_theirs() -> None:
    dot = pair_picture(20)
    links = [(a, b) for a, b, e in dot.edges if e.get("arrowhead") == "empty"]
    summary = ("steps/", "collapsed/", "repeated/")
    assert not [pair for pair in links if any(k in end for end in pair for k in summary)]
    assert ("backward/broadcast_to", "forward/mean") in links  # the rule of mean: both drawn
    small = pair_picture(2)  # nothing collapsed: every rule linked as before
    assert len([e for e in small.edges if e[2].get("arrowhead") == "empty"]) > len(links)


def test_an_unrolled_picture_does_not_grow_with_the_steps() -> None:
    assert len(drawn(pair_picture(40))) == len(drawn(pair_picture(60)))
    plain = pair_picture(12, max_chain=None)  # no collapsing: every step drawn
    assert len(drawn(plain)) > 3 * len(drawn(pair_picture(60)))


# -- the size guard ------------------------------------------------------------------------


def random_graph(count: int, scoped: bool) -> gc.Graph:
    """`count` ops on random earlier values: no chain, no period, nothing repeated."""
    rng = np.random.default_rng(0)
    ops = [gc.add, gc.mul, gc.sub, gc.maximum, gc.minimum]
    g = gc.Graph("big")
    with g:
        values = [gc.placeholder(name, (3,)) for name in ("x", "y", "z")]
        for i in range(count):
            a, b = (values[k] for k in rng.integers(0, len(values), 2))
            op = ops[int(rng.integers(len(ops)))]
            if scoped:
                with gc.name_scope(f"block{i // 40}"):
                    values.append(op(a, b))
            else:
                values.append(op(a, b))
        gc.output(gc.sum(values[-1]) + gc.sum(values[-2]), name="loss")
    return g


def test_a_graph_too_big_to_read_is_collapsed_by_scope_with_a_hint() -> None:
    g = random_graph(400, scoped=True)
    dot = parse_dot(gc.viz.to_dot(g).source)
    assert len(drawn(dot)) < 40  # ten blocks of forty, as ten nodes
    assert any(dot.label(i).startswith("block3\\n") for i in drawn(dot))
    assert VIEW_HINT in gc.viz.to_dot(g).source
    whole = parse_dot(gc.viz.to_dot(g, max_nodes=None).source)
    assert len(drawn(whole)) > 400 and VIEW_HINT not in gc.viz.to_dot(g, max_nodes=None).source


def test_a_small_graph_is_not_guarded() -> None:
    g = random_graph(40, scoped=True)
    source = gc.viz.to_dot(g).source
    assert VIEW_HINT not in source and "scope/" not in source


def test_the_guard_still_hints_without_scopes() -> None:
    source = gc.viz.to_dot(random_graph(400, scoped=False), title="big").source
    # the title stays, the hint on a line of its own
    assert re.search(rf"label=\"big\\n\d+ nodes, {re.escape(VIEW_HINT)}", source)


BIG_MODULE = textwrap.dedent(
    """
    import random

    import graphc as gc

    def big(x):
        draw = random.Random(0)  # no period, no chain: nothing collapses it
        values = [x]
        for _ in range(400):
            a, b = draw.choice(values), draw.choice(values)
            values.append(a * b if draw.random() < 0.5 else a - b)
        return gc.sum(values[-1])
    """
)


@pytest.mark.parametrize("dot_installed", [True, False], ids=["dot", "no dot"])
def test_render_prints_the_view_command_for_a_big_graph(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, dot_installed: bool
) -> None:
    if dot_installed and not files.have_dot():
        pytest.skip("graphviz's dot is not installed (apt-get install graphviz)")
    if not dot_installed:
        monkeypatch.setattr(files, "have_dot", lambda: False)
    module = tmp_path / "bigmod.py"
    module.write_text(BIG_MODULE)
    out = tmp_path / "big.svg"
    assert main(["render", f"{module}:big", "--spec", "3", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"graphc view {module}:big --spec '3'" in printed
    assert ("`dot` program is not installed" in printed) is not dot_installed
    written = out if dot_installed else out.with_suffix(".dot")
    assert written.is_file()
    if dot_installed:
        assert "<svg" in written.read_text()
    else:
        assert VIEW_HINT in written.read_text()


@needs_dot
def test_the_unrolled_rnn_s_forward_and_backward_fit_a_page(tmp_path: Path) -> None:
    path = gc.viz.render(
        gc.split_backward(unrolled(100), wrt=["w_ih", "w_hh", "b"]), tmp_path / "rnn.svg"
    )
    svg = path.read_text()
    width, height = (
        float(v) for v in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
    )  # type: ignore[union-attr]
    assert width < 3500 and height < 3500  # T=10 was 6,444 x 7,455 px before


# -- side by side is no loop ----------------------------------------------------------------


def test_the_same_ops_side_by_side_are_no_unrolled_steps() -> None:
    """Four heads computed alike from their own slice read nothing of one another: the
    picture shows them all (it used to hide three behind a "× 3" summary of "steps")."""
    g = gc.Graph("heads")
    with g:
        x = gc.placeholder("x", shape=(8, 4))
        heads = []
        for k in range(4):
            head = gc.tanh(gc.exp(x[2 * k : 2 * k + 2]) * 2.0 + 1.0)
            heads.append(gc.sum(head @ gc.transpose(head, (1, 0)) - 3.0))
        gc.output(heads[0] + heads[1] + heads[2] + heads[3], name="y")
    dot = parse_dot(gc.viz.to_dot(g, max_repeat=None).source)
    assert not [i for i in drawn(dot) if "steps/" in i or "collapsed/" in i]
    tanhs = [n.name for n in g.nodes if n.op == "tanh"]
    assert len(tanhs) == 4 and all(name in dot.nodes for name in tanhs)


def test_the_transformer_layer_shows_its_query_key_and_value_projections() -> None:
    from graphc import nn

    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, generator=0)
    g = gc.trace(layer, gc.TensorSpec((5, "B", 8)))
    dot = parse_dot(gc.viz.to_dot(g).source)
    assert not [i for i in drawn(dot) if "steps/" in i]
    projections = [n for n in g.nodes if n.op == "slice" and n.inputs[0].kind == "placeholder"]
    assert len(projections) == 6  # q, k, v: a weight and a bias slice each
    assert all(n.name in dot.nodes for n in projections)


def test_the_size_guard_counts_the_nodes_inside_loops() -> None:
    """A scan is one node of its graph but draws its whole body: an LSTM's picture of
    575 nodes passed a guard of 300 that counted 163. Bodies now count."""

    def step(h: Any, x: Any) -> Any:
        for _ in range(10):
            h = gc.tanh(h * 0.5 + x)
        return h, h

    g = gc.trace(
        lambda xs, h0: gc.scan(step, h0, xs)[1], gc.TensorSpec((4, 3)), gc.TensorSpec((3,))
    )
    scan = next(n for n in g.nodes if n.op == "scan")
    assert len(g.nodes) < 10 and len(scan.attrs["body"].nodes) > 30
    source = gc.viz.to_dot(g, max_nodes=25, max_chain=None).source
    assert VIEW_HINT in source and "nodes in its bodies, not drawn" in source
    assert "cluster_" not in source
    assert VIEW_HINT not in gc.viz.to_dot(g, max_nodes=100, max_chain=None).source
