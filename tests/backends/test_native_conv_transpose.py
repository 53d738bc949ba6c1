"""conv_transpose2d of stride 1 on the native backend: the direct convolution of the
flipped weight (graphc/backends/native/conv.py, `lower_conv_transpose`).

It is a convolution's input gradient, so every training step of a CNN runs it. Against
numpy's kernel (a matmul, then col2im's sums): within the componentwise bound of a sum
of K = C kH kW products, 2 (K + 2) eps sum |w| |x|, over geometries with padding,
dilation, output_padding and one output channel; nan and inf where numpy has them; the
same bits at every level and on every call as the weight changes (a weight that is
state or a placeholder is flipped on every call, a constant once); the caller's arrays
unchanged. Geometries it does not take run numpy's kernel with numpy's bits, the reason
in explain().
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ops.conv import conv2d, conv_transpose2d
from graphc.ops.conv_kernels import conv_transpose2d_kernel
from tests.edge_values import bits_differ
from tests.native_checks import (
    assert_kernel_within_bound,
    assert_numpys_kernel_runs,
    direct_kernel_everywhere,  # noqa: F401 - a fixture
    needs_native,
    scaled_values,
    sum_feeds,
    two_input_graph,
)

# the kernel's own tests: it runs wherever it applies, on any processor
pytestmark = [needs_native, pytest.mark.usefixtures("direct_kernel_everywhere")]

# (N, C, H, W), (C, O, kH, kW), attrs
GEOMETRIES = {
    "lenet second's input gradient": ((3, 16, 10, 10), (16, 6, 5, 5), {}),
    "lenet first's, one channel": ((2, 6, 28, 28), (6, 1, 5, 5), {"padding": (2, 2, 2, 2)}),
    "asymmetric, dilated": ((2, 3, 7, 9), (3, 4, 3, 2), {"padding": (1, 0, 2, 1), "dilation": (2, 1)}),
    "output_padding": ((2, 3, 6, 5), (3, 2, 3, 3), {"padding": (1, 1, 1, 1), "dilation": (2, 2), "output_padding": (1, 0)}),
    "1x1": ((2, 5, 4, 6), (5, 3, 1, 1), {}),
    "wide rows": ((1, 4, 3, 40), (4, 5, 3, 3), {"padding": (1, 1, 1, 1)}),
}  # fmt: skip


def _assert_within_bound(
    got: np.ndarray, want: np.ndarray, x: np.ndarray, w: np.ndarray, attrs: dict
) -> None:
    terms = w.shape[0] * w.shape[2] * w.shape[3]
    assert_kernel_within_bound(conv_transpose2d_kernel, got, want, x, w, attrs, terms)


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_within_the_bound_of_numpys_kernel_at_every_level(name: str) -> None:
    x_shape, w_shape, attrs = GEOMETRIES[name]
    g = two_input_graph(conv_transpose2d, x_shape, w_shape, attrs)
    levels = [gc.compile(g, opt_level=k, backend="native") for k in (0, 1, 2)]
    assert "conv_transpose2d(" in levels[2].explain() and "[native]" in levels[2].explain()
    assert "flipped weight" in levels[2].source()
    rng = np.random.default_rng(len(name))
    for _ in range(3):  # new weights each call: flipped on every call
        x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
        kept = x.copy(), w.copy()
        got = levels[2](x, w)
        _assert_within_bound(got, conv_transpose2d_kernel(x, w, **attrs), x, w, attrs)
        for exe in levels[:2]:
            assert bits_differ(exe(x, w), got) is None
        assert bits_differ(x, kept[0]) is None and bits_differ(w, kept[1]) is None


@pytest.mark.parametrize("name", ["lenet first's, one channel", "output_padding"])
def test_nan_inf_and_signed_zeros_where_numpy_has_them(name: str) -> None:
    x_shape, w_shape, attrs = GEOMETRIES[name]
    g = two_input_graph(conv_transpose2d, x_shape, w_shape, attrs)
    exe = gc.compile(g, backend="native")
    for seed in range(4):
        x, w = sum_feeds(g, seed, share=0.02)
        want = conv_transpose2d_kernel(x, w, **attrs)
        _assert_within_bound(exe(x, w), want, x, w, attrs)


def test_an_images_bits_do_not_depend_on_its_batch() -> None:
    x_shape, w_shape, attrs = GEOMETRIES["lenet second's input gradient"]
    exe = gc.compile(
        two_input_graph(conv_transpose2d, ("B", *x_shape[1:]), w_shape, attrs), backend="native"
    )
    rng = np.random.default_rng(11)
    x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
    whole = exe(x, w)
    assert "[native]" in exe.explain(x, w)
    for k in range(x.shape[0]):
        assert bits_differ(exe(x[k : k + 1], w), whole[k : k + 1]) is None, f"image {k} alone"


def test_a_constant_weight_is_flipped_once_and_a_state_weight_every_step() -> None:
    x_shape, w_shape, attrs = GEOMETRIES["asymmetric, dilated"]
    rng = np.random.default_rng(3)
    w = scaled_values(rng, w_shape)
    g = gc.Graph("constant")
    with g:
        x = gc.placeholder("x", x_shape, "float32")
        gc.output(conv_transpose2d(x, gc.constant(w), **attrs), name="y")
    exe = gc.compile(g, backend="native")
    source = exe.source()
    assert "[native]" in exe.explain() and "flipped weight" in source
    run_body = source[source.index("def run(") :]
    assert "flipped(" not in run_body.split("# ---- native")[0], "a constant flipped per call"
    x = scaled_values(rng, x_shape)
    _assert_within_bound(exe(x), conv_transpose2d_kernel(x, w, **attrs), x, w, attrs)


def test_the_input_gradient_of_a_training_step() -> None:
    """A conv2d's input gradient is a conv_transpose2d: native runs it, within the bound,
    and the weight's update between steps reaches it."""
    g = gc.Graph("step")
    with g:
        x = gc.placeholder("x", (4, 6, 14, 14), "float32")
        w = gc.placeholder("w", (16, 6, 5, 5), "float32")
        r = gc.placeholder("r", (4, 16, 10, 10), "float32")
        gc.output(gc.sum(conv2d(x, w) * r), name="loss")
    exe = gc.compile(gc.gradients(g, wrt=["x"]), backend="native")
    text = exe.explain()
    assert "conv_transpose2d(" in text and "[native]" in text.split("conv_transpose2d(")[1]
    rng = np.random.default_rng(5)
    for _ in range(2):
        x, w, r = (
            rng.standard_normal(s).astype(np.float32)
            for s in ((4, 6, 14, 14), (16, 6, 5, 5), (4, 16, 10, 10))
        )
        want = conv_transpose2d_kernel(r, w)
        _assert_within_bound(exe(x, w, r)[1], want, r, w, {})


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs", "dtype", "why"),
    [
        ((2, 3, 5, 5), (3, 4, 3, 3), {"stride": 2}, "float32", "stride 1 only"),
        ((2, 4, 5, 5), (4, 1, 3, 3), {"groups": 2}, "float32", "one group only"),
        ((2, 3, 5, 5), (3, 4, 3, 3), {}, "float64", "float32 only"),
        ((2, 3, 5, 5), (3, 4, 3, 3), {"padding": (3, 0, 0, 0)}, "float32", "padding past"),
        ((2, 0, 5, 5), (0, 4, 3, 3), {}, "float32", "non-empty shapes"),
    ],
)
def test_other_geometries_run_numpys_kernel(
    x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str, why: str
) -> None:
    g = two_input_graph(conv_transpose2d, x_shape, w_shape, attrs, dtype)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    assert_numpys_kernel_runs(g, why, x, w)


def test_a_weight_with_inf_or_nan_runs_numpys_kernel() -> None:
    """The convolution would multiply the padding's zeros by the weight (0 * inf is nan),
    which the transpose's scatter never does: such a call runs numpy's kernel, its bits."""
    x_shape, w_shape, attrs = GEOMETRIES["lenet first's, one channel"]
    g = two_input_graph(conv_transpose2d, x_shape, w_shape, attrs)
    exe = gc.compile(g, backend="native")
    rng = np.random.default_rng(2)
    x = scaled_values(rng, x_shape)
    x[0, 0, 0, :3] = [np.inf, -np.inf, np.nan]
    for bad in (np.inf, -np.inf, np.nan):
        w = scaled_values(rng, w_shape)
        w[1, 0, 4, 4] = bad
        with np.errstate(all="ignore"):
            want = conv_transpose2d_kernel(x, w, **attrs)
            assert bits_differ(exe(x, w), want) is None, bad
    w = scaled_values(rng, w_shape)  # finite again: the direct kernel, nan and inf from x
    _assert_within_bound(exe(x, w), conv_transpose2d_kernel(x, w, **attrs), x, w, attrs)
