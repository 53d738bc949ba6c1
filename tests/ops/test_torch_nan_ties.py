"""PyTorch's nan and tie rules in the max-pooling family, against torch itself: eager
tensors, and graph values compiled for numpy and for the native backend (its C kernels
run at every size here).

torch's CPU kernels scan each window in row-major order and take a tap when it is greater
than the maximum so far or is nan: of equal values (-0.0 and 0.0 too) the first wins, and
its value is the one returned; of nans the last wins, and with it the index and the
gradient. A window of -inf only has its first element as its maximum (the padding never
wins).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.nn import functional as F
from tests.native_checks import HAVE_NATIVE

torch = pytest.importorskip("torch")

nan, inf = np.nan, np.inf

# rows of 8: nans in the middle, first and last, only nans, ties of -0.0 and 0.0, only
# -inf, inf beside nan and ties
ROWS = [
    [1, nan, 3, nan, 0, 2, nan, 5],
    [nan, 1, 2, 3, 4, 5, 6, nan],
    [nan] * 8,
    [-0.0, 0.0, 0.0, -0.0, -1, -0.0, 0.0, -2],
    [-inf] * 8,
    [inf, nan, inf, 2, 2, -inf, 7, 7],
]

MODES = ["eager", "numpy", "native"]


def _rows(dtype: str) -> np.ndarray:
    """The rows as (6, 1, 1, 8)."""
    return np.array(ROWS, dtype).reshape(6, 1, 1, 8)


def _planes(dtype: str) -> np.ndarray:
    """The rows two by two, as (3, 1, 2, 8) planes."""
    return np.array(ROWS, dtype).reshape(3, 1, 2, 8)


def _seed(shape: tuple, dtype: Any) -> np.ndarray:
    """A cotangent whose sums show which elements it reached, and how often."""
    return (1.0 + np.arange(int(np.prod(shape))).reshape(shape) / 8).astype(dtype)


def _torch(fn: Callable, x: np.ndarray) -> list[np.ndarray]:
    """[values, indices..., gradient of sum(values * seed)]."""
    t = torch.tensor(x, requires_grad=True)
    values, *rest = fn(t)
    (values * torch.tensor(_seed(values.shape, x.dtype))).sum().backward()
    return [values.detach().numpy(), *(r.numpy() for r in rest), t.grad.numpy()]


def _graphc(mode: str, fn: Callable, x: np.ndarray, seed: np.ndarray) -> list[np.ndarray]:
    """What `_torch` gives, from graphc: eagerly, or traced and differentiated by
    gc.gradients and compiled for `mode`'s backend."""
    if mode == "eager":
        t = ge.tensor(x, requires_grad=True)
        values, *rest = fn(t)
        (values * ge.tensor(seed)).sum().backward()
        return [values.detach().numpy(), *(r.numpy() for r in rest), t.grad.numpy()]

    def loss(t: Any) -> tuple:
        values, *rest = fn(t)
        return (gc.sum(values * seed), values, *rest)

    g = gc.trace(loss, gc.TensorSpec(x.shape, str(x.dtype)))
    gg = gc.gradients(g, wrt=[g.inputs[0].name], outputs=[g.outputs[0].name])
    _, *results = gc.compile(gg, backend=mode, wait=True)(x)
    return [np.asarray(r) for r in results]


def _same_values(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal, nan where nan, and -0.0 where -0.0."""
    np.testing.assert_array_equal(got, want, err_msg=what)
    assert np.array_equal(np.signbit(got), np.signbit(want)), f"{what}: signs of zero differ"


def _check(
    mode: str, fn: Callable, torch_fn: Callable, x: np.ndarray, what: str, signed: bool = True
) -> None:
    """graphc's values (their zeros' signs too, if `signed`), indices and gradient
    against torch's."""
    want = _torch(torch_fn, x)
    got = _graphc(mode, fn, x, _seed(want[0].shape, x.dtype))
    if signed:
        _same_values(got[0], want[0], f"{what}: values")
    np.testing.assert_array_equal(got[0], want[0], err_msg=f"{what}: values")
    for k in range(1, len(want) - 1):
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{what}: indices")
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-6, err_msg=f"{what}: gradient")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "native":
        if not HAVE_NATIVE:
            pytest.skip("the native backend cannot run here")
        import graphc.backends.native as native

        monkeypatch.setattr(native, "SMALL", 0)  # these small pools in C too
    return request.param


# max_pool2d's arguments, on the rows or on the planes: windows side by side, overlapping
# with padding, dilated with a partial last window, 2x2 of stride 2 (native's vector
# code), and 2x3 of stride 1 (its general loop)
POOLS_2D = [
    (_rows, {"kernel_size": (1, 4)}),
    (_rows, {"kernel_size": (1, 3), "stride": 1, "padding": (0, 1)}),
    (_rows, {"kernel_size": (1, 2), "stride": (1, 3), "dilation": (1, 2), "ceil_mode": True}),
    (_planes, {"kernel_size": 2}),
    (_planes, {"kernel_size": (2, 3), "stride": 1}),
]


