"""Central differences: the numerical gradient the gradient tests check against (float64)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def numeric_grad(
    f: Callable[..., Any], xs: Sequence[np.ndarray], i: int, eps: float = 1e-6
) -> np.ndarray:
    """d f / d xs[i] of a scalar function of the arrays `xs`, by central differences."""
    grad = np.zeros(np.shape(xs[i]))
    for position in np.ndindex(*grad.shape):
        sides = []
        for step in (eps, -eps):
            moved = [np.array(x, copy=True) for x in xs]
            moved[i][position] += step
            sides.append(float(np.asarray(f(*moved))))
        grad[position] = (sides[0] - sides[1]) / (2 * eps)
    return grad
