"""gc.vmap on Python functions: against jax.vmap (x64) where jax is installed and a
Python loop otherwise; in_axes None and nested like the arguments, out_axes, control
flow, the errors naming the argument, and composition with gradients both ways
(per-example gradients = vmap(grad(f)); grad of a vmapped function), inside gc.jit,
with values captured from the enclosing trace, and on eager tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

RNG = np.random.default_rng(350)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


@pytest.fixture
def jax() -> Iterator[Any]:
    """jax with float64 inside each test only (a global setting outlived the tests)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


# -- against jax.vmap -----------------------------------------------------------------


def _cases(jnp: Any, lax: Any) -> list[tuple[str, Callable, Callable, Any, list]]:
    """(id, graphc function, jax function, in_axes, arguments)."""

    def mlp(lib: Any) -> Callable:
        return lambda x, w, b: lib.sum(lib.tanh(x @ w + b) ** 2)

    def cond(lib: Any, flow: Any) -> Callable:
        return lambda x, y: flow.cond(
            lib.sum(x) > 0, lambda a, b: a * 2 + b, lambda a, b: a - b, x, y
        )

    def scan(lib: Any, flow: Any) -> Callable:
        def f(xs: Any, h: Any) -> Any:
            def step(c: Any, x: Any) -> Any:
                c = lib.tanh(c + x)
                return c, c * 2

            c, ys = flow.scan(step, h, xs)
            return c + lib.sum(ys, axis=0)

        return f

    def loop(lib: Any, flow: Any) -> Callable:
        def f(x: Any, n: Any) -> Any:
            return flow.while_loop(
                lambda c: c[0] < n, lambda c: (c[0] + 1.0, c[1] * 1.5), (n * 0.0, x)
            )[1]

        return f

    def fori(lib: Any, flow: Any) -> Callable:
        return lambda x: flow.fori_loop(0, 3, lambda i, c: c * 0.5 + lib.sin(c), x)

    return [
        ("mlp-x", mlp(gc), mlp(jnp), (0, None, None), [_normal(6, 3), _normal(3, 2), _normal(2)]),
        ("mlp-w", mlp(gc), mlp(jnp), (None, 0, None), [_normal(3), _normal(6, 3, 2), _normal(2)]),
        ("mlp-axis1", mlp(gc), mlp(jnp), (1, None, 0), [_normal(3, 6), _normal(3, 2), _normal(6, 2)]),
        ("cond", cond(gc, gc), cond(jnp, lax), 0, [_normal(6, 3), _normal(6, 3)]),
        ("cond-pred-only", cond(gc, gc), cond(jnp, lax), (0, None), [_normal(6, 3), _normal(3)]),
        ("scan", scan(gc, gc), scan(jnp, lax), (0, None), [_normal(6, 5, 3), _normal(3)]),
        ("scan-carry", scan(gc, gc), scan(jnp, lax), (None, 0), [_normal(5, 3), _normal(6, 3)]),
        ("while", loop(gc, gc), loop(jnp, lax), 0, [_normal(6, 3), RNG.integers(0, 5, 6) * 1.0]),
        ("fori", fori(gc, gc), fori(jnp, lax), 0, [_normal(6, 3)]),
    ]  # fmt: skip


CASE_IDS = ["mlp-x", "mlp-w", "mlp-axis1", "cond", "cond-pred-only", "scan", "scan-carry",
            "while", "fori"]  # fmt: skip


@pytest.mark.parametrize("case", CASE_IDS)
def test_vmap_agrees_with_jax(jax: Any, case: str) -> None:
    cases = {c[0]: c[1:] for c in _cases(jax.numpy, jax.lax)}
    ours, theirs, in_axes, args = cases[case]
    got = gc.vmap(ours, in_axes=in_axes)(*args)
    want = jax.vmap(theirs, in_axes=in_axes)(*args)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-12)


def test_per_example_gradients_agree_with_jax(jax: Any) -> None:
    def loss(lib: Any) -> Callable:
        return lambda w, x, y: lib.mean((lib.tanh(x @ w) - y) ** 2)

    w, xs, ys = _normal(3, 2), _normal(7, 3), _normal(7, 2)
    got = gc.vmap(gc.grad(loss(gc)), in_axes=(None, 0, 0))(w, xs, ys)
    want = jax.vmap(jax.grad(loss(jax.numpy)), in_axes=(None, 0, 0))(w, xs, ys)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14)


