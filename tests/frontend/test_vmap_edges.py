"""gc.vmap at its edges, against jax.vmap where jax is installed and expected values
always: loops on eager tensors (a traced graph with several-result nodes inlined on
tensors), batches of no examples, out_axes errors, registered pytree classes as
in_axes / out_axes prefixes, functions returning None, and a batched cond's branches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

RNG = np.random.default_rng(351)


@pytest.fixture
def jax() -> Iterator[Any]:
    """jax with float64 inside each test only (a global setting outlived the tests)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


# -- loops on eager tensors ------------------------------------------------------------------


def _loops(lib: Any, flow: Any) -> dict[str, Callable[[Any], Any]]:
    """Per-example functions with a loop or branch, written against graphc or jax."""
    return {
        "fori_loop": lambda v: flow.fori_loop(0, 3, lambda i, c: c * lib.sin(c) + 1.0, v),
        "scan": lambda v: flow.scan(lambda c, t: (c * t + 1.0, c * t), 0.5, v)[0],
        "scan-ys-reverse": lambda v: flow.scan(
            lambda c, t: (c * t + 1.0, c * t), 0.5, v, reverse=True
        )[1],
        "map": lambda v: flow.map(lambda r: lib.sin(r) * r, v),
        "cond": lambda v: flow.cond(lib.sum(v) > 5.0, lambda a: a * a, lambda a: lib.sin(a), v),
        "while_loop": lambda v: flow.while_loop(lambda c: lib.sum(c) < 10.0, lambda c: c * 2.0, v),
    }


LOOPS = ["fori_loop", "scan", "scan-ys-reverse", "map", "cond", "while_loop"]
X = np.array([[1.0, 1.0], [3.0, 4.0], [20.0, 0.0]])


@pytest.mark.parametrize("name", LOOPS)
def test_vmap_of_a_loop_on_eager_tensors_matches_arrays(name: str) -> None:
    f = _loops(gc, gc)[name]
    want = gc.vmap(f)(X)
    got = gc.vmap(f)(ge.tensor(X))
    assert isinstance(got, ge.Tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)


def test_vmap_of_loops_on_eager_tensors_expected_values() -> None:
    loops = _loops(gc, gc)
    fori = gc.vmap(lambda v: gc.fori_loop(0, 3, lambda i, c: c * 2.0, v))(ge.tensor(X))
    np.testing.assert_array_equal(fori.numpy(), X * 8)
    scan = gc.vmap(lambda v: gc.scan(lambda c, t: (c + t, c), 0.0, v)[0])(ge.tensor(X))
    np.testing.assert_array_equal(scan.numpy(), X.sum(1))
    grown = gc.vmap(loops["while_loop"])(ge.tensor(X))
    np.testing.assert_array_equal(grown.numpy(), [[8.0, 8.0], [6.0, 8.0], [20.0, 0.0]])


@pytest.mark.parametrize("name", LOOPS)
def test_vmap_of_a_loop_on_eager_tensors_agrees_with_jax(jax: Any, name: str) -> None:
    got = gc.vmap(_loops(gc, gc)[name])(ge.tensor(X))
    want = jax.vmap(_loops(jax.numpy, jax.lax)[name])(X)
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in LOOPS if n != "while_loop"])
def test_gradients_of_a_vmapped_loop_on_eager_tensors(name: str) -> None:
    """The eager tape records the loop's steps, as gc.grad differentiates the graph."""
    f = _loops(gc, gc)[name]
    x = ge.tensor(X, requires_grad=True)
    gc.vmap(f)(x).sum().backward()
    want = gc.grad(lambda a: gc.sum(gc.vmap(f)(a)))(X)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in LOOPS if n != "while_loop"])
def test_gradients_of_a_vmapped_loop_on_eager_tensors_agree_with_jax(jax: Any, name: str) -> None:
    x = ge.tensor(X, requires_grad=True)
    gc.vmap(_loops(gc, gc)[name])(x).sum().backward()
    f = jax.vmap(_loops(jax.numpy, jax.lax)[name])
    want = jax.grad(lambda a: f(a).sum())(X)
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("name", LOOPS)
def test_a_traced_graph_with_a_loop_called_on_eager_tensors(name: str) -> None:
    """frontend/call.py's inline on several-result nodes: the loop runs in Python."""
    g = gc.trace(_loops(gc, gc)[name], X[1])
    x = ge.tensor(X[1], requires_grad=True)
    got = g(x)
    assert isinstance(got, ge.Tensor)
    np.testing.assert_allclose(got.detach().numpy(), g(X[1]), rtol=1e-14)
    if name != "while_loop":
        got.sum().backward()
        want = gc.grad(lambda a: gc.sum(_loops(gc, gc)[name](a)))(X[1])
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_a_traced_scan_of_a_symbolic_length_on_eager_tensors() -> None:
    init = np.zeros(2, np.float32)
    g = gc.trace(lambda v: gc.scan(lambda c, t: (c + t, c * t), init, v), gc.TensorSpec(("T", 2)))
    for steps in (0, 3):
        xs = np.arange(steps * 2.0, dtype=np.float32).reshape(steps, 2)
        carry, ys = g(ge.tensor(xs))
        want_carry, want_ys = g(xs)
        np.testing.assert_array_equal(np.asarray(carry), want_carry)
        assert isinstance(ys, ge.Tensor) and ys.shape == (steps, 2)
        np.testing.assert_array_equal(ys.numpy(), want_ys)


