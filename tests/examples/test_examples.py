"""Each example runs at a small size, and eager and static training agree (1e-5 rel)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import graphc as gc
from tests.budget import full

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_comp_graph_gradients_agree_and_pictures_are_written(tmp_path: Path, capsys) -> None:
    x, w = 2.0, 1.0
    result = load("comp_graph").main(["--x", str(x), "--w", str(w), "--out", str(tmp_path)])
    # y = (x + w)(w + 1): dy/dx = w + 1, dy/dw = (w + 1) + (x + w)
    expected = {"y": (x + w) * (w + 1), "dy/dx": w + 1, "dy/dw": (w + 1) + (x + w)}
    assert result["eager"] == pytest.approx(expected)
    assert result["static"] == pytest.approx(expected)
    suffix = ".svg" if gc.viz.have_dot() else ".dot"
    names = ["eager_tape", "static_forward", "static_gradients", "static_forward_backward"]
    assert [p.name for p in result["files"]] == [n + suffix for n in names]
    assert all(p.stat().st_size > 0 for p in result["files"])
    out = capsys.readouterr().out
    assert "MulBackward0" in out and "output %grad_w" in out


def test_comp_graph_without_dot_writes_dot_sources(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(gc.viz, "have_dot", lambda: False)
    result = load("comp_graph").main(["--out", str(tmp_path)])
    assert [p.suffix for p in result["files"]] == [".dot"] * 4
    assert result["files"][0].read_text().startswith("digraph")


def test_linear_regression_modes_reach_the_same_parameters(capsys) -> None:
    result = load("linear_regression").main(["--samples", "60", "--steps", "80"])
    eager, static = result["eager"]["params"], result["static"]["params"]
    assert sorted(eager) == ["bias", "weight"]
    for name in eager:
        np.testing.assert_allclose(static[name], eager[name], rtol=1e-5)
    np.testing.assert_allclose(result["static"]["losses"], result["eager"]["losses"], rtol=1e-5)
    assert eager["weight"] == pytest.approx(2.0, abs=0.2)  # it learned y = 2x + 3
    assert eager["bias"] == pytest.approx(3.0, abs=0.2)
    assert "largest relative difference" in capsys.readouterr().out


def test_digits_mlp_reaches_95_percent_in_both_modes_with_the_same_parameters(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sklearn")
    argv = ["--epochs", "5", "--out", str(tmp_path), "--no-progress"]
    result = load("digits_mlp").main(argv)
    for mode in ("eager", "static"):
        assert result[mode]["test_accuracy"] >= 0.95
    eager, static = result["eager"]["state"], result["static"]["state"]
    assert list(eager) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for name in eager:
        np.testing.assert_allclose(static[name], eager[name], rtol=1e-5, atol=1e-12)
    assert result["static"]["test_accuracy"] == result["eager"]["test_accuracy"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert result["plot"] == tmp_path / "digits_loss.png" and result["plot"].stat().st_size
    else:
        assert result["plot"] is None


@pytest.mark.reads_budget
def test_digits_cnn_reaches_97_percent_in_both_modes_with_the_same_parameters(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sklearn")
    # the example's 15 epochs with --full; 2 in the quick run (84% when measured)
    epochs, least = (15, 0.97) if full() else (2, 0.8)
    argv = ["--epochs", str(epochs), "--out", str(tmp_path), "--no-progress"]
    result = load("digits_cnn").main(argv)
    for mode in ("eager", "static"):
        assert result[mode]["test_accuracy"] >= least
    eager, static = result["eager"]["state"], result["static"]["state"]
    assert list(eager) == ["0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias"]
    for name in eager:
        np.testing.assert_allclose(static[name], eager[name], rtol=1e-5, atol=1e-12)
    names = [p.name for p in result["files"]]
    if gc.viz.have_dot():
        assert names == ["cnn_forward.svg", "cnn_gradients.svg", "cnn_gradients_O2.svg"]
    else:
        assert names == []


@pytest.mark.reads_budget
def test_reverse_transformer_learns_in_both_modes_to_the_same_parameters() -> None:
    # 150 steps in the quick run (every string reversed when measured), 250 with --full
    result = load("reverse_transformer").main(["--steps", "250" if full() else "150"])
    for mode in ("eager", "static"):
        assert result[mode]["string_accuracy"] >= 0.95
    assert result["max_rel_diff"] < 1e-8
    assert result["static"]["losses"] == pytest.approx(result["eager"]["losses"], rel=1e-9)


def test_digits_mlp_without_sklearn_says_how_to_install_it(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)  # makes `import sklearn...` fail
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(SystemExit) as exit_info:
        load("digits_mlp").main(["--epochs", "1"])
    assert exit_info.value.code != 0
    assert "pip install scikit-learn" in capsys.readouterr().err


def test_examples_run_as_scripts(tmp_path: Path) -> None:
    for argv in (
        ["comp_graph.py", "--no-render"],
        ["linear_regression.py", "--samples", "20", "--steps", "5"],
    ):
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "static" in done.stdout
