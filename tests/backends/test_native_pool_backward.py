"""max_pool2d_backward on the native backend (graphc/backends/native/pool.py): numpy's
bits, bit for bit, over geometries that reach both paths (2x2 windows of stride 2 in
one branch-free pass; any other: winners first, then tap by tap), overlapping windows
whose cotangents add up in numpy's order, padding, dilation, ceil_mode, odd sizes;
ties, nan, inf and -0.0 in the input, the pooled values and the cotangent; float32 and
float64; on the calling thread and on the pool. Other dtypes stay on numpy.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import pool
from graphc.ir.graph import Graph
from graphc.ops.maxpool import max_pool2d, max_pool2d_backward
from tests.edge_values import bits_differ
from tests.native_checks import needs_native

pytestmark = needs_native

# x shape, attrs
GEOMETRIES = {
    "2x2 stride 2": ((2, 3, 8, 12), {"kernel_size": (2, 2)}),
    "2x2 stride 2, odd sizes": ((2, 3, 7, 9), {"kernel_size": (2, 2)}),
    "2x2 stride 2, wide rows": ((1, 2, 4, 70), {"kernel_size": (2, 2)}),
    "3x3 stride 1, overlapping": ((2, 2, 6, 7), {"kernel_size": (3, 3), "stride": (1, 1)}),
    "3x3 stride 2, padding 1": ((2, 3, 9, 8), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1)}),
    "dilated": ((1, 2, 9, 9), {"kernel_size": (2, 3), "stride": (1, 2), "dilation": (2, 1)}),
    "ceil_mode": ((2, 2, 7, 7), {"kernel_size": (2, 2), "ceil_mode": True}),
    "1x1": ((1, 3, 4, 5), {"kernel_size": (1, 1)}),
}  # fmt: skip


def _graph(x_shape: tuple, attrs: dict, dtype: str) -> Graph:
    g = gc.Graph("pool_grad")
    with g:
        x = gc.placeholder("x", x_shape, dtype)
        pooled = max_pool2d(x, **attrs)
        ct = gc.placeholder("ct", pooled.type.shape, dtype)
        gc.output(max_pool2d_backward(ct, x, pooled, **attrs), name="grad")
    return g


def _feeds(g: Graph, seed: int, dtype: str) -> dict[str, np.ndarray]:
    """x: small integers (ties in every window); the cotangent: normal values scaled by
    10**k, k in [-8, 8] (sums whose order shows); both with nan, inf, -inf and -0.0."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in g.inputs:
        if p.name == "x":
            a = rng.integers(-3, 4, p.type.shape).astype(dtype)
        else:
            scale = 10.0 ** rng.uniform(-8, 8, p.type.shape)
            a = (rng.standard_normal(p.type.shape) * scale).astype(dtype)
        flat = a.reshape(-1)
        for value in (np.nan, np.inf, -np.inf, -0.0):
            flat[rng.integers(0, flat.size, max(1, flat.size // 40))] = value
        feeds[p.name] = a
    return feeds


@pytest.mark.parametrize("name", list(GEOMETRIES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("parallel", [False, True])
def test_numpys_bits(
    name: str, dtype: str, parallel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "PARALLEL_WORK", 0 if parallel else 10**15)
    x_shape, attrs = GEOMETRIES[name]
    g = _graph(x_shape, attrs, dtype)
    exe = gc.compile(g, backend="native")
    text = exe.explain()
    assert "[native]" in text.split("max_pool2d_backward(")[1].splitlines()[0], text
    want_exe = gc.compile(g, backend="numpy")
    for seed in range(4):
        feeds = _feeds(g, seed, dtype)
        kept = {k: v.copy() for k, v in feeds.items()}
        with np.errstate(invalid="ignore"):  # inf - inf where windows overlap
            got, want = exe(**feeds), want_exe(**feeds)
        assert bits_differ(got, want) is None, f"seed {seed}"
        for k in feeds:
            assert bits_differ(feeds[k], kept[k]) is None, f"{k} was written"


def test_a_buffer_reused_for_the_gradient_is_cleared() -> None:
    """The gradient is written whole (zeros where no window wins, the rows and columns
    no window covers): a second call over a buffer holding the first's values agrees."""
    x_shape, attrs = GEOMETRIES["2x2 stride 2, odd sizes"]
    g = _graph(x_shape, attrs, "float32")
    exe, want = gc.compile(g, backend="native"), gc.compile(g, backend="numpy")
    for seed in range(3):
        feeds = _feeds(g, seed, "float32")
        assert bits_differ(exe(**feeds), want(**feeds)) is None


def test_mixed_dtypes_stay_on_numpy() -> None:
    g = gc.Graph("mixed")
    with g:
        x = gc.placeholder("x", (2, 3, 6, 6), "int32")
        pooled = max_pool2d(x, kernel_size=(2, 2))
        ct = gc.placeholder("ct", (2, 3, 3, 3), "float32")
        gc.output(max_pool2d_backward(ct, x, pooled, kernel_size=(2, 2)), name="grad")
    exe = gc.compile(g, backend="native")
    text = exe.explain()
    assert "values of one float dtype only" in text, text
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, (2, 3, 6, 6)).astype(np.int32)
    ct = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    assert bits_differ(exe(x, ct), gc.compile(g, backend="numpy")(x, ct)) is None


def test_both_dtypes_in_one_plan_build_once() -> None:
    """float32 and float64 gradients in one graph: each dtype's functions are in the
    library once (a definition twice would fail the build and fall back to numpy)."""
    g = gc.Graph("both")
    with g:
        outs = []
        for dtype in ("float32", "float64"):
            x = gc.placeholder(f"x_{dtype}", (2, 3, 8, 8), dtype)
            pooled = max_pool2d(x, kernel_size=(2, 2))
            ct = gc.placeholder(f"ct_{dtype}", (2, 3, 4, 4), dtype)
            outs.append(max_pool2d_backward(ct, x, pooled, kernel_size=(2, 2)))
        gc.output(outs[0], name="g32")
        gc.output(outs[1], name="g64")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to numpy warns
        exe = gc.compile(g, backend="native")
        feeds = _feeds(g, 0, "float32")
        feeds = {k: v.astype(k.split("_")[1]) for k, v in feeds.items()}
        got = exe(**feeds)
    assert exe.explain().count("max_pool2d_backward(") == 2
    assert "[numpy]" not in exe.explain()
    want = gc.compile(g, backend="numpy")(**feeds)
    for a, b in zip(got, want):
        assert bits_differ(a, b) is None
