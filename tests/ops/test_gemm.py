"""gemm: values against numpy over every flag, alpha and beta; broadcast c, empty dims,
nan and inf; gradients against finite differences and the eager tape; errors; the
kernel given c's own buffer as its output (what the planner does when c dies there)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.registry import get_op

KERNEL = get_op("gemm").kernel
FLAGS = list(itertools.product([False, True], repeat=2))
SCALES = [(1.0, 1.0), (-0.01, 1.0), (0.5, 2.0), (2.0, 0.0), (-1.0, -0.5)]


def reference(a, b, c, alpha, beta, ta, tb):
    x, y = (a.T if ta else a), (b.T if tb else b)
    result = alpha * (x.astype(np.float64) @ y.astype(np.float64))
    if c is not None and beta != 0:
        result = result + beta * c.astype(np.float64)
    return result


def operands(rng, m, k, n, ta, tb, c_shape, dtype):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c = None if c_shape is None else rng.standard_normal(c_shape).astype(dtype)
    return a, b, c


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ta,tb", FLAGS)
@pytest.mark.parametrize("alpha,beta", SCALES)
@pytest.mark.parametrize("c_shape", [None, (5, 7), (7,), (5, 1), (1, 1), ()])
def test_values_match_numpy(dtype, ta, tb, alpha, beta, c_shape) -> None:
    rng = np.random.default_rng(0)
    a, b, c = operands(rng, 5, 6, 7, ta, tb, c_shape, dtype)
    got = gc.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)
    assert got.dtype == np.dtype(dtype) and got.shape == (5, 7)
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, reference(a, b, c, alpha, beta, ta, tb), rtol=tol, atol=tol)


def test_bits_are_those_of_its_decomposition() -> None:
    """matmul, then * alpha, then + c * beta: what ONNX's importer builds from Gemm."""
    rng = np.random.default_rng(1)
    a, b, c = operands(rng, 9, 40, 11, True, False, (11,), "float32")
    want = np.matmul(a.T, b) * np.float32(0.3) + c * np.float32(1.5)
    assert np.array_equal(gc.gemm(a, b, c, 0.3, 1.5, trans_a=True), want)


@pytest.mark.parametrize("m,k,n", [(0, 3, 4), (3, 0, 4), (3, 4, 0), (0, 0, 0)])
def test_empty_dims(m, k, n) -> None:
    rng = np.random.default_rng(2)
    a, b, c = operands(rng, m, k, n, False, True, (n,), "float64")
    got = gc.gemm(a, b, c, alpha=2.0, beta=0.5, trans_b=True)
    np.testing.assert_array_equal(got, reference(a, b, c, 2.0, 0.5, False, True))


def test_nan_and_inf() -> None:
    a = np.array([[np.inf, 1.0], [2.0, np.nan]], np.float32)
    b = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    c = np.array([[np.nan, 1.0], [-np.inf, 2.0]], np.float32)
    with np.errstate(invalid="ignore"):
        got = gc.gemm(a, b, c)
        want = a @ b + c
    np.testing.assert_array_equal(got, want)
    # beta = 0: c is not read (BLAS's and torch.addmm's rule), its nan does not propagate
    np.testing.assert_array_equal(gc.gemm(b, b, c, beta=0.0), b)
    # alpha = 0 still multiplies: 0 * inf is nan
    with np.errstate(invalid="ignore"):
        assert np.isnan(gc.gemm(a, b, alpha=0.0)[0, 0])


def test_kernel_into_c_own_buffer_gives_the_same_bits() -> None:
    rng = np.random.default_rng(3)
    a, b, c = operands(rng, 30, 50, 20, True, False, (30, 20), "float32")
    for alpha, beta in SCALES:
        apart = KERNEL(a, b, c, alpha=alpha, beta=beta, trans_a=True)
        shared = c.copy()
        KERNEL(a, b, shared, out=shared, alpha=alpha, beta=beta, trans_a=True)
        assert np.array_equal(apart, shared), (alpha, beta)


def test_callers_arrays_are_not_written() -> None:
    rng = np.random.default_rng(4)
    a, b, c = operands(rng, 4, 3, 2, False, False, (4, 2), "float32")
    saved = [x.copy() for x in (a, b, c)]
    gc.gemm(a, b, c, alpha=-1.0)
    assert all(np.array_equal(x, y) for x, y in zip((a, b, c), saved))


