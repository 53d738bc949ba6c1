"""The native backend's Winograd F(2x2, 3x3) convolution (graphc/backends/native/winograd.py).

Its stated bound, |y - exact| <= 2.02 (C + 7) eps sum_c |w[o, c]|_1 |x[c] window|_1
(module docstring), against float64 convolutions and, with numpy's own share added,
against numpy's conv2d, on geometries that reach every path: odd sizes (tiles that
overhang the output), 1x1 images, padding 0, 1 and asymmetric, batch 1 and several,
channels 2 to 64, bands of several tile rows. Values that are not finite: numpy's
kernel for the image, so nan and inf where numpy has them. Its own bits: the same for
an image whatever its batch, bands and threads; conv2d, conv2d_epilogue and
conv2d_fused agree bit for bit; a weight that changes between calls is transformed
again, a constant one once; callers' arrays are never written.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import calls, direct_conv, matmul, toolchain, winograd
from graphc.backends.native import conv as native_conv
from graphc.backends.native.kernels import DeclinedError
from graphc.backends.native.rows import prelude as kernel_prelude
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.ops.conv_kernels import conv2d_kernel
from graphc.ops.conv_ops import conv2d
from tests.edge_values import bits_differ, sprinkled_feeds
from tests.native_checks import (
    check_native,
    needs_native,
    scaled_values,
    sum_feeds,
    threaded_mismatches,
    two_input_graph,
)

pytestmark = [
    needs_native,
]


@pytest.fixture(autouse=True)
def winograd_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    """This kernel on every geometry that it applies to with more than one input channel,
    on 512-bit vectors too, where conv.py gives it only the wider layers of more
    channels (`winograd.preferred`, tested by `test_the_choice_by_vectors_channels_width`)."""
    monkeypatch.setattr(winograd, "WIDE_MIN_CHANNELS", 2)
    monkeypatch.setattr(winograd, "WIDE_MIN_WIDTH", 1)


EPS = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).smallest_subnormal)

# (N, C, H, W), O, padding (top, left, bottom, right)
GEOMETRIES = {
    "resnet, batch 2": ((2, 64, 28, 28), 64, (1, 1, 1, 1)),
    "odd sizes": ((3, 5, 7, 9), 6, (1, 1, 1, 1)),
    "no padding, odd": ((2, 4, 9, 6), 3, (0, 0, 0, 0)),
    "asymmetric": ((2, 3, 8, 11), 5, (1, 0, 2, 1)),
    "1x1 image": ((3, 7, 1, 1), 4, (1, 1, 1, 1)),
    "one row": ((2, 6, 1, 20), 2, (1, 1, 1, 1)),
    "one output channel": ((1, 16, 10, 10), 1, (1, 1, 1, 1)),
    "two channels, wide": ((2, 2, 5, 37), 9, (1, 1, 1, 1)),
    "batch 1, many bands": ((1, 8, 64, 12), 8, (1, 1, 1, 1)),
}


def _attrs(padding: tuple) -> dict:
    return {"padding": padding}


def _magnitude(x: np.ndarray, w: np.ndarray, padding: tuple) -> np.ndarray:
    """sum_c |w[o, c]|_1 |x[c]|_1 over each output's window (float64; inf and nan as 0):
    what the kernel's rounding errors are proportional to."""
    ax = np.nan_to_num(np.abs(x.astype(np.float64)), posinf=0.0)
    norms = np.nan_to_num(np.abs(w.astype(np.float64)), posinf=0.0).sum(axis=(2, 3))
    ones = np.broadcast_to(norms[:, :, None, None], w.shape).copy()
    return conv2d_kernel(ax, ones, padding=padding)


def _bound(x: np.ndarray, w: np.ndarray, padding: tuple) -> np.ndarray:
    """The kernel's bound against the exact convolution (the module docstring's)."""
    channels = w.shape[1]
    return 2.02 * (channels + 7) * EPS * _magnitude(x, w, padding) + 32 * (channels + 7) * TINY


