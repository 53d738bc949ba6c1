"""`gc.random`, jax.random's functions on graphc's counter-based keys: the same numbers
from the same key on arrays, in traced graphs and on eager tensors; independent
streams from split and fold_in; the distributions' moments (loose, many draws)."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

r = gc.random
KEY = r.key(0)


def test_a_key_gives_the_same_draws_everywhere() -> None:
    k1, k2 = r.split(KEY)
    assert k1 != k2 and r.split(KEY, 3).shape == (3,) and r.split(KEY, 3)[0] == k1
    on_arrays = r.normal(k1, (4,))
    traced = gc.jit(lambda k: r.normal(k, (4,)))(k1)
    eager = r.normal(ge.tensor(k1), (4,)).numpy()
    np.testing.assert_array_equal(traced, on_arrays)
    np.testing.assert_array_equal(eager, on_arrays)
    assert not np.array_equal(r.normal(k2, (4,)), on_arrays)
    assert r.fold_in(KEY, 1) != r.fold_in(KEY, 2)
    # a key that is an input draws fresh numbers per call, as the caller advances it
    draw = gc.jit(lambda k, x: x + r.uniform(k, x.shape))
    x = np.zeros(3, np.float32)
    assert not np.array_equal(draw(r.key(1), x), draw(r.key(2), x))


def test_dtypes_shapes_and_ranges() -> None:
    u = r.uniform(KEY, (1000,), minval=-2, maxval=2.0)
    assert u.dtype == np.float32 and u.min() >= -2 and u.max() < 2
    assert r.normal(KEY, (2, 3), "float64").dtype == np.float64
    ints = r.randint(KEY, (5000,), -3, 4, np.int32)
    assert ints.dtype == np.int32 and set(np.unique(ints)) == set(range(-3, 4))
    assert r.bernoulli(KEY, np.array([0.0, 1.0])).tolist() == [False, True]
    assert r.bernoulli(KEY, 0.5, (2, 2)).dtype == np.bool_
    assert sorted(r.permutation(KEY, 6).tolist()) == list(range(6))
    rows = np.arange(10.0).reshape(5, 2)
    shuffled = r.permutation(KEY, rows)
    assert sorted(shuffled[:, 0].tolist()) == rows[:, 0].tolist()
    np.testing.assert_array_equal(shuffled[:, 1] - shuffled[:, 0], 1.0)  # rows kept whole
    with pytest.raises(gc.DTypeError, match="seed must be an int"):
        r.key(0.5)
    with pytest.raises(gc.DTypeError, match="must be a float"):
        r.uniform(KEY, (2,), np.int32)
    with pytest.raises(gc.ShapeError, match="positive int"):
        r.split(KEY, 0)


def test_moments_of_many_draws() -> None:
    z = r.normal(KEY, (200_000,), np.float64)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    g = r.gumbel(KEY, (200_000,), np.float64)
    assert abs(g.mean() - np.euler_gamma) < 0.01
    p = np.array([0.2, 0.3, 0.5])
    drawn = r.categorical(KEY, np.log(p) + np.zeros((60_000, 3)))
    np.testing.assert_allclose(np.bincount(drawn, minlength=3) / 60_000, p, atol=0.01)
    assert abs(r.bernoulli(KEY, 0.3, (100_000,)).mean() - 0.3) < 0.01


def test_under_vmap_each_key_its_own_draws() -> None:
    keys = r.split(KEY, 3)
    batched = gc.vmap(lambda k: r.uniform(k, (2,)))(keys)
    for k, row in zip(keys, batched):
        np.testing.assert_array_equal(row, r.uniform(k, (2,)))
