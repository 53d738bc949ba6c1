"""gemm on the native backend: one cblas call on numpy's OpenBLAS (graphc/backends/native/blas.py)
where matmul.py's product does not compute it (float64, transposing flags, a beta other
than 0 and 1: test_native_sgd_fold.py checks the other gemms bit for bit).

Against numpy's kernel (the reference): bit for bit where BLAS makes numpy's own call
(alpha = 1, no c); elsewhere within the componentwise bound of a K-term dot product,
2 (K + 2) eps (|alpha| |op(a)| |op(b)| + |beta| |c|), since OpenBLAS scales and
accumulates into c block after block of K (measured: bit-equal for K = 32 with alpha a
power of two, not for K of 512 or more, nor for alpha = -0.01). The fallback when no
library is found; the SGD fold in a train step, native against numpy.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.backends.native import blas
from graphc.bench import mlp
from graphc.ir.registry import get_op
from tests.native_checks import needs_native

pytestmark = needs_native
KERNEL = get_op("gemm").kernel


def gemm_graph(shapes: list[tuple], dtype: str, **attrs: object) -> gc.Graph:
    g = gc.Graph("g")
    with g:
        xs = [gc.placeholder(f"x{k}", s, dtype) for k, s in enumerate(shapes)]
        gc.output(gc.gemm(*xs, **attrs), name="y")
    return g


def within_gemm_bound(got, want, a, b, c, alpha, beta, ta, tb) -> bool:
    x, y = (a.T if ta else a), (b.T if tb else b)
    k = x.shape[1]
    eps = float(np.finfo(want.dtype).eps)
    scale = abs(alpha) * (np.abs(x).astype(np.float64) @ np.abs(y))
    if c is not None and beta != 0:
        scale = scale + abs(beta) * np.abs(c)
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= 2 * (k + 2) * eps * scale))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (-0.01, 1.0), (0.5, 2.0), (1.5, 0.0)])
@pytest.mark.parametrize("m,n,k", [(32, 40, 784), (7, 3, 5), (48, 20, 1500)])
def test_native_gemm_within_the_bound_of_numpys(dtype, ta, tb, alpha, beta, m, n, k) -> None:
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c = rng.standard_normal((n,)).astype(dtype)
    flags = {"alpha": alpha, "beta": beta, "trans_a": ta, "trans_b": tb}
    exe = gc.compile(gemm_graph([a.shape, b.shape, c.shape], dtype, **flags), backend="native")
    assert "gemm(x0, x1, x2)" in exe.explain(a, b, c) and "[native]" in exe.explain(a, b, c)
    got = exe(a, b, c)
    want = KERNEL(a, b, c, **flags)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert within_gemm_bound(got, want, a, b, c, alpha, beta, ta, tb)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_alpha_one_without_c_is_numpys_own_call(dtype) -> None:
    rng = np.random.default_rng(1)
    a, b = (
        rng.standard_normal((300, 64)).astype(dtype),
        rng.standard_normal((300, 70)).astype(dtype),
    )
    exe = gc.compile(gemm_graph([a.shape, b.shape], dtype, trans_a=True), backend="native")
    assert np.array_equal(exe(a, b), KERNEL(a, b, trans_a=True))


def test_callers_arrays_of_any_layout_and_never_written() -> None:
    rng = np.random.default_rng(2)
    a = np.asfortranarray(rng.standard_normal((6, 9)).astype(np.float32))  # a transposed view
    b = rng.standard_normal((9, 20)).astype(np.float32)[:, ::2]  # strided: copied
    c = rng.standard_normal((6, 10)).astype(np.float32)
    saved = [x.copy() for x in (a, b, c)]
    exe = gc.compile(
        gemm_graph([a.shape, b.shape, c.shape], "float32", alpha=-2.0), backend="native"
    )
    got = exe(a, b, c)
    assert all(np.array_equal(x, y) for x, y in zip((a, b, c), saved))
    assert within_gemm_bound(got, KERNEL(a, b, c, alpha=-2.0), a, b, c, -2.0, 1.0, False, False)


def test_nan_and_inf_and_beta_zero() -> None:
    a = np.array([[np.inf, 1.0], [2.0, np.nan]], np.float32)
    eye = np.eye(2, dtype=np.float32)
    c = np.array([[np.nan, 1.0], [-np.inf, 2.0]], np.float32)
    with np.errstate(invalid="ignore"):
        for beta in (1.0, 0.0):
            exe = gc.compile(gemm_graph([(2, 2)] * 3, "float32", beta=beta), backend="native")
            np.testing.assert_array_equal(exe(a, eye, c), KERNEL(a, eye, c, beta=beta))


def test_alpha_zero_and_empty_dims_stay_on_numpy() -> None:
    """BLAS skips the product when alpha is 0 (a nan of a would not reach the result)."""
    for shapes, attrs in [([(3, 2), (2, 4)], {"alpha": 0.0}), ([(3, 0), (0, 4)], {})]:
        exe = gc.compile(gemm_graph(shapes, "float64", **attrs), backend="native")
        feeds = [np.full(s, np.nan, np.float64) for s in shapes]
        assert "[numpy]" in exe.explain(*feeds)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(exe(*feeds), KERNEL(*feeds, **attrs))


def test_without_the_library_numpys_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "locate", lambda: None)
    monkeypatch.setattr(blas, "_cache", {})
    assert isinstance(blas.library(), str)
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(s).astype(np.float64) for s in ((40, 30), (30, 20), (20,)))
    exe = gc.compile(
        gemm_graph([a.shape, b.shape, c.shape], "float64", alpha=-0.1), backend="native"
    )
    assert "[numpy]" in exe.explain(a, b, c)
    assert np.array_equal(exe(a, b, c), KERNEL(a, b, c, alpha=-0.1))


def test_a_library_failing_its_check_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A binding that computes nothing (a wrong symbol, say) is caught by the self-check."""
    found = blas.locate()
    assert found is not None, "numpy's OpenBLAS should be found on this machine"

    def inert(path, spelling):
        return blas.Blas(
            path, spelling[:2], spelling[2], dict.fromkeys(blas.DTYPES, lambda *a: None), "test"
        )

    monkeypatch.setattr(blas, "_bind", inert)
    monkeypatch.setattr(blas, "_cache", {})
    assert "failed its check" in blas.library()


