"""`graphc inspect` and `graphc render` read ONNX models (.onnx) as well."""

from __future__ import annotations

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

import graphc as gc  # noqa: E402
from graphc.cli import main  # noqa: E402
from tests.viz.dotsource import parse_dot  # noqa: E402


def _model(tmp_path: Path) -> Path:
    def f(x: object, w: object) -> object:
        return gc.cond(gc.sum(x) > 0, lambda v: gc.tanh(v @ w), lambda v: v @ w * 2.0, x)

    g = gc.trace(f, gc.TensorSpec(("B", 3)), gc.TensorSpec((3, 2)))
    path = tmp_path / "m.onnx"
    gc.onnx.export_model(g, path)
    return path


def test_inspect_an_onnx_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(_model(tmp_path)), "--opt-level", "2"]) == 0
    out = capsys.readouterr().out
    assert "graph f(%x: f32[B,3], %w: f32[3,2])" in out and "cond(" in out
    assert "== optimization (O2) ==" in out


def test_render_an_onnx_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.dot"
    assert main(["render", str(_model(tmp_path)), "-o", str(out)]) == 0
    dot = parse_dot(out.read_text())
    assert {"x", "w"} <= set(dot.nodes) and any("cond" in c for c in dot.clusters)


def test_a_missing_model_is_a_named_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(tmp_path / "none.onnx")]) == 2
    assert "no such file" in capsys.readouterr().err
