"""The `graphc` command, and the README's promise about it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import graphc as gc
from graphc.cli import EXIT_BROKEN_PIPE, main

ROOT = Path(__file__).resolve().parent.parent


def test_demo_tours_the_pipeline(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "-o", str(tmp_path)]) == 0  # -o as render and view take it
    out = capsys.readouterr().out
    assert "graph affine(%x: f32[B,3], %w: f32[3,2]) {" in out
    assert "output %loss = %mean" in out
    assert "output %grad_w" in out  # the gradient graph, optimized
    assert "optimization at O2" in out  # the pass report
    assert "loss and dw agree with the reference interpreter (gc.run, op by op): True" in out
    assert "peak bytes of intermediates" in out  # the plan
    assert "eager : y = 6   dy/dw = 5   dy/dx = 2" in out
    assert "static: y = 6   dy/dw = 5   dy/dx = 2" in out
    assert (tmp_path / "affine-forward.svg").exists() or (tmp_path / "affine-forward.dot").exists()


def test_demo_counts_as_its_pass_report_and_plan_do(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a new user compared "19 ops ... 16 ops" with the report's "23 -> 20 nodes", and the
    # fusion step's 8 steps with the plan's 6, and found no word on either
    assert main(["demo", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    said = re.search(r"(\d+) nodes as differentiated .*\n(\d+) nodes after the O2 passes", out)
    report = re.search(r"optimization at O2 .*: (\d+) -> (\d+) nodes", out)
    assert said is not None and report is not None
    assert said.groups() == report.groups()
    fused_steps = re.search(r"(\d+) steps: (.*) \(a fused node", out)
    plan = out.split("steps:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert fused_steps is not None and "count" in fused_steps.group(2)
    assert not any("count(" in line for line in plan)  # B = 4 is known: count folded
    assert int(fused_steps.group(1)) > len(plan)
    assert "with B known, `count`" in out


def test_help_shows_first_steps_and_the_benchmark_workloads(capsys) -> None:  # type: ignore[no-untyped-def]
    from graphc.bench.runner import ON_REQUEST, WORKLOADS

    with pytest.raises(SystemExit):
        main(["--help"])
    first_steps = capsys.readouterr().out.split("first steps:", 1)[1]
    for command in ("graphc demo", "graphc inspect model.onnx", "graphc bench --quick"):
        assert command in first_steps
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    only = " ".join(capsys.readouterr().out.split("--only WORKLOAD", 1)[1].split())
    for workload in (*WORKLOADS, *ON_REQUEST):  # --only's names, without a failed run first
        assert re.search(rf"(^| ){re.escape(workload.name)}[ ,(]", only), workload.name


def test_console_entry_point_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run(
        [sys.executable, "-m", "graphc.cli", "demo", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "loss =" in result.stdout


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^    (pip install .*)$", readme, flags=re.MULTILINE)
    assert len(commands) >= 2, "README must open with the demo and the test commands"
    demo_command, test_command = commands[0], commands[1]
    assert demo_command.endswith("graphc demo")
    assert "pytest" in test_command
    # .ci/run runs the command's steps in its order, the last (the quick run) beside
    # `--rest` and the matrix: each step is the start of one of its lines, in order (a
    # line of its own, so that a failing linter fails CI: inside an `a && b` list it
    # does not stop a `set -e` script)
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    *setup, tests = test_command.split(" && ")
    assert tests == "python -m pytest"
    at = 0
    for step in setup:
        found = [k for k, line in enumerate(ci_lines[at:], at) if line.startswith(step)]
        assert found, f".ci/run has no line of its own for {step!r} after line {at}"
        at = found[0] + 1
        assert " && " not in ci_lines[found[0]], f"{step!r} shares a line: {ci_lines[found[0]]}"
    after = ci_lines[at:]
    assert any(line.startswith(f"{tests} >") for line in after), "the quick run, as is"


# -- what a new user tried (the first bug hunt) --------------------------------------------

MODEL = """
import graphc as gc

def f(x, w):
    return gc.mean(gc.relu(x @ w) * 1.0)
"""


def test_version_is_the_package_version(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"graphc {gc.__version__}"


def test_a_reader_gone_ends_the_command_quietly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`graphc demo | head -1`: no BrokenPipeError traceback, the status a Unix tool
    killed by SIGPIPE shows (the reader here is gone before the first write)."""
    command = [sys.executable, "-m", "graphc.cli", "demo", "--out", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait() == EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_inspect_refuses_what_render_refuses(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "model.py"
    module.write_text(MODEL)
    target = f"{module}:f"
    specs = ["--spec", "B,3", "--spec", "3,2"]
    assert main(["inspect", target, *specs, "--fuse", "native"]) == 2
    assert "--fuse needs --opt-level N" in capsys.readouterr().err
    assert main(["inspect", target, "--spec", "3,,4", "--spec", "3,2"]) == 2
    assert "--spec '3,,4': an empty dim" in capsys.readouterr().err
    saved = tmp_path / "f.json"
    gc.save(gc.trace(lambda x: gc.tanh(x), gc.TensorSpec(("B", 3))), saved)
    assert main(["inspect", str(saved), "--spec", "B,3"]) == 2
    assert f"--spec is for tracing a function; {saved}" in capsys.readouterr().err
    # and without the mistakes: --opt-level 2 is still the level when none is given
    assert main(["inspect", target, *specs]) == 0
    assert "== optimization (O2) ==" in capsys.readouterr().out
    assert main(["inspect", target, *specs, "--opt-level", "1", "--fuse", "numpy"]) == 0
    assert "== optimization (O1) ==" in capsys.readouterr().out


def test_bench_only_prints_the_goals_of_what_it_ran(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """`graphc bench --only tiny` printed a "not measured" row for every goal of the
    workloads it skipped; a full run keeps every row."""
    from graphc import bench
    from graphc.bench.goals import Goal

    goals = [Goal("tiny: ran", "1 us", True), Goal("gelu: skipped", "not measured", None)]
    monkeypatch.setattr(bench, "run", lambda **_: {"workloads": {}})
    monkeypatch.setattr(bench, "markdown", lambda report: "# graphc bench\n")
    monkeypatch.setattr(bench.goals, "evaluate", lambda report: list(goals))
    assert main(["bench", "--only", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "| tiny: ran | 1 us | met |" in out and "gelu: skipped" not in out
    assert "1 not measured are left out" in out
    assert main(["bench"]) == 0
    assert "| gelu: skipped | not measured | not measured |" in capsys.readouterr().out