def test_nested_in_axes_and_out_axes_agree_with_jax(jax: Any) -> None:
    def f(lib: Any) -> Callable:
        return lambda p, x: {"y": p["w"] * x[0] + x[1], "s": (lib.sum(x[0]),)}

    args = ({"w": _normal(3)}, (_normal(3, 4), _normal(3)))
    in_axes = ({"w": None}, (1, None))
    out_axes = {"y": 1, "s": (0,)}
    got = gc.vmap(f(gc), in_axes=in_axes, out_axes=out_axes)(*args)
    want = jax.vmap(f(jax.numpy), in_axes=in_axes, out_axes=out_axes)(*args)
    np.testing.assert_allclose(got["y"], np.asarray(want["y"]), rtol=1e-14)
    np.testing.assert_allclose(got["s"][0], np.asarray(want["s"][0]), rtol=1e-14)


# -- against a loop, and compositions ---------------------------------------------------


def _loss(w: Any, x: Any) -> Any:
    return gc.sum(gc.tanh(x @ w) ** 2)


def test_vmap_of_grad_equals_a_loop_of_grads() -> None:
    w, xs = _normal(3, 2), _normal(5, 3)
    got = gc.vmap(gc.grad(_loss), in_axes=(None, 0))(w, xs)
    want = np.stack([gc.grad(_loss)(w, x) for x in xs])
    np.testing.assert_array_equal(got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_grad_of_vmap_matches_finite_differences() -> None:
    w, xs = _normal(3, 2), _normal(5, 3)

    def total(w: Any, xs: Any) -> Any:
        return gc.sum(gc.vmap(_loss, in_axes=(None, 0))(w, xs))

    got = gc.grad(total)(w, xs)
    eps, want = 1e-6, np.zeros_like(w)
    for i in np.ndindex(w.shape):
        step = np.zeros_like(w)
        step[i] = eps
        want[i] = (total(w + step, xs) - total(w - step, xs)) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_vmap_inside_jit_reads_values_of_the_enclosing_trace() -> None:
    w, xs = _normal(3, 2), _normal(5, 3)
    f = gc.jit(lambda w, xs: gc.vmap(lambda x: _loss(w, x))(xs))
    np.testing.assert_allclose(f(w, xs), [float(_loss(w, x)) for x in xs], rtol=1e-12)


def test_vmap_inside_a_scan_body() -> None:
    xs = _normal(4, 5, 3)  # 4 steps, each a batch of 5

    def step(c: Any, x: Any) -> Any:
        c = c + gc.vmap(lambda row: gc.sum(row * row))(x)
        return c, c

    got, _ = gc.scan(step, np.zeros(5), xs)
    np.testing.assert_allclose(got, (xs**2).sum(axis=(0, 2)), rtol=1e-12)


def test_vmap_of_vmap() -> None:
    x = _normal(4, 5, 3)
    got = gc.vmap(gc.vmap(lambda v: gc.sum(v * v)))(x)
    np.testing.assert_allclose(got, (x**2).sum(-1), rtol=1e-12)


def test_vmap_on_eager_tensors_gives_tensors() -> None:
    x = _normal(4, 3)
    got = gc.vmap(lambda v: gc.sum(v))(ge.tensor(x))
    assert isinstance(got, ge.Tensor)
    np.testing.assert_allclose(got.numpy(), x.sum(1))


def test_in_axes_none_and_out_axes_none() -> None:
    x, w = _normal(4, 3), _normal(3)
    out, shared = gc.vmap(lambda x, w: (x * w, w * 2), in_axes=(0, None), out_axes=(0, None))(x, w)
    np.testing.assert_array_equal(out, x * w)
    np.testing.assert_array_equal(shared, w * 2)


def test_python_scalars_and_int_arguments() -> None:
    got = gc.vmap(lambda i, s: i * 2 + s, in_axes=(0, None))(np.arange(4), 3)
    np.testing.assert_array_equal(got, np.arange(4) * 2 + 3)
    assert got.dtype == np.int64


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "int32", "uint8"])
@pytest.mark.parametrize("scalar", [7, 2.5, True])
def test_an_unbatched_python_scalar_is_weakly_typed(jax: Any, dtype: str, scalar: Any) -> None:
    """As jax: the array's dtype where the scalar's kind fits it (a float scalar meets an
    integer array in the default float; graphc's is numpy's float64 there)."""
    x = np.arange(6).reshape(2, 3).astype(dtype)
    got = gc.vmap(lambda a, s: a * s + s, in_axes=(0, None))(x, scalar)
    want = jax.vmap(lambda a, s: a * s + s, in_axes=(0, None))(x, scalar)
    if np.issubdtype(x.dtype, np.integer) and isinstance(scalar, float):
        assert got.dtype == np.float64
    else:
        assert got.dtype == want.dtype == x.dtype
    np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))
    traced = gc.jit(lambda a: gc.vmap(lambda b, s: b * s, in_axes=(0, None))(a, scalar))(x)
    assert traced.dtype == got.dtype


