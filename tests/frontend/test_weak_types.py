"""Weak types (issue 35): a Python scalar that becomes a graph value in control flow (a
loop's initial carry, a branch result, fori_loop's counter with Python bounds) still
takes the dtype of the array it meets, as in JAX (graphc/ops/weak.py).

Each program runs traced (gc.jit) and, where jax is installed, in jax: dtypes and values
agree where JAX accepts the program. Where JAX refuses (a Python `1` against a float32
branch result) graphc accepts it by the same weak rule, and where graphc keeps numpy's
lattice for arrays (an int32 counter meeting a float32 carry) it refuses with an error
naming the carry and both dtypes, never changing a carry's dtype silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.types import DTYPES

F32 = np.dtype(np.float32)


@pytest.fixture
def jax32() -> Any:
    """jax with its default (32-bit) types: where JAX's weak rule gives float32."""
    return pytest.importorskip("jax")


@pytest.fixture
def jax64() -> Iterator[Any]:
    """jax with 64-bit types inside the test only, where graphc's defaults (int64) hold."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def xs_f32(n: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def agree(ours: Any, theirs: Any) -> None:
    """The same structure, dtypes and values (float32 tolerance)."""
    ours_leaves, ours_tree = gc.tree_flatten(ours)
    theirs_leaves, theirs_tree = gc.tree_flatten(theirs)
    assert ours_tree == theirs_tree
    for a, b in zip(ours_leaves, theirs_leaves, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def cumulative(c: Any, x: Any) -> tuple[Any, Any]:
    return c + x, c + x


# -- loop carries that start as Python scalars ----------------------------------------


@pytest.mark.parametrize("init", [0, 0.0])
def test_scan_python_scalar_init_takes_the_xs_dtype(init: Any, jax32: Any) -> None:
    xs = xs_f32()
    ours = gc.jit(lambda xs: gc.scan(cumulative, init, xs))(xs)
    assert ours[0].dtype == F32 and ours[1].dtype == F32
    agree(ours, jax32.lax.scan(cumulative, init, xs))


def test_scan_python_bool_init_is_weak_as_in_numpy(jax32: Any) -> None:
    # a Python bool is weak in numpy 2 (True + float32 is float32) but strong in JAX,
    # which refuses this carry; graphc follows numpy here
    xs = xs_f32()
    with pytest.raises(TypeError):
        jax32.lax.scan(cumulative, True, xs)
    carry, ys = gc.jit(lambda xs: gc.scan(cumulative, True, xs))(xs)
    assert carry.dtype == F32 and ys.dtype == F32
    np.testing.assert_allclose(ys, 1 + np.cumsum(xs), rtol=1e-6)


@pytest.mark.parametrize("init", [0, 0.0, True])
@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float32", "float64"])
def test_weak_carry_dtype_is_numpys_weak_rule(init: Any, dtype: str, jax64: Any) -> None:
    # the carry takes what numpy 2 gives the Python scalar meeting xs (NEP 50); jax
    # with 64-bit types agrees wherever it accepts the program (a bool is strong in JAX)
    xs = (np.arange(3) % 2).astype(dtype)
    f = gc.jit(lambda xs: gc.scan(lambda c, x: (c + x, c), init, xs))
    carry, ys = f(xs)
    assert carry.dtype == ys.dtype == np.result_type(xs.dtype, init)
    try:
        theirs = jax64.lax.scan(lambda c, x: (c + x, c), init, xs)
    except TypeError:
        assert isinstance(init, bool) and dtype != "bool"
        return
    agree((carry, ys), theirs)


def test_scan_weak_init_on_arrays_and_tensors_agrees_with_the_graph() -> None:
    xs = xs_f32()
    traced = gc.jit(lambda xs: gc.scan(cumulative, 0, xs))(xs)
    on_arrays = gc.scan(cumulative, 0, xs)
    eager = gc.scan(cumulative, 0, ge.tensor(xs))
    for other in (on_arrays, (eager[0].numpy(), eager[1].numpy())):
        agree(traced, other)


def test_scan_ys_holding_the_python_scalar_init_on_arrays_and_tensors(jax32: Any) -> None:
    """ys that are the carry before the step: the first is the init itself, which takes
    the carry's dtype before it is stacked (a Python 0 beside float32 values failed)."""
    xs = xs_f32()

    def before(c: Any, x: Any) -> tuple:
        return c + x, c

    traced = gc.jit(lambda xs: gc.scan(before, 0, xs))(xs)
    on_arrays = gc.scan(before, 0, xs)
    eager = gc.scan(before, 0, ge.tensor(xs))
    assert on_arrays[1].dtype == eager[1].dtype == F32
    for other in (on_arrays, (eager[0].numpy(), eager[1].numpy())):
        agree(traced, other)
    agree(on_arrays, jax32.lax.scan(before, 0, xs))
    # leaf by leaf: the int meets int32 xs; the float meets only Python scalars (numpy's
    # float64 when stacked, graphc's default for a Python float)
    pair = gc.scan(lambda c, x: ((c[0] + x, c[1] * 2), c), (0, 0.5), np.ones(3, np.int32))
    (count, _), (counts, halves) = pair
    assert count.dtype == counts.dtype == np.int32 and halves.dtype == np.float64
    np.testing.assert_array_equal(halves, [0.5, 1.0, 2.0])


