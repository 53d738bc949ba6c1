"""Activations and elementwise math: erf's accuracy in ulps, PyTorch's values and
gradients for every op, function and Tensor method, and fused chains at every level.

The op cases (tests/cases/activation.py) already run every op through the registry
tests (kernels, types, VJPs against finite differences, round trips, O0/O1/O2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
import graphc.nn.functional as F
from graphc.ops.special import CHUNK, erf_into, gelu_exact_into
from tests.conftest import needs_torch, torch
from tests.differential import check_levels

try:
    import mpmath
except ImportError:  # mpmath comes with PyTorch (through sympy); the ulp tests need it
    mpmath = None

needs_mpmath = pytest.mark.skipif(
    mpmath is None, reason="mpmath is not installed: pip install mpmath"
)
RNG = np.random.default_rng(0)


# -- erf: ulps against mpmath and math.erf -----------------------------------------------


def _ulps(got: np.ndarray, x: np.ndarray, exact: Callable[[Any], Any]) -> np.ndarray:
    """|got - exact(x)| in units of the last place of exact(x) rounded to got's dtype."""
    dtype = got.dtype.type
    errors = np.empty(len(x))
    for k, (g, v) in enumerate(zip(got, x)):
        truth = exact(mpmath.mpf(float(v)))
        rounded = dtype(float(truth))
        errors[k] = float(abs(mpmath.mpf(float(g)) - truth) / float(np.spacing(np.abs(rounded))))
    return errors


