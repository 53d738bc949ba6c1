"""graph_statistics and the `graphc inspect` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from graphc.cli import main
from graphc.passes.stats import graph_statistics

TEXT = """graph g(%x: f32[B,3], %w: f32[3,2]) {
  %c: f32[2] = constant(value=[1.0, 2.0])
  %m: f32[B,2] = matmul(%x, %w)
  %a: f32[B,2] = add(%m, %c)
  %t: f32[B,2] = tanh(%a)
  output %y = %t
}"""


def test_statistics_counts_ops_parameters_and_flops() -> None:
    stats = graph_statistics(gc.parse(TEXT), {"B": 5})
    assert stats.ops_by_name == {"constant": 1, "matmul": 1, "add": 1, "tanh": 1}
    assert stats.inputs[0][0] == "x" and stats.input_elements == 5 * 3 + 3 * 2
    assert stats.constant_elements == 2
    assert stats.flops == 2 * 5 * 2 * 3 + 5 * 2 + 5 * 2  # matmul, add, tanh
    assert stats.free_dims == ()
    unbound = graph_statistics(gc.parse(TEXT))
    assert unbound.free_dims == ("B",) and "FLOP estimate: 16 (with B = 1)" in str(unbound)


def test_inspect_a_json_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.json"
    gc.save(gc.parse(TEXT), path)
    assert main(["inspect", str(path), "--opt-level", "2", "--fuse", "numpy", "--optimized"]) == 0
    out = capsys.readouterr().out
    for heading in ("== graph ==", "== statistics ==", "== optimization (O2) =="):
        assert heading in out
    assert "matmul_epilogue" in out and "FLOP estimate" in out and "fuse_elementwise" in out


def test_inspect_a_traced_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "model.py"
    module.write_text("import graphc as gc\n\ndef f(x):\n    return gc.exp(x) * 1.0\n")
    assert main(["inspect", f"{module}:f", "--spec", "B,3", "--opt-level", "1"]) == 0
    out = capsys.readouterr().out
    assert "graph f(%x: f32[B,3])" in out and "mul(x, 1)" in out


def test_inspect_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing.json")]) == 2
    assert "graphc inspect:" in capsys.readouterr().err


def test_statistics_of_control_flow_count_their_bodies() -> None:
    cheap = gc.trace(lambda x: gc.cond(gc.sum(x) > 0, gc.tanh, gc.tanh, x), gc.TensorSpec(("T", 3)))
    dear = gc.trace(
        lambda x: gc.cond(gc.sum(x) > 0, gc.tanh, lambda v: gc.exp(gc.exp(v)), x),
        gc.TensorSpec(("T", 3)),
    )
    # the costlier branch counts: two exps instead of one tanh over 3T elements
    assert graph_statistics(dear, {"T": 4}).flops - graph_statistics(cheap, {"T": 4}).flops == 12
    loop = gc.trace(
        lambda xs: gc.scan(lambda c, r: (c * r + 1.0, None), np.float32(1.0), xs)[0],
        gc.TensorSpec(("T",)),
    )
    # T steps of a body of two scalar ops
    assert [graph_statistics(loop, {"T": t}).flops for t in (1, 5, 9)] == [2, 10, 18]


def test_input_elements_are_exact_in_a_symbolic_dim() -> None:
    g = gc.parse(
        """graph g(%x: f32[B,3], %w: f32[3,2]) {
  %m: f32[B,2] = matmul(%x, %w)
  output %y = %m
}"""
    )
    said = str(graph_statistics(g))
    assert "parameters (inputs): 2, 3*B + 6 elements" in said
    # found by the pictures hunt: a scan over T with a carry of 3 is 3T + 3, not "6 per
    # unit of T"
    scan = gc.trace(
        lambda xs, c0: gc.scan(lambda c, x: (c + x, c), c0, xs)[0],
        gc.TensorSpec(("T", 3)),
        gc.TensorSpec((3,)),
    )
    assert "parameters (inputs): 2, 3*T + 3 elements" in str(graph_statistics(scan))
    assert "parameters (inputs): 2, 36 elements\n" in str(graph_statistics(g, {"B": 10})) + "\n"


def test_inspect_shows_a_large_constant_by_count_and_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model's weights were printed whole, as base64 (screens of it for a 6 KB model,
    found by the first-hour hunt); inspect now shows such a constant by its count and
    range, small ones as before, and the graph's own text still reads back whole."""
    weight = np.linspace(-2.5, 3.0, 40, dtype=np.float32).reshape(8, 5)
    weight[0, 0] = np.nan
    g = gc.trace(lambda x: gc.tanh(x @ weight + np.float32(0.5)), gc.TensorSpec(("B", 8)))
    path = tmp_path / "g.json"
    gc.save(g, path)
    assert main(["inspect", str(path), "--optimized"]) == 0
    out = capsys.readouterr().out
    assert "b64" not in out
    assert out.count("<40 values in [-2.359, 3], some not finite>") == 2  # graph, optimized
    assert 'b64"' in str(g) and gc.parse(str(g)).nodes[1].value.tobytes() == weight.tobytes()
