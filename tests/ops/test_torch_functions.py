"""The functions torch users reach for, against torch 2.13: values and gradients on
eager tensors and traced graphs alike, at ordinary inputs and at the special ones
(signed zeros, the ends of domains, inf and nan), vmap against a loop over examples, and
forward mode against finite differences.

The op-case table (tests/cases/) runs the generic checks (finite differences in float64,
every engine, ONNX, edge values); this file holds what only torch can say.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

RNG = np.random.default_rng(41)


def _torch() -> Any:
    return pytest.importorskip("torch")


def _eager_and_traced(fn: Callable[..., Any], *arrays: np.ndarray) -> tuple[list, list]:
    """fn's value and its gradients of sum(fn) for each float input, run eagerly on
    graphc tensors, and as a traced graph differentiated symbolically."""
    tensors = [ge.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*tensors)
    out.sum().backward()
    eager = [out.detach().numpy()] + [t.grad.numpy() for t in tensors if t.requires_grad]
    g = gc.trace(lambda *xs: gc.sum(fn(*xs)), *arrays)
    wrt = [p.name for p, a in zip(g.inputs, arrays) if a.dtype.kind == "f"]
    with np.errstate(all="ignore"):
        traced_value = gc.trace(fn, *arrays)(*arrays)
        grads = gc.gradients(g, wrt=wrt)(*arrays)[1:]
    return eager, [np.asarray(traced_value), *map(np.asarray, grads)]


def _torch_run(fn: Callable[..., Any], *arrays: np.ndarray) -> list:
    torch = _torch()
    tensors = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*tensors)
    out.sum().backward()
    return [out.detach().numpy()] + [t.grad.numpy() for t in tensors if t.requires_grad]


def _same(got: list, want: list, rtol: float = 1e-12, atol: float = 0.0) -> None:
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=str(k))


# -- trigonometric and hyperbolic ----------------------------------------------------------------

UNARY = ["tan", "asin", "acos", "cosh", "asinh", "acosh", "atanh"]
SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 1e-300, 30.0, -30.0, 1e200,
                    np.inf, -np.inf, np.nan])  # fmt: skip


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_and_gradients_agree_with_torch(name: str) -> None:
    x = np.concatenate([SPECIAL, RNG.uniform(-3, 3, 20)])
    with np.errstate(all="ignore"):
        eager, traced = _eager_and_traced(getattr(ge, name), x)
    want = _torch_run(lambda t: getattr(t, name)(), x)
    # 1e-300 squared underflows to 0 in either formula; nan, inf and signed zeros agree
    _same(eager, want, rtol=1e-13)
    _same(traced, want, rtol=1e-13)
    signs = np.signbit(eager[0][~np.isnan(eager[0])])
    assert (signs == np.signbit(want[0][~np.isnan(want[0])])).all(), "signed zeros differ"


@pytest.mark.parametrize("name", UNARY)
def test_unary_on_integers_and_bools_as_numpy_says(name: str) -> None:
    """Integers compute in float64 (numpy's rule, as for atan and sinh; torch gives its
    default float32); bools are refused, naming the op, as log's are."""
    ints = np.array([1, 2, 3])
    got = getattr(gc, name)(ge.tensor(ints))
    with np.errstate(all="ignore"):
        want = getattr(np, {"a": "arc"}.get(name[0], "") + (name[1:] if name[0] == "a" else name))(
            ints
        )
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(gc.DTypeError, match=name):
        getattr(gc, name)(np.array([True]))
    with pytest.raises(gc.DTypeError, match=name):
        gc.trace(getattr(gc, name), np.array([True]))


def test_numpy_and_torch_spellings_are_the_same_functions() -> None:
    x = ge.tensor([0.25, 0.5])
    for short, long in [("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"),
                        ("asinh", "arcsinh"), ("atanh", "arctanh"), ("atan2", "arctan2")]:  # fmt: skip
        assert getattr(gc, short) is getattr(gc, long)
        other = [x + 1.0] if short == "atan2" else []
        assert getattr(x, short)(*other).tolist() == getattr(x, long)(*other).tolist()
    assert gc.acosh is gc.arccosh and (x + 1.0).acosh().tolist() == (x + 1.0).arccosh().tolist()


