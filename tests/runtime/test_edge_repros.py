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
