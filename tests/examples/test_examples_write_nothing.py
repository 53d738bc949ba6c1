"""Every example, at its smallest size, writes only under its --out folder: run from the
repository's root, it leaves `git status` as it found it, and prints no progress bar
into a log.

The examples run as scripts, as a user runs them, two at a time. The check compares
`git status --porcelain` before and after, so it holds in a tree with other changes
in progress. Code is left out of the comparison (Python files, and the graphc/ and
tests/ folders), which no example writes, so that someone editing code meanwhile in the
same tree does not fail it.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.examples.test_examples import EXAMPLES, load, script_env

ROOT = EXAMPLES.parent

# each example's smallest run, and the optional modules it needs
RUNS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "comp_graph": ([], ()),
    "tutorial_graph": ([], ()),
    "linear_regression": (["--samples", "20", "--steps", "5"], ()),
    "digits_mlp": (["--epochs", "1"], ("sklearn",)),
    "digits_cnn": (["--epochs", "1"], ("sklearn",)),
    "per_example_grads": (["--batch", "8", "--hidden", "8"], ("sklearn",)),
    "rnn": (["--steps", "3", "--batch", "2", "--inputs", "3", "--hidden", "4"], ()),
    "reverse_transformer": (["--steps", "2", "--batch-size", "8"], ()),
    "out_of_core": (["--rows", "2000", "--chunk", "1000", "--workers", "1"], ("distributed",)),
    "run_guide": ([], ()),
}
# those that write even without graphviz's `dot` or matplotlib (pictures as .dot files)
ALWAYS_WRITE = ("comp_graph", "tutorial_graph", "linear_regression", "reverse_transformer")


# what no example writes, and others may edit while the examples run
CODE = re.compile(r"(graphc/|tests/|.*\.py$)")


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def _in_a_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    return _git("rev-parse", "--is-inside-work-tree").stdout.strip() == "true"


needs_git = pytest.mark.skipif(not _in_a_checkout(), reason="not in a git checkout")


def _status() -> set[str]:
    """`git status --porcelain` lines, but for code (CODE)."""
    lines = _git("status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    return {line for line in lines if not CODE.match(line[3:])}


def test_every_example_has_a_smallest_run() -> None:
    assert set(RUNS) == {path.stem for path in EXAMPLES.glob("*.py")}


@needs_git
def test_the_default_out_folders_are_ignored_by_git() -> None:
    for name in RUNS:
        out = load(name).OUT
        assert out == ROOT / "out" / name, name
        assert _git("check-ignore", "-q", str(out / "a_file")).returncode == 0, name


@pytest.mark.slow  # long: the quick run leaves it to --rest
@needs_git
def test_examples_write_only_under_out_and_draw_no_bar_in_a_log(tmp_path: Path) -> None:
    runnable = {
        name: argv
        for name, (argv, needs) in RUNS.items()
        if all(importlib.util.find_spec(module) for module in needs)
    }
    env = script_env()

    def run(name: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(EXAMPLES / f"{name}.py"), *runnable[name]]
        argv += ["--out", str(tmp_path / name)]
        return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)

    before = _status()
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(zip(runnable, pool.map(run, runnable)))
    assert _status() ^ before == set()  # what the examples wrote, or removed, in the tree
    for name, finished in done.items():
        assert finished.returncode == 0, (name, finished.stderr[-2000:])
        assert "\r" not in finished.stdout + finished.stderr, name  # no bar redrawn in place
        if name in ALWAYS_WRITE:
            assert any((tmp_path / name).iterdir()), f"{name} wrote nothing under --out"
