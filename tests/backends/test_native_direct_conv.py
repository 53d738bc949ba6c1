"""The native backend's direct float32 convolution (graphc/backends/native/direct_conv.py).

Against numpy's im2col and BLAS: within the componentwise bound of a sum of K products,
2 (K + 2) eps sum |w| |x| (plus the underflow of K products), over geometries that reach
every path of the kernel (partial vectors, rows of several vectors, output-channel
tiles of 1 to 4, groups, dilation, asymmetric padding, more than 512 taps, one row, one
column); nan and inf where numpy has them. Its own bits: the same for an image whatever
its batch, the chunking and the threads, and at every optimization level with an
epilogue or a body after it. Geometries it does not take run numpy's kernel, with
numpy's bits and the reason in explain().
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import conv as native_conv
from graphc.backends.native import direct_conv, winograd
from graphc.backends.native.kernels import DeclinedError
from graphc.backends.numpy.nodes import conv_epilogue as numpy_conv_epilogue
from graphc.backends.numpy.nodes import conv_fused as numpy_conv_fused
from graphc.ir.graph import Graph
from graphc.ops.conv_kernels import conv2d_kernel
from graphc.ops.conv_ops import conv2d
from tests.edge_values import bits_differ, sprinkled_feeds
from tests.native_checks import (
    assert_kernel_within_bound,
    check_native,
    direct_kernel_everywhere,  # noqa: F401 - a fixture
    needs_native,
    scaled_values,
    sum_feeds,
    two_input_graph,
)

# the kernel's own tests: it runs wherever it applies, on any processor
pytestmark = [needs_native, pytest.mark.usefixtures("direct_kernel_everywhere")]

# (N, C, H, W), (O, C/groups, kH, kW), padding (top, left, bottom, right), dilation, groups
GEOMETRIES = {
    "lenet first": ((2, 1, 28, 28), (6, 1, 5, 5), (2, 2, 2, 2), (1, 1), 1),
    "lenet second": ((3, 6, 14, 14), (16, 6, 5, 5), (0, 0, 0, 0), (1, 1), 1),
    "resnet": ((2, 16, 14, 14), (16, 16, 3, 3), (1, 1, 1, 1), (1, 1), 1),
    "wide rows, asymmetric": ((2, 3, 9, 70), (5, 3, 3, 3), (1, 0, 2, 1), (1, 1), 1),
    "groups and dilation": ((2, 6, 11, 7), (9, 2, 3, 2), (0, 1, 1, 0), (2, 3), 3),
    "630 taps": ((1, 70, 5, 5), (3, 70, 3, 3), (1, 1, 1, 1), (1, 1), 1),
    "one row": ((2, 3, 1, 40), (4, 3, 1, 3), (0, 0, 0, 0), (1, 1), 1),
    "one column": ((2, 3, 17, 1), (4, 3, 3, 1), (1, 0, 1, 0), (1, 1), 1),
    "1x1": ((2, 4, 6, 6), (7, 4, 1, 1), (0, 0, 0, 0), (1, 1), 1),
    "padding only": ((1, 2, 2, 3), (1, 2, 3, 3), (2, 2, 2, 2), (1, 1), 1),
}


def _attrs(padding: tuple, dilation: tuple, groups: int) -> dict:
    return {"padding": padding, "dilation": dilation, "groups": groups}


def _assert_within_bound(got: np.ndarray, want: np.ndarray, x: np.ndarray, w: np.ndarray,
                         attrs: dict) -> None:  # fmt: skip
    terms = w.shape[1] * w.shape[2] * w.shape[3]
    assert_kernel_within_bound(conv2d_kernel, got, want, x, w, attrs, terms)


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_direct_conv_within_the_bound_of_numpys(name: str) -> None:
    x_shape, w_shape, padding, dilation, groups = GEOMETRIES[name]
    attrs = _attrs(padding, dilation, groups)
    exe = gc.compile(two_input_graph(conv2d, x_shape, w_shape, attrs), backend="native")
    assert "[native]" in exe.explain(), exe.explain()
    rng = np.random.default_rng(len(name))
    for _ in range(3):
        x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
        want = conv2d_kernel(x, w, **attrs)
        _assert_within_bound(exe(x, w), want, x, w, attrs)


@pytest.mark.parametrize("name", ["lenet first", "groups and dilation", "630 taps"])
def test_nan_inf_and_signed_zeros_where_numpy_has_them(name: str) -> None:
    x_shape, w_shape, padding, dilation, groups = GEOMETRIES[name]
    attrs = _attrs(padding, dilation, groups)
    g = two_input_graph(conv2d, x_shape, w_shape, attrs)
    exe = gc.compile(g, backend="native")
    for seed in range(4):
        x, w = sum_feeds(g, seed, share=0.02)
        _assert_within_bound(exe(x, w), conv2d_kernel(x, w, **attrs), x, w, attrs)


@pytest.mark.parametrize("name", ["lenet first", "resnet", "groups and dilation"])
def test_an_images_bits_do_not_depend_on_batch_chunks_or_threads(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, w_shape, padding, dilation, groups = GEOMETRIES[name]
    x_shape = (5, *GEOMETRIES[name][0][1:])
    attrs = _attrs(padding, dilation, groups)
    exe = gc.compile(two_input_graph(conv2d, ("B", *x_shape[1:]), w_shape, attrs), backend="native")
    rng = np.random.default_rng(7)
    x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
    whole = exe(x, w)
    for k in range(x.shape[0]):
        assert bits_differ(exe(x[k : k + 1], w), whole[k : k + 1]) is None, f"image {k} alone"
    for chunk, parallel in ((1, 0), (1, 10**12), (10**9, 0), (10**9, 10**12)):
        monkeypatch.setattr(direct_conv, "CHUNK_BYTES", chunk)
        monkeypatch.setattr(direct_conv, "PARALLEL_WORK", parallel)
        why = bits_differ(exe(x, w), whole)
        assert why is None, f"chunk {chunk} bytes, parallel from {parallel}: {why}"


# the elementwise work after a convolution y, on the input x (a residual), a per-channel
# b, one value s; whether the direct kernel runs it in registers (else a C kernel or
# numpy's ops per chunk of images)
BODIES = {
    "bias, relu": (lambda y, x, b, s: gc.relu(y + b), True),
    "one bias, relu": (lambda y, x, b, s: gc.relu(y + s), True),
    "norm, residual, relu": (lambda y, x, b, s: gc.relu((y - b) * b * s + b + x), True),
    "operand first, min, max, div": (
        lambda y, x, b, s: gc.maximum(gc.minimum(b - y, x), s) / (s + 2.0) - x, True),
    "relu between": (lambda y, x, b, s: gc.relu(y * b - s) * s + x, True),
    "seven operands": (lambda y, x, b, s: y * x + b + x + b + x + b + x, False),
    "not a chain": (lambda y, x, b, s: gc.relu(y * y + b), False),
}  # fmt: skip


def _block_graph(body: str, batch: int = 3) -> Graph:
    g = gc.Graph("block")
    with g:
        x = gc.placeholder("x", (batch, 8, 12, 12), "float32")
        w = gc.placeholder("w", (8, 8, 3, 3), "float32")
        b = gc.placeholder("b", (8, 1, 1), "float32")
        s = gc.placeholder("s", (1,), "float32")
        gc.output(BODIES[body][0](conv2d(x, w, padding=1), x, b, s), name="y")
    return g


@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("every_size", [False, True])
def test_levels_agree_with_an_epilogue_or_a_body(
    body: str, every_size: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O0 (conv2d, then the elementwise ops) and O1/O2 (conv2d_epilogue or
    conv2d_fused) give the same bits on native, whether the direct kernel runs the body
    in registers or the body runs per chunk in C or on numpy; feeds are never written;
    the results stay close to numpy's."""
    import graphc.backends.native as native

    if every_size:
        monkeypatch.setattr(native, "SMALL", 0)
    g = _block_graph(body)
    o2 = gc.compile(g, backend="native")
    text = o2.explain()
    assert "conv2d_fused(" in text or "conv2d_epilogue(" in text, text
    assert ("its epilogue in registers" in o2.source()) == BODIES[body][1], o2.source()

    def close(a: np.ndarray, b: np.ndarray) -> str | None:
        ok = np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
        return None if ok else f"max diff {np.nanmax(np.abs(a - b))}"

    feeds = [sprinkled_feeds(g, 1, share=0.0), sprinkled_feeds(g, 2)]
    check_native(g, feeds, levels=(0, 1, 2), close=close, close_sets=(0,))


