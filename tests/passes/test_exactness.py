"""The findings that made O1/O2 change results O0 computes correctly, one test each."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from tests.passes.passcheck import assert_bits_equal, edge_values

# Each level's plan runs on the default backend's final tier (wait=True): with
# GRAPHC_BACKEND=native a plan may otherwise run numpy's tier while its kernels build
# (runtime/tiers.py), and the levels agree bit for bit within one backend.


def _levels_agree(g: gc.Graph, *feeds: np.ndarray, fast_math: bool = False) -> list[np.ndarray]:
    want = gc.compile(g, opt_level=0, wait=True)(*feeds)
    for level in (1, 2):
        got = gc.compile(g, opt_level=level, fast_math=fast_math, wait=True)(*feeds)
        assert_bits_equal(got, want, f"O{level}\n{gc.optimize(g, level, fast_math=fast_math)}")
    return want


def _graph(dtype: str, build) -> gc.Graph:  # type: ignore[no-untyped-def]
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(len(edge_values(np.dtype(dtype))),), dtype=dtype)
        gc.output(build(x), name="y")
    return g


def test_folding_two_scales_that_overflow_together_does_not_run() -> None:
    g = _graph("float32", lambda x: (x * gc.constant(1e30)) * gc.constant(1e30))
    x = np.full(21, 1e-30, np.float32)
    assert np.isfinite(_levels_agree(g, x)).all()
    # with fast_math the fold declines: c*d is not finite in float32
    assert_bits_equal(gc.compile(g, fast_math=True)(x), gc.compile(g, opt_level=0)(x))


def test_moving_a_scale_outward_does_not_run_by_default() -> None:
    g = _graph("float32", lambda x: (x * gc.constant(np.float32(1e-30))) * x)
    x = np.full(21, 1e20, np.float32)  # (x*c)*x is 1e10; (x*x)*c would overflow
    assert np.isfinite(_levels_agree(g, x)).all()
    fast = gc.compile(g, fast_math=True)(x)
    assert np.isinf(fast).all()  # what the value-changing rule does when asked for


def test_dividing_by_a_subnormal_power_of_two_is_not_a_multiplication_by_inf() -> None:
    g = _graph("float32", lambda x: x / gc.constant(np.float32(2.0**-130)))
    x = np.full(21, 1e-30, np.float32)
    out = _levels_agree(g, x)
    assert np.isfinite(out).all()
    # while x / 4 -> x * 0.25 is exact, and runs
    g4 = _graph("float32", lambda x: x / gc.constant(np.float32(4.0)))
    assert [n.op for n in gc.optimize(g4, 1).op_nodes if not n.is_constant] == ["mul"]
    _levels_agree(g4, edge_values(np.dtype(np.float32)))


def test_integer_scales_fold_nowhere_even_with_fast_math() -> None:
    def build(x: gc.Symbol) -> gc.Symbol:
        return (x * gc.constant(np.int64(3))) / gc.constant(np.int64(2))

    g = _graph("int64", build)
    x = edge_values(np.dtype(np.int64))
    _levels_agree(g, x, fast_math=True)


def test_scales_fold_in_the_expressions_dtype() -> None:
    third = np.float32(1 / 3)

    def build(x: gc.Symbol) -> gc.Symbol:
        return (x * gc.constant(third)) * gc.constant(np.float32(3.0))

    g = _graph("float64", build)
    fast = gc.optimize(g, 1, fast_math=True)
    (scale,) = [n for n in fast.op_nodes if n.is_constant]
    assert scale.value.dtype == np.float64
    assert scale.value == np.float64(third) * 3.0  # not float32's rounding of it


def test_a_replacement_that_fails_its_type_rule_declines() -> None:
    g = _graph("bool", lambda x: x * -1)  # bool * -1 is int64; neg(bool) does not exist
    out = _levels_agree(g, edge_values(np.dtype(np.bool_)))
    assert out.dtype == np.int64
    assert all(n.op != "neg" for n in gc.optimize(g, 2).nodes)


def test_log_sum_exp_is_rewritten_only_with_fast_math() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3, 4), dtype="float64")
        gc.output(gc.log(gc.sum(gc.exp(x), axis=1)), name="y")
    assert "logsumexp" not in [n.op for n in gc.optimize(g, 2).op_nodes]
    assert "logsumexp" in [n.op for n in gc.optimize(g, 2, fast_math=True).op_nodes]
    x = np.array([[1000.0, 0.0, -np.inf, 1.0]] * 3)
    want = gc.compile(g, opt_level=0)(x)
    assert np.isinf(want).all()  # exp overflows at O0: the exact levels keep that
    _levels_agree(g, x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_edge_values_through_every_exact_rule_pattern(dtype: str) -> None:
    """A graph exercising many exact rules at once, on every edge value of a dtype."""
    values = edge_values(np.dtype(dtype))
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(len(values),), dtype=dtype)
        if dtype == "bool":
            y = gc.where(x, x * 1, x * 0)
        else:
            zero = gc.constant(np.zeros((), dtype))
            y = gc.neg(gc.neg(x * 1)) - zero
            y = gc.reshape(gc.reshape(y, (len(values), 1)), (len(values),))
            y = y + (-x) + gc.broadcast_to(zero, (len(values),)) * x
        gc.output(y, name="y")
    _levels_agree(g, values)


def test_minus_one_filled_into_bools_is_true_not_minus_one() -> None:
    """x * full_like(b_bool, -1) multiplies by True: no negation (the pattern reads the
    value as stored, not the attribute)."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(100,), dtype="int64")  # 100: full_like not folded
        b = gc.placeholder("b", shape=(100,), dtype="bool")
        gc.output(x * gc.full_like(b, -1), name="y")
    x = np.resize(edge_values(np.dtype(np.int64)), 100)
    want = gc.compile(g, opt_level=0)(x, np.ones(100, bool))
    for level in (1, 2):
        assert_bits_equal(gc.compile(g, opt_level=level)(x, np.ones(100, bool)), want)