@pytest.mark.parametrize("dtype", ["float16", "float64", "int8", "int32", "uint8", "int64"])
def test_scan_python_int_init_takes_any_xs_dtype(dtype: str, jax64: Any) -> None:
    if np.dtype(dtype) not in DTYPES.values():
        pytest.skip(f"graphc does not support {dtype} yet")
    xs = (np.arange(5) % 3).astype(dtype)
    ours = gc.jit(lambda xs: gc.scan(lambda c, x: (c + x, None), 0, xs)[0])(xs)
    assert ours.dtype == np.dtype(dtype)
    agree(ours, jax64.lax.scan(lambda c, x: (c + x, None), 0, xs)[0])


def test_scan_weak_carry_on_a_symbolic_and_an_empty_length() -> None:
    f = gc.trace(lambda xs: gc.scan(cumulative, 0, xs), gc.TensorSpec(("T",), "float32"))
    for n in (0, 1, 5):
        carry, ys = f(xs_f32(n))
        assert carry.dtype == F32 and ys.dtype == F32 and ys.shape == (n,)
    carry, _ = f(np.array([np.inf, -np.inf, 1.0], np.float32))
    assert np.isnan(carry)


def test_weak_carry_meets_only_python_scalars_as_in_jax(jax32: Any) -> None:
    # a weak int times a Python float is a float32 (JAX), not numpy's int64 * float
    xs = xs_f32(3)
    ours = gc.jit(lambda xs: gc.scan(lambda c, x: (c * 2.5, c < 4), 1, xs))(xs)
    assert ours[0].dtype == F32 and ours[1].dtype == np.bool_
    agree(ours, jax32.lax.scan(lambda c, x: (c * 2.5, c < 4), 1, xs))


def test_a_carry_that_stays_weak_stays_weak_after_the_loop(jax32: Any) -> None:
    xs, h = xs_f32(3), np.float32(0.5)
    f = gc.jit(lambda xs, h: gc.scan(lambda c, x: (c + 1, None), 0, xs)[0] + h)
    assert f(xs, h).dtype == F32  # a weak int64 count added to a float32 (strong: float64)
    jax_out = jax32.lax.scan(lambda c, x: (c + 1, None), 0, xs)[0] + h
    agree(f(xs, h), jax_out)