@pytest.mark.parametrize("body", [*BODIES, "clip"])
def test_numpys_epilogue_after_the_c_convolution(
    body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where neither the direct kernel's program nor a C body takes the step's
    elementwise work (a clip has no C chain; the others are forced by declining both),
    the C convolution runs and then the numpy node's own `chunk_epilogue` on each chunk:
    the same bits as the C body (both exact), feeds never written, and numpy's
    convolution never runs."""
    bodies = BODIES | {"clip": (lambda y, x, b, s: gc.clip(y + x, -1.0, 1.0) * s, False)}
    monkeypatch.setitem(BODIES, body, bodies[body])
    g = _block_graph(body)
    feeds = sprinkled_feeds(g, 4, share=0.0)
    want = gc.compile(g, opt_level=0, backend="native")(**feeds)  # conv2d, then the ops

    def declined(*args: object) -> None:
        raise DeclinedError("declined by the test")

    if body != "clip":
        monkeypatch.setattr(native_conv, "_program", lambda gen, step: None)
        monkeypatch.setattr(native_conv, "_body_epilogue", declined)

    def im2col(*args: object, **kwargs: object) -> None:
        raise AssertionError("numpy's convolution ran")

    for module in (native_conv, numpy_conv_epilogue, numpy_conv_fused):
        monkeypatch.setattr(module, "conv2d_kernel", im2col)
    exe = gc.compile(g, backend="native")
    assert "numpy's epilogue per chunk" in exe.source(), exe.source()
    before = {k: v.copy() for k, v in feeds.items()}
    assert bits_differ(exe(**feeds), want) is None
    for k, v in feeds.items():
        assert bits_differ(v, before[k]) is None, f"feed {k} written"


@pytest.mark.parametrize("body", [name for name, (_, kept) in BODIES.items() if kept])
def test_threads_splitting_the_images_read_each_images_operands(
    body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over 8 images (two or more per thread: dc_images splits the batch, each thread
    through its own part of the padded buffer) the program's per-image operand (the
    residual x) is read at each image's place: the bits of the serial kernel and of
    each image alone."""
    g = _block_graph(body, batch=8)
    feeds = sprinkled_feeds(g, 3, share=0.0)
    runs = []
    for parallel in (0, 10**12):  # read when a plan's steps are set up
        monkeypatch.setattr(direct_conv, "PARALLEL_WORK", parallel)
        runs.append(gc.compile(g, backend="native")(**feeds))
    assert bits_differ(runs[0], runs[1]) is None
    one = gc.compile(_block_graph(body, batch=1), backend="native")
    for k in range(8):
        alone = one(**{n: a[k : k + 1] if n == "x" else a for n, a in feeds.items()})
        assert bits_differ(alone, runs[0][k : k + 1]) is None, f"image {k}"


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs", "dtype", "why"),
    [
        ((2, 3, 9, 9), (4, 3, 3, 3), {"stride": 2}, "float32", "stride 1"),
        ((2, 3, 9, 9), (4, 3, 3, 3), {}, "float64", "float32 only"),
        ((2, 4, 9, 9), (4, 1, 3, 3), {"groups": 4}, "float32", "depthwise"),
        ((2, 3, 12, 12), (5, 3, 5, 5), {"dilation": 2}, "float32", "larger than its output"),
    ],
)
def test_other_geometries_run_numpys_kernel(
    x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str, why: str
) -> None:
    g = two_input_graph(conv2d, x_shape, w_shape, attrs, dtype)
    exe = gc.compile(g, backend="native")
    text = exe.explain()
    assert "[numpy]" in text and why in text, text
    feeds = sprinkled_feeds(g, 3)
    with np.errstate(all="ignore"):  # the largest finite values overflow the sums
        want = gc.compile(g, backend="numpy")(**feeds)
        assert bits_differ(exe(**feeds), want) is None


