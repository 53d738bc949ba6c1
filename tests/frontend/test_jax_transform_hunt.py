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


# -- the functions vjp and linearize return, called on graph values -----------------------

# (name, call(transforms)): vjp and linearize at arrays returned functions that ran their
# compiled backward (linear) part on arrays only, so vmap(f_vjp) over a basis (the rows of
# a Jacobian, as jax users write it), jit(f_vjp) and grad through f_vjp raised a
# TracingError; the part is now replayed into the caller's graph, the residuals constants
BASIS = np.eye(3, dtype=np.float32)
FUNCTIONS_ON_GRAPH_VALUES: list[tuple[str, Callable[[Any], Any]]] = [
    ("vmap_vjp", lambda t: t.vmap(t.vjp(lambda x: t.sin(x) * x, X)[1])(BASIS)),
    ("vmap_linearize", lambda t: t.vmap(t.linearize(lambda x: t.sin(x) * x, X)[1])(BASIS)),
    (
        "jit_vjp_pytree",
        lambda t: t.jit(t.vjp(lambda a, b: {"o": a * b, "s": (a * a).sum()}, X, 2 * X)[1])(
            {"o": X, "s": np.float32(1.0)}
        ),
    ),
    ("grad_through_vjp", lambda t: t.grad(lambda c: (t.vjp(t.sin, X)[1](c)[0] ** 2).sum())(X)),
    (
        "jit_linearize_has_aux",
        lambda t: t.jit(t.linearize(lambda x: (x * x, x), X, has_aux=True)[1])(X),
    ),
]


@pytest.mark.parametrize(
    "name, call", FUNCTIONS_ON_GRAPH_VALUES, ids=[c[0] for c in FUNCTIONS_ON_GRAPH_VALUES]
)
def test_vjp_and_linearize_functions_take_graph_values(
    name: str, call: Callable[[Any], Any]
) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    class Jax:  # jax's transformations and the few jnp functions the cases use
        vmap, vjp, linearize, jit, grad = jax.vmap, jax.vjp, jax.linearize, jax.jit, jax.grad
        sin = staticmethod(jnp.sin)

    assert_same(call(gc), call(Jax))


def test_f_vjp_on_a_graph_value_checks_the_cotangent() -> None:
    _, f_vjp = gc.vjp(gc.sin, X)
    with pytest.raises(gc.ShapeError, match="cotangent for 'out' is f32\\[2\\].*f32\\[3\\]"):
        gc.jit(f_vjp)(X[:2])


# -- linearize through a while_loop ------------------------------------------------------


def test_linearize_through_a_while_loop_as_jax() -> None:
    """gc.linearize refused a while_loop on the differentiated path (its tangent loop
    computes the primal carries too, so there is no primal part to run once); jax's
    linear function reruns the loop, and graphc's now does as well."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def grow(t: Any, sin: Callable) -> Callable:
        def f(x: Any, a: Any) -> Any:  # each step multiplies by at least 1.5: it stops
            body = lambda c: (c[0] * (2.0 + a * sin(c[0])), c[1] + 1)  # noqa: E731
            return t.while_loop(lambda c: (c[0] * 1.0).sum() < 10.0, body, (x, 0))[0]

        return f

    primals = (X + 1.0, np.float32(0.5))
    got_y, got_f = gc.linearize(grow(gc, gc.sin), *primals)
    want_y, want_f = jax.linearize(grow(jax.lax, jnp.sin), *primals)
    assert_same(got_y, want_y)
    for tangents in [(X, np.float32(0.0)), (2 * X, np.float32(3.0))]:
        assert_same(got_f(*tangents), want_f(*tangents))
    basis = (BASIS, np.float32(0.0))
    assert_same(
        gc.vmap(got_f, in_axes=(0, None))(*basis), jax.vmap(want_f, in_axes=(0, None))(*basis)
    )


# -- JAX's float0 tangents -----------------------------------------------------------------

INTS = np.array([2, 0, 1], np.int32)


@pytest.mark.parametrize("where", ["arrays", "jit"])
def test_jvp_takes_jax_float0_tangents_for_integer_primals(where: str) -> None:
    """jax.jvp requires a float0 tangent for an integer primal; graphc ignores an integer
    primal's tangent, but refused a float0 one (an unsupported dtype, naming nothing)."""
    jax = pytest.importorskip("jax")
    zeros = np.zeros(3, jax.dtypes.float0)

    def f(x: Any, n: Any) -> Any:
        return x * (n > 0)  # float32 in both (x * n would follow numpy's promotion)

    want = jax.jvp(f, (X, INTS), (X, zeros))
    if where == "jit":
        got = gc.jit(lambda x, n: gc.jvp(f, (x, n), (x, zeros)))(X, INTS)
    else:
        got = gc.jvp(f, (X, INTS), (X, zeros))
    assert_same(got, want)
    scalar = np.zeros((), jax.dtypes.float0)
    assert_same(gc.jvp(f, (X, 1), (X, scalar)), jax.jvp(f, (X, 1), (X, scalar)))


