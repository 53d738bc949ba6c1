"""Every example in graphc's docstrings runs and prints what it shows (doctest, module
by module; a module whose optional dependency is missing is skipped, naming it)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import graphc

MODULES = sorted(m.name for m in pkgutil.walk_packages(graphc.__path__, "graphc."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHC_BACKEND", "numpy")  # examples print numpy's bits
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (onnx, dask, cffi) not installed
        if (exc.name or "graphc").split(".")[0] == "graphc":
            raise  # graphc's own import broke
        pytest.skip(f"{name} needs {exc.name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (printed above)"


def test_the_examples_are_found() -> None:
    """Guards the walk: the modules above hold examples (a broken walk would find none)."""
    tried = sum(
        doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS).attempted
        for name in ("graphc.passes.pipeline", "graphc.runtime.executable")
    )
    assert tried >= 6