def test_empty_batch_strided_views_and_callers_arrays() -> None:
    g = two_input_graph(conv2d, ("B", 3, 10, 10), (4, 3, 3, 3), {"padding": 1})
    exe = gc.compile(g, backend="native")
    rng = np.random.default_rng(0)
    w = scaled_values(rng, (4, 3, 3, 3))
    empty = exe(np.zeros((0, 3, 10, 10), np.float32), w)
    assert empty.shape == (0, 4, 10, 10) and empty.dtype == np.float32
    big = scaled_values(rng, (4, 3, 20, 10))
    x = big[::2, :, ::2]  # a strided view, not C-contiguous
    before = big.copy()
    got = exe(x, w)
    assert bits_differ(big, before) is None, "the caller's array was written"
    assert bits_differ(got, exe(np.ascontiguousarray(x), w)) is None
    _assert_within_bound(got, conv2d_kernel(x, w, padding=(1, 1, 1, 1)), x, w,
                         {"padding": (1, 1, 1, 1)})  # fmt: skip


def test_a_weight_that_is_a_transposed_view_is_read_in_its_order() -> None:
    """A weight given as the transpose of a constant is, unfolded (O0), a strided view
    that exists before the call; the direct kernel reads C-ordered weights, so it takes
    a C-ordered copy per call: the bits of the same weight given C-ordered."""
    rng = np.random.default_rng(8)
    stored = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)  # (C, O, kh, kw)
    feeds = {"x": rng.standard_normal((2, 3, 9, 9)).astype(np.float32)}
    results = []
    for transposed in (True, False):
        g = gc.Graph("weight")
        with g:
            x = gc.placeholder("x", (2, 3, 9, 9), "float32")
            if transposed:
                w = gc.transpose(gc.constant(stored), axes=(1, 0, 2, 3))
            else:
                w = gc.constant(np.ascontiguousarray(stored.transpose(1, 0, 2, 3)))
            gc.output(gc.relu(conv2d(x, w, padding=1) + 0.5), name="y")
        for level in (0, 2):
            exe = gc.compile(g, opt_level=level, backend="native")
            assert "gc_direct_conv2d_f32(" in exe.source(**feeds)
            results.append(exe(**feeds))
    for got in results[:3]:
        assert bits_differ(got, results[3]) is None