def test_negating_a_narrow_integer_scale_in_the_products_dtype() -> None:
    """(-x)*c -> x*(-c) with x int64 and c = INT32_MIN: -c is made in int64 (in int32 it
    wraps back to INT32_MIN and the sign of every product flips)."""
    g = _graph("int64", lambda x: gc.neg(x) * gc.constant(np.int32(-(2**31))))
    _levels_agree(g, edge_values(np.dtype(np.int64)))


def test_scales_that_fold_to_zero_decline() -> None:
    """(x*1e-30)*1e-30 in float32: c*d flushes to 0, which would make x*c*d 0 for x =
    1e30 (1e-30 at O0) and nan for inf; the fold declines even with fast_math."""
    g = _graph("float32", lambda x: (x * gc.constant(np.float32(1e-30))) * 1e-30)
    x = np.full(21, 1e30, np.float32)
    x[:2] = np.inf
    assert_bits_equal(gc.compile(g, fast_math=True)(x), gc.compile(g, opt_level=0)(x))


def test_log_sum_exp_over_an_empty_axis_keeps_o0s_result() -> None:
    """log(sum(exp(x))) over an empty axis is log(0) = -inf at O0; O1/O2 keep it (the
    rewrite into logsumexp, which crashed there, is fast_math only)."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3, 0), dtype="float32")
        gc.output(gc.log(gc.sum(gc.exp(x), axis=1)), name="y")
    with np.errstate(divide="ignore"):
        out = _levels_agree(g, np.zeros((3, 0), np.float32))
    assert np.isneginf(out).all()


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_a_narrow_negation_is_not_the_wide_one(dtype: str) -> None:
    """x + (-y) -> x - y and x - (-y) -> x + y with y int32 and a wider result: -y wraps
    in int32 (-INT32_MIN is INT32_MIN) before it widens, so the rules decline."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(2,), dtype=dtype)
        y = gc.placeholder("y", shape=(2,), dtype="int32")
        gc.output(x + gc.neg(y), name="a")
        gc.output(x - gc.neg(y), name="b")
    feeds = {"x": np.zeros(2, dtype), "y": np.array([-(2**31), 5], np.int32)}
    want = gc.compile(g, opt_level=0)(**feeds)
    for level in (1, 2):
        for got, expected in zip(gc.compile(g, opt_level=level)(**feeds), want):
            assert_bits_equal(got, expected, f"O{level}")