def test_weak_bool_carry_stays_a_bool_condition(jax32: Any) -> None:
    xs = np.array([0.5, 2.0, -1.0, 3.0], np.float32)

    def step(c: Any, x: Any) -> tuple[Any, Any]:
        return gc.logical_or(c, x > 1), gc.where(c, x, -x)

    ours = gc.jit(lambda xs: gc.scan(step, False, xs))(xs)
    assert ours[0].dtype == np.bool_ and ours[1].dtype == F32
    jnp = jax32.numpy
    agree(
        ours,
        jax32.lax.scan(lambda c, x: (jnp.logical_or(c, x > 1), jnp.where(c, x, -x)), False, xs),
    )


def test_weak_carry_as_an_index_is_an_ordinary_int(jax32: Any) -> None:
    xs = xs_f32(4)

    def f(xs: Any) -> Any:
        return gc.scan(lambda c, x: (c + 1, xs[c] * x), 0, xs)

    ours = gc.jit(f)(xs)
    assert ours[0].dtype == np.int64 and ours[1].dtype == F32
    np.testing.assert_allclose(ours[1], xs * xs)
    held = jax32.numpy.asarray(xs)
    theirs = jax32.lax.scan(lambda c, x: (c + 1, held[c] * x), 0, xs)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_pytree_carries_with_python_scalars_settle_leaf_by_leaf(jax64: Any) -> None:
    xs = xs_f32()

    def step(c: dict, x: Any) -> tuple[dict, None]:
        return {"sum": c["sum"] + x, "count": c["count"] + 1, "flag": c["flag"]}, None

    init = {"sum": 0, "count": 0, "flag": True}
    ours = gc.jit(lambda xs: gc.scan(step, init, xs)[0])(xs)
    assert [ours[k].dtype for k in ("sum", "count", "flag")] == [F32, np.int64, np.bool_]
    agree(ours, jax64.lax.scan(step, init, xs)[0])


def test_a_nested_cond_reading_a_weak_carry_settles_with_it() -> None:
    xs = np.array([0.5, 2.0, 3.0], np.float32)

    def step(c: Any, x: Any) -> tuple[Any, None]:
        return gc.cond(x > 1, lambda: c + x, lambda: c), None

    carry = gc.jit(lambda xs: gc.scan(step, 0, xs)[0])(xs)
    assert carry.dtype == F32 and carry == 5.0


def test_weak_ints_divided_give_a_weak_float_as_in_python_and_jax(jax32: Any) -> None:
    """numpy's int64 / int64 is float64; weak ints divided are Python's 1 / 2, a weak
    float: float32 next to float32 values (it was float64, and the fori carry failed)."""
    xs = xs_f32(3)
    ys = lambda xs: gc.scan(lambda c, x: (c + 1, x + c / 2), 0, xs)[1]  # noqa: E731
    agree(
        gc.jit(ys)(xs),
        ys_jax := jax32.jit(lambda xs: jax32.lax.scan(lambda c, x: (c + 1, x + c / 2), 0, xs)[1])(
            xs
        ),
    )
    assert ys_jax.dtype == F32
    for body in (lambda i, c: c + i / 2, lambda i, c: c + gc.sqrt(i)):
        ours = gc.jit(lambda x, body=body: gc.fori_loop(0, 3, body, x))(np.float32(0))
        assert ours.dtype == F32
    np.testing.assert_allclose(ours, 1 + np.sqrt(2), rtol=1e-6)
    alone = gc.jit(lambda x: gc.fori_loop(0, 3, lambda i, c: c + i / 2, 0.0) + x)(np.float32(1))
    assert alone.dtype == F32 and alone == 2.5


def test_a_weak_operand_is_weak_inside_the_branches_too() -> None:
    """A weak carry handed to a cond: `q * 0.5` in one branch stays weak and settles on
    the other branch's float64 (it was a strong float32 there: a type mismatch)."""

    def step(c: Any, t: Any) -> tuple[Any, Any]:
        return gc.cond(t > 0, lambda q: q + t, lambda q: q * 0.5, c), c

    carry, ys = gc.jit(lambda xs: gc.scan(step, 1.0, xs))(np.array([1.0, -1.0, 1.0]))
    assert carry.dtype == ys.dtype == np.float64
    np.testing.assert_array_equal(ys, [1.0, 2.0, 1.0])
    assert carry == 2.0


