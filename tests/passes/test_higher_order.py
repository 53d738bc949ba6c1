"""Gradients of gradient graphs: gc.gradients applied to its own result."""

from __future__ import annotations

import numpy as np

import graphc as gc


def central_difference(f, x: float, h: float = 1e-5) -> float:  # type: ignore[no-untyped-def]
    return (f(x + h) - f(x - h)) / (2 * h)


def test_second_and_third_derivatives_match_finite_differences() -> None:
    g = gc.trace(lambda x: gc.sin(x) * x**3, gc.TensorSpec((), "float64"))
    d1 = gc.gradients(g, wrt=["x"])
    d2 = gc.gradients(d1, wrt=["x"], outputs=["grad_x"])  # a second constant "seed"
    d3 = gc.gradients(d2, wrt=["x"], outputs=[d2.outputs[-1].name])
    assert [o.name for o in d3.outputs] == ["out", "grad_x", "grad_x_1", "grad_x_2"]

    x0 = 0.7
    first = lambda x: float(d1(np.float64(x))[1])  # noqa: E731
    second = lambda x: float(d2(np.float64(x))[2])  # noqa: E731
    values = gc.compile(d3)(np.float64(x0))
    np.testing.assert_allclose(values[2], central_difference(first, x0), rtol=1e-7)
    np.testing.assert_allclose(values[3], central_difference(second, x0), rtol=1e-7)
