"""verify: every symbolic dim of a graph gets its size from a placeholder."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def test_a_symbol_no_placeholder_has_is_a_verify_error() -> None:
    # gc.zeros(("C", 6)) in a graph fed only B: verify passed, gc.run and calls were a
    # bare TypeError ('<' between str and int), gc.compile a ShapeError after binding
    g = gc.Graph("free")
    with g:
        x = gc.placeholder("x", shape=("B", 6))
        gc.output(x * 2, name="y")
        gc.output(gc.zeros(("C", 6)), name="z")
    message = "no placeholder of graph 'free' has the symbolic dim 'C'"
    xv = np.ones((2, 6), np.float32)
    for check in (gc.verify, lambda g: g(xv), lambda g: gc.run(g, {"x": xv}), gc.compile):
        with pytest.raises(gc.VerifyError, match=message):
            check(g)


def test_symbols_of_placeholders_pass() -> None:
    g = gc.Graph("bound")
    with g:
        x = gc.placeholder("x", shape=("B", 6))
        gc.output(x + gc.zeros(("B", 6)), name="y")
    gc.verify(g)
    xv = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(gc.compile(g)(xv), xv)