@pytest.mark.quick_cases(len(MODES))  # each mode its own kernels, each well under 0.2 s
def test_max_pool2d_takes_the_first_maximum_and_the_last_nan(mode: str) -> None:
    for dtype in ["float32", "float64"]:
        for make, attrs in POOLS_2D:
            _check(
                mode,
                lambda t, attrs=attrs: F.max_pool2d(t, return_indices=True, **attrs),
                lambda t, attrs=attrs: torch.nn.functional.max_pool2d(
                    t, return_indices=True, **attrs
                ),
                make(dtype),
                f"max_pool2d {attrs} {dtype} ({mode})",
            )


def test_max_pool1d_and_adaptive_max_pools_follow_torch(mode: str) -> None:
    tf = torch.nn.functional
    rows = _rows("float32")[:, :, 0]  # (6, 1, 8)
    # (what, graphc's call, torch's call, input): bins of 3 (uneven, overlapping) and 4
    cases = [
        ("max_pool1d", lambda t: F.max_pool1d(t, 3, 1, 1, return_indices=True),
         lambda t: tf.max_pool1d(t, 3, 1, 1, return_indices=True), rows),
        ("adaptive_max_pool1d, uneven", lambda t: F.adaptive_max_pool1d(t, 3, True),
         lambda t: tf.adaptive_max_pool1d(t, 3, True), rows),
        ("adaptive_max_pool1d, even", lambda t: F.adaptive_max_pool1d(t, 2, True),
         lambda t: tf.adaptive_max_pool1d(t, 2, True), rows),
        ("adaptive_max_pool2d", lambda t: F.adaptive_max_pool2d(t, (1, 3), True),
         lambda t: tf.adaptive_max_pool2d(t, (1, 3), True), _planes("float64")),
    ]  # fmt: skip
    for what, ours, theirs, x in cases:
        _check(mode, ours, theirs, x, f"{what} ({mode})")


def test_max_pool3d_takes_the_last_nan_and_never_the_padding(mode: str) -> None:
    volumes = _rows("float32").reshape(3, 1, 4, 2, 2)  # depth windows meet nans and -inf
    tf = torch.nn.functional
    for attrs in [
        {"kernel_size": (2, 2, 1), "stride": 1},
        {"kernel_size": (2, 1, 2), "stride": 1, "padding": (1, 0, 0)},  # -inf next to padding
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    ]:
        _check(
            mode,
            lambda t, attrs=attrs: (F.max_pool3d(t, **attrs),),
            lambda t, attrs=attrs: (tf.max_pool3d(t, **attrs),),
            volumes,
            f"max_pool3d {attrs} ({mode})",
        )


def test_max_pool3d_pads_integers_with_their_lowest_value(mode: str) -> None:
    """torch pools integers too; graphc padded the depths with -inf, which int64 refused."""
    x = np.array([3, -7, 7, 1, 0, 2, 5, 5, 1, -9, 9, 0], np.int64).reshape(1, 1, 3, 2, 2)
    attrs = {"kernel_size": (2, 1, 2), "stride": 1, "padding": (1, 0, 1)}
    want = torch.nn.functional.max_pool3d(torch.tensor(x), **attrs).numpy()
    if mode == "eager":
        got = F.max_pool3d(ge.tensor(x), **attrs).numpy()
    else:
        g = gc.trace(lambda t: F.max_pool3d(t, **attrs), gc.TensorSpec(x.shape, "int64"))
        got = gc.compile(g, backend=mode, wait=True)(x)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_a_median_of_everything_shares_its_gradient_among_ties(mode: str, name: str) -> None:
    """torch's median() and nanmedian() give each element equal to the result (each nan,
    when it is nan) an equal share. (Which zero a tie of -0.0 and 0.0 gives is torch's
    sort's business, so the signs are not compared.)"""
    rows = [
        [2, 5, 5, 1, 1, 0, 1, 7],  # three ties of the median
        [-0.0, 0.0, 0.0, -0.0, -1, -0.0, 0.0, -2],  # -0.0 and 0.0 tie
        [inf, -inf, inf, 1, inf, 2, inf, nan],  # the median inf; nan for median()
        [nan, 1, nan, 2, 3, nan, 4, 5],  # nan, or 3 for nanmedian()
        [nan] * 8,
        [-inf, -inf, -inf, 0, 1, 2, 3, 4],
    ]
    for row in rows:
        x = np.array(row, np.float64)
        _check(
            mode,
            lambda t: (getattr(t, name)(),),
            lambda t: (getattr(torch, name)(t),),
            x,
            f"{name} of {row} ({mode})",
            signed=False,
        )


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_of_everything_share_their_gradient_as_torch(mode: str, name: str) -> None:
    """x.max() and x.min() give each element equal to the result an equal share, and
    each nan when the result is nan (graph values spread nan over every element: no
    element equals a nan; an eager tensor read its data to do it, now both take one
    custom gradient)."""
    for row in ROWS:
        x = np.array(row, np.float32)
        _check(
            mode,
            lambda t: (getattr(t, name)(),),
            lambda t: (getattr(t, name)(),),
            x,
            f"{name} of {row} ({mode})",
            signed=False,
        )
