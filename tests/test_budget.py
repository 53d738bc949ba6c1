"""The test budget (tests/budget.py) and `--rest`: the quick run and `--rest` together are
`--full`, and a test that does more under `--full` than in the quick run is run again
by `--rest` (it is a hypothesis test, or it is marked `reads_budget`)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.budget import FULL_ENV

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
READERS = {"full", "draws"}  # tests/budget.py's functions a test body may ask


def _budget_names(tree: ast.Module) -> set[str]:
    """`full`, `draws` and the module-level names computed from them."""
    names = set(READERS)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            called = {
                n.func.id
                for n in ast.walk(node.value)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            if called & READERS:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _reads(function: ast.FunctionDef, names: set[str]) -> bool:
    """Whether `function`'s body (not its decorators) calls `full` or `draws` or names a
    module-level value computed from them."""
    for stmt in function.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in READERS:
                return True
            if isinstance(n, ast.Name) and n.id in names - READERS:
                return True
    return False


def _marked(function: ast.FunctionDef) -> bool:
    return any("reads_budget" in ast.unparse(d) for d in function.decorator_list)


def _is_fixture(function: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in function.decorator_list)


def unmarked_budget_readers() -> list[str]:
    """Tests that ask the budget in their body, or through a fixture of their module,
    without the `reads_budget` mark."""
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        names = _budget_names(tree)
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        fixtures = {f.name for f in functions if _is_fixture(f) and _reads(f, names)}
        for f in functions:
            if not f.name.startswith("test_") or _marked(f):
                continue
            uses = {a.arg for a in f.args.args}
            if _reads(f, names) or uses & fixtures:
                found.append(f"{path.relative_to(ROOT)}::{f.name}")
    return found


def test_tests_that_read_the_budget_are_marked_for_rest() -> None:
    assert unmarked_budget_readers() == []


def test_the_scan_finds_an_unmarked_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "test_planted.py").write_text(
        "from tests.budget import full\n"
        "STEPS = 9 if full() else 2\n\n"
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def steps():\n    return STEPS\n\n"
        "def test_direct():\n    assert full() in (True, False)\n\n"
        "def test_through_fixture(steps):\n    assert steps\n\n"
        "@pytest.mark.reads_budget\n"
        "def test_marked():\n    assert full() in (True, False)\n\n"
        "@pytest.mark.parametrize('n', [STEPS])\n"
        "def test_in_decorator_only(n):\n    assert n\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "TESTS", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert unmarked_budget_readers() == [
        "test_planted.py::test_direct",
        "test_planted.py::test_through_fixture",
    ]


# a file of sampled cases and one of hypothesis tests
PATHS = ("tests/ir/test_canonical_attrs.py", "tests/ir/test_json.py")


def _collect(*flags: str) -> set[str]:
    """The ids a run with `flags` collects (pyproject's addopts give -q: one id a line)."""
    env = {k: v for k, v in os.environ.items() if k != FULL_ENV}
    command = [sys.executable, "-m", "pytest", "--collect-only", *flags, *PATHS]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return {line for line in done.stdout.splitlines() if "::" in line}


@pytest.mark.slow  # three pytest processes, each importing graphc (run by --rest, in CI)
def test_quick_and_rest_make_full_and_share_only_what_does_more() -> None:
    quick, rest, full = _collect(), _collect("--rest"), _collect("--full")
    assert quick and rest and quick < full
    assert quick | rest == full
    # run by both: test_json's hypothesis test, a tenth of its draws in the quick run
    assert quick & rest == {"tests/ir/test_json.py::test_random_graphs_round_trip"}


@pytest.mark.slow  # two pytest processes, each importing graphc
def test_two_shards_split_the_quick_run() -> None:
    first, second = _collect("--shard", "1/2"), _collect("--shard", "2/2")
    assert first and second and not first & second
    assert first | second == _collect()


def test_the_quick_sample_takes_the_first_case_or_what_a_quick_cases_mark_asks() -> None:
    """_sample_cases keeps each parametrized test's first case, or it and n - 1 more by
    hash for a test marked quick_cases(n); unparametrized tests stay."""
    from tests.conftest import QUICK_CASES, _sample_cases

    class Item:
        def __init__(self, nodeid: str, limit: int | None) -> None:
            self.nodeid = nodeid
            self.mark = None if limit is None else pytest.mark.quick_cases(limit).mark

        def get_closest_marker(self, name: str) -> object:
            return self.mark if name == "quick_cases" else None

    class Config:
        class hook:  # noqa: N801 - pytest's hook relay, as the sample calls it
            deselected: list = []

            @staticmethod
            def pytest_deselected(items: list) -> None:
                Config.hook.deselected += items

    items = [Item(f"t.py::plain[{k}]", None) for k in range(5)]
    items += [Item(f"t.py::wide[{k}]", 3) for k in range(5)]
    items += [Item("t.py::single", None)]
    _sample_cases(Config, items)  # type: ignore[arg-type]
    kept = [item.nodeid for item in items]
    assert [n for n in kept if n.startswith("t.py::plain[")] == ["t.py::plain[0]"]
    assert QUICK_CASES == 1 and "t.py::single" in kept
    wide = [n for n in kept if n.startswith("t.py::wide[")]
    assert len(wide) == 3 and wide[0] == "t.py::wide[0]"
    assert len(Config.hook.deselected) == 4 + 2