# -- errors -------------------------------------------------------------------------------


def test_errors_name_the_argument() -> None:
    x, y = _normal(4, 3), _normal(5, 3)
    with pytest.raises(gc.VmapError, match=r"inconsistent batch sizes: argument args\[1\] has 5"):
        gc.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(gc.VmapError, match=r"in_axes 2 is out of range for argument args\[0\]"):
        gc.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(gc.VmapError, match="in_axes has 1 entries for 2 arguments"):
        gc.vmap(lambda a, b: a + b, in_axes=(0,))(x, x)
    with pytest.raises(
        gc.VmapError, match=r"args\[0\]: in_axes has 2 entries but the argument has 3"
    ):
        gc.vmap(lambda t: t[0], in_axes=((0, 0),))((x, x, x))
    with pytest.raises(gc.VmapError, match=r"keys \['a'\] but the argument has keys \['b'\]"):
        gc.vmap(lambda d: d["b"], in_axes=({"a": 0},))({"b": x})
    with pytest.raises(gc.VmapError, match="batches no argument"):
        gc.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(gc.VmapError, match="expected a function"):
        gc.vmap(3)
    with pytest.raises(gc.VmapError, match="output '.*' differs per example"):
        gc.vmap(lambda a: a * 2, out_axes=None)(x)


def test_random_draws_with_a_key_per_example_and_a_shared_key() -> None:
    def f(key: Any, x: Any) -> Any:
        return x + gc.random_uniform(key, (3,), dtype="float64")

    keys, x = np.arange(4), _normal(4, 3)
    got = gc.vmap(f)(keys, x)
    want = np.stack([gc.trace(f, np.asarray(k), xi)(np.asarray(k), xi) for k, xi in zip(keys, x)])
    np.testing.assert_array_equal(got, want)
    shared = gc.vmap(f, in_axes=(None, 0))(np.array(7), np.zeros((4, 3)))
    np.testing.assert_array_equal(shared, np.broadcast_to(shared[0], (4, 3)))


def test_on_arrays_a_signature_is_traced_once() -> None:
    traces = []

    def f(v: Any) -> Any:
        traces.append(1)
        return v * 2.0

    batched = gc.vmap(f)
    for _ in range(3):
        np.testing.assert_array_equal(batched(np.ones((4, 3))), np.full((4, 3), 2.0))
    assert len(traces) == 1
    batched(np.ones((5, 3)))  # another batch size: another signature
    batched(np.ones((4, 3), np.float32))
    assert len(traces) == 3


def test_matmul_of_rows_by_a_shared_matrix_is_one_product() -> None:
    g = gc.trace(lambda x, w: x @ w, np.ones(3), np.ones((3, 2)))
    batched = gc.passes.vmap_graph(g, in_axes=(0, None), axis_size=5)
    assert [n.op for n in batched.op_nodes] == ["matmul"], str(batched)
    rows = gc.trace(lambda x, w: x @ w, np.ones((4, 3)), np.ones((3, 2)))
    batched = gc.passes.vmap_graph(rows, in_axes=(0, None), axis_size=5)
    matmul = next(n for n in batched.op_nodes if n.op == "matmul")
    assert matmul.inputs[0].type.shape == (20, 3), str(batched)  # 5 examples' 4 rows
    x, w = _normal(5, 4, 3), _normal(3, 2)
    np.testing.assert_allclose(batched(x, w), x @ w, rtol=1e-14)
    symbolic = gc.passes.vmap_graph(rows, in_axes=(0, None))  # vmap*4 has no name: a stack
    np.testing.assert_allclose(symbolic(x, w), x @ w, rtol=1e-14)


def test_keyword_arguments_are_batched_on_axis_0_as_in_jax(jax: Any) -> None:
    def f(lib: Any) -> Callable:
        return lambda x, *, scale: lib.sum(x * scale)

    x, scale = _normal(4, 3), _normal(4, 3)
    got = gc.vmap(f(gc), in_axes=(None,))(x[0], scale=scale)
    want = jax.vmap(f(jax.numpy), in_axes=(None,))(x[0], scale=scale)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-14)
    with pytest.raises(gc.VmapError, match=r"argument kwargs\['scale'\] has 5"):
        gc.vmap(f(gc))(x, scale=_normal(5, 3))