# -- atan2 ------------------------------------------------------------------------------------------

ZEROS_AND_INFINITIES = [0.0, -0.0, 2.0, -2.0, np.inf, -np.inf, np.nan]


def test_atan2_values_and_gradients_agree_with_torch() -> None:
    """Every pair of signed zeros, infinities and nan, and random points: the angle's
    quadrant, and torch's gradient 0 at the origin (where there is no derivative)."""
    a, b = np.meshgrid(ZEROS_AND_INFINITIES, ZEROS_AND_INFINITIES)
    x = np.concatenate([a.ravel(), RNG.standard_normal(30)])
    y = np.concatenate([b.ravel(), RNG.standard_normal(30)])
    with np.errstate(all="ignore"):
        eager, traced = _eager_and_traced(ge.atan2, x, y)
    want = _torch_run(lambda s, t: s.atan2(t), x, y)
    _same(eager, want, rtol=1e-14)
    _same(traced, want, rtol=1e-14)
    number = ~np.isnan(want[0])  # (nan's sign bit is no promise)
    assert (np.signbit(eager[0][number]) == np.signbit(want[0][number])).all()
    origin = (x == 0) & (y == 0)
    assert (eager[1][origin] == 0).all() and (eager[2][origin] == 0).all()


def test_atan2_broadcasts_and_takes_a_python_number() -> None:
    x, y = RNG.standard_normal((3, 1)), RNG.standard_normal(4)
    eager, _ = _eager_and_traced(lambda s, t: s.atan2(t), x, y)
    want = _torch_run(lambda s, t: s.atan2(t), x, y)
    _same(eager, want, rtol=1e-14)
    np.testing.assert_allclose(gc.atan2(x, -1.5), np.arctan2(x, -1.5), rtol=1e-15)


# -- transformations: vmap and forward mode ----------------------------------------------------------


@pytest.mark.parametrize("name", [*UNARY, "atan2"])
def test_vmap_is_a_loop_and_jvp_matches_finite_differences(name: str) -> None:
    fn = getattr(gc, name)
    draw = (lambda *s: RNG.uniform(1.1, 3.0, s)) if name == "acosh" else (
        lambda *s: RNG.uniform(-0.9, 0.9, s))  # fmt: skip
    args = [draw(4, 3)] * (2 if name == "atan2" else 1)
    args = [a + k for k, a in enumerate(args)]  # atan2's two operands differ
    got = gc.vmap(fn)(*args)
    np.testing.assert_array_equal(got, np.stack([fn(*(a[i] for a in args)) for i in range(4)]))
    tangents = [RNG.standard_normal(a.shape) for a in args]
    _, tangent = gc.jvp(fn, tuple(args), tuple(tangents))
    eps = 1e-6
    ahead = fn(*(a + eps * t for a, t in zip(args, tangents)))
    behind = fn(*(a - eps * t for a, t in zip(args, tangents)))
    np.testing.assert_allclose(tangent, (ahead - behind) / (2 * eps), rtol=1e-6, atol=1e-8)


# -- cumprod ----------------------------------------------------------------------------------------