def assert_within_bound(got: np.ndarray, x: np.ndarray, w: np.ndarray, padding: tuple) -> None:
    """`got` within the bound of the float64 convolution, and within that plus numpy's
    own share ((K + 2) eps sum |w| |x|, K = 9 C) of numpy's float32 conv2d; nan and inf
    where numpy has them."""
    want = conv2d_kernel(x, w, padding=padding)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), "nan in other places"
    assert np.array_equal(np.isinf(got), np.isinf(want)), "inf in other places"
    assert np.array_equal(got[np.isinf(got)], want[np.isinf(want)])
    exact = conv2d_kernel(x.astype(np.float64), w.astype(np.float64), padding=padding)
    bound = _bound(x, w, padding)
    terms = 9 * w.shape[1]
    magnitude = conv2d_kernel(
        np.nan_to_num(np.abs(x.astype(np.float64)), posinf=0.0),
        np.nan_to_num(np.abs(w.astype(np.float64)), posinf=0.0),
        padding=padding,
    )
    numpy_share = (terms + 2) * EPS * magnitude + 2 * terms * TINY
    finite = np.isfinite(want)
    err = np.abs(got.astype(np.float64) - exact)
    bad = finite & np.isfinite(exact) & (err > bound)
    assert not bad.any(), f"{int(bad.sum())} beyond the bound of the exact result: {err[bad][:3]}"
    err = np.abs(got.astype(np.float64) - want)
    bad = finite & (err > bound + numpy_share)
    assert not bad.any(), f"{int(bad.sum())} beyond the bound of numpy's: {err[bad][:3]}"


def _exe(x_shape: tuple, out_ch: int, padding: tuple) -> gc.Executable:
    w_shape = (out_ch, x_shape[1], 3, 3)
    return gc.compile(two_input_graph(conv2d, x_shape, w_shape, _attrs(padding)), backend="native")


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_winograd_within_its_bound(name: str) -> None:
    x_shape, out_ch, padding = GEOMETRIES[name]
    exe = _exe(x_shape, out_ch, padding)
    assert f"{winograd.NAME}" in exe.source(), exe.source()
    rng = np.random.default_rng(len(name))
    for _ in range(2):
        x = scaled_values(rng, x_shape)
        w = scaled_values(rng, (out_ch, x_shape[1], 3, 3))
        assert_within_bound(exe(x, w), x, w, padding)