def _erf_sample(n: int) -> np.ndarray:
    """Points over erf's whole range: near 0, around the 1.0 seam, the tail, tiny values."""
    return np.concatenate([
        RNG.uniform(-1, 1, n),
        RNG.uniform(-6.5, 6.5, n),
        1.0 + RNG.uniform(-1e-3, 1e-3, n // 4),
        -np.exp(RNG.uniform(-700, 0, n // 4)),
        np.exp(RNG.uniform(-700, 0, n // 4)),
    ])  # fmt: skip


@needs_mpmath
def test_erf_is_within_1_5_ulp_in_float64_and_correctly_rounded_in_float32() -> None:
    mpmath.mp.dps = 40
    x = _erf_sample(1500)
    got64 = np.empty_like(x)
    erf_into(x, got64)
    worst64 = _ulps(got64, x, mpmath.erf).max()
    x32 = x.astype(np.float32)
    got32 = np.empty_like(x32)
    erf_into(x32, got32)
    worst32 = _ulps(got32, x32, mpmath.erf).max()
    # measured: 1.41 ulp (float64, near |x| = 1.14) and 0.515 ulp (float32)
    assert worst64 <= 1.5, worst64
    assert worst32 <= 0.52, worst32


def test_erf_agrees_with_math_erf_over_a_dense_sweep() -> None:
    # math.erf (the C library's) is itself within about 1 ulp: 2 ulps apart at most
    x = np.concatenate([np.linspace(-7, 7, 200_001), np.geomspace(1e-300, 1, 2001)])
    got = gc.erf(x)
    want = np.vectorize(math.erf, otypes=[np.float64])(x)
    assert np.max(np.abs(got - want) / np.spacing(np.abs(want))) <= 2.0
    x32 = x.astype(np.float32)
    want32 = np.vectorize(math.erf, otypes=[np.float64])(x32.astype(np.float64))
    err32 = np.abs(gc.erf(x32).astype(np.float64) - want32) / np.spacing(
        np.abs(want32.astype(np.float32))
    )
    assert err32.max() <= 0.52


def test_erf_of_special_values() -> None:
    for dtype in (np.float32, np.float64):
        x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 40.0, -40.0], dtype)
        got = gc.erf(x)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got[:4], [0.0, -0.0, 1.0, -1.0])
        assert np.signbit(got[1]) and not np.signbit(got[0])
        assert np.isnan(got[4])
        assert got[5] >= 0 and got[6] <= 0 and np.signbit(got[6])  # subnormals keep signs
        np.testing.assert_array_equal(got[7:], [1.0, -1.0])
    tiny = np.array([5e-324, 1e-310])
    np.testing.assert_array_equal(gc.erf(tiny), tiny * (2 / math.sqrt(math.pi)))


@needs_mpmath
def test_gelu_exact_is_accurate_in_its_left_tail_where_1_plus_erf_cancels() -> None:
    mpmath.mp.dps = 40

    def exact(v: Any) -> Any:
        return v / 2 * mpmath.erfc(-v / mpmath.sqrt(2))

    x = np.concatenate([RNG.normal(0, 3, 1500), RNG.uniform(-37, -1, 1000)])
    got = np.empty_like(x)
    gelu_exact_into(x, got)
    assert _ulps(got, x, exact).max() <= 8  # measured 6.5: the rounding of x/sqrt(2)
    x32 = np.concatenate([x, RNG.uniform(-14, -3, 500)]).astype(np.float32)
    got32 = np.empty_like(x32)
    gelu_exact_into(x32, got32)
    assert _ulps(got32, x32, exact).max() <= 0.62


def test_erf_kernel_runs_in_chunks_and_writes_over_its_input() -> None:
    x = RNG.normal(0, 2, 2 * CHUNK + 17)
    want = gc.erf(x)
    inplace = x.copy()
    erf_into(inplace, inplace)
    np.testing.assert_array_equal(inplace, want)
    strided = np.empty(len(x) * 2)[::2]
    erf_into(x, strided)
    np.testing.assert_array_equal(strided, want)
    gelu = gc.gelu_exact(x)
    gelu_exact_into(x, x)
    np.testing.assert_array_equal(x, gelu)


# -- PyTorch's values and gradients ---------------------------------------------------------

EDGES = [-np.inf, -40.0, -3.0, -1.0, -1e-10, -0.0, 0.0, 1e-10, 0.5, 3.0, 21.0, 40.0, np.inf, np.nan]

# (graphc, PyTorch) pairs of functions of one tensor
UNARY: dict[str, tuple[Callable, Callable]] = {
    "softplus": (F.softplus, lambda t: torch.nn.functional.softplus(t)),
    "softplus_beta": (lambda x: F.softplus(x, 2.0, 3.0), lambda t: torch.nn.functional.softplus(t, 2.0, 3.0)),
    "leaky_relu": (F.leaky_relu, lambda t: torch.nn.functional.leaky_relu(t)),
    "leaky_relu_0.2": (lambda x: F.leaky_relu(x, 0.2), lambda t: torch.nn.functional.leaky_relu(t, 0.2)),
    "elu": (lambda x: F.elu(x, 0.7), lambda t: torch.nn.functional.elu(t, 0.7)),
    "selu": (F.selu, lambda t: torch.nn.functional.selu(t)),
    "celu": (lambda x: F.celu(x, 1.5), lambda t: torch.nn.functional.celu(t, 1.5)),
    "silu": (F.silu, lambda t: torch.nn.functional.silu(t)),
    "mish": (F.mish, lambda t: torch.nn.functional.mish(t)),
    "gelu": (F.gelu, lambda t: torch.nn.functional.gelu(t)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
    "hardsigmoid": (F.hardsigmoid, lambda t: torch.nn.functional.hardsigmoid(t)),
    "hardswish": (F.hardswish, lambda t: torch.nn.functional.hardswish(t)),
    "hardtanh": (lambda x: F.hardtanh(x, -2.0, 0.5), lambda t: torch.nn.functional.hardtanh(t, -2.0, 0.5)),
    "relu6": (F.relu6, lambda t: torch.nn.functional.relu6(t)),
    "softsign": (F.softsign, lambda t: torch.nn.functional.softsign(t)),
    "logsigmoid": (F.logsigmoid, lambda t: torch.nn.functional.logsigmoid(t)),
    "relu": (F.relu, lambda t: torch.nn.functional.relu(t)),
    "sigmoid": (F.sigmoid, lambda t: torch.sigmoid(t)),
    "erf": (lambda x: x.erf(), lambda t: t.erf()),
    "log1p": (lambda x: x.log1p(), lambda t: t.log1p()),
    "expm1": (lambda x: x.expm1(), lambda t: t.expm1()),
    "reciprocal": (lambda x: x.reciprocal(), lambda t: t.reciprocal()),
    "rsqrt": (lambda x: x.rsqrt(), lambda t: t.rsqrt()),
    "floor": (lambda x: x.floor(), lambda t: t.floor()),
    "ceil": (lambda x: x.ceil(), lambda t: t.ceil()),
    "round": (lambda x: x.round(), lambda t: t.round()),
    "round_2": (lambda x: x.round(decimals=2), lambda t: t.round(decimals=2)),
    "trunc": (lambda x: x.trunc(), lambda t: t.trunc()),
    "softmax": (lambda x: F.softmax(x, 0), lambda t: torch.softmax(t, 0)),
}  # fmt: skip


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_values_and_gradients_match_torch(name: str, dtype: str) -> None:
    ours, theirs = UNARY[name]
    x = np.concatenate([RNG.normal(0, 2, 40), RNG.uniform(-0.3, 0.3, 8)]).astype(dtype)
    if name in ("log1p", "rsqrt"):
        x = np.abs(x) + 0.1
    xt = ge.tensor(x, requires_grad=True)
    tt = torch.tensor(x, requires_grad=True)
    y, yt = ours(xt), theirs(tt)
    ct = RNG.standard_normal(x.shape).astype(dtype)
    (y * ge.from_numpy(ct)).sum().backward()
    (yt * torch.from_numpy(ct)).sum().backward()
    rtol = 3e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=rtol)
    if name in ("hardsigmoid", "hardswish"):
        rtol = max(rtol, 1e-7)  # PyTorch's slope 1/6 is a float32 constant, also in float64
    np.testing.assert_allclose(xt.grad.numpy(), tt.grad.numpy(), rtol=10 * rtol, atol=10 * rtol)
    assert y.dtype == x.dtype


# relu is elementwise.py's max(x, 0): +0.0 for -0.0, where PyTorch keeps -0.0
@needs_torch
@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("softmax", "relu")])
def test_edge_values_match_torch(name: str) -> None:
    ours, theirs = UNARY[name]
    x = np.array(EDGES, np.float64)
    with np.errstate(all="ignore"):
        got = ours(ge.tensor(x)).numpy()
    want = theirs(torch.tensor(x)).numpy()
    if name == "gelu":  # PyTorch's 1 + erf cancels in the tail: graphc's is exact there
        want[1] = got[1]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300, equal_nan=True)
    zeros = want == 0
    assert (np.signbit(got[zeros]) == np.signbit(want[zeros])).all(), "signs of zero"


