"""max_pool2d in C on the native backend (graphc/backends/native/pool.py): numpy's bits for
every geometry (2x2 of stride 2, float32's vector path, with rows of partial and of
several vectors; any kernel, stride 1, 2 and 3, asymmetric padding, dilation,
ceil_mode's partial windows, windows wholly in the padding), on hostile values (nan, inf, -0.0
against +0.0, subnormals), float32 and float64, on one thread and on the pool, for a
caller's strided array; integer inputs stay on numpy."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import pool
from graphc.ir.graph import Graph
from tests.edge_values import bits_differ, edge_feeds
from tests.native_checks import check_native, needs_native

pytestmark = needs_native

# input (N, C, H, W), then max_pool2d's arguments
GEOMETRIES = {
    "2x2": ((3, 4, 8, 8), {"kernel_size": 2}),
    "odd size, floor": ((2, 3, 7, 9), {"kernel_size": 2}),
    "ceil mode": ((2, 3, 7, 9), {"kernel_size": 2, "ceil_mode": True}),
    "3x3 stride 1 padded": ((2, 2, 6, 5), {"kernel_size": 3, "stride": 1, "padding": 1}),
    "stride 3, asymmetric": (
        (2, 2, 11, 10),
        {"kernel_size": (2, 3), "stride": 3, "padding": (1, 0, 0, 1)},
    ),
    "dilation": ((1, 3, 9, 12), {"kernel_size": 2, "stride": (1, 2), "dilation": (2, 3)}),
    "long rows": ((1, 2, 4, 70), {"kernel_size": (1, 2)}),
    "2x2, long rows": ((2, 2, 5, 70), {"kernel_size": 2}),
    # rows of 14 and of 9 outputs: a whole vector, then one overlapping it
    "2x2, LeNet's first": ((2, 3, 28, 28), {"kernel_size": 2}),
    "2x2, an odd column left": ((2, 2, 6, 19), {"kernel_size": 2}),
    "padding only windows": ((1, 1, 2, 2), {"kernel_size": 3, "stride": 1, "padding": 2}),
}


def _graph(shape: tuple, attrs: dict, dtype: str) -> Graph:
    g = gc.Graph("pool")
    with g:
        x = gc.placeholder("x", shape, dtype)
        gc.output(gc.max_pool2d(x, **attrs), name="y")
    return g


def _signed_zeros(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """+0.0 and -0.0 only, and a few nans: which of two equal maxima wins shows in the bits."""
    x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(dtype)
    x[rng.random(shape) < 0.05] = np.nan
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_numpys_bits(name: str, dtype: str) -> None:
    shape, attrs = GEOMETRIES[name]
    g = _graph(shape, attrs, dtype)
    text = gc.compile(g, backend="native").explain()
    assert "[native]" in text, text
    rng = np.random.default_rng(len(name))
    feeds = [edge_feeds(g, 0), edge_feeds(g, 1), {"x": _signed_zeros(rng, shape, dtype)}]
    check_native(g, feeds, levels=(0, 2))


@pytest.mark.parametrize("name", ["2x2", "2x2, long rows", "ceil mode", "dilation"])
def test_on_the_pool_and_on_a_strided_array(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shape, attrs = GEOMETRIES[name]
    g = _graph(shape, attrs, "float32")
    want = gc.compile(g, backend="numpy")
    rng = np.random.default_rng(1)
    big = rng.standard_normal((shape[0], shape[1], shape[2], 2 * shape[3])).astype(np.float32)
    x = big[..., ::2]  # not C-contiguous
    before = big.copy()
    monkeypatch.setattr(pool, "PARALLEL_WORK", 0)  # read when the step is lowered
    exe = gc.compile(g, backend="native")
    assert bits_differ(exe(x), want(x)) is None
    assert bits_differ(big, before) is None, "the caller's array was written"


def test_integers_stay_on_numpy_and_empty_batches() -> None:
    g = _graph((2, 3, 6, 6), {"kernel_size": 2}, "int32")
    text = gc.compile(g, backend="native").explain()
    assert "[numpy]" in text and "not for integer values" in text, text
    g = _graph(("B", 3, 6, 6), {"kernel_size": 2}, "float32")
    y = gc.compile(g, backend="native")(np.zeros((0, 3, 6, 6), np.float32))
    assert y.shape == (0, 3, 3, 3) and y.dtype == np.float32


@pytest.mark.parametrize("layout", ["reshaped", "transposed"])
def test_a_view_made_before_the_call_is_read_in_its_order(layout: str) -> None:
    """The pooled value is a view of an arena value: a reshape (C-ordered: its address
    is taken once) or a transpose (copied to C order per call); numpy's bits either way."""
    g = gc.Graph(layout)
    with g:
        x = gc.placeholder("x", (2, 6, 64), "float32")
        h = gc.reshape(x * 2.0, (2, 6, 8, 8))
        if layout == "transposed":
            h = gc.transpose(h, (0, 1, 3, 2))
        gc.output(gc.max_pool2d(h, 2), name="y")
    exe = gc.compile(g, opt_level=0, backend="native")
    x = np.random.default_rng(9).standard_normal((2, 6, 64)).astype(np.float32)
    assert "gc_max_pool2d_f32(" in exe.source(x)
    for _ in range(2):  # the second call reads the same buffers again
        got, want = exe(x), gc.compile(g, opt_level=0, backend="numpy")(x)
        assert bits_differ(got, want) is None
        x = x[:, ::-1].copy()