def test_the_bound_is_not_loose_by_orders_of_magnitude() -> None:
    """The errors of normal values reach past a ten-thousandth of the bound: it is the
    kernel's, not a blanket tolerance."""
    x_shape, out_ch, padding = GEOMETRIES["resnet, batch 2"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((out_ch, x_shape[1], 3, 3)).astype(np.float32)
    got = _exe(x_shape, out_ch, padding)(x, w)
    exact = conv2d_kernel(x.astype(np.float64), w.astype(np.float64), padding=padding)
    ratio = np.max(np.abs(got - exact) / _bound(x, w, padding))
    assert 1e-4 < ratio < 1.0, ratio


@pytest.mark.parametrize("name", ["odd sizes", "resnet, batch 2", "1x1 image"])
def test_nan_and_inf_where_numpy_has_them(name: str) -> None:
    """Edge values (nan, inf, -0.0, subnormals) in the input with a finite weight, in
    both, and an inf in the weight only: Winograd's sums of transformed values would
    make nan of a lone inf (inf - inf), numpy's kernel computes those images."""
    x_shape, out_ch, padding = GEOMETRIES[name]
    w_shape = (out_ch, x_shape[1], 3, 3)
    g = two_input_graph(conv2d, x_shape, w_shape, _attrs(padding))
    exe = gc.compile(g, backend="native")
    rng = np.random.default_rng(11)
    for seed in range(3):
        x, w = sum_feeds(g, seed, share=0.004)
        finite_w = rng.standard_normal(w_shape).astype(np.float32)
        one_inf = finite_w.copy()
        one_inf[0, 0, 1, 1] = np.inf
        finite_x = rng.standard_normal(x_shape).astype(np.float32)
        for xs, ws in ((x, finite_w), (x, w), (finite_x, one_inf)):
            with np.errstate(all="ignore"):
                assert_within_bound(exe(xs, ws), xs, ws, padding)


def test_an_inf_in_one_image_leaves_the_others_to_winograd() -> None:
    """Only the image whose convolution is not finite goes to numpy's kernel: the others
    keep the bits they have alone; an overflow inside the transforms of finite values
    (2e38 + 2e38) goes there too."""
    x_shape, out_ch, padding = (4, 8, 10, 10), 8, (1, 1, 1, 1)
    exe = _exe(("B", *x_shape[1:]), out_ch, padding)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((out_ch, 8, 3, 3)).astype(np.float32)
    x[1, 3, 4, 4] = np.inf
    x[2, :, 2:4, 2:4] = 2e38
    for weight in (w, w * np.float32(1e-3)):  # the image's sums overflow, or not
        with np.errstate(all="ignore"):  # numpy's kernel overflows on image 2
            got = exe(x, weight)
            assert_within_bound(got, x, weight, padding)
        for k in (0, 3):
            alone = exe(x[k : k + 1], weight)
            assert bits_differ(alone, got[k : k + 1]) is None, f"image {k}"
        for k in (1, 2):
            with np.errstate(all="ignore"):
                numpy_image = conv2d_kernel(x[k : k + 1], weight, padding=padding)
            assert bits_differ(got[k : k + 1], numpy_image) is None, f"image {k}"
    assert np.isfinite(got[2]).all()  # (w * 1e-3: numpy's sums are finite there)


# (bytes of a band, the work from which it runs on the pool); 64 * (16 + 12) bytes are
# a tile's transformed values, 35 tiles an image: 1 MiB holds the five images in one
# band (a band sized for 10**9 bytes made each thread's scratch a gigabyte: 5-12 s a case)
BANDS = [(1, 0), (1, 10**12), (1 << 20, 0), (1 << 20, 10**12), (7 * 64 * (16 + 12), 0)]


@pytest.mark.quick_cases(2)  # each case builds its kernels afresh: about 2 s cold
@pytest.mark.parametrize(("band", "parallel"), BANDS)
def test_an_images_bits_do_not_depend_on_batch_bands_or_threads(
    monkeypatch: pytest.MonkeyPatch, band: int, parallel: int
) -> None:
    g = two_input_graph(conv2d, ("B", 16, 14, 10), (12, 16, 3, 3), _attrs((1, 1, 1, 1)))
    rng = np.random.default_rng(7)
    x, w = scaled_values(rng, (5, 16, 14, 10)), scaled_values(rng, (12, 16, 3, 3))
    whole = gc.compile(g, backend="native")(x, w)
    monkeypatch.setattr(winograd, "BAND_BYTES", band)
    monkeypatch.setattr(winograd, "PARALLEL_WORK", parallel)
    monkeypatch.setattr(winograd, "WARM_WORK", parallel)
    exe = gc.compile(g, backend="native")  # bands are chosen when a step is set up
    why = bits_differ(exe(x, w), whole)
    assert why is None, f"bands of {band} bytes, parallel from {parallel}: {why}"
    for k in range(x.shape[0]):
        assert bits_differ(exe(x[k : k + 1], w), whole[k : k + 1]) is None, f"image {k}"


def test_a_weight_is_transformed_again_when_it_changes_and_feeds_are_not_written() -> None:
    """A fed weight is transformed on every call (it may change between calls); a
    constant one once per thread, with the same bits; the caller's arrays (x, w, and a
    strided view of x) keep theirs."""
    x_shape, w_shape = (2, 6, 9, 9), (5, 6, 3, 3)
    exe = gc.compile(two_input_graph(conv2d, x_shape, w_shape, _attrs((1, 1, 1, 1))),
                     backend="native")  # fmt: skip
    rng = np.random.default_rng(9)
    big = scaled_values(rng, (2, 6, 18, 9))
    x = big[:, :, ::2]
    results = []
    for _ in range(2):
        w = scaled_values(rng, w_shape)
        before = big.copy(), w.copy()
        got = exe(x, w)
        assert bits_differ(big, before[0]) is None and bits_differ(w, before[1]) is None
        assert_within_bound(got, np.ascontiguousarray(x), w, (1, 1, 1, 1))
        g = gc.Graph("constant weight")
        with g:
            xp = gc.placeholder("x", x_shape, "float32")
            gc.output(conv2d(xp, gc.constant(w), padding=1), name="y")
        constant = gc.compile(g, backend="native")
        assert winograd.NAME in constant.source()
        for _ in range(2):
            assert bits_differ(constant(x), got) is None
        results.append(got)
    assert bits_differ(results[0], results[1]) is not None


# the elementwise work after a convolution y, on the input x (a residual), a per-channel
# b, one value s; whether it is a program the Winograd kernel runs on its output rows
BODIES = {
    "plain": (lambda y, x, b, s: y, False),
    "bias, relu": (lambda y, x, b, s: gc.relu(y + b), True),
    "batch norm, residual, relu": (lambda y, x, b, s: gc.relu((y - b) * b * s + b + x), True),
    "operand first, min, max, div": (
        lambda y, x, b, s: gc.maximum(gc.minimum(b - y, x), s) / (s + 2.0) - x, True),
    "not a chain": (lambda y, x, b, s: gc.relu(y * y + b), False),
    "clip": (lambda y, x, b, s: gc.clip(y + x, -1.0, 1.0) * s, False),
}  # fmt: skip


def _block_graph(body: str, batch: int = 3) -> Graph:
    g = gc.Graph("block")
    with g:
        x = gc.placeholder("x", (batch, 8, 11, 13), "float32")
        w = gc.placeholder("w", (8, 8, 3, 3), "float32")
        b = gc.placeholder("b", (8, 1, 1), "float32")
        s = gc.placeholder("s", (1,), "float32")
        gc.output(BODIES[body][0](conv2d(x, w, padding=1), x, b, s), name="y")
    return g


@pytest.mark.parametrize("body", list(BODIES))
def test_levels_agree_with_an_epilogue_or_a_body(body: str) -> None:
    """O0 (conv2d, then the elementwise ops) and O1/O2 (conv2d_epilogue or conv2d_fused)
    give the same bits, the body run on the output rows by the kernel's program or per
    chunk after it, also on feeds with nan and inf (numpy's kernel for those images);
    feeds are never written; the results stay close to numpy's."""
    g = _block_graph(body)
    o2 = gc.compile(g, backend="native")
    source = o2.source()
    assert winograd.NAME in source, source
    assert ("its epilogue in C" in source) == BODIES[body][1], source

    def close(a: np.ndarray, b: np.ndarray) -> str | None:
        ok = np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
        return None if ok else f"max diff {np.nanmax(np.abs(a - b))}"

    feeds = [sprinkled_feeds(g, 1, share=0.0), sprinkled_feeds(g, 2, share=0.01)]
    check_native(g, feeds, levels=(0, 1, 2), close=close, close_sets=(0,))


def test_numpys_epilogue_after_the_winograd_convolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where neither the program nor a C body takes the step's elementwise work (both
    declined here), the Winograd convolution runs and then the numpy node's own
    chunk epilogue: the same bits as the program."""
    g = _block_graph("batch norm, residual, relu")
    feeds = sprinkled_feeds(g, 4, share=0.0)
    want = gc.compile(g, backend="native")(**feeds)

    def declined(*args: object) -> None:
        raise DeclinedError("declined by the test")

    monkeypatch.setattr(native_conv, "_program", lambda gen, step: None)
    monkeypatch.setattr(native_conv, "_body_epilogue", declined)
    exe = gc.compile(g, backend="native")
    source = exe.source()
    assert "numpy's epilogue per chunk" in source and winograd.NAME in source, source
    assert bits_differ(exe(**feeds), want) is None


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [
        ((2, 4, 9, 9), (4, 4, 3, 3), {"stride": 2}),
        ((2, 4, 9, 9), (4, 4, 3, 3), {"dilation": 2}),
        ((2, 4, 9, 9), (4, 2, 3, 3), {"groups": 2}),
        ((2, 4, 9, 9), (4, 4, 5, 5), {}),
        ((2, 1, 9, 9), (4, 1, 3, 3), {}),  # one input channel: the direct kernel
    ],
)
def test_other_geometries_do_not_take_it(x_shape: tuple, w_shape: tuple, attrs: dict) -> None:
    exe = gc.compile(two_input_graph(conv2d, x_shape, w_shape, attrs), backend="native")
    assert winograd.NAME not in exe.source(), exe.source()


@pytest.mark.parametrize("wide", [False, True])
def test_the_choice_by_vectors_channels_width(wide: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """On 256-bit vectors this kernel runs every 3x3 convolution it applies to with more
    than one input channel; on 512-bit ones only from WIDE_MIN_CHANNELS input channels
    and an output WIDE_MIN_WIDTH wide, the direct kernel the others (by the geometry: the
    batch never changes it)."""
    monkeypatch.undo()  # this module's fixture: the measured minima
    monkeypatch.setattr(direct_conv, "WIDE_REGISTERS", wide)
    f32 = lambda *shape: TensorType(shape, np.float32)  # noqa: E731
    channels, width = winograd.WIDE_MIN_CHANNELS, winograd.WIDE_MIN_WIDTH
    for c, wo, small in ((2, 5, True), (channels - 1, 2 * width, True),
                         (channels, width - 1, True), (channels, width, False)):  # fmt: skip
        for batch in (1, 64):
            got = winograd.preferred(f32(c, c, 3, 3), f32(batch, c, wo, wo))
            assert got == (not (wide and small)), (wide, c, wo, batch)
    assert not winograd.preferred(f32(8, 1, 3, 3), f32(2, 8, 20, 20))
    exe = _exe((1, channels, width, width), 8, (1, 1, 1, 1))
    source = exe.source()
    assert winograd.NAME in source and direct_conv.NAME not in source, source
    exe = _exe((1, channels - 1, width, width), 8, (1, 1, 1, 1))
    kernel = direct_conv.NAME if wide else winograd.NAME
    assert kernel in exe.source(), exe.source()


def test_the_transformed_weight_is_g_g_gt_in_double_rounded_once() -> None:
    """U = G g G^T of each 3x3 kernel, computed in double and rounded once to float32, bit
    for bit, whether its input channel falls in a whole vector (the C transforms LANES
    channels at a time) or after the last one: a fed weight with nan, inf, -0.0,
    subnormals and extreme magnitudes."""
    out_ch, channels = 3, 2 * winograd.LANES + 3
    x_shape, w_shape = (1, channels, 6, 6), (out_ch, channels, 3, 3)
    exe = _exe(x_shape, out_ch, (1, 1, 1, 1))
    rng = np.random.default_rng(4)
    w = sprinkled_feeds(two_input_graph(conv2d, x_shape, w_shape, _attrs((1, 1, 1, 1))),
                        4, share=0.2)["w"]  # fmt: skip
    w[0, 1:4, 0, 0] = np.float32(np.finfo(np.float32).max)  # sums that overflow a float
    with np.errstate(over="ignore", invalid="ignore"):  # numpy's kernel for the image
        exe(scaled_values(rng, x_shape), w)
    (made,) = [c for c in list(winograd._CONVOLUTIONS.values()) if c.w_shape == w_shape]
    g = w.astype(np.float64)  # (O, C, 3, 3); the C's order: row 0, 1, 2, then columns
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    with np.errstate(invalid="ignore", over="ignore"):
        t = [G[a, 0] * g[:, :, 0] + G[a, 1] * g[:, :, 1] + G[a, 2] * g[:, :, 2] for a in range(4)]
        want = np.stack([(t[a][..., 0] * G[b, 0] + t[a][..., 1] * G[b, 1]
                          + t[a][..., 2] * G[b, 2]).astype(np.float32)
                         for a in range(4) for b in range(4)])  # fmt: skip
    got = made.u[: want.size].reshape(want.shape)
    assert bits_differ(got, want) is None, bits_differ(got, want)


def test_reasons() -> None:
    f32 = lambda *shape: TensorType(shape, np.float32)  # noqa: E731
    attrs = {"stride": (1, 1), "dilation": (1, 1), "groups": 1}
    x, w, out = f32(1, 4, 8, 8), f32(4, 4, 3, 3), f32(1, 4, 8, 8)
    assert winograd.reason(x, w, out, attrs) is None
    assert winograd.reason(x, f32(4, 4, 3, 2), out, attrs) is not None
    assert winograd.reason(x, w, out, {**attrs, "stride": (2, 2)}) is not None
    wide = TensorType((1, 4, 8, 8), np.float64)
    assert winograd.reason(wide, w, out, attrs) == "float32 only"


def test_with_avx512_it_takes_the_pool_from_the_direct_kernels_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With AVX-512 this kernel takes over convolutions the direct kernel ran on the pool
    from direct_conv.PARALLEL_WORK vectors of multiply-adds, and runs them there from as
    much work; on 256-bit vectors from the 2**26 measured there. (4, 32, 16, 16) -> 32 is
    9.4 million multiply-adds, between the two: on the pool with AVX-512 only (the pool
    counted cold: WARM_WORK out of reach)."""
    from graphc.backends.native.calls import POOL_CLOCK

    if winograd.slots() < 2:
        pytest.skip("one processor: no pool")
    monkeypatch.setattr(winograd, "WARM_WORK", 1 << 62)
    x_shape, out_ch = (4, 32, 16, 16), 32
    assert direct_conv.PARALLEL_WORK * 16 < 4 * 32 * out_ch * 16 * 16 * 9 < 1 << 26
    exe = _exe(x_shape, out_ch, (1, 1, 1, 1))
    assert winograd.NAME in exe.source()
    rng = np.random.default_rng(5)
    x, w = scaled_values(rng, x_shape), scaled_values(rng, (out_ch, 32, 3, 3))
    before = int(POOL_CLOCK[0])
    exe(x, w)
    assert (int(POOL_CLOCK[0]) > before) == direct_conv.WIDE_REGISTERS


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_the_kernel_writes_nothing_past_its_scratch_and_result(
    name: str, parallel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C run through a scratch and into a result that lie inside larger arrays, at
    this machine's vector width (rows and planes are padded to it, whole vectors stored
    past a row's end): both keep the values around them, on the calling thread and on
    the pool, and the result is what the plan computes."""
    monkeypatch.setattr(winograd, "PARALLEL_WORK", 0 if parallel else 1 << 62)
    monkeypatch.setattr(winograd, "WARM_WORK", 0 if parallel else 1 << 62)
    built = toolchain.build_units([winograd.SOURCE], kernel_prelude())[winograd.SOURCE]
    names = {winograd.NAME: winograd.PARAMS, winograd.PROGRAM_NAME: winograd.PROGRAM_PARAMS}
    kernels = calls.bind(built.path, built.library, names, frozenset({winograd.NAME}))
    x_shape, out_ch, padding = GEOMETRIES[name]
    w_shape = (out_ch, x_shape[1], 3, 3)
    rng = np.random.default_rng(len(name))
    x, w = scaled_values(rng, x_shape), scaled_values(rng, w_shape)
    guard = 256  # floats: a multiple of the arrays' alignment
    size = winograd.scratch_size(x_shape, w_shape, padding)
    scratch = matmul.aligned(size + 2 * guard)
    scratch[:] = 7.5
    made = winograd.Convolution(*kernels.values(), x_shape, w_shape, padding,
                                np.zeros(0, np.int64), None, scratch[guard : guard + size])  # fmt: skip
    want = _exe(x_shape, out_ch, padding)(x, w)
    result = matmul.aligned(want.size + 2 * guard)
    result[:] = 7.5
    out = result[guard : guard + want.size].reshape(want.shape)
    made(x, w, out)
    assert bits_differ(out, want) is None
    for around in (scratch[:guard], scratch[guard + size :], result[:guard],
                   result[guard + want.size :]):  # fmt: skip
        assert (around == 7.5).all(), "written past the scratch or the result"


def test_the_steps_of_a_plan_share_one_scratch() -> None:
    """Two Winograd steps of different sizes in one plan run through one scratch (room
    for the larger), with the bits of each step compiled alone."""
    g = gc.Graph("two")
    with g:
        x = gc.placeholder("x", (2, 8, 12, 12), "float32")
        w1 = gc.placeholder("w1", (16, 8, 3, 3), "float32")
        w2 = gc.placeholder("w2", (4, 16, 3, 3), "float32")
        gc.output(conv2d(conv2d(x, w1, padding=1), w2), name="y")
    exe = gc.compile(g, backend="native")
    source = exe.source()
    assert source.count("winograd_scratch = ") == 1 and source.count(winograd.NAME + ",") == 2
    rng = np.random.default_rng(12)
    feeds = {p.name: rng.standard_normal(p.type.shape).astype(np.float32) for p in g.inputs}
    first = _exe((2, 8, 12, 12), 16, (1, 1, 1, 1))(feeds["x"], feeds["w1"])
    second = _exe((2, 16, 12, 12), 4, (0, 0, 0, 0))(first, feeds["w2"])
    assert bits_differ(exe(**feeds), second) is None


def test_eight_threads_calling_one_executable() -> None:
    """Each thread's setup makes its own Convolution and scratch: eight threads calling
    one plan at once get the bits of one call."""
    import threading

    g = two_input_graph(conv2d, (4, 32, 28, 28), (32, 32, 3, 3), _attrs((1, 1, 1, 1)))
    exe = gc.compile(g, backend="native")
    feeds = sprinkled_feeds(g, 6, share=0.0)
    want = exe(**feeds)
    differ: list[str] = []

    def calls() -> None:
        for _ in range(10):
            why = bits_differ(exe(**feeds), want)
            if why is not None:
                differ.append(why)

    threads = [threading.Thread(target=calls) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not differ, differ[:2]


def _entry_block(batch: int, constant_weight: bool) -> tuple[Graph, np.ndarray]:
    """A ResNet block's two convolutions (conv2d_fused: batch norm and relu, then batch
    norm, the residual and relu), the weight a constant or fed; and the weight."""
    w = scaled_values(np.random.default_rng(11), (8, 8, 3, 3))
    g = gc.Graph(f"entry_block_{constant_weight}")
    with g:
        x = gc.placeholder("x", (batch, 8, 11, 13), "float32")
        weight = gc.constant(w) if constant_weight else gc.placeholder("w", w.shape, "float32")
        b = gc.constant(np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(8, 1, 1))
        h = gc.relu((conv2d(x, weight, padding=1) - b) * b)
        gc.output(gc.relu((conv2d(h, weight, padding=1) - b) * b + x), name="y")
    return g, w


@pytest.mark.parametrize("constant_weight", [True, False])
def test_the_step_runs_in_an_entry_in_c_images_computed_again_included(
    constant_weight: bool,
) -> None:
    """The generated code calls the kernel itself, so a plan of Winograd steps is one C
    call (entry.py). An image whose result is not finite is computed again by numpy's
    kernel mid-tape (the kernel's status; Kernel.repairs), then the tape goes on: the
    same bits as the Python entry, which computes it again after its call."""
    g, w = _entry_block(3, constant_weight)
    rng = np.random.default_rng(12)
    x = scaled_values(rng, (3, 8, 11, 13))
    bad = x.copy()
    bad[1, 2, 5, 5] = np.inf
    bad[2, 0, 0, 0] = np.nan
    args = lambda x: (x,) if constant_weight else (x, w)  # noqa: E731
    in_python = gc.compile(g, backend="native", wait=True)
    with np.errstate(all="ignore"):
        wants = [in_python(*args(v)) for v in (x, bad)]
        exe = gc.compile(g, backend="native", wait=True)
        for _ in range(20):
            exe(*args(x))
        exe.wait()
        assert "entry: one C call" in exe.explain(*args(x)), exe.explain(*args(x))
        assert "entry: Python" in in_python.explain(*args(x))  # 2 calls: not built yet
        for _ in range(2):
            for v, want in zip((x, bad, x), (*wants, wants[0]), strict=True):
                assert bits_differ(exe(*args(v)), want) is None
    assert not np.isfinite(wants[1][1]).all() and np.isfinite(wants[1][0]).all()
    assert bits_differ(wants[1][0], wants[0][0]) is None  # image 0 kept Winograd's bits


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's inf - inf, in the threads
def test_images_computed_again_mid_tape_from_four_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repair runs Python code mid-tape (here it also sleeps, so other threads run
    meanwhile), so such an entry takes its lock (a call that finds it taken runs the
    Python entry): every thread's results are its own."""
    numpy_conv = winograd.conv2d_kernel

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.001)
        return numpy_conv(*args, **kwargs)

    monkeypatch.setattr(winograd, "conv2d_kernel", slow)
    g, _ = _entry_block(2, True)
    rng = np.random.default_rng(13)
    feeds = [scaled_values(rng, (2, 8, 11, 13)) for _ in range(4)]
    for k, x in enumerate(feeds):
        x[k % 2, k, 3, 3] = np.inf
    reference = gc.compile(g, backend="native", wait=True)
    with np.errstate(all="ignore"):
        wants = [reference(x) for x in feeds]
        exe = gc.compile(g, backend="native", wait=True)
        for _ in range(20):
            exe(feeds[0])
        exe.wait()
        assert "entry: one C call" in exe.explain(feeds[0])
        errors = threaded_mismatches(exe, [(x,) for x in feeds], wants, 4, 50)
    assert errors == [], errors[:3]