@needs_torch
def test_gelu_exact_in_float32_is_more_accurate_than_torchs_in_the_tail() -> None:
    x = np.array([-3.0, -5.0, -8.0], np.float32)
    exact = np.array([v / 2 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
    ours = F.gelu(ge.tensor(x)).numpy()
    theirs = torch.nn.functional.gelu(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, exact, rtol=1e-6)
    assert np.all(np.abs(ours - exact) <= np.abs(theirs - exact))


@needs_torch
@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_and_fmod_follow_torch_for_every_sign(op: str) -> None:
    x = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 7.0, np.inf, 3.0])
    y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, np.inf, 2.0, 0.0])
    with np.errstate(all="ignore"):
        got = getattr(ge.tensor(x), op)(ge.tensor(y)).numpy()
    want = getattr(torch.tensor(x), op)(torch.tensor(y)).numpy()
    np.testing.assert_array_equal(got, want)
    # signs of zero too, but for remainder(-0.0, 3.0): +0.0 as Python's % and numpy
    # give it, where PyTorch gives -0.0
    keep = ~np.isnan(want) & ((op == "fmod") | ~((x == 0) & np.signbit(x)))
    assert (np.signbit(got) == np.signbit(want))[keep].all()
    xi, yi = np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])
    got_int = getattr(gc, op)(xi, yi)
    np.testing.assert_array_equal(got_int, getattr(torch, op)(torch.tensor(xi), torch.tensor(yi)))
    assert got_int.dtype == np.int64
    with pytest.raises(gc.GraphcError, match="division by zero"):
        getattr(gc, op)(xi, np.array([1, 0, 1, 1]))


