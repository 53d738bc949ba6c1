"""`graphc render` and `graphc view` read their options alike and check them before
any work; `gc.viz.render` without graphviz names the format it was asked for."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import graphc as gc
from graphc.cli import main
from graphc.viz import files
from graphc.viz.command import parse_spec
from tests.viz.test_view import page_data

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tutorial_graph.py"
MODEL = """
import graphc as gc

def f(x, w):
    return gc.mean(gc.relu(x @ w) * 1.0 + 0.0)
"""


@pytest.fixture
def model(tmp_path: Path) -> str:
    source = tmp_path / "model.py"
    source.write_text(MODEL)
    return f"{source}:f"


@pytest.mark.parametrize("wrt", [["--wrt", "x,w"], ["--wrt", "x", "--wrt", "w"]])
def test_view_reads_wrt_as_render_does(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], wrt: list[str]
) -> None:
    out = tmp_path / "f.html"
    argv = ["view", model, "--spec", "B,3", "--spec", "3,2", "--backward", *wrt, "-o", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    joint = page_data(out)["views"][1]
    grads = {n["n"] for n in joint["nodes"] if "g" in n and n["k"] == "output"}
    assert grads == {"grad_x", "grad_w"}


def test_view_names_a_wrong_wrt_as_render_does(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = ["--spec", "B,3", "--spec", "3,2"]
    for command, out in (("view", "f.html"), ("render", "f.dot")):
        argv = [command, model, *specs, "--backward", "--wrt", "x,v", "-o", str(tmp_path / out)]
        assert main(argv) == 2
        assert "--wrt v: 'f' has no input named 'v'; its floating-point inputs are x, w" in (
            capsys.readouterr().err
        )
    assert not list(tmp_path.glob("f.*"))


def test_render_checks_its_options_before_drawing(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "f.dot"
    assert (
        main(["render", model, "--spec", "B,3", "--spec", "3,2", "--passes", "-o", str(out)]) == 2
    )
    assert "--passes needs --opt-level N" in capsys.readouterr().err
    assert not out.exists()  # the main picture was written before the refusal


def test_render_says_when_no_pass_changed_the_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.dot"
    argv = ["render", f"{EXAMPLE}:f", "--spec", "B,3", "--spec", "B,3", "-o", str(out)]
    assert main([*argv, "--opt-level", "2", "--passes"]) == 0
    printed = capsys.readouterr().out
    assert "no pass changed the graph at O2: no per-pass pictures" in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.dot"]


def test_a_spec_with_an_empty_dim_is_refused() -> None:
    for text in ("3,,4", "B,3,", ",3"):
        with pytest.raises(gc.GraphcError, match=f"--spec '{text}': an empty dim"):
            parse_spec(text)
    assert parse_spec(" B , 3 ").shape == ("B", 3) and parse_spec(":f64").shape == ()


def test_specs_for_a_saved_graph_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "g.json"
    gc.save(gc.trace(lambda x: gc.tanh(x), gc.TensorSpec(("B", 3))), saved)
    assert main(["render", str(saved), "--spec", "B,3", "-o", str(tmp_path / "g.dot")]) == 2
    assert "--spec is for tracing a function" in capsys.readouterr().err


def test_without_dot_the_hint_renders_the_format_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "have_dot", lambda: False)
    g = gc.trace(lambda x: gc.tanh(x), gc.TensorSpec((3,)))
    for suffix in ("png", "pdf", "svg"):
        asked = tmp_path / f"pic.{suffix}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", gc.viz.DotMissingWarning)
            written = gc.viz.render(g, asked)
        assert written == tmp_path / "pic.dot" and written.exists()
        [warning] = [str(w.message) for w in caught]
        assert f"`dot -T{suffix} {written} -o {asked}`" in warning


def test_a_missing_file_or_spec_says_what_to_give(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.json"
    for command in ("render", "inspect"):
        out = ["-o", str(tmp_path / "g.dot")] if command == "render" else []
        assert main([command, str(missing), *out]) == 2
        assert f"no such file: {missing}" in capsys.readouterr().err
        assert main([command, model, *out]) == 2  # f(x, w) traced without a --spec
        assert "give one --spec per argument" in capsys.readouterr().err
        assert main([command, str(tmp_path / "weights.bin"), *out]) == 2
        assert "GRAPH.json or a MODEL.onnx" in capsys.readouterr().err