@pytest.mark.parametrize("ta,tb", FLAGS)
@pytest.mark.parametrize("c_shape", [(3, 4), (4,), (3, 1)])
def test_gradients_match_finite_differences_and_eager(ta, tb, c_shape) -> None:
    rng = np.random.default_rng(5)
    a, b, c = operands(rng, 3, 5, 4, ta, tb, c_shape, "float64")
    flags = {"alpha": -0.7, "beta": 1.3, "trans_a": ta, "trans_b": tb}
    seed = rng.standard_normal((3, 4))

    def loss(a, b, c):
        return gc.sum(gc.gemm(a, b, c, **flags) * seed)

    g = gc.trace(loss, a, b, c)
    grads = gc.compile(gc.gradients(g, wrt=[p.name for p in g.inputs]))(a, b, c)[1:]
    eps = 1e-6
    for k, x in enumerate((a, b, c)):
        numeric = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            up, down = [y.copy() for y in (a, b, c)], [y.copy() for y in (a, b, c)]
            up[k][index] += eps
            down[k][index] -= eps
            numeric[index] = (
                np.sum(reference(*up, **_ref(flags)) * seed)
                - np.sum(reference(*down, **_ref(flags)) * seed)
            ) / (2 * eps)
        np.testing.assert_allclose(grads[k], numeric, rtol=1e-6, atol=1e-8)
    tensors = [ge.tensor(x, requires_grad=True) for x in (a, b, c)]
    ge.sum(ge.gemm(*tensors, **flags) * ge.tensor(seed)).backward()
    for t, want in zip(tensors, grads):
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-12, atol=1e-12)


def _ref(flags: dict) -> dict:
    return {
        "alpha": flags["alpha"],
        "beta": flags["beta"],
        "ta": flags["trans_a"],
        "tb": flags["trans_b"],
    }


def test_gradient_of_c_with_beta_zero_is_zero() -> None:
    c = ge.tensor(np.ones((2, 2)), requires_grad=True)
    ge.sum(ge.addmm(c, ge.tensor(np.eye(2)), ge.tensor(np.eye(2)), beta=0.0)).backward()
    np.testing.assert_array_equal(c.grad.numpy(), np.zeros((2, 2)))


def test_addmm_is_torchs() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    i, m1, m2 = rng.standard_normal((4,)), rng.standard_normal((3, 5)), rng.standard_normal((5, 4))
    got = ge.addmm(ge.tensor(i), ge.tensor(m1), ge.tensor(m2), beta=0.5, alpha=-2.0)
    want = torch.addmm(*(torch.tensor(x) for x in (i, m1, m2)), beta=0.5, alpha=-2.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert got.grad_fn is None or got.grad_fn.name() == "AddmmBackward0"


@pytest.mark.parametrize(
    "shapes,dtypes,flags,error,words",
    [
        (((3,), (3, 2)), ("float32",) * 2, {}, ShapeError, "a must be a matrix"),
        (((3, 4), (3, 2)), ("float32",) * 2, {}, ShapeError, "inner dims differ"),
        (((3, 4), (4, 2), (3, 3)), ("float32",) * 3, {}, ShapeError, "does not broadcast"),
        (((3, 4), (4, 2), (2, 3, 2)), ("float32",) * 3, {}, ShapeError, "does not broadcast"),
        (((3, 4), (4, 2)), ("float32", "float64"), {}, DTypeError, "must all be float32"),
        (((3, 4), (4, 2)), ("int64", "int64"), {}, DTypeError, "must all be float32"),
        (((3, 4), (4, 2)), ("float32",) * 2, {"alpha": "x"}, GraphcError, "alpha must be"),
        (((3, 4), (4, 2)), ("float32",) * 2, {"trans_a": 2}, GraphcError, "trans_a must be"),
    ],
)
def test_errors_name_gemm_and_what_was_expected(shapes, dtypes, flags, error, words) -> None:
    with pytest.raises(error, match=f"^gemm: .*{words}"), gc.Graph("bad"):
        xs = [gc.placeholder(f"x{k}", s, d) for k, (s, d) in enumerate(zip(shapes, dtypes))]
        gc.gemm(*xs, **flags)


def test_symbolic_dims_and_text_round_trip() -> None:
    g = gc.Graph("sym")
    with g:
        a = gc.placeholder("a", ("B", 4))
        w = gc.placeholder("w", (3, 4))
        c = gc.placeholder("c", (3,))
        gc.output(gc.gemm(a, w, c, alpha=-0.25, trans_b=True), name="y")
    assert g.outputs[0].type.shape == ("B", 3)
    assert str(gc.parse(str(g))) == str(g)
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((6, 4), (3, 4), (3,))]
    np.testing.assert_allclose(gc.compile(g)(*xs), -0.25 * xs[0] @ xs[1].T + xs[2], rtol=1e-6)
