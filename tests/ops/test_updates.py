"""Functional updates (graphc/ops/updates.py): `x.at[index]`, `dynamic_slice` and
`dynamic_update_slice`, on arrays, graph values (static and dynamic indices), eager
tensors and under vmap; against numpy's in-place spelling, jax where installed, and
central finite differences in float64."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.edge_values import bits_differ

X = np.arange(12.0).reshape(3, 4)


def numpy_update(x: np.ndarray, index: Any, how: str, v: Any) -> np.ndarray:
    out = x.copy()
    if how == "set":
        out[index] = v
    elif how == "add":
        np.add.at(out, index, v)
    elif how == "subtract":
        np.subtract.at(out, index, v)
    elif how == "multiply":
        out[index] *= v
    elif how == "divide":
        out[index] /= v
    elif how == "power":
        out[index] **= v
    elif how == "min":
        out[index] = np.minimum(out[index], v)
    else:
        out[index] = np.maximum(out[index], v)
    return out


CASES = [
    (1, 2.5),
    ((2, -1), 100.0),
    ((slice(None), slice(1, 3)), np.array([7.0, 8.0])),
    ((Ellipsis, 0), np.array([-1.0, 0.5, 2.0])),
    ((slice(None, None, -2), slice(1, None)), 3.0),
    ((0, slice(0, 0)), 1.0),  # an empty region: nothing changes
]
HOW = ["set", "add", "subtract", "multiply", "divide", "power", "min", "max"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("index, v", CASES, ids=[str(i) for i, _ in CASES])
def test_static_indices_as_numpy_bit_for_bit(index: Any, v: Any, how: str) -> None:
    expected = numpy_update(X, index, how, v)
    on_arrays = getattr(gc.at(X)[index], how)(v)
    traced = gc.trace(lambda x: getattr(x.at[index], how)(v), X)(X)
    eager = getattr(ge.tensor(X).at[index], how)(v).numpy()
    for got in (on_arrays, traced, eager):
        assert bits_differ(np.asarray(got), expected) is None
    np.testing.assert_array_equal(X, np.arange(12.0).reshape(3, 4))  # never in place


def test_edges_keep_nan_inf_and_signed_zeros_elsewhere() -> None:
    x = np.array([-0.0, np.nan, np.inf, 1.0])
    assert bits_differ(gc.at(x)[3].add(1.0), np.array([-0.0, np.nan, np.inf, 2.0])) is None
    assert bits_differ(gc.at(x)[0].set(np.nan), np.array([np.nan, np.nan, np.inf, 1.0])) is None
    i = np.array([3, 3])
    assert bits_differ(gc.at(x)[i].add(1.0), np.array([-0.0, np.nan, np.inf, 3.0])) is None
    ints = np.array([1, 2, 3], np.int32)
    out = gc.at(ints)[1].set(7.9)  # cast to the operand's dtype, as JAX
    assert out.dtype == np.int32 and out.tolist() == [1, 7, 3]


def test_a_dynamic_index_in_a_graph() -> None:
    f = gc.jit(lambda x, i: x.at[i, 1:].set(0.0))
    for i in (0, 2, -1, -3):
        np.testing.assert_array_equal(
            f(X, np.int64(i)), numpy_update(X, (i, slice(1, None)), "set", 0.0)
        )
    with pytest.raises(gc.IndexRangeError, match="out of range"):
        f(X, np.int64(3))
    g = gc.jit(lambda x, i, j: x.at[i, j].add(10.0))
    np.testing.assert_array_equal(
        g(X, np.int64(1), np.int32(-2)), numpy_update(X, (1, -2), "add", 10.0)
    )
    # a loop counter: fill a row per step
    fill = gc.jit(
        lambda z: gc.fori_loop(0, 3, lambda i, acc: acc.at[i].set(gc.cast(i, "float64") * 2.0), z)
    )
    rows = fill(np.zeros((3, 2)))
    np.testing.assert_array_equal(rows, [[0, 0], [2, 2], [4, 4]])


def test_an_index_array_accumulates_repeats_and_sets_their_mean() -> None:
    i = np.array([0, 0, 2])
    np.testing.assert_array_equal(gc.at(X)[i].add(1.0), numpy_update(X, i, "add", 1.0))
    np.testing.assert_array_equal(
        gc.at(X)[:, i].subtract(np.ones((3, 3))), numpy_update(X, (slice(None), i), "subtract", 1.0)
    )
    unique = np.array([2, 0])
    v = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    np.testing.assert_array_equal(gc.at(X)[unique].set(v), numpy_update(X, unique, "set", v))
    np.testing.assert_array_equal(
        gc.at(X)[np.array([1, 1])].set(np.array([[2.0], [4.0]]))[1], np.full(4, 3.0)
    )
    with pytest.raises(gc.GraphcError, match="only set, add and subtract"):
        gc.at(X)[i].multiply(2.0)
    with pytest.raises(gc.GraphcError, match="combined with ':'"):
        gc.at(X)[i, 1].set(0.0)
    with pytest.raises(gc.DTypeError, match="boolean mask"):
        gc.at(X)[X > 3].set(0.0)


def test_gradients_against_finite_differences() -> None:
    rng = np.random.default_rng(0)
    x0, v0 = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(0.5, 1.5, (2,))

    def loss(x: Any, v: Any) -> Any:
        y = x.at[1, 1:3].multiply(v).at[np.array([0, 0, 2])].add(x[1])
        return gc.sum(gc.sin(y) * y)

    gx, gv = gc.grad(loss, argnums=(0, 1))(x0, v0)

    def numeric(x: np.ndarray, v: np.ndarray) -> float:
        y = numpy_update(
            numpy_update(x, (1, slice(1, 3)), "multiply", v), np.array([0, 0, 2]), "add", x[1]
        )
        return float(np.sum(np.sin(y) * y))

    eps = 1e-6
    for arg, grad in ((0, gx), (1, gv)):
        base = [x0, v0]
        for k in np.ndindex(base[arg].shape):
            hi, lo = [b.copy() for b in base], [b.copy() for b in base]
            hi[arg][k] += eps
            lo[arg][k] -= eps
            np.testing.assert_allclose(
                grad[k], (numeric(*hi) - numeric(*lo)) / (2 * eps), rtol=1e-6
            )


def test_under_vmap_each_example_its_own_index() -> None:
    out = gc.vmap(lambda row, i: row.at[i].set(-5.0))(X, np.array([0, 1, 3]))
    expected = X.copy()
    expected[[0, 1, 2], [0, 1, 3]] = -5.0
    np.testing.assert_array_equal(out, expected)


def test_dynamic_slice_and_update_slice_clamp_as_jax() -> None:
    np.testing.assert_array_equal(
        gc.dynamic_slice(X, (np.int64(2), np.int64(1)), (2, 2)), X[1:3, 1:3]
    )
    f = gc.jit(lambda x, i: gc.dynamic_slice(x, (i, 0), (2, 4)))
    np.testing.assert_array_equal(f(X, np.int64(-4)), X[0:2])
    u = -np.ones((2, 2))
    got = gc.jit(lambda x, u, i, j: gc.dynamic_update_slice(x, u, (i, j)))(
        X, u, np.int64(2), np.int64(3)
    )
    expected = X.copy()
    expected[1:3, 2:4] = -1.0
    np.testing.assert_array_equal(got, expected)
    g = gc.grad(lambda u: gc.sum(gc.dynamic_update_slice(X, u, (np.int64(0), np.int64(1))) ** 2))(u)
    np.testing.assert_array_equal(g, 2 * u)
    with pytest.raises(gc.ShapeError, match="size 4 of axis 0 does not fit"):
        gc.dynamic_slice(X, (0, 0), (4, 1))


@pytest.fixture
def jnp() -> Iterator[Any]:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax.numpy


def test_against_jax(jnp: Any) -> None:
    import jax

    for index, v in CASES[:5]:
        for how in HOW:
            ours = gc.jit(lambda x, index=index, how=how, v=v: getattr(x.at[index], how)(v))(X)
            theirs = getattr(jnp.asarray(X).at[index], how)(v)
            np.testing.assert_allclose(ours, theirs, rtol=1e-15, err_msg=f"{index} {how}")
    i = np.array([0, 0, 2])
    np.testing.assert_array_equal(gc.at(X)[i].add(2.0), jnp.asarray(X).at[i].add(2.0))
    np.testing.assert_array_equal(
        gc.dynamic_update_slice(X, -np.ones((2, 2)), (np.int64(2), np.int64(3))),
        jax.lax.dynamic_update_slice(jnp.asarray(X), -jnp.ones((2, 2)), (2, 3)),
    )
    np.testing.assert_array_equal(
        gc.dynamic_slice(X, (np.int64(-1), np.int64(3)), (2, 2)),
        jax.lax.dynamic_slice(jnp.asarray(X), (-1, 3), (2, 2)),
    )


def test_exported_to_onnx_as_the_ops_it_is_made_of() -> None:
    ort = pytest.importorskip("onnxruntime")
    from graphc.onnx import export_model

    def f(x: Any, i: Any) -> Any:
        y = x.at[i, 1:].add(1.0).at[np.array([0, 0])].add(x[1])
        return gc.dynamic_update_slice(y, -gc.ones_like(y[:2, :2]), (i, i))

    g = gc.trace(f, X, np.int64(1))
    session = ort.InferenceSession(export_model(g).SerializeToString())
    for i in (1, -1, 0):
        got = session.run(None, {"x": X, "i": np.array(i)})[0]
        np.testing.assert_array_equal(got, g(X, np.int64(i)))
