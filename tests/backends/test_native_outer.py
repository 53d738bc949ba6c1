"""Stacked outer products (a matmul of (..., M, 1) by (..., 1, N), as vmap batches
per-example weight gradients) in C: numpy's bits on special values, in float32 and
float64, for every rank, operands that are views, and calls large enough to run on the
OpenMP pool; and what stays on numpy."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import calls, matmul, outer, toolchain
from graphc.backends.native.rows import prelude as kernel_prelude
from tests.edge_values import bits_differ, float_specials
from tests.native_checks import needs_native, runs_native

pytestmark = needs_native


def _operands(dtype: str, lead: tuple[int, ...], m: int, n: int, seed: int) -> tuple:
    """Columns (lead, m, 1) and rows (lead, 1, n) drawn from the special values and
    random numbers: every pair of signed zeros, infinities, nan and subnormals meets."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate([float_specials(np.dtype(dtype)), rng.standard_normal(64)])
    pool = pool.astype(dtype)
    return rng.choice(pool, (*lead, m, 1)), rng.choice(pool, (*lead, 1, n))


def _graph(a: np.ndarray, b: np.ndarray) -> gc.Graph:
    g = gc.Graph("outer")
    with g:
        x = gc.placeholder("a", shape=a.shape, dtype=a.dtype)
        y = gc.placeholder("b", shape=b.shape, dtype=b.dtype)
        gc.output(gc.matmul(x, y), name="out")
    return g


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("lead", "m", "n"),
    [
        ((), 7, 5),
        ((3,), 1, 1),
        ((256,), 64, 10),
        ((2, 3), 9, 17),
        ((0,), 4, 4),
        ((5,), 0, 3),
        ((3,), 4, 0),  # empty rows: nothing may be written
        # rows of whole vectors (8 or 16 lanes), and of whole vectors and an overlapping one
        ((4,), 3, 8),
        ((2,), 5, 16),
        ((3,), 2, 20),
        ((2,), 3, 33),
    ],
)
def test_stacked_outer_products_give_numpys_bits(
    dtype: str, lead: tuple[int, ...], m: int, n: int
) -> None:
    a, b = _operands(dtype, lead, m, n, seed=m * 31 + n)
    with np.errstate(all="ignore"):
        want = np.matmul(a, b)
        exe = gc.compile(_graph(a, b), backend="native")
        got = exe(a, b)
    assert bits_differ(got, want) is None
    # a stack is this kernel's (a matrix, matmul.py's), unless its result is empty
    # (numpy's: rows of no entries took whole-vector stores past the result with AVX-512)
    name = outer.KERNELS[np.dtype(dtype)].name
    assert (name in exe.source()) == bool(lead and want.size), exe.source()


@pytest.mark.parametrize("n", [64, 10])
def test_views_and_a_call_on_the_pool_give_numpys_bits(n: int) -> None:
    """Operands made inside the graph by reshapes and transposes of rows (vmap's form),
    and a result of 2**21 entries, large enough to run on the OpenMP pool: rows of whole
    vectors, and rows of 10, shorter than a vector with AVX-512, where each thread's
    last row must not be stored past (the next thread's first is there)."""
    rng = np.random.default_rng(5)
    examples = 2**21 // (64 * n)
    rows, cols = rng.standard_normal((examples, 64)), rng.standard_normal((examples, n))
    rows, cols = rows.astype(np.float32), cols.astype(np.float32)
    rows[::7, 1::3] = -0.0  # not in column 0: a thread's first row then has no zero
    g = gc.Graph("per_example")
    with g:
        x = gc.placeholder("x", shape=rows.shape, dtype="float32")
        d = gc.placeholder("d", shape=cols.shape, dtype="float32")
        column = gc.transpose(gc.reshape(x, (examples, 1, 64)), (0, 2, 1))
        gc.output(gc.matmul(column, gc.reshape(d, (examples, 1, n))), name="grads")
    assert examples * 64 * n >= outer.PARALLEL_WORK
    exe = gc.compile(g, backend="native")
    want = np.matmul(rows[:, :, None], cols[:, None, :])
    for _ in range(20):  # the threads' order differs from call to call
        assert bits_differ(exe(rows, cols), want) is None
    assert runs_native(exe, rows, cols) >= 1


@pytest.mark.parametrize("parallel", [0, 1])
def test_the_kernel_writes_its_result_and_nothing_past_it(parallel: int) -> None:
    """The C called on a result that lies inside a larger array: every row length from 1
    to past a vector, stacks of 1 to 39 rows, on the calling thread and on the pool; the
    result holds numpy's bits and the entries around it keep theirs (rows shorter than
    a vector are stored as whole vectors with AVX-512: none may reach past the result)."""
    built = toolchain.build_units([outer.SOURCE], kernel_prelude())[outer.SOURCE]
    kernel = outer.KERNELS[np.dtype(np.float32)]
    fn = calls.bind(built.path, built.library, {kernel.name: kernel.params})[kernel.name]
    at = calls.address_now
    rng = np.random.default_rng(8)
    guard = 40
    for n in (1, 2, 3, 7, 10, 15, 16, 17, 33):
        for stack, m in ((1, 1), (2, 3), (5, 8), (3, 13)):
            a = rng.standard_normal((stack, m, 1)).astype(np.float32)
            b = rng.standard_normal((stack, 1, n)).astype(np.float32)
            size = stack * m * n
            whole = np.full(size + 2 * guard, np.float32(7.5))
            fn(stack, at(a), at(b), at(whole[guard:]), m, n, parallel)
            got = whole[guard : guard + size].reshape(stack, m, n)
            assert bits_differ(got, np.matmul(a, b)) is None, (n, stack, m)
            assert (whole[:guard] == 7.5).all() and (whole[guard + size :] == 7.5).all(), (
                f"written past a result of {stack} x {m} rows of {n}"
            )


def test_what_stays_on_numpy() -> None:
    """Broadcast leading dims are not this kernel's (float32: matmul.py's stacked
    product, one multiply-add from +0.0 an entry, numpy's bits); integers are numpy's
    matmul."""
    a = np.ones((3, 4, 1), np.float32)
    b = np.ones((1, 1, 5), np.float32)  # leading dims broadcast: not this kernel's
    exe = gc.compile(_graph(a, b), backend="native")
    np.testing.assert_array_equal(exe(a, b), np.matmul(a, b))
    source = exe.source(a, b)
    assert matmul.STACK.name in source and "gc_outer_f32" not in source
    ints = np.arange(12, dtype=np.int64).reshape(3, 4, 1)
    exe = gc.compile(_graph(ints, ints.reshape(3, 1, 4)), backend="native")
    np.testing.assert_array_equal(exe(ints, ints.reshape(3, 1, 4)), ints @ ints.reshape(3, 1, 4))
    assert "[native]" not in exe.explain(ints, ints.reshape(3, 1, 4))
