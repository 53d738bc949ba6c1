"""Counter-based randomness and dropout: determinism, independence, distribution, modes."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import functional as F
from tests.cases.random import uniform


def test_the_same_key_gives_the_same_array_and_other_keys_other_arrays() -> None:
    a = gc.random_uniform(np.int64(5), shape=(1000,))
    assert np.array_equal(a, gc.random_uniform(np.int64(5), shape=(1000,)))
    assert not np.array_equal(a, gc.random_uniform(np.int64(6), shape=(1000,)))
    # a longer draw extends the shorter one: element i depends on (key, i) only
    assert np.array_equal(gc.random_uniform(np.int64(5), shape=(10,)), a[:10])
    folded = {int(gc.fold_in(np.int64(5), d)) for d in range(100)}
    assert len(folded) == 100 and 5 not in folded


def test_bits_are_splitmix64_exactly() -> None:
    for key in (0, 1, -1, 2**63 - 1, -(2**63)):
        for dtype in ("float32", "float64"):
            got = gc.random_uniform(np.int64(key), shape=(6,), dtype=dtype)
            np.testing.assert_array_equal(got, uniform(np.int64(key), (6,), dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_and_normal_have_their_distributions(dtype: str) -> None:
    n = 200_000
    u = gc.random_uniform(np.int64(11), shape=(n,), dtype=dtype)
    assert u.dtype == dtype and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 1e-3
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    chi2 = ((counts - n / 20) ** 2 / (n / 20)).sum()
    assert chi2 < 50  # 19 degrees of freedom: p < 1e-4 above 45
    z = gc.random_normal(np.int64(12), shape=(n,), dtype=dtype).astype(np.float64)
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 4 / np.sqrt(n) and abs(z.std() - 1) < 0.01
    assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.005
    # neighbouring elements are not correlated
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01


def test_symbolic_shapes_are_bound_when_the_graph_runs() -> None:
    g = gc.trace(lambda x, k: x + gc.random_uniform(k, shape=x.shape), gc.TensorSpec((None, 3)),
                 gc.TensorSpec((), "int64"))  # fmt: skip
    for rows in (0, 2, 5):
        x = np.zeros((rows, 3), np.float32)
        np.testing.assert_array_equal(
            gc.compile(g)(x, np.int64(4)), gc.random_uniform(np.int64(4), shape=(rows, 3))
        )


def test_a_key_must_be_an_int64_scalar() -> None:
    with pytest.raises(gc.DTypeError, match="key must be an int64 scalar"):
        gc.random_uniform(np.array([1, 2]), shape=(2,))
    with pytest.raises(gc.DTypeError, match="dtype must be a float"):
        gc.random_uniform(np.int64(1), shape=(2,), dtype="int64")


# -- dropout ----------------------------------------------------------------------------


def test_eager_dropout_keeps_about_1_minus_p_and_scales_them() -> None:
    ge.manual_seed(0)
    x = ge.ones(100_000, requires_grad=True)
    y = F.dropout(x, p=0.3)
    kept = y.detach().numpy() > 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / np.float32(0.7), rtol=1e-6)
    ge.manual_seed(0)
    assert np.array_equal(F.dropout(ge.ones(100_000), p=0.3).numpy(), y.detach().numpy())
    assert not np.array_equal(F.dropout(ge.ones(100_000), p=0.3).numpy(), y.detach().numpy())


def test_dropout_edges_and_modes() -> None:
    x = ge.ones(4)
    assert F.dropout(x, p=0.5, training=False) is x and F.dropout(x, p=0.0) is x
    assert F.dropout(x, p=1.0).tolist() == [0.0] * 4
    with pytest.raises(gc.GraphcError, match="p must be between 0 and 1"):
        F.dropout(x, p=1.5)
    layer = nn.Dropout(0.5)
    assert layer.eval()(x) is x and layer.train().training
    assert set(layer(ge.ones(1000)).tolist()) == {0.0, 2.0}


def test_traced_dropouts_read_one_rng_key_and_draw_different_masks() -> None:
    def two(x):
        return F.dropout(x, 0.5), F.dropout(x, 0.5)

    g = gc.trace(two, gc.TensorSpec((None, 8)))
    assert [p.name for p in g.inputs] == ["x", "rng_key"]
    x = np.ones((64, 8), np.float32)
    for level in (0, 2):
        exe = gc.compile(g, opt_level=level)
        a, b = exe(x, rng_key=np.int64(1))
        again = exe(x, rng_key=np.int64(1))
        other = exe(x, rng_key=np.int64(2))
        assert not np.array_equal(a, b)  # two layers, two masks
        assert np.array_equal(a, again[0]) and not np.array_equal(a, other[0])
        want = gc.run(g, {"x": x, "rng_key": np.int64(1)})
        assert all(np.array_equal(u, v) for u, v in zip((a, b), want))


def test_a_traced_model_in_eval_mode_has_no_key() -> None:
    model = nn.Sequential(nn.Linear(3, 2, generator=0), nn.Dropout(0.5)).eval()
    g = gc.trace(model, gc.TensorSpec((None, 3)))
    assert "rng_key" not in g and not any(n.op == "random_uniform" for n in g.op_nodes)
