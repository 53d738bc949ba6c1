"""The `graphc` command."""

from __future__ import annotations

import subprocess
import sys

from graphc.cli import main


def test_demo_prints_graph_and_result(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "graph affine(%x: f32[B,3], %w: f32[3,2]) {" in out
    assert "output %loss = %mean" in out
    assert "loss =" in out


def test_console_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "graphc.cli", "demo"], capture_output=True, text=True, check=True
    )
    assert "loss =" in result.stdout