def test_a_python_complex_is_the_named_unsupported_dtype() -> None:
    for f in (
        lambda x: gc.fori_loop(0, 2, lambda i, c: c * x, 1j),
        lambda x: gc.cond(x > 0, lambda v: 1j, lambda v: v, x),
    ):
        with pytest.raises(gc.GraphcError, match="complex64 is not supported"):
            gc.jit(f)(np.float32(2))


def test_while_loop_python_init_takes_the_body_dtype(jax32: Any) -> None:
    x = np.float32(2.5)
    ours = gc.jit(lambda x: gc.while_loop(lambda c: c < 10, lambda c: c + x, 0))(x)
    assert ours.dtype == F32
    agree(ours, jax32.lax.while_loop(lambda c: c < 10, lambda c: c + x, 0))


def test_fori_loop_python_init_and_python_counter(jax32: Any) -> None:
    x = np.float32(1.5)
    for body, init in [
        (lambda i, c: c + x, 0),  # a weak init meeting a float32
        (lambda i, c: c * 0.5 + i, x),  # the weak counter meeting a float32 carry
        (lambda i, c: c + i, 0.0),  # both weak: a float32 (JAX's weak float)
    ]:
        ours = gc.jit(lambda x, body=body, init=init: gc.fori_loop(0, 4, body, init))(x)
        assert ours.dtype == F32
        agree(ours, jax32.lax.fori_loop(0, 4, body, init))


def test_fori_loop_weak_counter_on_arrays_and_tensors_as_traced() -> None:
    body = lambda i, c: c * 0.5 + i  # noqa: E731
    x = np.float32(1.5)
    traced = gc.jit(lambda x: gc.fori_loop(0, 4, body, x))(x)
    on_array = gc.fori_loop(0, 4, body, x)
    eager = gc.fori_loop(0, 4, body, ge.tensor(x)).numpy()
    for other in (on_array, eager):
        assert np.asarray(other).dtype == F32 and np.asarray(other) == traced


def test_fori_loop_graph_bounds_counter_is_strong() -> None:
    # bounds that are graph values make a strongly typed counter: numpy's lattice
    f = gc.jit(lambda n, x: gc.fori_loop(0, n, lambda i, c: c + gc.cast(i, "float32"), x))
    assert f(np.int64(4), np.float32(0)).dtype == F32
    with pytest.raises(gc.ShapeError) as info:
        gc.jit(lambda n, x: gc.fori_loop(0, n, lambda i, c: c + i, x))(np.int64(4), np.float32(0))
    assert "fori_loop: the carry init_val enters" in str(info.value)


def test_fori_loop_counter_indexes_an_array(jax32: Any) -> None:
    xs = xs_f32(5)
    ours = gc.jit(lambda xs: gc.fori_loop(1, 4, lambda i, c: c + xs[i], 0.0))(xs)
    assert ours.dtype == F32
    held = jax32.numpy.asarray(xs)
    agree(ours, jax32.lax.fori_loop(1, 4, lambda i, c: c + held[i], 0.0))


# -- where graphc keeps numpy's lattice, or a weak scalar cannot take the dtype --------


def test_strong_int32_counter_with_float32_carry_is_a_named_error(jax32: Any) -> None:
    body = lambda i, c: c + i  # noqa: E731
    lower = np.int32(0)
    # JAX's lattice keeps float32; numpy's (graphc's, for arrays) gives float64
    assert jax32.lax.fori_loop(lower, 3, body, np.float32(1)).dtype == F32
    with pytest.raises(gc.ShapeError) as info:
        gc.jit(lambda x: gc.fori_loop(lower, 3, body, x))(np.float32(1))
    message = str(info.value)
    for part in ("fori_loop", "init_val", "f32[]", "f64[]", "each carry must keep its type"):
        assert part in message, message
    # the cast it advises works
    fixed = gc.jit(lambda x: gc.fori_loop(lower, 3, lambda i, c: c + gc.cast(i, "float32"), x))
    assert fixed(np.float32(1)).dtype == F32 and fixed(np.float32(1)) == 4.0


