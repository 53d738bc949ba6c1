"""A placeholder or argument named `self` (a hostile name, or a method's first argument
traced as a function) fed by keyword: the callables graphc returns take their own first
argument positionally only, so the name reaches the graph."""

from __future__ import annotations

import numpy as np

import graphc as gc


def test_jit_and_compile_take_self_by_keyword() -> None:
    f = gc.jit(lambda self, args: self * 2 + args)
    np.testing.assert_array_equal(f(self=np.ones(2), args=np.ones(2)), [3.0, 3.0])
    g = gc.Graph("selfish")
    with g:
        s = gc.placeholder("self", shape=(2,), dtype="float64")
        gc.output(s * 2, name="y")
    feeds = {"self": np.array([1.0, -2.0])}
    np.testing.assert_array_equal(gc.compile(g)(**feeds), [2.0, -4.0])
    np.testing.assert_array_equal(g(**feeds), [2.0, -4.0])
