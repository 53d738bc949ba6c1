"""gc.jit: one trace per input signature, reused afterwards."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest

import graphc as gc


def test_jit_traces_once_per_signature() -> None:
    calls = []

    def f(x, w):
        calls.append(x.shape)
        return gc.tanh(x @ w)

    jf = gc.jit(f)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 2))
    w = w.astype(np.float32)
    np.testing.assert_allclose(jf(x, w), np.tanh(x @ w), rtol=1e-6)
    jf(x + 1, w)
    jf(x * 0, w)
    assert len(calls) == 1
    assert tuple(jf.cache_info()) == (2, 1, 1)  # hits, misses, size

    jf(np.ones((7, 3), np.float32), w)  # a new shape: traced again
    assert len(calls) == 2 and jf.cache_info().misses == 2
    jf(np.ones((7, 3), np.float64), w.astype(np.float64))  # a new dtype: traced again
    assert len(calls) == 3 and jf.cache_info().size == 3
    jf(np.zeros((7, 3), np.float32), w)  # an old signature again: reused
    assert len(calls) == 3 and jf.cache_info().hits == 3


def test_jit_returns_what_the_function_returns() -> None:
    x = np.array([1.0, -2.0], np.float32)
    pair = gc.jit(lambda x: (x * 2, gc.relu(x)))(x)
    assert isinstance(pair, tuple)
    np.testing.assert_array_equal(pair[1], [1.0, 0.0])
    named = gc.jit(lambda x: {"a": x + 1, "b": gc.sum(x)})(x)
    assert list(named) == ["a", "b"] and float(named["b"]) == -1.0


def test_jit_gives_the_traced_graph_of_a_signature() -> None:
    jf = gc.jit(lambda x: x + 1)
    g = jf.graph_for(np.zeros((2, 2), np.float32))
    assert [p.name for p in g.inputs] == ["x"] and str(g.inputs[0].type) == "f32[2,2]"
    jf(np.ones((2, 2), np.float32))
    assert jf.cache_info().misses == 1 and jf.cache_info().hits == 1


def test_jit_keeps_the_function_name() -> None:
    def loss(x):
        return gc.sum(x)

    jf = gc.jit(loss)
    assert jf.__name__ == "loss"
    assert jf.graph_for(np.ones(3, np.float32)).name == "loss"


def test_a_jitted_module_or_lambda_names_its_graph_as_trace_does() -> None:
    # a module's graph was named "recording" (jit's inner function), a lambda's "<lambda>"
    from graphc import nn

    x = np.ones((2, 3), np.float32)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    g = gc.jit(model).graph_for(x)
    assert g.name == "Sequential" == gc.trace(model, x).name
    assert "plan for graph 'Sequential'" in gc.compile(g).explain()
    assert gc.jit(lambda v: v + 1).graph_for(x).name == "lambda"


def test_python_scalars_are_static_and_keep_numpy_weak_typing() -> None:
    calls = []

    def scale(x, n, axis, flag):
        calls.append(n)
        y = gc.sum(x * n, axis=axis)
        return y * 2 if flag else y

    jf = gc.jit(scale)
    x32 = np.arange(6, dtype=np.float32).reshape(2, 3)
    for n, axis, flag in [(3, 0, True), (3, 1, False), (0.1, 0, True)]:
        got, want = jf(x32, n, axis, flag), scale(x32, n, axis, flag)
        assert got.dtype == want.dtype == np.float32  # not float64 from an int64 placeholder
        np.testing.assert_allclose(got, want, rtol=1e-6)
    x64 = np.ones(3)
    # 0.1 is not rounded to float32 on the way in
    np.testing.assert_array_equal(jf(x64, 0.1, 0, False), scale(x64, 0.1, 0, False))
    jf(x32, 3, 0, True)  # a value seen before: reused
    assert jf.cache_info().misses == 4 and jf.cache_info().hits == 1
    assert [p.name for p in jf.graph_for(x32, 3, 0, True).inputs] == ["x"]


def test_static_scalars_are_keyed_exactly() -> None:
    import math

    f = gc.jit(lambda x, c: x / c)
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(f(x, 0.0), np.full(2, np.inf, np.float32))
    np.testing.assert_array_equal(f(x, -0.0), np.full(2, -np.inf, np.float32))
    assert f.cache_info().misses == 2
    for _ in range(3):
        assert np.isnan(f(x, math.nan)).all()
    assert f.cache_info().misses == 3 and f.cache_info().hits == 2


class Pair(NamedTuple):
    a: Any
    b: Any


def test_pytree_arguments_and_results_as_jax_jit() -> None:
    calls = []

    def f(d, pair, s):
        calls.append(1)
        return {"z": d["x"] * s, "y": (pair.a, [d["w"] + pair.b, None])}

    jf = gc.jit(f)
    d = {"x": np.ones(2, np.float32), "w": np.arange(2, dtype=np.float32)}
    pair = Pair(np.float32(3), np.ones(2, np.float32))
    got = jf(d, pair, 3)
    want = f(d, pair, 3)
    assert list(got) == ["y", "z"]  # sorted keys, as jax
    assert gc.tree_structure(got) == gc.tree_structure(want)
    for g, w in zip(gc.tree_leaves(got), gc.tree_leaves(want)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    assert isinstance(got["y"][1], list) and got["y"][1][1] is None
    jf({"x": np.zeros(2, np.float32), "w": d["w"]}, pair, 3)  # same structure: reused
    assert len(calls) == 2 and jf.cache_info().hits == 1
    jf({"x": d["x"], "w": d["w"], "v": d["w"]}, pair, 3)  # another structure: traced
    assert jf.cache_info().misses == 2
    names = [p.name for p in jf.graph_for(d, pair, 3).inputs]
    assert names == ["d_w", "d_x", "pair_a", "pair_b"]


def test_an_argument_that_is_no_array_is_named_in_the_error() -> None:
    with pytest.raises(gc.DTypeError, match=r"args\[0\]\['k'\] is not an array \(got object\)"):
        gc.jit(lambda d: d["k"])({"k": object()})


def test_a_jitted_function_on_graph_values_is_inlined() -> None:
    x = np.arange(6.0).reshape(2, 3)
    g = gc.jit(lambda r: gc.sum(r) * r)
    want = x.sum(1, keepdims=True) * x
    np.testing.assert_allclose(gc.vmap(g)(x), want)
    # jit(vmap(jit)): the outer jit keeps its own function (functools.wraps once copied
    # the inner Jitted's __dict__, fn and cache, onto the vmapped wrapper and then onto
    # the outer jit, which ran the inner function on the whole batch)
    np.testing.assert_allclose(gc.jit(gc.vmap(g))(x), want)
    np.testing.assert_allclose(gc.jit(gc.jit(lambda v: v * 2))(x), x * 2)
    np.testing.assert_allclose(gc.grad(lambda v: gc.sum(g(v)))(x), np.full_like(x, 2 * x.sum()))
    traced = gc.trace(lambda v: g(v) + 1, gc.TensorSpec((2, 3), "float64"))
    assert "sum" in {n.op for n in traced.op_nodes}  # its ops, in the outer graph
    assert g.cache_info().misses == 0  # never compiled on its own


def test_keyword_arguments_as_jax_jit() -> None:
    """Keywords are arguments like the others: arrays inputs (named after the keyword),
    Python numbers static, part of the signature (a raw TypeError before)."""
    f = gc.jit(lambda x, n=1, *, scale=None: x * n if scale is None else x * scale)
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(f(x=x, n=3), [3.0, 3.0])
    np.testing.assert_array_equal(f(x, scale=np.float32(5)), [5.0, 5.0])
    np.testing.assert_array_equal(f(x), [1.0, 1.0])
    assert f.cache_info().misses == 3
    assert [p.name for p in f.graph_for(x, scale=np.float32(5)).inputs] == ["x", "scale"]
    np.testing.assert_array_equal(gc.jit(lambda a, b: a - b)(b=np.ones(2), a=np.zeros(2)), [-1, -1])


def test_static_argnums_and_argnames_as_jax_jit() -> None:
    calls = []

    def reduce(x, mode="sum", axis=0):
        calls.append((mode, axis))
        return gc.sum(x, axis=axis) if mode == "sum" else gc.max(x, axis=axis)

    x = np.arange(6.0).reshape(2, 3)
    by_name = gc.jit(reduce, static_argnames=("mode", "axis"))
    np.testing.assert_array_equal(by_name(x, mode="max", axis=1), x.max(axis=1))
    np.testing.assert_array_equal(by_name(x, mode="max", axis=1), x.max(axis=1))
    # a name is found by position too (the signature says where it is), as in JAX
    np.testing.assert_array_equal(by_name(x, "sum", 1), x.sum(axis=1))
    assert calls == [("max", 1), ("sum", 1)]
    assert by_name.cache_info() == (1, 2, 2)
    assert [p.name for p in by_name.graph_for(x, mode="sum").inputs] == ["x"]

    # a position is found by name too; any hashable value may be static: a function
    apply = gc.jit(lambda x, fn, k: fn(x) * k, static_argnums=(1, -1))
    np.testing.assert_allclose(apply(x, gc.sin, 2), np.sin(x) * 2)
    np.testing.assert_allclose(apply(x, gc.cos, k=3), np.cos(x) * 3)
    assert apply.cache_info().misses == 2
    # inlined on graph values, differentiated through
    np.testing.assert_allclose(gc.grad(lambda x: gc.sum(apply(x, gc.sin, 2)))(x), 2 * np.cos(x))


def test_static_argument_errors_name_the_argument() -> None:
    f = gc.jit(lambda x, shape: gc.reshape(x, shape), static_argnums=1)
    np.testing.assert_array_equal(f(np.arange(6.0), (2, 3)), np.arange(6.0).reshape(2, 3))
    with pytest.raises(gc.DTypeError, match=r"static argument 1 \('shape'\) is a list.*tuple"):
        f(np.arange(6.0), [2, 3])
    with pytest.raises(gc.DTypeError, match=r"static_argnames \['nope'\] name no parameter"):
        gc.jit(lambda x: x, static_argnames="nope")
    with pytest.raises(gc.DTypeError, match="static_argnums -3 counts from the end"):
        gc.jit(lambda x, y: x, static_argnums=-3)
    with pytest.raises(gc.DTypeError, match="static_argnums must be ints"):
        gc.jit(lambda x, y: x, static_argnums="y")


def test_static_arguments_against_jax() -> None:
    jax = pytest.importorskip("jax")
    import functools

    def ours(x, n, mode):
        return x**n if mode == "pow" else x * n

    @functools.partial(jax.jit, static_argnums=(1,), static_argnames="mode")
    def theirs(x, n, mode):
        return x**n if mode == "pow" else x * n

    jitted = functools.partial(gc.jit, static_argnums=(1,), static_argnames="mode")(ours)
    x = np.linspace(-1, 1, 5).astype(np.float32)
    for n, mode in ((2, "pow"), (3, "pow"), (2, "mul")):
        got, expected = jitted(x, n, mode=mode), np.asarray(theirs(x, n, mode=mode))
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_jitted_dropout_draws_a_fresh_mask_every_call() -> None:
    """gc.jit of anything with training-mode dropout raised KeyError 'rng_key': its
    graph's dropout key was fed by nothing (the nn hunt). gc.jit now feeds a fresh key
    to every call from graphc.eager's generator, as eager dropout draws: masks differ
    from call to call, manual_seed repeats them, eval mode has no key."""
    import graphc.eager as ge
    from graphc import nn

    drop = gc.jit(lambda v: nn.Dropout(0.25)(v))
    first, second = drop(np.ones(4000)), drop(np.ones(4000))
    assert set(np.unique(first)) == {0.0, 1 / 0.75} and 0.72 < (first > 0).mean() < 0.78
    assert not np.array_equal(first, second)
    ge.manual_seed(7)
    again = drop(np.ones(4000))
    ge.manual_seed(7)
    assert np.array_equal(drop(np.ones(4000)), again)
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    model.eval()
    x = np.ones((2, 3), np.float32)
    assert np.array_equal(gc.jit(model)(x), model(ge.tensor(x)).detach().numpy())