def test_a_strong_carry_changing_dtype_names_the_leaf() -> None:
    init = {"a": np.float32(0), "b": np.int32(0)}
    step = lambda c, x: ({"a": c["a"] + x, "b": c["b"] + x}, None)  # noqa: E731
    with pytest.raises(gc.ShapeError) as info:
        gc.jit(lambda xs: gc.scan(step, init, xs)[0])(xs_f32())
    message = str(info.value)
    assert "scan: the carry init['b'] enters" in message and "i32[]" in message, message
    assert "f64[]" in message, message


def test_python_float_carry_cannot_become_an_int() -> None:
    def body(c: Any) -> Any:
        return gc.cast(c, "int32") + np.int32(1)

    with pytest.raises(gc.DTypeError) as info:
        gc.jit(lambda x: gc.while_loop(lambda c: c < 10, body, 0.5))(np.float32(0))
    message = str(info.value)
    assert "init_val" in message and "int32" in message and "np.int32" in message, message


def test_python_int_too_big_for_the_carry_dtype_is_named() -> None:
    xs = np.arange(3, dtype=np.int32)
    with pytest.raises(gc.DTypeError) as info:
        gc.jit(lambda xs: gc.scan(lambda c, x: (c + x, None), 2**40, xs)[0])(xs)
    assert "carry init" in str(info.value) and "int32" in str(info.value)


# -- branch results -------------------------------------------------------------------


def test_cond_python_result_takes_the_other_branch_dtype(jax32: Any) -> None:
    f = gc.jit(lambda p, x: gc.cond(p, lambda v: 1, lambda v: v * 2, x))
    x = np.array([1.5, -2.0], np.float32)
    # JAX refuses int32[] against float32; graphc applies the weak rule (and shapes must agree)
    with pytest.raises(TypeError):
        jax32.lax.cond(True, lambda v: 1, lambda v: v * 2, np.float32(1))
    scalar = gc.jit(lambda p, x: gc.cond(p, lambda v: 1, lambda v: v * 2, x))
    for pred, expected in ((True, 1.0), (False, 3.0)):
        out = scalar(np.bool_(pred), np.float32(1.5))
        assert out.dtype == F32 and out == expected
    with pytest.raises(gc.ShapeError):  # a scalar against an f32[2] is no weak-type matter
        f(np.bool_(True), x)


def test_cond_python_results_both_ways(jax32: Any) -> None:
    both = gc.jit(lambda p, h: gc.cond(p, lambda: 1, lambda: 2) + h)
    h = np.float32(0.25)
    for pred in (True, False):
        ours = both(np.bool_(pred), h)
        assert ours.dtype == F32  # weak in both branches: the result is still weak
        agree(ours, jax32.lax.cond(pred, lambda: 1, lambda: 2) + h)
    mixed = gc.jit(lambda p: gc.cond(p, lambda: 1, lambda: 2.5))
    assert mixed(np.bool_(True)).dtype == F32 and mixed(np.bool_(False)) == 2.5


def test_cond_python_float_against_int32_is_a_named_error() -> None:
    with pytest.raises(gc.DTypeError) as info:
        gc.jit(lambda p, x: gc.cond(p, lambda v: 1.5, lambda v: v, x))(np.bool_(1), np.int32(2))
    message = str(info.value)
    assert "cond: result" in message and "int32" in message and "true_fn" in message, message


def test_cond_weak_results_inside_pytrees() -> None:
    def f(p: Any, x: Any) -> Any:
        return gc.cond(p, lambda v: {"a": v, "b": (0, v)}, lambda v: {"a": 1.0, "b": (v, v)}, x)

    def flat(p: Any, x: Any) -> tuple:
        return tuple(gc.tree_leaves(f(p, x)))

    a, b0, _ = gc.jit(flat)(np.bool_(False), np.float32(3))
    assert a.dtype == F32 and a == 1.0
    assert b0.dtype == F32 and b0 == 3.0
    a, b0, _ = gc.jit(flat)(np.bool_(True), np.float32(3))
    assert a == 3.0 and b0.dtype == F32 and b0 == 0.0


