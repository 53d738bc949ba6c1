"""Every example in graphc's docstrings runs and prints what it shows (doctest, module
by module; a module whose optional dependency is missing is skipped, naming it)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re

import pytest

import graphc

MODULES = sorted(m.name for m in pkgutil.walk_packages(graphc.__path__, "graphc."))
_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.MULTILINE)


def _missing_import(module: object) -> str | None:
    """The first top-level module an example of `module` imports that is not installed
    (a module importable without its optional extra may show examples that need it)."""
    for test in doctest.DocTestFinder().find(module):
        for example in test.examples:
            for top in _IMPORT.findall(example.source):
                if top != "graphc" and importlib.util.find_spec(top) is None:
                    return top
    return None


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHC_BACKEND", "numpy")  # examples print numpy's bits
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (onnx, dask, cffi) not installed
        if (exc.name or "graphc").split(".")[0] == "graphc":
            raise  # graphc's own import broke
        pytest.skip(f"{name} needs {exc.name}")
    missing = _missing_import(module)
    if missing is not None:
        pytest.skip(f"the examples of {name} need {missing}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (printed above)"


def test_the_examples_are_found() -> None:
    """Guards the walk: the modules above hold examples (a broken walk would find none)."""
    tried = sum(
        doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS).attempted
        for name in ("graphc.passes.pipeline", "graphc.runtime.executable")
    )
    assert tried >= 6


def test_an_example_needing_a_missing_extra_is_found() -> None:
    """Guards the skip: an example importing what is not installed is named, one
    importing only what is installed is not (the oldest-numpy CI leg has no onnx)."""
    import types

    needs = types.ModuleType("needs", ">>> import graphc_no_such_extra_xyz\n")
    plain = types.ModuleType("plain", ">>> import math\n>>> from graphc import ops\n")
    assert _missing_import(needs) == "graphc_no_such_extra_xyz"
    assert _missing_import(plain) is None
