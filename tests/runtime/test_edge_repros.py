"""Minimal repros of mismatches the hostile random graphs found (tests/edge_graphs.py).

Each is the smallest graph hypothesis shrank to, written out by hand. A repro marked
xfail is a bug not fixed yet, whose feature the generators leave out meanwhile (see
the `# excluded until` comments there); when it passes, drop the mark and the
exclusion.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from tests.differential import check_levels


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_empty_symbolic_reduction_raises_a_graphc_error_everywhere(op: str) -> None:
    # gc.run let numpy's ValueError out where the plans raised ShapeError
    g = gc.Graph("repro")
    with g:
        x = gc.placeholder("x", shape=("B",), dtype="float32")
        gc.output(getattr(gc, op)(x, axis=0), name="y")
    check_levels(g, [{"x": np.zeros(0, np.float32)}, {"x": np.ones(2, np.float32)}])


@pytest.mark.parametrize("level", [0, 2])
@pytest.mark.parametrize("op", ["max", "argmin"])
def test_empty_symbolic_reduction_raises_the_eager_error_class(op: str, level: int) -> None:
    # the plans wrapped the type rule's IndexRangeError in a plain ShapeError, so a
    # PyTorch user's `except IndexError` (torch.max of an empty dim raises one) caught
    # the eager and reference errors but not the compiled one
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError):
        getattr(torch, op)(torch.zeros(0), dim=0)
    g = gc.Graph("repro")
    with g:
        x = gc.placeholder("x", shape=("B",), dtype="float32")
        gc.output(getattr(gc, op)(x, axis=0), name="y")
    empty = np.zeros(0, np.float32)
    with pytest.raises(gc.IndexRangeError):
        getattr(gc, op)(empty, axis=0)
    with pytest.raises(gc.IndexRangeError):
        gc.run(g, {"x": empty})
    with pytest.raises(gc.IndexRangeError) as caught:
        gc.compile(g, opt_level=level)(x=empty)
    assert caught.value.node == g.outputs[0].inputs[0].name
    assert "B=0" in str(caught.value)