def test_a_float0_tangent_for_a_float_primal_is_named() -> None:
    jax = pytest.importorskip("jax")
    with pytest.raises(gc.DTypeError, match="tangent of primal leaf 1 is float0.*float32"):
        gc.jvp(lambda n, x: x * n, (INTS, X), (np.zeros(3, jax.dtypes.float0),) * 2)


# -- forward mode through a scan or cond whose body holds a while_loop -------------------


def _scan_of_while(t: Any, sin: Callable, stack: Callable) -> Callable:
    def f(x: Any, w: Any) -> Any:
        def step(c: Any, a: Any) -> Any:
            shrink = lambda v: v / 2 + 0.1 * sin(v) * w  # noqa: E731
            h = t.while_loop(lambda v: (v * v).sum() > 1.0, shrink, c + a * w)
            return h, h * 2.0 + a

        return t.scan(step, x, stack([x, 2 * x, x * x]))

    return f


def _cond_of_while(t: Any, sin: Callable, cos: Callable) -> Callable:
    def f(x: Any, p: Any) -> Any:
        grow = lambda u: u * 1.5 + sin(u)  # noqa: E731
        taken = lambda v: t.while_loop(lambda u: (u * u).sum() < 20.0, grow, v)  # noqa: E731
        return t.cond(p, taken, lambda v: cos(v) * v, x)

    return f


def test_forward_mode_through_a_scan_or_cond_holding_a_while_loop() -> None:
    """jvp refused a scan or cond whose body holds a while_loop (forward mode transposed
    the scan's VJP, and a while_loop has none); jax takes them. Now such a node's tangent
    is the same op over the forward-mode graphs of its bodies, as a while_loop's is."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x, ones, w = np.array([0.5, -1.0, 2.0], np.float32), np.ones(3, np.float32), np.float32(0.7)
    ours, theirs = _scan_of_while(gc, gc.sin, gc.stack), _scan_of_while(jax.lax, jnp.sin, jnp.stack)
    assert_close(gc.jvp(ours, (x, w), (ones, w)), jax.jvp(theirs, (x, w), (ones, w)))
    ours, theirs = _cond_of_while(gc, gc.sin, gc.cos), _cond_of_while(jax.lax, jnp.sin, jnp.cos)
    zero = np.zeros((), jax.dtypes.float0)
    for p in (True, False):
        assert_close(gc.jvp(ours, (x, p), (ones, zero)), jax.jvp(theirs, (x, p), (ones, zero)))


@pytest.mark.slow
def test_jacfwd_and_linearize_through_a_scan_holding_a_while_loop() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x, w = np.array([0.5, -1.0, 2.0], np.float32), np.float32(0.7)
    ours, theirs = _scan_of_while(gc, gc.sin, gc.stack), _scan_of_while(jax.lax, jnp.sin, jnp.stack)
    assert_close(gc.jacfwd(ours, argnums=(0, 1))(x, w), jax.jacfwd(theirs, argnums=(0, 1))(x, w))
    got_f, want_f = gc.linearize(ours, x, w)[1], jax.linearize(theirs, x, w)[1]
    assert_close(got_f(x, w), want_f(x, w))
    ours, theirs = _cond_of_while(gc, gc.sin, gc.cos), _cond_of_while(jax.lax, jnp.sin, jnp.cos)
    for p in (True, False):
        assert_close(gc.jacfwd(ours)(x, p), jax.jacfwd(theirs)(x, p))


def assert_close(got: Any, want: Any) -> None:
    """assert_same, to float32 rounding (the loops run many float32 steps)."""
    got_leaves, want_leaves = gc.tree_leaves(got), gc.tree_leaves(gc.tree_map(np.asarray, want))
    assert len(got_leaves) == len(want_leaves), (got, want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (g, w)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_jvp_takes_a_python_number_tangent_in_its_primals_dtype() -> None:
    """A Python number tangent became float32 on arrays before jvp saw it, so beside a
    float16 primal it was refused (jax takes it in the primal's dtype)."""
    jax = pytest.importorskip("jax")
    half = np.float16(2.0)
    assert_same(
        gc.jvp(lambda x: x * 3.0, (half,), (1.0,)),
        jax.jvp(lambda x: x * 3.0, (half,), (np.float16(1.0),)),
    )
    assert_same(gc.jvp(lambda x: x * 3.0, (half,), (1,)), (half * 3, np.float16(3.0)))