ROWS_WITH_ZEROS = np.array(
    [[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 2.0, 3.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0],
     [1.5, -2.0, 0.5, 3.0, 0.7], [2.0, 3.0, -4.0, 0.5, 0.0]]
)  # fmt: skip


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_values_and_gradients_at_zeros_agree_with_torch(dim: int) -> None:
    """Torch's gradient where the product passes zeros: the first zero's slope is the
    running product of the others, and every slope past it is 0 (out / x would be nan)."""
    seed = RNG.standard_normal(ROWS_WITH_ZEROS.shape)

    def fn(x: Any) -> Any:  # weighted, so every position has a cotangent of its own
        torch_tensor = hasattr(x, "new_tensor") and not isinstance(x, ge.Tensor)
        return x.cumprod(dim) * (x.new_tensor(seed) if torch_tensor else seed)

    eager, traced = _eager_and_traced(fn, ROWS_WITH_ZEROS)
    want = _torch_run(fn, ROWS_WITH_ZEROS)
    _same(eager, want, rtol=1e-14, atol=1e-15)
    _same(traced, want, rtol=1e-14, atol=1e-15)
    assert np.isfinite(eager[1]).all()


def test_cumprod_dtypes_and_spellings_agree_with_torch() -> None:
    torch = _torch()
    for values in ([1, 2, 3, 4], [True, False, True]):
        got, want = gc.cumprod(ge.tensor(values), dim=0), torch.cumprod(torch.tensor(values), 0)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()
    x = RNG.standard_normal((2, 3))
    np.testing.assert_array_equal(gc.cumprod(x), np.cumprod(x))  # numpy's: flattened
    np.testing.assert_array_equal(ge.tensor(x).cumprod(1, dtype=ge.float32).numpy(),
                                  np.cumprod(x.astype(np.float32), 1))  # fmt: skip


@pytest.mark.parametrize("dim", [0, 1])
def test_cumprod_second_derivative_at_zeros_agrees_with_torch(dim: int) -> None:
    """Past the first zero every slope is 0, but moves with that zero: the gradient's own
    gradient there is not 0 (it was, with the slopes written as a constant 0)."""
    torch = _torch()
    x = RNG.standard_normal((5, 6))
    x[0, 1] = x[1, [0, 3]] = x[2, [1, 2, 4]] = x[3] = 0.0  # one, two, three, all zeros
    weights, direction = RNG.standard_normal(x.shape), RNG.standard_normal(x.shape)
    seen = []
    for lib in (ge, torch):
        t = lib.tensor(x, requires_grad=True)
        (g,) = lib.autograd.grad((lib.cumprod(t, dim) * lib.tensor(weights)).sum(), t,
                                 create_graph=True)  # fmt: skip
        (h,) = lib.autograd.grad((g * lib.tensor(direction)).sum(), t)
        seen.append((g.detach().numpy(), h.detach().numpy()))
    for got, want in zip(*seen):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert np.abs(seen[0][1]).max() > 0


def test_cumprod_hessian_and_per_example_gradients_at_zeros() -> None:
    torch = _torch()
    xs = RNG.standard_normal((4, 5))
    xs[1, 2] = xs[2, 0] = xs[2, 3] = 0.0
    weights = RNG.standard_normal(5)

    def f(x: Any) -> Any:
        return gc.sum(gc.cumprod(x, 0) * weights)

    want = torch.autograd.functional.hessian(
        lambda t: (torch.cumprod(t, 0) * torch.tensor(weights)).sum(), torch.tensor(xs[2])
    )
    np.testing.assert_allclose(gc.hessian(f)(xs[2]), want.numpy(), rtol=1e-12, atol=1e-14)
    per_example = gc.vmap(gc.grad(f))(xs)
    np.testing.assert_array_equal(per_example, np.stack([gc.grad(f)(x) for x in xs]))