def train_steps(backend: str, fast_math: bool, batch: int = 32):
    model = mlp.model()
    opt = optim.SGD(model.parameters(), lr=mlp.LR)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    step = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), opt, (x, y), fast_math=fast_math, backend=backend
    )
    return step, x, y


def test_mlp_step_with_the_fold_on_native_matches_numpy() -> None:
    native, x, y = train_steps("native", fast_math=True)
    plan = native.explain(x, y)
    folded = [line for line in plan.splitlines() if "= gemm(" in line]
    assert len(folded) == 3 and all(
        "written into state" in line and "[native]" in line for line in folded
    )
    reference, _, _ = train_steps("numpy", fast_math=False)
    for _ in range(6):
        np.testing.assert_allclose(native(x, y), reference(x, y), rtol=1e-5)
    got, want = native.parameters(), reference.parameters()
    for name in want:
        scale = float(np.max(np.abs(want[name])))
        assert float(np.max(np.abs(got[name] - want[name]))) <= 1e-5 * scale, name


def test_in_place_of_a_dying_c_and_inside_a_loop_body() -> None:
    g = gc.Graph("g")
    with g:
        a = gc.placeholder("a", (40, 30))
        b = gc.placeholder("b", (30, 20))
        v = gc.placeholder("v", (40, 20))
        c = gc.exp(v)  # an arena value that dies at the gemm: its buffer becomes the result
        gc.output(-gc.gemm(a, b, c, alpha=-0.25, beta=0.5), name="y")
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in ((40, 30), (30, 20), (40, 20))]
    exe = gc.compile(g, opt_level=0, backend="native")
    line = next(x for x in exe.explain(*feeds).splitlines() if "= gemm(" in x)
    # c: exp(v), the node named after its variable
    assert "in place of c " in line and "[native]" in line, line
    want = -KERNEL(feeds[0], feeds[1], np.exp(feeds[2]), alpha=-0.25, beta=0.5)
    got = exe(*feeds)
    assert within_gemm_bound(
        -got, -want, feeds[0], feeds[1], np.exp(feeds[2]), -0.25, 0.5, False, False
    )

    def body(carry, x):
        new = gc.gemm(x, x, carry, alpha=0.5, trans_a=True)
        return new, gc.sum(new)

    xs = rng.standard_normal((3, 6, 4)).astype(np.float64)
    loop = gc.trace(lambda c0, seq: gc.scan(body, c0, seq), np.zeros((4, 4)), xs)
    carry = np.zeros((4, 4))
    for x in xs:
        carry = KERNEL(x, x, carry, alpha=0.5, trans_a=True)
    np.testing.assert_allclose(
        gc.compile(loop, backend="native")(np.zeros((4, 4)), xs)[0], carry, rtol=1e-12
    )
