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