def test_percent_is_remainder_on_tensors_and_graph_values() -> None:
    x = ge.tensor([-5.0, 5.0], requires_grad=True)
    y = x % 3
    assert y.tolist() == [1.0, 2.0] and (7 % x).tolist() == [-3.0, 2.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    g = gc.trace(lambda v: v % 3.0, gc.TensorSpec((2,)))
    assert [n.op for n in g.nodes if n.op not in (None, "constant")][-1] == "remainder"
    np.testing.assert_array_equal(g(np.array([-5.0, 5.0], np.float32)), [1.0, 2.0])


@needs_torch
def test_clamp_takes_tensor_bounds_like_torch() -> None:
    x, low, high = RNG.normal(size=(3, 4)), RNG.normal(size=4) - 0.5, RNG.normal(size=(3, 1)) + 0.5
    ours = [ge.tensor(v, requires_grad=True) for v in (x, low, high)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (x, low, high)]
    y, yt = ours[0].clamp(ours[1], ours[2]), theirs[0].clamp(theirs[1], theirs[2])
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    y.sum().backward()
    yt.sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    np.testing.assert_array_equal(ge.clamp(ge.tensor(x), min=ge.tensor(low)).numpy(),
                                  torch.clamp(torch.tensor(x), min=torch.tensor(low)).numpy())  # fmt: skip
    np.testing.assert_array_equal(gc.clip(x, low, 0.25), np.clip(x, low, 0.25))
    np.testing.assert_array_equal(
        ge.tensor(x).clamp_max(ge.tensor(high)).numpy(), np.minimum(x, high)
    )
    nan = np.array([np.nan, 1.0])
    assert np.isnan(gc.clamp(np.array([0.5, 0.5]), nan, 2.0)[0])  # a nan bound gives nan
    with pytest.raises(gc.GraphcError, match="either min or a_min"):
        gc.clamp(x, min=0.0, a_min=1.0)


@needs_torch
def test_logical_ops_give_bools_like_torch() -> None:
    x = np.array([0.0, -0.0, 2.0, np.nan, 0.0])
    y = np.array([1, 0, 0, 3, 0])
    for name in ("logical_and", "logical_or", "logical_xor"):
        got = getattr(ge.tensor(x), name)(ge.tensor(y)).numpy()
        want = getattr(torch.tensor(x), name)(torch.tensor(y)).numpy()
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.bool_
    np.testing.assert_array_equal(
        ge.tensor(x).logical_not().numpy(), torch.tensor(x).logical_not().numpy()
    )


def test_rounding_has_zero_gradient_and_keeps_integers() -> None:
    x = ge.tensor([0.5, 1.5, 2.5, -0.5], requires_grad=True)
    y = x.round() + x.floor() + x.ceil() + x.trunc()
    y.sum().backward()
    assert x.round().tolist() == [0.0, 2.0, 2.0, -0.0] and x.grad.tolist() == [0.0] * 4
    ints = np.array([3, -4], np.int32)
    for name in ("floor", "ceil", "round", "trunc"):
        out = getattr(gc, name)(ints)
        assert out.dtype == np.int32 and out.tolist() == [3, -4]
    with pytest.raises(gc.DTypeError, match="bool"):
        gc.floor(np.array([True]))
    with pytest.raises(gc.DTypeError, match="decimals"):
        gc.round(ints, decimals=1)


def test_activations_refuse_bools_and_compute_ints_in_float64() -> None:
    for name in ("softplus", "elu", "silu", "gelu_exact", "erf", "hardtanh", "leaky_relu"):
        assert getattr(gc, name)(np.array([1, 2])).dtype == np.float64
        with pytest.raises(gc.DTypeError):
            getattr(gc, name)(np.array([True]))


def test_gelu_spellings() -> None:
    x = ge.tensor([-1.0, 0.5])
    np.testing.assert_array_equal(F.gelu(x).numpy(), gc.gelu_exact(x).numpy())
    np.testing.assert_array_equal(F.gelu(x, approximate="tanh").numpy(), gc.gelu(x).numpy())
    np.testing.assert_array_equal(x.gelu_exact().numpy(), gc.gelu_exact(x).numpy())
    with pytest.raises(gc.GraphcError, match="approximate"):
        F.gelu(x, approximate="sigmoid")


# -- compiled chains: fused at O2, the reference's bits at every level ----------------------


def _chain(x: Any, y: Any) -> Any:
    a = gc.silu(gc.softplus(x, beta=2.0)) + gc.leaky_relu(y, 0.1)
    b = gc.gelu_exact(a) * gc.erf(y) - gc.hardsigmoid(x) / gc.hardtanh(y, -0.5, 0.5)
    c = gc.elu(b) + gc.selu(a) + gc.expm1(gc.tanh(x)) + gc.log1p(gc.abs(y))
    d = gc.remainder(c, 0.75) + gc.fmod(c, 0.5) + gc.round(c * 4.0) + gc.rsqrt(gc.abs(c) + 1.0)
    return gc.where(gc.logical_and(x > 0, y < 0), d, gc.reciprocal(d + 3.0))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_activation_chain_and_its_gradient_give_the_references_bits_at_every_level(
    dtype: str,
) -> None:
    g = gc.trace(lambda x, y: gc.sum(_chain(x, y)), gc.TensorSpec((None, 5), dtype),
                 gc.TensorSpec((5,), dtype))  # fmt: skip
    gg = gc.gradients(g, wrt=["x", "y"])
    fused = gc.compile(gg, opt_level=2).optimized
    assert any(n.op == "fused" for n in fused.nodes), "the chain is not fused at O2"
    x = RNG.normal(size=(7, 5)).astype(dtype)
    y = RNG.normal(size=5).astype(dtype)
    edges = np.array([[np.nan, np.inf, -np.inf, -0.0, 1e30]] * 2, dtype)
    check_levels(gg, [{"x": x, "y": y}, {"x": edges, "y": y}])
    eager_x, eager_y = ge.tensor(x, requires_grad=True), ge.tensor(y, requires_grad=True)
    gc.sum(_chain(eager_x, eager_y)).backward()
    loss, dx, dy = gc.compile(gg, opt_level=2)(x, y)
    np.testing.assert_allclose(dx, eager_x.grad.numpy(), rtol=1e-4 if dtype == "float32" else 1e-10)
    np.testing.assert_allclose(dy, eager_y.grad.numpy(), rtol=1e-4 if dtype == "float32" else 1e-10)


@pytest.mark.parametrize("bounds", [(-0.0, 0.0), (0.0, 6.0), (0.1, -1e40), (-1.0, float("nan"))])
def test_hardtanh_spelled_out_for_numpy_2_0_gives_the_newer_clips_bits(monkeypatch, bounds) -> None:
    """numpy 2.0's clip gives +0.0 where a -0.0 meets a zero bound (and for x past a -0.0
    bound); 2.1 and later keep -0.0, as the native backend's hardtanh does: CI's oldest
    numpy found them apart. On a numpy whose clip does not select, the kernel spells the
    selection out: here, forced, against this numpy's clip where it selects."""
    from graphc.ops import activation

    if not activation._CLIP_SELECTS:
        pytest.skip("this numpy's clip is 2.0's: the spelled-out form is the kernel itself")
    x = np.array([-0.0, 0.0, -1.0, 1.0, np.nan, 7.0, -np.inf, np.inf, 1e-45], np.float32)
    want = np.clip(x, *bounds)
    monkeypatch.setattr(activation, "_CLIP_SELECTS", False)
    got = activation._hardtanh_body(x, np.empty_like(x), *bounds)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
