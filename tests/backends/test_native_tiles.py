"""The native backend's tiled kernels: an elementwise step reading the transpose of a
matrix (a weight minus its transposed gradient) walks the output in tiles and copies
each tile of the transposed operand in the output's order (float32 whole tiles by 8 x 8
register transposes). The values must be numpy's bit for bit whatever the shape (whole
and partial tiles, one row, one column), dtype and level, and the step must run native
(numpy's strided loop for it is 4-16x slower: graphc/backends/native/kernels.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from tests.edge_values import bits_differ, edge_array
from tests.native_checks import needs_native, runs_native

pytestmark = needs_native

SHAPES = [(16, 16), (32, 48), (37, 53), (1, 40), (40, 1), (3, 5), (256, 784), (17, 16)]


def _update_graph(rows: int, cols: int, dtype: str) -> gc.Graph:
    """w - transpose(g * c), as an SGD step subtracts a weight gradient computed in the
    transposed layout: the scaled gradient is an arena buffer, its transpose a view."""
    g = gc.Graph("update")
    with g:
        w = gc.placeholder("w", shape=(rows, cols), dtype=dtype)
        grad = gc.placeholder("g", shape=(cols, rows), dtype=dtype)
        scaled = grad * gc.constant(np.asarray(0.5, dtype))
        gc.output(gc.maximum(w - gc.transpose(scaled, (1, 0)), w * 0.25), name="y")
    return g


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_transposed_operand_gives_numpy_bits(shape: tuple[int, int], dtype: str) -> None:
    rows, cols = shape
    g = _update_graph(rows, cols, dtype)
    rng = np.random.default_rng(rows * 1000 + cols)
    w, grad = (
        edge_array(rng, (rows, cols), np.dtype(dtype)),
        edge_array(rng, (cols, rows), np.dtype(dtype)),
    )
    with np.errstate(all="ignore"):
        want = gc.compile(g, backend="numpy", opt_level=0)(w, grad)
        for level in (0, 2):
            exe = gc.compile(g, backend="native", opt_level=level)
            got = exe(w, grad)
            why = bits_differ(got, want)
            assert why is None, f"{shape} {dtype} O{level}: {why}"
            if rows * cols >= 4096:  # smaller exact steps stay on numpy (native.SMALL)
                assert runs_native(exe, w, grad) >= 1
                assert "stays on numpy: an operand is a transposed" not in exe.explain(w, grad)


def test_bool_transposed_operand_gives_numpy_bits() -> None:
    g = gc.Graph("masks")
    with g:
        a = gc.placeholder("a", shape=(70, 90))
        b = gc.placeholder("b", shape=(90, 70))
        mask = gc.transpose(b > 0.0, (1, 0))
        gc.output(gc.where(gc.logical_and(a > 0.0, mask), a, 0.0), name="y")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((70, 90), np.float32), rng.standard_normal((90, 70), np.float32)
    want = gc.compile(g, backend="numpy")(a, b)
    for level in (0, 2):
        assert bits_differ(gc.compile(g, backend="native", opt_level=level)(a, b), want) is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_scale_of_the_transposed_gradient_fuses_into_the_update(dtype: str) -> None:
    """Guards simplify's `lowered` (native reads transposes itself): w - transpose(g) * c
    keeps its scale beside the subtraction, one tiled kernel over the weight, where on
    numpy the scale moves before the transpose (a pass of its own in g's layout); both
    give numpy's O0 bits."""
    g = gc.Graph("sgd")
    with g:
        w = gc.placeholder("w", shape=(256, 784), dtype=dtype)
        grad = gc.placeholder("g", shape=(784, 256), dtype=dtype)
        lr = gc.constant(np.asarray(0.01, dtype))
        gc.output(w - gc.transpose(grad, (1, 0)) * lr, name="w_new")
    rng = np.random.default_rng(3)
    w, grad = (
        edge_array(rng, (256, 784), np.dtype(dtype)),
        edge_array(rng, (784, 256), np.dtype(dtype)),
    )
    with np.errstate(all="ignore"):
        want = gc.compile(g, backend="numpy", opt_level=0)(w, grad)
        numpy_steps = gc.compile(g, backend="numpy").plan(w, grad).steps
        native = gc.compile(g, backend="native")
        assert bits_differ(native(w, grad), want) is None
    ops = [s.node.op for s in native.plan(w, grad).steps if s.node.op != "transpose"]
    assert ops == ["fused"], ops
    assert [s.node.op for s in numpy_steps if s.node.op != "transpose"] == ["mul", "sub"]