def test_a_loop_body_keeps_its_winograd_step_in_python() -> None:
    """A loop's tape cannot go on after a call numpy finished (Kernel.repairs), so a
    body with a Winograd step runs from Python, and explain says why; its images
    computed again where a value is not finite, as anywhere else."""
    rng = np.random.default_rng(14)
    w = (0.2 * rng.standard_normal((4, 4, 3, 3))).astype(np.float32)
    g = gc.Graph("scan_conv")
    with g:
        h0 = gc.placeholder("h0", (2, 4, 6, 6), "float32")
        xs = gc.placeholder("xs", (3, 2, 4, 6, 6), "float32")

        def body(h: gc.Symbol, x: gc.Symbol) -> tuple[gc.Symbol, gc.Symbol]:
            h2 = gc.relu(conv2d(h, gc.constant(w), padding=1) * 0.5 + x)
            return h2, h2

        gc.output(gc.scan(body, h0, xs)[1], name="ys")
    h0 = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    xs = rng.standard_normal((3, 2, 4, 6, 6)).astype(np.float32)
    xs[1, 0, 0, 0, 0] = np.inf  # image 0 from step 1 on
    exe = gc.compile(g, backend="native", wait=True)
    with np.errstate(all="ignore"):
        got = exe(h0, xs)
        want = gc.compile(g, backend="numpy")(h0, xs)
    assert "gc_winograd_f32 may have numpy finish its work mid-loop" in exe.explain(h0, xs)
    for kind in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(kind(got), kind(want)), kind.__name__
    assert not np.isfinite(got[1, 0]).all() and np.isfinite(got[:, 1]).all()
    np.testing.assert_allclose(got[:, 1], want[:, 1], rtol=1e-5, atol=1e-5)
