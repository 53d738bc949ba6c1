"""matmul's kernel: np.dot where numpy makes the same BLAS call for it, bit for bit
np.matmul; edge values, empty and one-row shapes, transposed, strided and integer operands."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pytest

from graphc.ops import linalg
from tests.edge_values import bits_differ

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan and inf products

SHAPES = [(1, 400, 120), (1, 84, 10), (3, 1, 5), (7, 130, 1), (32, 128, 513), (0, 4, 3), (2, 0, 3)]
SHAPES += [(1, 1, 1), (1, 1, 3), (3, 1, 1), (1, 300, 1), (2, 2, 2)]  # dot's scalar and vector cases


def _operands(m: int, k: int, n: int, dtype: str, b_transposed: bool, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype).T if b_transposed else rng.standard_normal((k, n))
    b = b.astype(dtype)
    if a.size and b.size:  # the edges: nan, inf, -0.0, a subnormal, extreme magnitudes
        tiny = np.finfo(dtype).smallest_subnormal
        a.flat[:: max(1, a.size // 5)] = [np.nan, np.inf, -0.0, tiny, 1e30][: a.size]
        b.flat[-1] = -np.inf if b.size > 1 else b.flat[-1]
    return a, b


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("b_transposed", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_kernel_gives_np_matmuls_bits(shape: tuple, dtype: str, b_transposed: bool) -> None:
    a, b = _operands(*shape, "float64" if dtype.startswith("int") else dtype, b_transposed, 0)
    if dtype.startswith("int"):
        a, b = (
            np.nan_to_num(a).clip(-9, 9).astype(dtype),
            np.nan_to_num(b).clip(-9, 9).astype(dtype),
        )
    want = np.matmul(a, b)
    out = np.full(want.shape, 7, want.dtype)
    a0, b0 = a.copy(), b.copy()
    got = linalg._matmul_kernel(a, b, out=out)
    assert got is out and bits_differ(out, want) is None
    assert bits_differ(a, a0) is None and bits_differ(b, b0) is None  # operands untouched
    assert bits_differ(linalg._matmul_kernel(a, b), want) is None  # no out given
    stacked = np.stack([a, a[::-1]])  # a batch of rows: one product over all of them
    rows = np.concatenate([a, a[::-1]])
    assert (
        bits_differ(
            linalg._matmul_kernel(stacked, b).reshape(rows.shape[0], b.shape[1]), np.matmul(rows, b)
        )
        is None
    )
    square = a @ a.T  # numpy's syrk, for dot and matmul alike
    assert bits_differ(linalg._matmul_kernel(a, a.T, out=np.empty_like(square)), square) is None


@pytest.mark.parametrize("shape", [(m, k, n) for m in (1, 2) for k in (1, 2, 5) for n in (1, 2)])
def test_signed_zero_products_keep_np_matmuls_sign(shape: tuple) -> None:
    m, k, n = shape
    for dtype in (np.float32, np.float64):
        a, b = np.zeros((m, k), dtype), np.full((k, n), -1.0, dtype)  # every product -0.0
        out = np.empty((m, n), dtype)
        assert bits_differ(linalg._matmul_kernel(a, b, out=out), np.matmul(a, b)) is None


def test_two_dimensional_blas_products_go_through_np_dot_and_the_rest_do_not() -> None:
    a, b = _operands(4, 8, 3, "float32", False, 1)
    calls = []
    real_dot = np.dot

    def spy(*args, **kwargs):
        calls.append(args[0].dtype)
        return real_dot(*args, **kwargs)

    with mock.patch.object(linalg.np, "dot", spy):
        linalg._matmul_kernel(a, b, out=np.empty((4, 3), np.float32))
        linalg._matmul_kernel(
            a.astype(np.int64), b.astype(np.int64), out=np.empty((4, 3), np.int64)
        )
        linalg._matmul_kernel(a, b.astype(np.float64), out=np.empty((4, 3), np.float64))
        linalg._matmul_kernel(a, b, out=np.empty((3, 4), np.float32).T)  # strided out
        linalg._matmul_kernel(a[:, ::2], b[::2], out=np.empty((4, 3), np.float32))  # strided
        linalg._matmul_kernel(a, np.asfortranarray(b), out=np.empty((4, 3), np.float32))
        linalg._matmul_kernel(a[:1, :1], b[:1, :1], out=np.empty((1, 1), np.float32))  # 1 x 1
    assert calls == [np.float32, np.float32]


@pytest.mark.parametrize("m, k, n", list(itertools.product((1, 5), (3, 64), (1, 33))))
def test_a_strided_out_or_operand_still_gives_np_matmuls_bits(m: int, k: int, n: int) -> None:
    a, b = _operands(m, k, n, "float32", False, 2)
    out, want = np.empty((n, m), np.float32).T, np.empty((n, m), np.float32).T
    linalg._matmul_kernel(a, b, out=out)  # a transposed out: BLAS's other arrangement
    assert bits_differ(out, np.matmul(a, b, out=want)) is None
    wide = np.zeros((m, 2 * k), np.float32)
    wide[:, ::2] = a
    got = linalg._matmul_kernel(wide[:, ::2], b, out=np.empty((m, n), np.float32))
    assert bits_differ(got, np.matmul(wide[:, ::2], b)) is None  # matmul's own loop
