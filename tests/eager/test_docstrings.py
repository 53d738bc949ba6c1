"""The examples in graphc.eager's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "graphc.eager",
    "graphc.eager.autograd",
    "graphc.eager.composites",
    "graphc.eager.counting",
    "graphc.eager.creation",
    "graphc.eager.function",
    "graphc.eager.gradcheck",
    "graphc.eager.grad_mode",
    "graphc.eager.tensor",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
