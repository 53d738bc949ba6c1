"""The import rules of docs/layout.md, read from the source: imports point downwards.

Every `import graphc.<folder>...` or `from graphc.<folder> import ...` in a module of one
folder must name a folder that folder may use (lazy imports inside functions count:
they are dependencies all the same). `import graphc` itself (the whole public API) is
for the applications at the top only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "graphc"

# folder -> the folders its modules may import (besides itself); the order of layers
MAY_IMPORT: dict[str, set[str]] = {
    "ir": set(),
    "ops": {"ir"},
    "passes": {"ir", "ops"},
    "runtime": {"ir", "ops", "passes"},
    "backends": {"ir", "ops", "passes", "runtime"},
    "eager": {"ir", "ops"},
    "frontend": {"ir", "ops", "passes", "runtime"},
    "nn": {"ir", "ops", "eager"},
    "optim": {"ir", "ops", "passes", "runtime", "frontend", "eager", "nn"},
    "onnx": {"ir", "ops", "runtime"},  # runtime: InferenceSession compiles the model
    "viz": {"ir", "frontend"},
    "distributed": {"ir", "ops", "passes", "runtime", "optim"},
    "random": {"ir", "ops"},  # gc.random: jax.random's functions over the random ops
}
# modules at the top, which may import anything, `import graphc` included
APPLICATIONS = {"__init__", "cli", "demo", "inspection", "bench", "viz/command.py"}
# lower modules that import the whole of graphc late, each with its reason (none yet)
LATE_WHOLE: dict[str, str] = {}


def _folder(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imports(path: Path) -> set[str]:
    """The graphc modules `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "graphc"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "graphc":  # from graphc import ops: the submodules named
                found |= {f"graphc.{a.name}" for a in node.names}
            elif node.module.startswith("graphc."):
                found.add(node.module)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_imports_point_downwards(path: Path) -> None:
    folder, name = _folder(path), _relative(path)
    if folder in APPLICATIONS or name in APPLICATIONS:
        return
    assert folder in MAY_IMPORT, f"{folder}/ is not in the layer table: add it"
    for module in _imports(path):
        parts = module.split(".")
        if len(parts) == 1:
            assert name in LATE_WHOLE, f"{name} imports the whole of graphc"
            continue
        target = parts[1]
        if target == folder:
            continue
        assert target in MAY_IMPORT[folder], f"{name} imports {module}: {folder}/ may not"


def test_the_table_knows_every_folder_and_reasons_are_still_needed() -> None:
    folders = {_folder(p) for p in MODULES} - APPLICATIONS
    assert folders == set(MAY_IMPORT)
    for name in LATE_WHOLE:
        assert "graphc" in _imports(PACKAGE / name), f"{name} no longer needs its exception"


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    upward = tmp_path / "bad.py"
    upward.write_text("def f():\n    from graphc.runtime import plan\n    import graphc\n")
    assert _imports(upward) == {"graphc.runtime", "graphc"}
    assert "runtime" not in MAY_IMPORT["ops"]