# -- a batch of no examples --------------------------------------------------------------------

WEIGHT = np.ones((2, 1, 3, 3))


def _empty_cases(lib: Any, flow: Any, conv: Callable, pool: Callable) -> dict[str, Callable]:
    """Per-example functions, each batched over 0 examples (graphc's or jax's)."""
    return {
        "conv2d": lambda x: conv(x, WEIGHT),
        "max_pool2d": pool,
        "argmax": lambda x: lib.argmax(x),
        "argmax-1d": lambda x: lib.argmax(x),
        "while_loop": lambda x: flow.while_loop(lambda c: lib.sum(c) < 10.0, lambda c: c * 2.0, x),
        "fori_loop-bounds": lambda n: flow.fori_loop(0, n, lambda i, c: c * 2.0, np.ones(3)),
    }


def _ours() -> dict[str, Callable]:
    return _empty_cases(gc, gc, gc.conv2d, lambda x: gc.max_pool2d(x, 2))


# name: (one example's shape, its dtype, the shape of the batch of 0 examples' result)
EMPTY = {
    "conv2d": ((1, 1, 5, 5), "float64", (0, 1, 2, 3, 3)),
    "max_pool2d": ((1, 1, 4, 4), "float64", (0, 1, 1, 2, 2)),
    "argmax": ((3, 4), "float64", (0,)),
    "argmax-1d": ((3,), "float64", (0,)),
    "while_loop": ((3,), "float64", (0, 3)),
    "fori_loop-bounds": ((), "int64", (0, 3)),
}


@pytest.mark.parametrize("name", list(EMPTY))
def test_a_batch_of_no_examples_gives_empty_results(name: str) -> None:
    shape, dtype, want = EMPTY[name]
    f = _ours()[name]
    assert gc.vmap(f)(np.ones((0, *shape), dtype)).shape == want
    assert gc.vmap(f)(np.ones((2, *shape), dtype)).shape == (2, *want[1:])


@pytest.mark.parametrize("name", list(EMPTY))
def test_a_batch_of_no_examples_agrees_with_jax(jax: Any, name: str) -> None:
    lax, jnp = jax.lax, jax.numpy

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (1, 1), "VALID")

    def pool(x: Any) -> Any:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    shape, dtype, _ = EMPTY[name]
    xs = np.ones((0, *shape), dtype)
    want = jax.vmap(_empty_cases(jnp, lax, conv, pool)[name])(xs)
    got = gc.vmap(_ours()[name])(xs)
    assert got.shape == want.shape


@pytest.mark.parametrize("name", list(EMPTY))
def test_a_symbolic_batch_dim_runs_with_no_examples(name: str) -> None:
    shape, dtype, want = EMPTY[name]
    f = _ours()[name]
    g = gc.trace(lambda xs: gc.vmap(f)(xs), gc.TensorSpec(("B", *shape), dtype))
    run = gc.compile(g)
    for size in (0, 2):
        xs = np.ones((size, *shape), dtype)
        got = run(xs)
        assert got.shape == (size, *want[1:])
        np.testing.assert_array_equal(got, g(xs))


def test_a_batched_weight_convolution_of_no_examples() -> None:
    images = np.ones((1, 1, 5, 5))
    got = gc.vmap(lambda w: gc.conv2d(images, w))(np.ones((0, 2, 1, 3, 3)))
    assert got.shape == (0, 1, 2, 3, 3)
    got = gc.vmap(lambda w: gc.conv2d(images, w))(np.ones((2, 2, 1, 3, 3)))
    np.testing.assert_array_equal(got, np.full((2, 1, 2, 3, 3), 9.0))


def test_a_batched_while_loop_runs_until_every_example_stops() -> None:
    """The per-example predicate is counted (any), not maxed: the same values as before."""
    xs = np.array([[1.0, 1.0, 1.0], [5.0, 5.0, 5.0], [20.0, 0.0, 0.0]])
    got = gc.vmap(lambda x: gc.while_loop(lambda c: gc.sum(c) < 10.0, lambda c: c * 2.0, x))(xs)
    np.testing.assert_array_equal(got, [[4.0, 4.0, 4.0], [5.0, 5.0, 5.0], [20.0, 0.0, 0.0]])
