"""Each example runs at a small size, and eager and static training agree (1e-5 rel)."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import graphc as gc
from tests.budget import full

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def script_env() -> dict[str, str]:
    """The environment to run an example as a script in: this checkout's graphc first,
    whether or not it is the one installed."""
    paths = [str(EXAMPLES.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses (run_guide's) look their module up there while it runs; then it goes,
    # so that dask pickles the example's functions by value for its workers
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
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


def test_linear_regression_modes_reach_the_same_parameters(tmp_path: Path, capsys) -> None:
    argv = ["--samples", "60", "--steps", "80", "--out", str(tmp_path)]
    result = load("linear_regression").main(argv)
    eager, static = result["eager"]["params"], result["static"]["params"]
    assert sorted(eager) == ["bias", "weight"]
    for name in eager:
        np.testing.assert_allclose(static[name], eager[name], rtol=1e-5)
    np.testing.assert_allclose(result["static"]["losses"], result["eager"]["losses"], rtol=1e-5)
    assert eager["weight"] == pytest.approx(2.0, abs=0.2)  # it learned y = 2x + 3
    assert eager["bias"] == pytest.approx(3.0, abs=0.2)
    assert "largest relative difference" in capsys.readouterr().out
    # both loss curves, one row per step, under --out
    assert result["losses_csv"] == tmp_path / "losses.csv"
    curves = np.loadtxt(result["losses_csv"], delimiter=",", skiprows=1)
    assert curves.shape == (80, 2)
    np.testing.assert_allclose(curves[:, 0], result["eager"]["losses"], rtol=1e-12)
    np.testing.assert_allclose(curves[:, 1], result["static"]["losses"], rtol=1e-12)


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


@pytest.mark.slow  # long: the quick run leaves it to --rest
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


@pytest.mark.slow  # long: the quick run leaves it to --rest
@pytest.mark.reads_budget
def test_reverse_transformer_learns_in_both_modes_to_the_same_parameters(tmp_path: Path) -> None:
    # 150 steps in the quick run (every string reversed when measured), 250 with --full
    steps = 250 if full() else 150
    result = load("reverse_transformer").main(["--steps", str(steps), "--out", str(tmp_path)])
    for mode in ("eager", "static"):
        assert result[mode]["string_accuracy"] >= 0.95
    assert result["max_rel_diff"] < 1e-8
    assert result["static"]["losses"] == pytest.approx(result["eager"]["losses"], rel=1e-9)
    assert np.loadtxt(tmp_path / "losses.csv", delimiter=",", skiprows=1).shape == (steps, 2)


def test_a_training_example_whose_modes_disagree_exits_with_an_error(
    tmp_path: Path, monkeypatch
) -> None:
    # a static step gone wrong, as a user meets it: it takes every SGD step twice
    compile_train_step = gc.compile_train_step

    class TwiceStep:
        def __init__(self, step: Any) -> None:
            self.step = step

        def __call__(self, *batch: Any) -> Any:
            self.step(*batch)
            return self.step(*batch)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.step, name)

    monkeypatch.setattr(
        gc, "compile_train_step", lambda *a, **k: TwiceStep(compile_train_step(*a, **k))
    )
    argv = ["--samples", "20", "--steps", "5", "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match="eager and static training disagree") as info:
        load("linear_regression").main(argv)
    assert "GRAPHC_BACKEND=numpy" in str(info.value.code)


def test_every_example_option_that_takes_a_value_shows_its_default(capsys) -> None:
    # a new user read `--epochs EPOCHS` and had to open the file for the default
    checked = 0
    for path in sorted(EXAMPLES.glob("*.py")):
        with pytest.raises(SystemExit):
            load(path.stem).main(["--help"])
        options = capsys.readouterr().out.split("options:", 1)[1]
        entries = re.split(r"\n(?=  -)", options)
        for entry in entries:
            taking = re.match(r"\s*(--[\w-]+) [A-Z_{]", entry)
            if taking is None or taking.group(1) == "--out":  # --out names its folder
                continue
            assert "(default:" in entry, f"{path.name}: {entry.strip()}"
            checked += 1
    assert checked >= 30


def test_digits_progress_bar_is_drawn_only_on_a_terminal(monkeypatch) -> None:
    pytest.importorskip("tqdm")
    example = load("digits_mlp")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    bar = example.progress(10, "eager", enabled=True)
    assert type(bar).__module__.startswith("tqdm")
    bar.close()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log or a pipe: plain lines
    assert isinstance(example.progress(10, "eager", enabled=True), example.PlainProgress)


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
        ["linear_regression.py", "--samples", "20", "--steps", "5", "--out", str(tmp_path)],
    ):
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=script_env(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "static" in done.stdout


def test_tutorial_graph_writes_the_docs_pictures_only_with_update_docs(
    tmp_path: Path, monkeypatch
) -> None:
    example = load("tutorial_graph")
    docs = tmp_path / "docs_img"
    monkeypatch.setattr(example, "PICTURES", docs)
    assert example.main(["--out", str(tmp_path / "out")]) == tmp_path / "out"
    assert not docs.exists()
    assert example.main(["--out", str(tmp_path / "out"), "--update-docs"]) == docs
    suffix = ".svg" if gc.viz.have_dot() else ".dot"
    names = {p.name for p in docs.iterdir()}
    assert names == {f"tutorial-forward{suffix}", f"tutorial-backward{suffix}"}


def test_tutorial_graph_without_dot_says_so_once(tmp_path: Path, monkeypatch, capsys) -> None:
    # each of its two `graphc render` calls printed the whole install hint
    from graphc.viz import files

    monkeypatch.setattr(gc.viz, "have_dot", lambda: False)
    monkeypatch.setattr(files, "have_dot", lambda: False)
    load("tutorial_graph").main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.count("`dot` program is not installed") == 1, out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tutorial-backward.dot",
        "tutorial-forward.dot",
    ]


GUIDE = """# a guide

```python
open("guide-one.svg", "w").write("<svg/>")
print("new output")
```

```text
old output
```
"""


def test_run_guide_rewrites_docs_only_with_update_docs(tmp_path: Path, monkeypatch) -> None:
    example = load("run_guide")
    guide, docs, out = tmp_path / "guide.md", tmp_path / "docs_img", tmp_path / "out"
    guide.write_text(GUIDE)
    docs.mkdir()
    monkeypatch.setattr(example, "GUIDE", guide)
    monkeypatch.setattr(example, "PICTURES", docs)
    monkeypatch.setattr(example, "ROOT", tmp_path)
    example.main(["--out", str(out)])
    assert (out / "guide-one.svg").read_text() == "<svg/>"  # the blocks ran in --out
    assert guide.read_text() == GUIDE and not any(docs.iterdir())
    example.main(["--out", str(out), "--update-docs"])
    assert (docs / "guide-one.svg").read_text() == "<svg/>"
    assert "new output" in guide.read_text() and "old output" not in guide.read_text()
