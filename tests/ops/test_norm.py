"""Normalization: layer_norm, group_norm, batch_norm and std against PyTorch (values,
gradients, second derivatives, running statistics) and at every optimization level.

The op cases (tests/cases/norm.py) run layer_norm and layer_norm_grad through the
registry tests (kernels, types, VJPs and second derivatives against finite differences,
round trips, O0/O1/O2 against the reference).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
import graphc.nn.functional as F
from graphc.eager import autograd
from tests.conftest import needs_torch, torch
from tests.differential import check_levels

RNG = np.random.default_rng(0)


def _pair(a: np.ndarray, grad: bool = True) -> tuple[ge.Tensor, Any]:
    return ge.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _close(ours: Any, theirs: Any, dtype: str) -> None:
    tol = 2e-5 if dtype == "float32" else 1e-11
    got = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
    np.testing.assert_allclose(got, theirs.detach().numpy(), rtol=tol, atol=tol)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "normalized", "affine"),
    [((4, 6), (6,), True), ((2, 3, 4), (3, 4), True), ((5, 7), 7, False), ((2, 3, 8), (8,), True)],
)
def test_layer_norm_matches_torch_values_and_gradients(
    shape: tuple, normalized: Any, affine: bool, dtype: str
) -> None:
    dims = (normalized,) if isinstance(normalized, int) else normalized
    x, xt = _pair(RNG.normal(1.0, 2.0, shape).astype(dtype))
    w, wt = _pair(RNG.normal(size=dims).astype(dtype)) if affine else (None, None)
    b, bt = _pair(RNG.normal(size=dims).astype(dtype)) if affine else (None, None)
    y = F.layer_norm(x, normalized, w, b, eps=1e-3)
    yt = torch.nn.functional.layer_norm(xt, dims, wt, bt, eps=1e-3)
    _close(y, yt, dtype)
    ct = RNG.normal(size=shape).astype(dtype)
    (y * ge.from_numpy(ct)).sum().backward()
    (yt * torch.from_numpy(ct)).sum().backward()
    for ours, theirs in [(x, xt), (w, wt), (b, bt)]:
        if ours is not None:
            _close(ours.grad, theirs.grad, dtype)


@needs_torch
def test_layer_norm_second_derivatives_match_torch() -> None:
    x, xt = _pair(RNG.normal(size=(3, 5)))
    w, wt = _pair(RNG.normal(size=5))
    b, bt = _pair(RNG.normal(size=5))
    ct = RNG.normal(size=(3, 5))

    def grads(fn: Any, tensors: list, grad: Any, ctv: Any) -> list:
        (gx, gw) = grad((fn(*tensors) * ctv).sum(), tensors[:2], create_graph=True)
        return grad((gx * gx).sum() + (gw * gx[0]).sum(), tensors, allow_unused=True)

    ours = grads(lambda a, c, d: F.layer_norm(a, (5,), c, d), [x, w, b], autograd.grad,
                 ge.from_numpy(ct))  # fmt: skip
    theirs = grads(lambda a, c, d: torch.nn.functional.layer_norm(a, (5,), c, d), [xt, wt, bt],
                   torch.autograd.grad, torch.from_numpy(ct))  # fmt: skip
    for a, t in zip(ours, theirs):
        if t is None:
            assert a is None or not np.any(a.numpy())
        else:
            np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-9, atol=1e-10)


def test_layer_norm_checks_normalized_shape_and_affine_shapes() -> None:
    x = ge.ones(2, 3, 4)
    with pytest.raises(gc.ShapeError, match="trailing dims"):
        F.layer_norm(x, (3,))
    with pytest.raises(gc.ShapeError, match="weight"):
        F.layer_norm(x, (4,), ge.ones(3))
    with pytest.raises(gc.ShapeError, match="does not fit"):
        gc.layer_norm(np.ones((2, 3)), np.ones(2))
    with pytest.raises(gc.GraphcError, match="eps"):
        gc.layer_norm(np.ones((2, 3)), eps=-1.0)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "groups"), [((2, 6, 3, 3), 3), ((3, 4, 5), 2), ((2, 4), 2)])
def test_group_norm_matches_torch_values_and_gradients(
    shape: tuple, groups: int, dtype: str
) -> None:
    channels = shape[1]
    x, xt = _pair(RNG.normal(size=shape).astype(dtype))
    w, wt = _pair(RNG.normal(size=channels).astype(dtype))
    b, bt = _pair(RNG.normal(size=channels).astype(dtype))
    y, yt = F.group_norm(x, groups, w, b), torch.nn.functional.group_norm(xt, groups, wt, bt)
    _close(y, yt, dtype)
    ct = RNG.normal(size=shape).astype(dtype)
    (y * ge.from_numpy(ct)).sum().backward()
    (yt * torch.from_numpy(ct)).sum().backward()
    for ours, theirs in [(x, xt), (w, wt), (b, bt)]:
        _close(ours.grad, theirs.grad, dtype)
    with pytest.raises(gc.ShapeError, match="groups"):
        F.group_norm(x, 5)


@needs_torch
@pytest.mark.parametrize("momentum", [0.1, 0.5])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_training_matches_torch_and_updates_running_stats(
    shape: tuple, momentum: float
) -> None:
    x, xt = _pair(RNG.normal(2.0, 3.0, shape))
    w, wt = _pair(RNG.normal(size=3))
    b, bt = _pair(RNG.normal(size=3))
    mean, var = ge.tensor(RNG.normal(size=3)), ge.tensor(RNG.uniform(0.5, 2, 3))
    mean_t, var_t = torch.tensor(mean.numpy()), torch.tensor(var.numpy())
    y = F.batch_norm(x, mean, var, w, b, training=True, momentum=momentum, eps=1e-4)
    yt = torch.nn.functional.batch_norm(xt, mean_t, var_t, wt, bt, True, momentum, 1e-4)
    _close(y, yt, "float64")
    _close(mean, mean_t, "float64")
    _close(var, var_t, "float64")
    ct = RNG.normal(size=shape)
    (y * ge.from_numpy(ct)).sum().backward()
    (yt * torch.from_numpy(ct)).sum().backward()
    for ours, theirs in [(x, xt), (w, wt), (b, bt)]:
        _close(ours.grad, theirs.grad, "float64")
    assert mean.grad_fn is None and not mean.requires_grad  # updated outside the tape


@needs_torch
def test_batch_norm_eval_uses_running_stats_like_torch() -> None:
    x, xt = _pair(RNG.normal(size=(4, 3, 2)))
    w, wt = _pair(RNG.normal(size=3))
    mean, var = RNG.normal(size=3), RNG.uniform(0.5, 2, 3)
    y = F.batch_norm(x, ge.tensor(mean), ge.tensor(var), w, None, training=False)
    yt = torch.nn.functional.batch_norm(xt, torch.tensor(mean), torch.tensor(var), wt, None, False)
    _close(y, yt, "float64")
    y.sum().backward()
    yt.sum().backward()
    _close(x.grad, xt.grad, "float64")
    _close(w.grad, wt.grad, "float64")
    with pytest.raises(gc.GraphcError, match="eval mode"):
        F.batch_norm(x, None, None)
    with pytest.raises(gc.ShapeError, match="more than 1 value per channel"):
        F.batch_norm(ge.ones(1, 3), None, None, training=True)


@needs_torch
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_std_and_var_take_a_correction_like_torch(correction: int) -> None:
    x = RNG.normal(size=(4, 6))
    want_std = torch.std(torch.tensor(x), dim=1, correction=correction).numpy()
    want_var = torch.var(torch.tensor(x), dim=1, correction=correction).numpy()
    np.testing.assert_allclose(gc.std(x, axis=1, correction=correction), want_std, rtol=1e-12)
    np.testing.assert_allclose(gc.std(x, 1, False, correction), want_std, rtol=1e-12)
    np.testing.assert_allclose(gc.var(x, axis=1, correction=correction), want_var, rtol=1e-12)
    np.testing.assert_allclose(ge.std(ge.tensor(x), 1, correction=correction).numpy(), want_std)
    np.testing.assert_allclose(ge.tensor(x).var(1, correction=correction).numpy(), want_var)
    g = gc.trace(lambda v: gc.std(v, axis=0, keepdims=True, correction=correction), x)
    np.testing.assert_allclose(g(x), np.std(x, axis=0, keepdims=True, ddof=correction), rtol=1e-12)


# -- a transformer block's normalization at every level -------------------------------------


def _block(x: Any, w: Any, gamma: Any, beta: Any) -> Any:
    h = gc.layer_norm(x, gamma, beta)
    h = F.gelu(h @ w) @ gc.transpose(w)
    g = F.group_norm(gc.reshape(h, (-1, 4, 2)), 2)
    return gc.sum(gc.reshape(g, (-1, 8)) * x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_normalized_block_and_its_gradients_give_the_references_bits_at_every_level(
    dtype: str,
) -> None:
    specs = [gc.TensorSpec((6, 8), dtype), gc.TensorSpec((8, 16), dtype),
             gc.TensorSpec((8,), dtype), gc.TensorSpec((8,), dtype)]  # fmt: skip
    gg = gc.gradients(gc.trace(_block, *specs), wrt=["x", "w", "gamma", "beta"])
    feeds = {
        "x": RNG.normal(size=(6, 8)).astype(dtype),
        "w": (RNG.normal(size=(8, 16)) / 4).astype(dtype),
        "gamma": RNG.normal(size=8).astype(dtype),
        "beta": RNG.normal(size=8).astype(dtype),
    }
    constant_rows = dict(feeds, x=np.repeat(np.array([[1.0], [np.inf]], dtype), [5, 1], axis=0)
                         * np.ones((1, 8), dtype))  # fmt: skip
    check_levels(gg, [feeds, constant_rows])


def test_torchs_normalized_shape_given_to_gc_layer_norm_is_a_named_error() -> None:
    """gc.layer_norm's second argument is the weight; torch's F.layer_norm(x, (4,)) passed
    there scaled every value by 4 (a float64 result) before; graphc's torch spelling is
    named in the error and gives the normalized values."""
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    for shape in [(4,), [4]]:
        with pytest.raises(gc.GraphcError, match=r"layer_norm: .* weight, got the ints \(4,\)"):
            gc.layer_norm(x, shape)
    torch_spelling = F.layer_norm(x, (4,))
    assert torch_spelling.dtype == np.float32
    np.testing.assert_array_equal(torch_spelling, gc.layer_norm(x))
    weighted = gc.layer_norm(x, np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(weighted, gc.layer_norm(x) * np.float32(2.0))