@pytest.mark.parametrize("identity", ["x * 1", "x / 1", "--x", "x ** 1"])
def test_an_identity_on_a_transpose_keeps_the_layout_a_product_and_a_sum_read(
    identity: str,
) -> None:
    """x*1 -> x with x a transpose would hand matmul and sum a permuted view where O0
    gives them the product's C-contiguous copy: BLAS and numpy's pairwise sum round
    by memory order, so the identity stays unless every user ignores layout."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((200, 300)) * 1000).astype(np.float32)
    b = rng.standard_normal((200, 7)).astype(np.float32)
    g = gc.Graph("g")
    with g:
        x = gc.transpose(gc.placeholder("a", shape=a.shape), (1, 0))
        one = gc.constant(np.float32(1))
        m = {"x * 1": x * one, "x / 1": x / one, "--x": gc.neg(gc.neg(x)), "x ** 1": x**one}[
            identity
        ]
        gc.output(gc.sum(m, axis=1), name="s")
        gc.output(gc.matmul(m, gc.placeholder("b", shape=b.shape)), name="p")
        gc.output(m + one, name="e")  # an elementwise user: the identity may go for it
    want = gc.compile(g, opt_level=0, wait=True)(a, b)
    for level in (1, 2):
        for got, expected in zip(gc.compile(g, opt_level=level, wait=True)(a, b), want):
            assert_bits_equal(got, expected, f"O{level}\n{gc.optimize(g, level)}")
    h = gc.Graph("h")
    with h:
        x = gc.transpose(gc.placeholder("a", shape=a.shape), (1, 0))
        gc.output(gc.exp(x * gc.constant(np.float32(1))), name="y")
        gc.output(x * gc.constant(np.float32(1)), name="z")  # the caller gets its layout
    assert [n.op for n in gc.optimize(h, 1).op_nodes].count("mul") == 1
    zs = [gc.compile(h, opt_level=level)(a)[1] for level in (0, 1, 2)]
    for z in zs:  # summed again (a result fed back), an O1 result rounds as O0's does
        assert z.flags.c_contiguous
        assert_bits_equal(np.add.reduce(z, axis=1), np.add.reduce(zs[0], axis=1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_power_by_an_exponent_of_several_elements_is_not_a_product(dtype: str) -> None:
    """pow's kernel computes x**2 and x**3 as products only for a one-element exponent;
    an exponent array goes to C's pow, which rounds otherwise, and numpy's float32
    pow(x, 1) of arrays rounds some x to a neighbour (these four on AVX-512 machines).
    So those rewrites are fast_math's, and the exact levels keep O0's bits."""
    rng = np.random.default_rng(0)
    odd = np.array([1184377198, 1184378921, 202910480, 228068609], np.uint32).view(np.float32)
    x = np.concatenate([odd, rng.standard_normal(508) * 10]).astype(dtype)
    g = gc.Graph("g")
    with g:
        p = gc.placeholder("x", shape=x.shape, dtype=dtype)
        for e in (1, 2, 3):
            gc.output(gc.pow(p, gc.constant(np.full(x.shape, e, dtype))), name=f"p{e}")
        gc.output(gc.pow(p, gc.constant(np.array(2, dtype))), name="square")  # pow's meaning
    want = gc.compile(g, opt_level=0)(x)
    for level in (1, 2):
        for got, expected in zip(gc.compile(g, opt_level=level)(x), want):
            assert_bits_equal(got, expected, f"O{level}\n{gc.optimize(g, level)}")
    assert [n.op for n in gc.optimize(g, 1).op_nodes].count("pow") == 3
    fast = gc.optimize(g, 1, fast_math=True)
    assert "pow" not in [n.op for n in fast.op_nodes]