def test_axis_size_batches_functions_of_shared_arguments(jax: Any) -> None:
    w = _normal(3)
    got = gc.vmap(lambda v: v * 2.0, in_axes=None, axis_size=4)(w)
    want = jax.vmap(lambda v: v * 2.0, in_axes=None, axis_size=4)(w)
    np.testing.assert_array_equal(got, np.asarray(want))


def test_a_namedtuple_argument_and_result() -> None:
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    p = Pair(_normal(4, 3), _normal(3))
    got = gc.vmap(lambda q: Pair(q.a * q.b, q.b), in_axes=(Pair(0, None),))(p)
    assert isinstance(got, Pair)
    np.testing.assert_array_equal(got.a, p.a * p.b)
    np.testing.assert_array_equal(got.b, np.broadcast_to(p.b, (4, 3)))


def test_gradients_flow_through_vmap_on_eager_tensors() -> None:
    x = ge.tensor(_normal(4, 3), requires_grad=True)
    gc.sum(gc.vmap(lambda v: gc.sum(gc.sin(v)))(x)).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy()), rtol=1e-12)


def test_vmap_inside_a_cond_branch_reads_the_branch_operands() -> None:
    def f(x: Any, w: Any) -> Any:
        return gc.cond(
            gc.sum(w) > 0,
            lambda a, b: gc.vmap(lambda row: gc.sum(row * b))(a),
            lambda a, b: gc.sum(a, axis=1),
            x,
            w,
        )

    x, w = _normal(4, 3), np.full(3, 0.5)
    np.testing.assert_allclose(gc.jit(f)(x, w), (x * w).sum(1), rtol=1e-14)
    np.testing.assert_allclose(gc.jit(f)(x, -w), x.sum(1), rtol=1e-14)


def test_switch_map_and_associative_scan_agree_with_jax(jax: Any) -> None:
    lax, jnp = jax.lax, jax.numpy
    x, index = _normal(4, 5), np.array([0, 1, 2, 1])

    def switch(flow: Any, lib: Any) -> Callable:
        return lambda i, v: flow.switch(i, [lambda a: a * 2, lambda a: lib.sin(a), lambda a: -a], v)

    def mapped(flow: Any) -> Callable:
        return lambda v: flow.map(lambda r: r * 2 + 1, v)

    def prefix(flow: Any, add: Any) -> Callable:
        return lambda v: flow.associative_scan(add, v)

    pairs = [
        (gc.vmap(switch(gc, gc))(index, x), jax.vmap(switch(lax, jnp))(index, x)),
        (gc.vmap(mapped(gc))(x), jax.vmap(mapped(lax))(x)),
        (gc.vmap(prefix(gc, gc.add))(x), jax.vmap(prefix(lax, jnp.add))(x)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-14, atol=1e-15)


def test_vmap_in_a_trace_batches_on_the_traced_symbolic_dim() -> None:
    def f(xs: Any, w: Any) -> Any:
        return gc.vmap(lambda x: gc.sum(gc.tanh(x @ w)))(xs)

    g = gc.trace(f, gc.TensorSpec((None, 3), "float64"), gc.TensorSpec((3, 2), "float64"))
    assert str(g) == (
        "graph f(%xs: f64[xs_0,3], %w: f64[3,2]) {\n"
        "  %matmul: f64[xs_0,2] = matmul(%xs, %w)\n"
        "  %tanh: f64[xs_0,2] = tanh(%matmul)\n"
        "  %sum: f64[xs_0] = sum(%tanh, axis=(1,), keepdims=False)\n"
        "  output %out = %sum\n"
        "}"
    )
    x, w = _normal(5, 3), _normal(3, 2)
    np.testing.assert_allclose(g(x, w), np.tanh(x @ w).sum(1), rtol=1e-14)


def test_vmap_on_arrays_inside_a_transformation_reads_the_traced_values() -> None:
    """gc.vmap called on plain arrays while a graph is being built (inside gc.grad),
    its function reading a traced value: it records into that graph (it declared a graph
    of its own and refused the outer value)."""
    w0 = np.array([0.5, -1.0, 2.0])
    xs = np.arange(12.0).reshape(4, 3)
    per_example = lambda w, x: gc.sum(gc.tanh(w * x))  # noqa: E731
    got = gc.grad(lambda w: gc.sum(gc.vmap(lambda x: per_example(w, x))(xs)))(w0)
    want = sum((1 - np.tanh(w0 * x) ** 2) * x for x in xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)
