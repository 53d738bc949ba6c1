"""layer_norm and layer_norm_grad as C row kernels (graphc/backends/native/norm.py).

Against numpy's kernels: within the bound below, over row lengths with and without a
partial vector, several normalized dims, weights and biases of one value, one per
element or skipped, values of very different scales and spreads; nan and inf in the
same places. Their own bits: every level the same (also where a pass absorbs the
affine step), a row's bits independent of the batch and the threads; a caller's
strided arrays read, never written. Other dtypes and shapes run numpy's kernels.

The bound: the kernels do numpy's operations in numpy's order but sum the squared
deviations (and the gradient's g . (x - mean)) in lanes where numpy calls BLAS's sdot,
and the two sums of n terms differ by at most about (n / GC_W + log2 n) eps of the sum
of their absolute values; the mean is numpy's. Carried through, an output differs from
numpy's by at most `SLACK (n / 16 + log2 n + 8) eps` times the output's own scale:
(|xhat| + 1) |w| + |b| for layer_norm, rstd max|g| (1 + |xhat|) (1 + max|xhat|) for the
gradient, per row.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import norm
from graphc.ir.graph import Graph
from graphc.ops.norm import _layer_norm_grad_kernel, _layer_norm_kernel
from tests.edge_values import bits_differ, sprinkled_feeds
from tests.native_checks import check_native, needs_native

pytestmark = needs_native

EPS = float(np.finfo(np.float32).eps)
SLACK = 2.0

# input shape, the first normalized axis
SHAPES = {
    "rows of 128": ((16, 8, 128), 2),
    "rows of 33 (a partial vector)": ((5, 7, 33), 2),
    "rows of 3": ((4, 3), 1),
    "one element": ((6, 1), 1),
    "two dims normalized": ((3, 6, 10), 1),
    "one long row": ((1, 4099), 1),
}


def _graph(shape: tuple, axis: int, affine: str, dtype: str = "float32") -> Graph:
    """layer_norm with a weight and bias per element ("row"), of one value ("one"), or
    1 and 0 ("skip"), and layer_norm_grad against g."""
    normalized = shape[axis:]
    g = gc.Graph("ln")
    with g:
        x = gc.placeholder("x", shape, dtype)
        d = gc.placeholder("g", shape, dtype)
        if affine == "skip":
            w, b = gc.constant(np.ones(1, dtype)), gc.constant(np.zeros(1, dtype))
        else:
            wshape = normalized if affine == "row" else (1,)
            w, b = gc.placeholder("w", wshape, dtype), gc.placeholder("b", wshape, dtype)
        gc.output(gc.layer_norm(x, w, b, axis=axis), name="y")
        gc.output(gc.layer_norm_grad(x, d, axis=axis), name="dx")
    return g


def _feeds(g: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per row an offset and a spread of 10**k, k in [-6, 6]: means far from zero
    against small deviations, where the roundings of the sums matter most."""
    feeds = {}
    for p in g.inputs:
        shape = p.type.shape
        scale = 10.0 ** rng.uniform(-6, 6, shape[:-1] + (1,))
        offset = rng.standard_normal(shape[:-1] + (1,)) * scale * rng.uniform(0, 30)
        feeds[p.name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
    return feeds


def _rows(a: np.ndarray, axis: int) -> np.ndarray:
    return a.astype(np.float64).reshape(math.prod(a.shape[:axis]), -1)


def _assert_within_bound(got: list, feeds: dict, axis: int) -> None:
    x, d = feeds["x"], feeds["g"]
    w = feeds.get("w", np.ones(1, np.float32))
    b = feeds.get("b", np.zeros(1, np.float32))
    want_y = _layer_norm_kernel(x, w, b, axis=axis)
    want_dx = _layer_norm_grad_kernel(x, d, axis=axis)
    for a, want in zip(got, (want_y, want_dx)):
        assert a.dtype == want.dtype and a.shape == want.shape
        assert np.array_equal(np.isnan(a), np.isnan(want)), "nan in other places"
        assert np.array_equal(np.isinf(a), np.isinf(want)), "inf in other places"
    x2 = _rows(x, axis)
    n = x2.shape[1]
    mean = x2.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x2 - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    xhat = (x2 - mean) * rstd
    units = SLACK * (n / 16 + math.log2(n) + 8) * EPS
    wide = np.broadcast_to(np.abs(w.astype(np.float64)), x.shape[axis:]).reshape(1, n)
    scale_y = (np.abs(xhat) + 1) * wide + np.abs(b.astype(np.float64)).max()
    g2 = np.abs(_rows(d, axis))
    top = np.abs(xhat).max(axis=1, keepdims=True)
    scale_dx = rstd * g2.max(axis=1, keepdims=True) * (1 + np.abs(xhat)) * (1 + top)
    for a, want, scale in ((got[0], want_y, scale_y), (got[1], want_dx, scale_dx)):
        finite = np.isfinite(_rows(want, axis))
        err = np.abs(_rows(a, axis) - _rows(want, axis))
        bad = finite & ~(err <= units * scale)
        assert not bad.any(), f"{int(bad.sum())} beyond the bound, worst {err[bad].max()}"


@pytest.mark.parametrize("affine", ["row", "one", "skip"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_within_the_bound_of_numpys(name: str, affine: str) -> None:
    shape, axis = SHAPES[name]
    g = _graph(shape, axis, affine)
    exe = gc.compile(g, backend="native")
    text = exe.explain()
    assert text.count("[native]") == 2, text
    rng = np.random.default_rng(len(name))
    for _ in range(3):
        feeds = _feeds(g, rng)
        _assert_within_bound(exe(**feeds), feeds, axis)


def test_nan_and_inf_where_numpy_has_them() -> None:
    g = _graph((6, 40), 1, "row")
    exe = gc.compile(g, backend="native")
    for seed in range(4):
        feeds = sprinkled_feeds(g, seed, share=0.02)
        for name in ("x", "g"):  # the largest finite values would overflow the squares
            feeds[name][np.abs(feeds[name]) > 1e18] = 1.0
        with np.errstate(all="ignore"):
            _assert_within_bound(exe(**feeds), feeds, 1)


@pytest.mark.parametrize("affine", ["row", "one", "skip"])
def test_levels_agree_and_the_affine_step_absorbed(affine: str) -> None:
    """layer_norm(x, 1, 0) * w + b spelled out (absorbed into layer_norm at O2), the
    gradient of a loss through it: the same bits at O0, O1 and O2 on native, on hostile
    values too; close to numpy."""
    g = gc.Graph("absorbed")
    with g:
        x = gc.placeholder("x", (4, 5, 24), "float32")
        shape = (24,) if affine == "row" else (1,)
        w, b = gc.placeholder("w", shape, "float32"), gc.placeholder("b", shape, "float32")
        one, zero = gc.constant(np.ones(1, np.float32)), gc.constant(np.zeros(1, np.float32))
        y = gc.layer_norm(x, one, zero, axis=2)
        y = y if affine == "skip" else y * w + b
        gc.output(gc.sum(y * y * x), name="loss")
    g = gc.gradients(g, wrt=["x"])

    def close(a: np.ndarray, want: np.ndarray) -> str | None:
        scale = max(float(np.max(np.abs(want))), 1.0)
        err = float(np.max(np.abs(a.astype(np.float64) - want)))
        return None if err <= 1e-4 * scale else f"normwise error {err / scale:.3g}"

    feeds = [sprinkled_feeds(g, 1, share=0.0), sprinkled_feeds(g, 2)]
    with np.errstate(all="ignore"):
        check_native(g, feeds, levels=(0, 1, 2), close=close, close_sets=(0,))


def test_a_rows_bits_do_not_depend_on_batch_or_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _graph(("B", 9, 40), 2, "row")
    exe = gc.compile(g, backend="native")
    feeds = _feeds(_graph((6, 9, 40), 2, "row"), np.random.default_rng(3))
    whole = exe(**feeds)
    for k in range(6):
        part = {n: (a[k : k + 1] if n in ("x", "g") else a) for n, a in feeds.items()}
        for a, b in zip(exe(**part), whole):
            assert bits_differ(a, b[k : k + 1]) is None, f"image {k} alone"
    monkeypatch.setattr(norm, "PARALLEL_WORK", 0)  # read when a step is lowered
    on_pool = gc.compile(g, backend="native")
    for a, b in zip(on_pool(**feeds), whole):
        assert bits_differ(a, b) is None, "on the OpenMP pool"


def test_strided_arrays_read_never_written_and_other_kinds_on_numpy() -> None:
    g = _graph((4, 6, 20), 2, "row")
    exe = gc.compile(g, backend="native")
    feeds = _feeds(g, np.random.default_rng(0))
    big = np.repeat(feeds["x"], 2, axis=2)
    before = big.copy()
    strided = dict(feeds, x=big[..., ::2])
    for a, b in zip(exe(**strided), exe(**feeds)):
        assert bits_differ(a, b) is None
    assert bits_differ(big, before) is None, "the caller's array was written"
    for g, why in (
        (_graph((4, 6), 1, "row", "float64"), "float32"),
        (_layer_norm_over_two_dims_with_a_row_weight(), "one value or one per element"),
    ):
        text = gc.compile(g, backend="native").explain()
        assert "[numpy]" in text and why in text, text


def _layer_norm_over_two_dims_with_a_row_weight() -> Graph:
    """Normalized dims (6, 10), weight (10,): broadcast over the rows' first dim."""
    g = gc.Graph("ln2")
    with g:
        x = gc.placeholder("x", (3, 6, 10), "float32")
        w = gc.placeholder("w", (10,), "float32")
        gc.output(gc.layer_norm(x, w, gc.constant(np.zeros(1, np.float32)), axis=1), name="y")
    return g