def test_cumprod_gradient_where_a_product_overflows_before_a_zero() -> None:
    """inf * 0 past the zero is nan; the sums before the zero take those products as the
    0 they are (as torch): the gradient is inf there, not nan."""
    torch = _torch()
    x = np.array([1e300, 1e300, 0.0, 2.0])
    e, t = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    with np.errstate(all="ignore"):
        ge.cumprod(e, 0).sum().backward()
    torch.cumprod(t, 0).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_cumprod_second_derivative_agrees_with_torch() -> None:
    torch = _torch()
    x = RNG.uniform(0.5, 1.5, (3, 4))
    t = torch.tensor(x, requires_grad=True)
    (g,) = torch.autograd.grad(torch.cumprod(t, 1).pow(2).sum(), t, create_graph=True)
    (want,) = torch.autograd.grad(g.sin().sum(), t)
    e = ge.tensor(x, requires_grad=True)
    (h,) = ge.autograd.grad(ge.cumprod(e, 1).pow(2).sum(), e, create_graph=True)
    (got,) = ge.autograd.grad(h.sin().sum(), e)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_cumprod_vmap_is_a_loop() -> None:
    x = RNG.standard_normal((4, 3, 5))
    got = gc.vmap(lambda v: gc.cumprod(v, dim=-1))(x)
    np.testing.assert_array_equal(got, np.cumprod(x, -1))
    got = gc.vmap(lambda v: gc.cumprod(v, dim=0), in_axes=1)(x)
    np.testing.assert_array_equal(got, np.stack([np.cumprod(x[:, i], 0) for i in range(3)]))


