"""The native backend's convolution whose kernel is larger than its output: a weight
gradient (graphc/backends/native/wide_conv.py).

Against numpy's im2col and BLAS: within the componentwise bound of a sum of K products
over geometries that reach every path (several vectors of a kernel row, partial ones,
output rows wider than a tile, output channels left over, padding, one image, several);
nan and inf where numpy has them; the same bits at every level and on one thread or
two; a training step's weight gradient. Strided or dilated weight gradients, other
dtypes and groups run numpy's kernel, the reason in explain().
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import wide_conv
from graphc.ops.conv import conv2d
from graphc.ops.conv_kernels import conv2d_kernel
from tests.edge_values import bits_differ, sprinkled_feeds
from tests.native_checks import (
    assert_kernel_within_bound,
    assert_numpys_kernel_runs,
    assert_within_sum_bound,
    check_native,
    direct_kernel_everywhere,  # noqa: F401 - a fixture
    needs_native,
    scaled_values,
    sum_feeds,
    two_input_graph,
)

# the kernel's own tests: it runs wherever it applies, on any processor
pytestmark = [needs_native, pytest.mark.usefixtures("direct_kernel_everywhere")]

# x (B, C, H, W), the kernel (O, C, R, S), padding (top, left, bottom, right)
GEOMETRIES = {
    "lenet second's weight gradient": ((6, 64, 14, 14), (16, 64, 10, 10), (0, 0, 0, 0)),
    "lenet first's, padded": ((1, 8, 28, 28), (6, 8, 28, 28), (2, 2, 2, 2)),
    "3x3, padded": ((5, 4, 14, 14), (7, 4, 14, 14), (1, 1, 1, 1)),
    "wide output rows, asymmetric": ((2, 3, 9, 45), (3, 3, 6, 36), (1, 0, 0, 2)),
    "one kernel column": ((2, 3, 12, 1), (5, 3, 10, 1), (0, 0, 0, 0)),
}


def _check(got: np.ndarray, x: np.ndarray, w: np.ndarray, attrs: dict) -> None:
    with np.errstate(invalid="ignore"):
        want = conv2d_kernel(x, w, **attrs)
    terms = w.shape[1] * w.shape[2] * w.shape[3]
    assert_kernel_within_bound(conv2d_kernel, got, want, x, w, attrs, terms)


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_within_the_bound_of_numpys_kernel_at_every_level(name: str) -> None:
    x_shape, w_shape, padding = GEOMETRIES[name]
    attrs = {"padding": padding}
    g = two_input_graph(conv2d, x_shape, w_shape, attrs)
    levels = [gc.compile(g, opt_level=k, backend="native") for k in (0, 1, 2)]
    assert "[native]" in levels[2].explain() and wide_conv.NAME in levels[2].source()
    rng = np.random.default_rng(len(name))
    for _ in range(2):
        x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
        kept = x.copy(), w.copy()
        got = levels[2](x, w)
        _check(got, x, w, attrs)
        for exe in levels[:2]:
            assert bits_differ(exe(x, w), got) is None
        assert bits_differ(x, kept[0]) is None and bits_differ(w, kept[1]) is None


@pytest.mark.parametrize("name", ["lenet first's, padded", "wide output rows, asymmetric"])
def test_nan_and_inf_where_numpy_has_them(name: str) -> None:
    x_shape, w_shape, padding = GEOMETRIES[name]
    attrs = {"padding": padding}
    g = two_input_graph(conv2d, x_shape, w_shape, attrs)
    exe = gc.compile(g, backend="native")
    for seed in range(3):
        x, w = sum_feeds(g, seed, share=0.001)
        with np.errstate(invalid="ignore"):
            got = exe(x, w)
        _check(got, x, w, attrs)


def test_the_same_bits_on_one_thread_or_two(monkeypatch: pytest.MonkeyPatch) -> None:
    x_shape, w_shape, padding = GEOMETRIES["3x3, padded"]
    g = two_input_graph(conv2d, x_shape, w_shape, {"padding": padding})
    rng = np.random.default_rng(4)
    x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
    runs = []
    for parallel in (0, 10**15):  # read when the plan is built
        monkeypatch.setattr(wide_conv, "PARALLEL_WORK", parallel)
        runs.append(gc.compile(g, backend="native")(x, w))
    assert bits_differ(runs[0], runs[1]) is None


def test_a_training_steps_weight_gradient() -> None:
    g = gc.Graph("step")
    with g:
        x = gc.placeholder("x", (4, 6, 14, 14), "float32")
        w = gc.placeholder("w", (16, 6, 5, 5), "float32")
        r = gc.placeholder("r", (4, 16, 12, 12), "float32")
        gc.output(gc.sum(conv2d(x, w, padding=1) * r), name="loss")
    exe = gc.compile(gc.gradients(g, wrt=["w"]), backend="native")
    assert wide_conv.NAME in exe.source()
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 6, 14, 14)).astype(np.float32)
    w = rng.standard_normal((16, 6, 5, 5)).astype(np.float32)
    r = rng.standard_normal((4, 16, 12, 12)).astype(np.float32)
    got = exe(x, w, r)[1]
    want = gc.compile(gc.gradients(g, wrt=["w"]), backend="numpy")(x, w, r)[1]
    # the gradient is sum over images and positions of r * x: the bound of that sum
    x64 = np.abs(x.astype(np.float64)).transpose(1, 0, 2, 3)
    r64 = np.abs(r.astype(np.float64)).transpose(1, 0, 2, 3)
    magnitude = conv2d_kernel(x64, r64, padding=(1, 1, 1, 1)).transpose(1, 0, 2, 3)
    assert_within_sum_bound(got, want, magnitude, 4 * 12 * 12)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs", "dtype", "why"),
    [
        (
            (2, 3, 12, 12),
            (5, 3, 5, 5),
            {"dilation": 2},
            "float32",
            "weight gradient): stride 1 and dilation 1",
        ),
        ((2, 3, 9, 9), (5, 3, 7, 7), {}, "float64", "float32 only"),
        ((2, 4, 9, 9), (6, 2, 7, 7), {"groups": 2}, "float32", "weight gradient): one group only"),
    ],
)
def test_other_weight_gradients_run_numpys_kernel(
    x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str, why: str
) -> None:
    g = two_input_graph(conv2d, x_shape, w_shape, attrs, dtype)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    assert_numpys_kernel_runs(g, why, x, w)


@pytest.mark.parametrize("every_size", [False, True])
def test_levels_agree_with_an_epilogue_or_a_body(
    every_size: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O0 (conv2d, then bias and relu) and O1/O2 (conv2d_epilogue or conv2d_fused) take
    the wide kernel alike: the same bits at every level, close to numpy's."""
    import graphc.backends.native as native

    if every_size:
        monkeypatch.setattr(native, "SMALL", 0)
    g = gc.Graph("wide_body")
    with g:
        x = gc.placeholder("x", (2, 3, 4, 4), "float32")
        w = gc.placeholder("w", (4, 3, 3, 3), "float32")
        b = gc.placeholder("b", (4, 1, 1), "float32")
        y = conv2d(x, w, padding=(1, 0, 1, 0))  # 4 x 2 outputs of a 3 x 3 kernel
        gc.output(gc.relu(y + b) * x[:, :1, :, :2], name="y")
    o2 = gc.compile(g, backend="native")
    assert wide_conv.NAME in o2.source() and "conv2d_" in o2.explain()

    def close(a: np.ndarray, b: np.ndarray) -> str | None:
        ok = np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
        return None if ok else f"max diff {np.nanmax(np.abs(a - b))}"

    feeds = [sprinkled_feeds(g, 1, share=0.0), sprinkled_feeds(g, 2)]
    check_native(g, feeds, levels=(0, 1, 2), close=close, close_sets=(0,))