@pytest.mark.parametrize("index", [0, 1, 2, 7])
def test_switch_weak_branch_results(index: int) -> None:
    x = np.float32(5)
    for branches, expected in [
        ([lambda v: 1, lambda v: v, lambda v: 2.0], [1.0, 5.0, 2.0]),
        ([lambda v: v, lambda v: 1, lambda v: 2], [5.0, 1.0, 2.0]),  # weak in a nested cond
    ]:
        out = gc.jit(lambda i, v, bs=branches: gc.switch(i, bs, v))(np.int32(index), x)
        assert out.dtype == F32 and out == expected[min(index, 2)]


def test_scan_python_ys_keep_graphc_defaults(jax64: Any) -> None:
    xs = xs_f32(3)
    ys = gc.jit(lambda xs: gc.scan(lambda c, x: (c, (1, 2.0, x > 0)), xs[0], xs)[1])(xs)
    assert [y.dtype for y in ys] == [np.int64, F32, np.bool_]
    theirs = jax64.lax.scan(lambda c, x: (c, (1, 2, x > 0)), xs[0], xs)
    agree(ys[0], theirs[1][0])  # int64 under x64, as graphc's default int


# -- results of transformations that are Python scalars -------------------------------


def test_transformation_results_that_are_python_scalars(jax64: Any) -> None:
    xs = xs_f32(3)
    agree(gc.jit(lambda x: 1)(xs), jax64.jit(lambda x: 1)(xs))  # int64 with x64
    one = gc.jit(lambda x: (x, 1.0))(xs)[1]
    assert one.dtype == F32 and one == 1.0  # graphc's default float (JAX x32's too)
    batched = gc.vmap(lambda x: (x, 1))(xs)[1]
    agree(batched, jax64.vmap(lambda x: (x, 1))(xs)[1])
    zero = gc.grad(lambda x: gc.sum(x) * 0 + 2.0)(xs)
    assert zero.dtype == F32 and not zero.any()


# -- gradients through weak carries, float64 against finite differences ---------------


def central_difference(f: Callable[[np.ndarray], float], x: np.ndarray) -> np.ndarray:
    eps, grad = 1e-6, np.zeros_like(x)
    for k in range(x.size):
        step = np.zeros_like(x)
        step.flat[k] = eps
        grad.flat[k] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


@pytest.mark.parametrize(
    "fn",
    [
        lambda xs: gc.scan(lambda c, x: (c + x * x * c + x, None), 0, xs)[0],
        lambda xs: gc.sum(gc.fori_loop(0, 3, lambda i, c: c * (i + 1) + gc.sin(c), xs)),
        lambda xs: gc.sum(gc.scan(lambda c, x: (c * 0.5 + x, c * x), 1, xs)[1]),
    ],
)
def test_gradients_through_weak_carries(fn: Callable[..., Any]) -> None:
    xs = np.random.default_rng(3).standard_normal(4)
    grad = gc.grad(fn)(xs)
    assert grad.dtype == np.float64
    expected = central_difference(lambda v: float(gc.jit(fn)(v)), xs)
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-7)


def test_a_strong_init_traces_the_body_once_a_weak_one_twice() -> None:
    calls: list[str] = []

    def step(c: Any, x: Any) -> tuple[Any, None]:
        calls.append("step")
        return c + x, None

    gc.trace(lambda xs: gc.scan(step, np.float32(0), xs)[0], gc.TensorSpec((3,)))
    assert len(calls) == 1
    gc.trace(lambda xs: gc.scan(step, 0, xs)[0], gc.TensorSpec((3,)))
    assert len(calls) == 3  # a weak carry, then the float32 it takes (as JAX retraces)
