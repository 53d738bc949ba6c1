"""gc.map(f, xs, batch_size=k) as JAX's lax.map does it: a scan of vmap(f) over batches
of k slices, the len % k left over in one more vmapped call (graphc/frontend/batched_map.py).

Each program runs traced, on arrays and on eager tensors (the same bits), against a
Python loop over the slices and, where jax is installed, against
`jax.lax.map(..., batch_size=k)` in float64; gradients against finite differences.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.registry import get_op
from tests.frontend.test_jax_control import as_numpy, check_gradients, three_ways

LENGTH = 10
SIZES = [3, 4, 10, 16]  # a remainder of 1, of 2, one whole batch, larger than the length


@pytest.fixture
def jax() -> Iterator[Any]:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def rows(seed: int = 0, shape: tuple = (LENGTH, 3)) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def program(np_like: Any, lax_map: Any, size: int | None) -> Any:
    """A dict of two leaves in, a tuple of a scalar per slice and a row per slice out."""

    def fn(a: Any, b: Any) -> Any:
        out = lax_map(
            lambda d: (np_like.sum(np_like.tanh(d["a"]) * d["b"]), d["a"] * 2.0 - d["b"]),
            {"a": a, "b": b},
            batch_size=size,
        )
        return out[0], out[1]

    return fn


@pytest.mark.parametrize("size", SIZES)
def test_batched_map_matches_a_python_loop_on_every_path(size: int) -> None:
    a, b = rows(0), rows(1)
    got = three_ways(program(gc, gc.map, size), [a, b])
    sums = np.array([np.sum(np.tanh(a[i]) * b[i]) for i in range(LENGTH)])
    np.testing.assert_allclose(got[0], sums, rtol=1e-13)
    np.testing.assert_allclose(got[1], a * 2.0 - b, rtol=1e-13)
    one_at_a_time = program(gc, gc.map, None)(a, b)
    for x, y in zip(got, one_at_a_time, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13)


@pytest.mark.parametrize("size", SIZES)
def test_batched_map_matches_jax(jax: Any, size: int) -> None:
    a, b = rows(2), rows(3)
    got = program(gc, gc.map, size)(a, b)
    want = program(jax.numpy, jax.lax.map, size)(a, b)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_allclose(x, np.asarray(y), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("size", [3, 16])
def test_gradients_through_a_batched_map(size: int) -> None:
    def loss(a: Any, b: Any) -> Any:
        s, p = program(gc, gc.map, size)(a, b)
        return gc.sum(s * 1.5) + gc.sum(p * p)

    a, b = rows(4), rows(5)
    check_gradients(loss, [a, b])
    ta, tb = ge.tensor(a, requires_grad=True), ge.tensor(b, requires_grad=True)
    loss(ta, tb).backward()
    g = gc.trace(loss, gc.TensorSpec(a.shape, "float64"), gc.TensorSpec(b.shape, "float64"))
    want = gc.run(gc.gradients(g, wrt=[p.name for p in g.inputs]), {"a": a, "b": b})
    np.testing.assert_allclose(ta.grad.numpy(), want[1], rtol=1e-13)
    np.testing.assert_allclose(tb.grad.numpy(), want[2], rtol=1e-13)


def test_the_graph_holds_a_scan_of_the_vmapped_body_and_the_remainder() -> None:
    def fn(x: Any) -> Any:
        return gc.map(lambda r: gc.sum(r * r), x, batch_size=4)

    text = str(gc.trace(fn, gc.TensorSpec((LENGTH, 3), "float64")))
    assert 'slice(%x, index=":8")' in text
    assert "reshape(%slice, shape=(2, 4, 3))" in text
    assert "body=graph map_body(%x0: f64[4,3])" in text  # one batch of 4 slices a step
    assert "sum(%mul, axis=(1,), keepdims=False)" in text  # the body's sum, batched
    assert "length=2" in text
    assert 'slice(%x, index="8:")' in text  # the 2 left over, vmapped once
    assert "concat(" in text
    for size in (10, 16):  # one batch of every slice: vmap(f)(xs)
        whole = gc.trace(lambda x, k=size: gc.map(gc.sin, x, batch_size=k), gc.TensorSpec((10, 3)))
        assert "scan" not in str(whole) and "sin(%x)" in str(whole)


@pytest.mark.parametrize("size", [None, 1])
def test_no_batch_size_or_one_keeps_the_scan_of_one_slice_a_step(size: int | None) -> None:
    def per_slice(x: Any) -> Any:
        return gc.map(lambda r: gc.sum(r * r), x)

    def batched(x: Any) -> Any:
        return gc.map(lambda r: gc.sum(r * r), x, batch_size=size)

    spec = gc.TensorSpec((LENGTH, 3))
    body = str(gc.trace(batched, spec)).split("\n")[1:]  # past the graph's own name
    assert body == str(gc.trace(per_slice, spec)).split("\n")[1:]


def test_integer_slices_and_scalar_results() -> None:
    xs = np.arange(21, dtype=np.int64).reshape(7, 3)
    got = three_ways(lambda x: gc.map(lambda r: gc.max(r) * 2, x, batch_size=3), [xs])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, xs.max(axis=1) * 2)


def test_no_slices_give_empty_ys() -> None:
    got = three_ways(lambda x: gc.map(lambda r: r * 2.0, x, batch_size=3), [np.zeros((0, 3))])
    assert got.shape == (0, 3)


def test_a_body_vmap_cannot_batch_is_a_named_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(get_op("cumsum").rules, "vmap")
    xs = rows(6)

    def fn(x: Any) -> Any:
        return gc.map(lambda r: gc.cumsum(r, axis=0), x, batch_size=3)

    for run in (
        lambda: fn(xs),
        lambda: fn(ge.tensor(xs)),
        lambda: gc.trace(fn, gc.TensorSpec(xs.shape, "float64")),
    ):
        with pytest.raises(gc.VmapError, match=r"map: batch_size=3 maps .*cumsum.*batch_size=None"):
            run()
    # one slice a step still computes it, and the failed trace left nothing behind
    g = gc.trace(lambda x: gc.map(lambda r: gc.cumsum(r, axis=0), x), gc.TensorSpec(xs.shape))
    np.testing.assert_allclose(g(xs.astype(np.float32)), np.cumsum(xs, axis=1), rtol=1e-6)


@pytest.mark.parametrize("size", [0, -2, 2.5, True, "3", np.float64(3.0)])
def test_a_bad_batch_size_is_a_named_error(size: Any) -> None:
    with pytest.raises(gc.GraphcError, match="map: batch_size must be a positive int"):
        gc.map(gc.sin, rows(), batch_size=size)


def test_batch_size_zero_points_to_vmap() -> None:
    with pytest.raises(gc.GraphcError, match=r"gc.vmap\(f\)\(xs\)"):
        gc.map(gc.sin, rows(), batch_size=0)


def test_a_symbolic_length_cannot_be_batched() -> None:
    def fn(x: Any) -> Any:
        return gc.map(gc.sin, x, batch_size=4)

    with pytest.raises(gc.GraphcError, match="symbolic dim 'N'; give batch_size=None"):
        gc.trace(fn, gc.TensorSpec(("N", 3)))


def test_leaves_of_different_lengths_are_a_named_error() -> None:
    with pytest.raises(gc.ShapeError, match=r"different leading axes: \[10, 4\]"):
        gc.map(lambda t: t[0], (rows(), rows(shape=(4, 3))), batch_size=3)
    with pytest.raises(gc.GraphcError, match="xs has no arrays to map over"):
        gc.map(lambda t: t, {}, batch_size=3)
    with pytest.raises(gc.ShapeError, match="every leaf of xs must have a leading axis"):
        gc.map(lambda t: t, (rows(), 2.0), batch_size=3)


def test_batched_map_inside_jit_runs_once_per_signature() -> None:
    f = gc.jit(lambda x: gc.map(lambda r: gc.sum(r * r), x, batch_size=4))
    xs = rows(7)
    np.testing.assert_allclose(as_numpy(f(xs)), np.sum(xs * xs, axis=1), rtol=1e-13)