@pytest.mark.parametrize("wide", [False, True])
def test_winograd_runs_the_3x3_layers_it_is_given_first(
    wide: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Winograd's F(2x2, 3x3) runs the 3x3 convolutions that `winograd.preferred` gives
    it: on 256-bit vectors (direct_conv.WIDE_REGISTERS false) every one it applies to with
    more than one input channel, on 512-bit ones those of 32 channels 14 wide and more;
    the direct kernel runs the others (a 5 x 5 of 16 channels, LeNet's one-channel first
    layer, a one-channel 3x3, and with AVX-512 a 3x3 of 8 channels)."""
    monkeypatch.undo()  # the module's direct_kernel_everywhere: conv.py's own choice
    monkeypatch.setattr(direct_conv, "WIDE_REGISTERS", wide)
    for x_shape, w_shape, kernel in (
        ((2, 16, 12, 12), (16, 16, 5, 5), direct_conv.NAME),
        ((2, 1, 12, 12), (6, 1, 5, 5), direct_conv.NAME),
        ((2, 1, 12, 12), (6, 1, 3, 3), direct_conv.NAME),
        ((2, 8, 12, 12), (8, 8, 3, 3), direct_conv.NAME if wide else winograd.NAME),
        ((1, 32, 14, 14), (4, 32, 3, 3), winograd.NAME),
    ):
        g = two_input_graph(conv2d, x_shape, w_shape, {"padding": 1})
        exe = gc.compile(g, backend="native")
        text, source = exe.explain(), exe.source()
        assert "[numpy]" not in text, text
        other = winograd.NAME if kernel == direct_conv.NAME else direct_conv.NAME
        assert kernel in source and other not in source, source
        feeds = sprinkled_feeds(g, 1, share=0.0)
        got, want = exe(**feeds), gc.compile(g, backend="numpy")(**feeds)
        if kernel == direct_conv.NAME:
            _assert_within_bound(got, want, feeds["x"], feeds["w"], {"padding": (1, 1, 1, 1)})
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("body", ["none", "bias, relu", "one bias, relu", "norm, residual, relu"])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "padding", "dilation"),
    [
        # flat runs (whole vectors, padded width) a tenth or more shorter than the rows':
        ((3, 6, 14, 14), (6, 6, 5, 5), 0, 1),  # LeNet's second: 136 floats against 160
        ((2, 6, 9, 11), (6, 6, 3, 3), 1, 1),  # 120 against 144
        ((2, 6, 13, 12), (6, 6, 3, 2), 0, 2),  # dilated: 109 -> 112 against 144
        ((2, 6, 28, 28), (6, 6, 5, 5), 2, 1),  # LeNet's first: no shorter, by rows
    ],
)
def test_the_flat_run_gives_the_bits_of_the_rows(
    x_shape: tuple,
    w_shape: tuple,
    padding: int,
    dilation: int,
    body: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`dc_task` computes a channel's outputs as the flat run of its rows at the padded
    width where that is shorter (the columns past the output dropped), else by rows;
    the same sums either way, so the same bits, with an epilogue in registers too (one
    with an operand of the output's shape always goes by rows). Checked against the
    kernel built with no flat run at all (`direct_conv.FLAT` 0)."""
    g = gc.Graph("flat")
    with g:
        x = gc.placeholder("x", x_shape, "float32")
        w = gc.placeholder("w", w_shape, "float32")
        b = gc.placeholder("b", (w_shape[0], 1, 1), "float32")
        s = gc.placeholder("s", (1,), "float32")
        y = conv2d(x, w, padding=padding, dilation=dilation)
        if body != "none":
            residual = gc.placeholder("r", y.shape, "float32")
            y = BODIES[body][0](y, residual, b, s)
        gc.output(y, name="y")
    feeds = [sprinkled_feeds(g, seed, share=share) for seed, share in ((1, 0.0), (2, 0.125))]
    flat = gc.compile(g, backend="native", wait=True)
    assert direct_conv.NAME in flat.source(**feeds[0]), flat.source(**feeds[0])
    wanted = [flat(**f) for f in feeds]
    monkeypatch.setattr(direct_conv, "FLAT", 0)
    rows_kernel = dataclasses.replace(native_conv.DIRECT, source=direct_conv.source())
    assert rows_kernel.source != native_conv.DIRECT.source
    monkeypatch.setattr(native_conv, "DIRECT", rows_kernel)
    rows = gc.compile(g, backend="native", wait=True)
    for f, want in zip(feeds, wanted):
        assert bits_differ(rows(**f), want) is None, bits_differ(rows(**f), want)
