"""JAX users' programs for the function transformations (vmap, jvp, linearize, vjp,
jacobians), run side by side in graphc and in jax: values, dtypes, shapes and result
structures agree. Each case here was a difference once; the message of its commit says
which. jax runs in float32 (its default), as these cases are about dtypes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc

X = np.array([0.5, 1.0, 2.0], np.float32)


def assert_same(got: Any, want: Any) -> None:
    """The same structure, and leaves of the same shape, dtype and values."""
    got_leaves, got_tree = gc.tree_flatten(got)
    want_leaves = gc.tree_leaves(gc.tree_map(np.asarray, want))
    assert len(got_leaves) == len(want_leaves), (got, want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (g, w)
        np.testing.assert_allclose(g, w, rtol=1e-6)


# -- a Python int among the primals stays weakly typed -----------------------------------

# (name, call(transforms, zero)): `x * 2` of a float32 x is float32 in jax and in graphc
# outside a transformation; a Python int among jvp's, vjp's or linearize's primals became
# an int64 placeholder, so the results were float64. `zero` is an integer primal's tangent
# (jax's float0 zeros; graphc takes any number and ignores it).
WEAK_INT_PRIMALS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("jvp", lambda t, zero: t.jvp(lambda x, n: x * n, (X, 2), (X, zero))),
    ("jvp_bool", lambda t, zero: t.jvp(lambda x, b: x * b, (X, True), (X, zero))),
    ("vjp", lambda t, zero: t.vjp(lambda x, n: x * n, X, 2)[0]),
    ("vjp_ct", lambda t, zero: t.vjp(lambda x, n: x * n, X, 2)[1](X)[0]),
    ("linearize", lambda t, zero: t.linearize(lambda x, n: x * n, X, 2)[0]),
    ("linearize_jvp", lambda t, zero: t.linearize(lambda x, n: x * n, X, 2)[1](X, zero)),
]


@pytest.mark.parametrize("name, call", WEAK_INT_PRIMALS, ids=[c[0] for c in WEAK_INT_PRIMALS])
def test_a_python_int_primal_keeps_float32_results(
    name: str, call: Callable[[Any, Any], Any]
) -> None:
    jax = pytest.importorskip("jax")
    assert_same(call(gc, 0), call(jax, np.zeros((), jax.dtypes.float0)))


def test_a_python_int_primal_inside_a_trace_keeps_float32() -> None:
    jax = pytest.importorskip("jax")

    def f(t: Any, x: Any, zero: Any) -> Any:
        return t.jvp(lambda x, n: x * n, (x, 3), (x, zero))

    got = gc.jit(lambda x: f(gc, x, 0))(X)
    assert_same(got, jax.jit(lambda x: f(jax, x, np.zeros((), jax.dtypes.float0)))(X))