def test_cumprod_onnx_form_is_numpys_running_product_along_a_symbolic_axis() -> None:
    """ONNX has no CumProd: the form is a Scan multiplying in numpy's order, so
    onnxruntime and the model read back give numpy's bits, at any length."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    g = gc.trace(lambda x: gc.cumprod(x, dim=1), gc.TensorSpec((2, "T"), "float32"))
    model = gc.onnx.export_model(g)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    back = gc.onnx.import_model(model)
    for length in (1, 9):
        x = RNG.uniform(0.5, 1.5, (2, length)).astype(np.float32)
        (got,) = session.run(None, {g.inputs[0].name: x})
        np.testing.assert_array_equal(got, np.cumprod(x, 1))
        np.testing.assert_array_equal(back(x), np.cumprod(x, 1))


# -- nansum and nanmean -----------------------------------------------------------------------------

WITH_NANS = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.5], [-1.0, 0.5, 4.0]])


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
@pytest.mark.parametrize("kwargs", [{}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": (0, 1)}])
def test_nan_reductions_agree_with_torch(name: str, kwargs: dict) -> None:
    eager, traced = _eager_and_traced(lambda x: getattr(x, name)(**kwargs), WITH_NANS)
    want = _torch_run(lambda x: getattr(x, name)(**kwargs), WITH_NANS)
    _same(eager, want, rtol=1e-15)
    _same(traced, want, rtol=1e-15)
    assert (eager[1][np.isnan(WITH_NANS)] == 0).all()


def test_nan_reductions_of_other_dtypes_as_torch() -> None:
    torch = _torch()
    ints = [[1, 2], [3, 4]]
    got, want = ge.nansum(ge.tensor(ints), dim=0), torch.nansum(torch.tensor(ints), dim=0)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    assert ge.tensor([True, True]).nansum().item() == torch.tensor([True, True]).nansum().item()
    with pytest.raises(gc.DTypeError, match="nanmean.*floating-point.*int64"):
        ge.nanmean(ge.tensor(ints))
    with pytest.raises(gc.DTypeError, match="nanmean"):
        gc.trace(gc.nanmean, np.ones(3, np.int32))
    # a group of nans only: nan, as torch (whose gradient there is nan; graphc's is 0)
    with np.errstate(invalid="ignore"):
        got = ge.nanmean(ge.tensor([[np.nan, 1.0], [np.nan, 3.0]]), dim=0)
    want = torch.nanmean(torch.tensor([[np.nan, 1.0], [np.nan, 3.0]]), dim=0)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# -- outer and diagonal ---------------------------------------------------------------------------


def test_outer_agrees_with_torch() -> None:
    x, y = RNG.standard_normal(3), RNG.standard_normal(4)
    eager, traced = _eager_and_traced(ge.outer, x, y)
    want = _torch_run(lambda a, b: a.outer(b), x, y)
    _same(eager, want, rtol=1e-15)
    _same(traced, want, rtol=1e-15)
    torch = _torch()
    ints = ge.tensor([1, 2]).outer(ge.tensor([3, 4, 5]))
    assert ints.dtype == np.int64
    assert ints.tolist() == torch.outer(torch.tensor([1, 2]), torch.tensor([3, 4, 5])).tolist()
    assert ge.tensor([1.0]).ger(ge.tensor([2.0])).tolist() == [[2.0]]
    for bad in (np.ones((2, 2)), np.float64(2.0)):
        with pytest.raises(gc.ShapeError, match="outer: expects a 1-D"):
            gc.outer(bad, np.ones(2))
    g = gc.trace(gc.outer, gc.TensorSpec(("N",), "float64"), gc.TensorSpec((2,), "float64"))
    np.testing.assert_array_equal(
        g(np.arange(3.0), np.ones(2)), np.outer(np.arange(3.0), np.ones(2))
    )


DIAGONALS = [((3, 4), 0, 0, 1), ((3, 4), 1, 0, 1), ((3, 4), -2, 0, 1), ((3, 4), 5, 0, 1),
             ((3, 4), -5, 0, 1), ((2, 3, 4), 0, 1, 2), ((2, 3, 4), 1, 2, 0),
             ((2, 3, 4), -1, -1, 0), ((4, 4), 0, 1, 0), ((0, 3), 0, 0, 1),
             ((2, 0, 3), 1, 0, 2)]  # fmt: skip


@pytest.mark.quick_cases(3)
@pytest.mark.parametrize(("shape", "offset", "dim1", "dim2"), DIAGONALS)
def test_diagonal_and_its_scattered_gradient_agree_with_torch(
    shape: tuple, offset: int, dim1: int, dim2: int
) -> None:
    x = RNG.standard_normal(shape)
    weights = RNG.standard_normal(np.diagonal(x, offset, dim1, dim2).shape)

    def fn(v: Any) -> Any:  # weighted, so each diagonal entry has a cotangent of its own
        torch_tensor = hasattr(v, "new_tensor") and not isinstance(v, ge.Tensor)
        return v.diagonal(offset, dim1, dim2) * (v.new_tensor(weights) if torch_tensor else weights)

    eager, traced = _eager_and_traced(fn, x)
    want = _torch_run(fn, x)
    _same(eager, want)
    _same(traced, want)


def test_diagonal_spellings_refusals_and_symbolic_dims() -> None:
    torch = _torch()
    x = RNG.standard_normal((2, 3, 3))
    want = torch.diagonal(torch.tensor(x), 1, 1, 2).numpy()
    for got in (gc.diagonal(x, 1, 1, 2), gc.diagonal(x, offset=1, dim1=1, dim2=2),
                gc.diagonal(x, 1, axis1=-2, axis2=-1), ge.tensor(x).diagonal(1, 1, 2).numpy()):  # fmt: skip
        np.testing.assert_array_equal(got, want)
    with pytest.raises(gc.ShapeError, match="diagonal: needs at least 2 dims"):
        gc.diagonal(np.ones(3))
    with pytest.raises(gc.ShapeError, match="diagonal: axis1 and axis2 are both dim 1"):
        gc.diagonal(x, 0, 1, -2)
    with pytest.raises(gc.IndexRangeError, match="diagonal"):
        gc.diagonal(x, 0, 0, 3)
    with pytest.raises(gc.GraphcError, match="diagonal: give either dim1="):
        gc.diagonal(x, 0, 1, dim1=1)
    # a symbolic batch dim is carried along; the matrix dims must be concrete
    g = gc.trace(lambda v: gc.diagonal(v, -1, 1, 2), gc.TensorSpec(("B", 3, 3), "float64"))
    np.testing.assert_array_equal(g(x), np.diagonal(x, -1, 1, 2))
    with pytest.raises(gc.ShapeError, match=r"diagonal: dims 0 and 1 of shape \(N, 3\)"):
        gc.trace(gc.diagonal, gc.TensorSpec(("N", 3)))


@pytest.mark.parametrize(
    ("shape", "args"),
    [((3, 3), ()), ((2, 3, 3), (0, 1, 2)), ((3, 3, 2), (1, 1, 0)), ((3, 4, 2), (-1, 1, 0)),
     ((2, 3, 4), (0, 0, 1))],
)  # fmt: skip
def test_diagonal_of_neighbouring_dims_is_a_view_as_in_torch(shape: tuple, args: tuple) -> None:
    """Written in place, the diagonal writes its tensor (and the tape sees it): torch's
    view semantics, for two dims next to each other in either order."""
    torch = _torch()
    seen = []
    for lib in (ge, torch):
        x = lib.ones(*shape, dtype=lib.float64, requires_grad=True)
        y = x * 1.0
        y.diagonal(*args).mul_(3.0)
        (y * y).sum().backward()
        seen.append((y.detach().numpy().copy(), x.grad.numpy().copy()))
    for got, want in zip(*seen):
        np.testing.assert_array_equal(got, want)


def test_diagonal_vmap_is_a_loop() -> None:
    x = RNG.standard_normal((4, 3, 5))
    got = gc.vmap(lambda m: gc.diagonal(m, 1))(x)
    np.testing.assert_array_equal(got, np.stack([np.diagonal(m, 1) for m in x]))
    got = gc.vmap(lambda m: gc.diagonal(m, -1), in_axes=2)(x)
    np.testing.assert_array_equal(got, np.stack([np.diagonal(x[..., i], -1) for i in range(5)]))


# -- isclose and allclose ---------------------------------------------------------------------------

CLOSE_X = [0.0, -0.0, 1.0, 1.0 + 1e-9, 1.0, np.inf, -np.inf, np.inf, np.nan, np.nan, 1e300, 5.0]
CLOSE_Y = [-0.0, 1e-9, 1.0 + 2e-5, 1.0, 1.1, np.inf, np.inf, 1e308, np.nan, 1.0, np.inf, 5.5]


@pytest.mark.parametrize(
    "kwargs", [{}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.6}, {"rtol": 0, "atol": 0}]
)
def test_isclose_and_allclose_agree_with_torch(kwargs: dict) -> None:
    torch = _torch()
    for dtype in (np.float64, np.float32):
        x, y = np.array(CLOSE_X, dtype), np.array(CLOSE_Y, dtype)
        want = torch.isclose(torch.tensor(x), torch.tensor(y), **kwargs).numpy()
        with np.errstate(all="ignore"):
            eager = ge.tensor(x).isclose(ge.tensor(y), **kwargs).numpy()
            traced = gc.trace(lambda a, b: gc.isclose(a, b, **kwargs), x, y)(x, y)
        np.testing.assert_array_equal(eager, want)
        np.testing.assert_array_equal(traced, want)
        for k in range(len(x)):
            one = torch.allclose(torch.tensor(x[k : k + 3]), torch.tensor(y[k : k + 3]), **kwargs)
            with np.errstate(all="ignore"):
                got = ge.allclose(ge.tensor(x[k : k + 3]), ge.tensor(y[k : k + 3]), **kwargs)
            assert got is one, (k, kwargs)


def test_isclose_of_integers_and_bools_agrees_with_torch() -> None:
    torch = _torch()
    # 2**62, 2**62 + 1 and 2**62 + 3 are one float64: integers differ as integers
    a = np.array([10, 2, -3, 7, 2**62, 2**62, 2**62 + 1])
    b = np.array([11, 3, -3, 0, 2**62 + 1, 2**62, 2**62 + 3])
    for kwargs in ({}, {"atol": 1.5}, {"rtol": 0.1, "atol": 0}, {"rtol": 0, "atol": 0}):
        want = torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs).tolist()
        assert gc.isclose(ge.tensor(a), ge.tensor(b), **kwargs).tolist() == want
    p, q = np.array([True, False, True]), np.array([True, True, False])
    assert gc.isclose(p, q).tolist() == torch.isclose(torch.tensor(p), torch.tensor(q)).tolist()


def test_isclose_refusals_name_the_argument() -> None:
    with pytest.raises(gc.DTypeError, match="isclose: x is int64 and y is float32"):
        ge.isclose(ge.tensor([1, 2]), ge.tensor([1.0, 2.0]))
    with pytest.raises(gc.GraphcError, match="isclose: rtol must be >= 0, got -1"):
        gc.isclose(np.ones(2), np.ones(2), rtol=-1)
    with pytest.raises(gc.GraphcError, match="isclose: atol must be a number"):
        gc.isclose(np.ones(2), np.ones(2), atol="big")


def test_allclose_gives_a_python_bool_on_tensors_and_a_value_in_graphs() -> None:
    x = ge.tensor([1.0, 2.0])
    assert ge.allclose(x, x + 1e-7) is True and x.allclose(x + 1.0) is False
    assert gc.allclose(np.ones(2), np.ones(2)) is True
    assert gc.allclose(np.ones((0, 2)), np.ones(2)) is True  # no elements: all close, as torch
    g = gc.trace(
        lambda a, b: a.allclose(b),
        gc.TensorSpec(("B",), "float64"),
        gc.TensorSpec(("B",), "float64"),
    )
    assert g.outputs[0].type == gc.TensorType((), np.bool_)
    assert g(np.ones(3), np.ones(3)).item() is True and g(np.ones(3), np.zeros(3)).item() is False


# -- ONNX: one op type each, read back as the op ------------------------------------------------------


@pytest.mark.parametrize("name", UNARY)
def test_the_onnx_op_type_is_read_back_as_the_op(name: str) -> None:
    pytest.importorskip("onnx")
    g = gc.trace(getattr(gc, name), gc.TensorSpec((5,), "float32"))
    model = gc.onnx.export_model(g)
    written = [n.op_type for n in model.graph.node if n.op_type != "Identity"]  # (naming)
    assert written == [name[0].upper() + name[1:]]
    back = gc.onnx.import_model(model)
    assert [n.op for n in back.op_nodes] == [name]
    x = np.array([0.25, -0.5, 0.75, 1.5, 3.0], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(back(x), g(x))


# -- the builders under vmap and forward mode ---------------------------------------------------------

BUILDERS = {
    "nansum": (lambda x: gc.nansum(x, dim=-1), [WITH_NANS]),
    "nanmean": (lambda x: gc.nanmean(x, dim=0), [WITH_NANS]),
    "outer": (gc.outer, [RNG.standard_normal((3, 2)), RNG.standard_normal((3, 4))]),
    "diagonal": (lambda x: gc.diagonal(x, 1, 1, 0), [RNG.standard_normal((3, 4, 5))]),
    "isclose": (lambda x, y: gc.isclose(x, y, atol=0.5), [RNG.standard_normal((3, 4))] * 2),
    "allclose": (lambda x, y: gc.allclose(x, y, atol=1.0), [RNG.standard_normal((3, 4)),
                                                           RNG.standard_normal((3, 4))]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builders_under_vmap_are_a_loop(name: str) -> None:
    fn, args = BUILDERS[name]
    got = gc.vmap(fn)(*args)
    want = np.stack([np.asarray(fn(*(a[i] for a in args))) for i in range(len(args[0]))])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["nansum", "nanmean", "outer", "diagonal"])
def test_builders_jvp_matches_finite_differences(name: str) -> None:
    fn, batches = BUILDERS[name]
    args = tuple(a[0] for a in batches)  # one example
    tangents = tuple(RNG.standard_normal(a.shape) for a in args)
    _, tangent = gc.jvp(fn, args, tangents)
    eps = 1e-6
    ahead = fn(*(a + eps * t for a, t in zip(args, tangents)))
    behind = fn(*(a - eps * t for a, t in zip(args, tangents)))
    np.testing.assert_allclose(tangent, (ahead - behind) / (2 * eps), rtol=1e-6, atol=1e-8)
