"""Pooling against PyTorch: values, gradients and second derivatives of max_pool2d
(with return_indices), avg_pool2d and adaptive_avg_pool2d over kernel, stride, padding,
dilation and ceil_mode edge cases, in float32 and float64; nan and -inf; compiled graphs
bit for bit against the reference interpreter; errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch
from tests.differential import check_levels

RNG = np.random.default_rng(1)
TOL = {"float32": {"rtol": 1e-6, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-12}}

# (input shape, kernel_size, stride, padding, dilation, ceil_mode)
MAX_POOL = [
    ((2, 3, 6, 6), 2, None, 0, 1, False),
    ((1, 2, 5, 5), 3, 1, 1, 1, False),  # overlapping windows
    ((1, 2, 7, 7), 3, 2, 1, 2, False),  # dilation 2
    ((1, 2, 5, 5), 2, 2, 0, 1, True),  # ceil_mode: partial windows
    ((1, 2, 6, 5), 3, 2, 1, 1, True),
    ((1, 2, 4, 4), 3, 3, 0, 2, True),  # a window larger than the input
    ((2, 2, 3, 4), (3, 4), None, 0, 1, False),  # kernel = input size
    ((1, 2, 7, 7), 2, 3, 0, 1, False),  # stride > kernel
    ((1, 2, 3, 3), 1, 2, 0, 1, False),  # 1x1 kernel
    ((1, 2, 5, 7), (3, 2), (2, 1), (1, 0), (1, 2), False),
]
AVG_POOL = [  # (input shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor)
    ((2, 3, 6, 6), 2, None, 0, False, True, None),
    ((1, 2, 5, 5), 3, 1, 1, False, True, None),
    ((1, 2, 5, 5), 3, 1, 1, False, False, None),
    ((1, 2, 5, 5), 2, 2, 0, True, True, None),
    ((1, 2, 6, 5), 3, 2, 1, True, False, None),
    ((1, 2, 6, 5), 3, 2, 1, True, True, None),
    ((1, 2, 4, 4), 2, 2, 1, False, True, 3),
    ((2, 2, 3, 4), (3, 4), None, 0, False, True, None),
    ((1, 2, 7, 7), 2, 3, 0, False, True, None),
    ((1, 2, 3, 3), 1, 2, 0, False, True, None),
    ((1, 2, 5, 7), (3, 2), (2, 1), (1, 0), True, False, None),
]
ADAPTIVE = [((2, 3, 5, 7), (3, 2)), ((1, 2, 6, 4), (3, 2)), ((1, 2, 5, 4), (2, None)),
            ((2, 3, 4, 5), 1), ((1, 2, 2, 3), (3, 4)), ((1, 1, 9, 10), 4)]  # fmt: skip


def _compare(ours: Callable, theirs: Callable, x: np.ndarray, dtype: str) -> None:
    """ours(tensor) against theirs(torch tensor): values, then input gradients."""
    tx = torch.tensor(x, requires_grad=True)
    want = theirs(tx)
    ct = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    want.backward(torch.tensor(ct))
    ex = ge.tensor(x, requires_grad=True)
    got = ours(ex)
    assert got.dtype == x.dtype and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype])
    got.backward(ge.tensor(ct))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), **TOL[dtype])


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", MAX_POOL, ids=[str(c).replace(" ", "") for c in MAX_POOL])
def test_max_pool2d_matches_torch(case: tuple, dtype: str) -> None:
    shape, *args = case
    x = RNG.standard_normal(shape).astype(dtype)
    _compare(
        lambda t: F.max_pool2d(t, *args),
        lambda t: torch.nn.functional.max_pool2d(t, *args),
        x,
        dtype,
    )
    values, indices = F.max_pool2d(x, *args, return_indices=True)
    want, want_indices = torch.nn.functional.max_pool2d(torch.tensor(x), *args, return_indices=True)
    np.testing.assert_array_equal(values, want.numpy())
    np.testing.assert_array_equal(indices, want_indices.numpy())
    assert indices.dtype == np.int64


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", AVG_POOL, ids=[str(c).replace(" ", "") for c in AVG_POOL])
def test_avg_pool2d_matches_torch(case: tuple, dtype: str) -> None:
    shape, *args = case
    x = RNG.standard_normal(shape).astype(dtype)
    _compare(
        lambda t: F.avg_pool2d(t, *args),
        lambda t: torch.nn.functional.avg_pool2d(t, *args),
        x,
        dtype,
    )


@needs_torch
@pytest.mark.parametrize("case", AVG_POOL, ids=[str(c).replace(" ", "") for c in AVG_POOL])
def test_half_float_avg_pool2d_sums_in_float32_as_torch(case: tuple) -> None:
    """float16 windows of large values: the sum in float32, one rounding after the
    division, PyTorch's CPU bits exactly (summed in float16, a 3x3 window of values near
    100 drifts by several ulps). The gradient adds overlapping shares in float16, as
    PyTorch's does (in another order): both within the bound of such sums of the exact
    float64 gradient."""
    shape, *args = case
    x = (RNG.standard_normal(shape) * 100).astype(np.float16)
    want = torch.nn.functional.avg_pool2d(torch.tensor(x), *args).numpy()
    got = F.avg_pool2d(x, *args)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    tx = torch.tensor(x, requires_grad=True)
    ct = (RNG.standard_normal(want.shape) * 10).astype(np.float16)
    torch.nn.functional.avg_pool2d(tx, *args).backward(torch.tensor(ct))
    ex = ge.tensor(x, requires_grad=True)
    F.avg_pool2d(ex, *args).backward(ge.tensor(ct))
    exact, size = torch.tensor(x.astype(np.float64), requires_grad=True), ct.astype(np.float64)
    torch.nn.functional.avg_pool2d(exact, *args).backward(torch.tensor(size))
    bound = torch.tensor(x.astype(np.float64), requires_grad=True)
    torch.nn.functional.avg_pool2d(bound, *args).backward(torch.tensor(np.abs(size)))
    slack = 10 * 2.0**-11 * bound.grad.numpy() + 2.0**-24  # <= 9 roundings a share, each
    for grad in (ex.grad.numpy(), tx.grad.numpy()):
        assert np.all(np.abs(grad.astype(np.float64) - exact.grad.numpy()) <= slack)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "size"), ADAPTIVE, ids=[str(c).replace(" ", "") for c in ADAPTIVE]
)
def test_adaptive_avg_pool2d_matches_torch(shape: tuple, size: Any, dtype: str) -> None:
    x = RNG.standard_normal(shape).astype(dtype)
    tol = {"float32": {"rtol": 1e-5, "atol": 1e-6}, "float64": TOL["float64"]}[dtype]
    tx = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.adaptive_avg_pool2d(tx, size)
    want.sum().backward()
    ex = ge.tensor(x, requires_grad=True)
    got = F.adaptive_avg_pool2d(ex, size)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
    got.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), **tol)


@needs_torch
def test_unbatched_inputs_match_torch() -> None:
    x = RNG.standard_normal((3, 6, 5))
    tx = torch.tensor(x)
    for ours, theirs in [
        (F.max_pool2d(x, 2, ceil_mode=True), torch.nn.functional.max_pool2d(tx, 2, ceil_mode=True)),
        (F.avg_pool2d(x, 3, 1, 1), torch.nn.functional.avg_pool2d(tx, 3, 1, 1)),
        (F.adaptive_avg_pool2d(x, (4, 3)), torch.nn.functional.adaptive_avg_pool2d(tx, (4, 3))),
    ]:
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12)
    values, where = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    _, want = torch.nn.functional.max_pool2d(tx, 3, 2, 1, return_indices=True)
    assert values.shape == (3, 3, 3)
    np.testing.assert_array_equal(where, want.numpy())


@needs_torch
def test_max_pool2d_propagates_nan_and_routes_ties_and_infinities_like_torch() -> None:
    x = np.array([[[[1.0, 1.0, 2.0, -np.inf], [0.0, 2.0, -np.inf, -np.inf],
                    [np.nan, 0.0, 3.0, 3.0], [1.0, 1.0, 3.0, 3.0]]]])  # fmt: skip
    tx = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.max_pool2d(tx, 2, stride=1, padding=1)
    want.sum().backward()
    ex = ge.tensor(x, requires_grad=True)
    got = F.max_pool2d(ex, 2, stride=1, padding=1)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


@needs_torch
def test_max_pool2d_of_integers_matches_torch() -> None:
    x = RNG.integers(-50, 50, (2, 3, 5, 6))
    want = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True).numpy()
    got = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    low = np.int32(np.iinfo(np.int32).min + 60)  # the padding: the least int32, never a maximum
    small = x.astype(np.int32)
    np.testing.assert_array_equal(
        F.max_pool2d(small + low, 2, padding=1), F.max_pool2d(small, 2, padding=1) + low
    )


def _penalty_grads(pool: Callable, module: Any, x: Any, seed: Any) -> Any:
    """d/dx of sum(seed * d sum(pool(x) * pool(x) * x ... )/dx): a second derivative."""
    y = pool(x * x)
    (gx,) = module.autograd.grad((y * y).sum(), [x], create_graph=True)
    (ggx,) = module.autograd.grad((gx * seed).sum(), [x])
    return ggx


@needs_torch
@pytest.mark.parametrize(
    "args",
    [("max_pool2d", (3, 2, 1)), ("max_pool2d", (2, 1, 0, 2, True)), ("avg_pool2d", (3, 2, 1, True, False)),
     ("adaptive_avg_pool2d", ((3, 2),))],
)  # fmt: skip
def test_second_derivatives_match_torch(args: tuple) -> None:
    name, rest = args
    x, seed = RNG.standard_normal((2, 2, 6, 5)), RNG.standard_normal((2, 2, 6, 5))
    want = _penalty_grads(lambda t: getattr(torch.nn.functional, name)(t, *rest), torch,
                          torch.tensor(x, requires_grad=True), torch.tensor(seed))  # fmt: skip
    got = _penalty_grads(lambda t: getattr(F, name)(t, *rest), ge, ge.tensor(x, requires_grad=True),
                         ge.tensor(seed))  # fmt: skip
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


def _pool_net(x: Any) -> Any:
    """Every pooling op (and so, in the gradient, every pooling gradient op)."""
    y = gc.max_pool2d(gc.tanh(x), 3, stride=2, padding=(1, 0, 1, 1), ceil_mode=True)
    y = gc.avg_pool2d(y * y, 2, stride=1, padding=1, count_include_pad=False)
    z = gc.adaptive_avg_pool2d(y, (2, 3)) + gc.global_avg_pool2d(y)
    values, where = F.max_pool2d(z, 2, return_indices=True)
    return gc.sum(values * gc.cast(where, values.dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_graphs_match_the_reference(dtype: str) -> None:
    """Bit for bit on numpy; on native tanh within its declared bound, the rest bit for
    bit (tests/differential.py)."""
    gg = gc.gradients(gc.trace(_pool_net, gc.TensorSpec((None, 3, 9, 8), dtype)), wrt=["x"])
    fixed = gc.gradients(gc.trace(_pool_net, gc.TensorSpec((4, 3, 9, 8), dtype)), wrt=["x"])
    second = gc.gradients(gc.trace(lambda v: gc.sum(fixed(v)[-1] ** 2), gc.TensorSpec((4, 3, 9, 8), dtype)), wrt=["v"])  # fmt: skip
    for graph in (gg, second):
        gc.verify(graph)
        x = RNG.standard_normal((4, 3, 9, 8)).astype(dtype)
        x[0, 0, :2, :2] = [[np.nan, np.inf], [-np.inf, -0.0]]
        check_levels(graph, [{"x": x} if graph is gg else {"v": x}])


def test_pooling_keeps_symbolic_dims_where_it_can() -> None:
    g = gc.Graph("pool")
    with g:
        x = gc.placeholder("x", shape=("B", "C", "H", "W"))
        assert gc.max_pool2d(x, 3, stride=1, padding=1).shape == ("B", "C", "H", "W")
        assert gc.avg_pool2d(x, 3, stride=1, padding=1).shape == ("B", "C", "H", "W")
        assert gc.global_avg_pool2d(x).shape == ("B", "C", 1, 1)
        with pytest.raises(gc.ShapeError, match="max_pool2d: the spatial dim 'H'"):
            gc.max_pool2d(x, 2)
        # the divisors are the kernel's business, at run time: any size will do
        y = gc.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        assert y.shape == ("B", "C", "H", "W")
        gc.output(y, name="y")
    v = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = F.avg_pool2d(v, 3, stride=1, padding=1, count_include_pad=False)
    np.testing.assert_array_equal(gc.compile(g)(x=v), want)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: gc.max_pool2d(np.ones((1, 1, 5)), 2), gc.ShapeError, "max_pool2d: the input \\(N, C, H, W\\) must have rank 4"),
        (lambda: gc.max_pool2d(np.ones((1, 1, 4, 4), bool), 2), gc.DTypeError, "max_pool2d: needs a float or integer"),
        (lambda: gc.max_pool2d(np.ones((1, 1, 4, 4)), 2, ceil_mode=1), gc.GraphcError, "ceil_mode must be a bool"),
        (lambda: gc.max_pool2d(np.ones((1, 1, 2, 2)), 3), gc.ShapeError, "larger than the padded input"),
        (lambda: F.max_pool2d(np.ones((1, 1, 4, 4)), 2, padding=2), gc.GraphcError, "pad should be at most half"),
        (lambda: F.avg_pool2d(np.ones((1, 1, 4, 4)), 3, padding=2), gc.GraphcError, "pad should be at most half"),
        (lambda: gc.avg_pool2d(np.ones((1, 1, 4, 4), np.int64), 2), gc.DTypeError, "avg_pool2d: needs a floating"),
        (lambda: gc.avg_pool2d(np.ones((1, 1, 4, 4)), 2, divisor_override=0), gc.GraphcError, "divisor_override must be >= 1"),
        (lambda: gc.adaptive_avg_pool2d(np.ones((1, 1, 4, 4)), (1, 2, 3)), gc.GraphcError, "output_size takes one int or two"),
        (lambda: gc.max_pool2d_backward(np.ones((1, 1, 2, 2)), np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), 2), gc.ShapeError, "pooled must be max_pool2d of the input"),
        (lambda: gc.avg_pool2d_backward(np.ones((1, 1, 2, 2)), input_size=(6, 6), kernel_size=2), gc.ShapeError, "pools to"),
    ],
)  # fmt: skip
def test_mistakes_raise_errors_naming_the_op(call: Callable, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_kernels_never_loop_over_the_batch_and_are_deterministic() -> None:
    # one batch of 64 and 64 batches of one: the same bits, image by image
    x = RNG.standard_normal((64, 3, 9, 9)).astype(np.float32)
    for pool in (
        lambda v: gc.max_pool2d(v, 3, 2, 1),
        lambda v: gc.avg_pool2d(v, 3, 2, 1, count_include_pad=False),
    ):
        whole = pool(x)
        np.testing.assert_array_equal(
            np.concatenate([pool(x[i : i + 1]) for i in range(64)]), whole
        )
    for case in itertools.islice(MAX_POOL, 4):
        shape, *args = case
        v = RNG.standard_normal(shape)
        np.testing.assert_array_equal(F.max_pool2d(v, *args), F.max_pool2d(v.copy(), *args))
