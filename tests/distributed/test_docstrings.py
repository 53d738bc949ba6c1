"""The examples in graphc.distributed's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytest.importorskip("distributed")


@pytest.mark.parametrize(
    "name",
    [
        "graphc.distributed.mapping",
        "graphc.distributed.training",
        "graphc.distributed.split",
        "graphc.distributed.stages",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
