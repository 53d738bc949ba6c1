"""The attention node in C on the native backend (graphc/backends/native/attention.py):
numpy's BLAS calls item by item and the softmax row kernel, so O2 gives the bits of O0
and O1 (the unfused ops) on native; which layouts take it, and which fall back to the
numpy kernel (a matrix times its own transpose, where numpy calls syrk; the caller's
arrays), with the same bits either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import attention
from graphc.nn import functional as F
from tests.native_checks import check_native, needs_native, normwise

pytestmark = needs_native


def _graph(
    heads: int, dim: int, dtype: Any, self_keys: bool = False, scale: Any = None
) -> gc.Graph:
    """q, k and v made inside the graph (arena values, views through a transpose), as
    a transformer layer makes them from its projections."""
    g = gc.Graph("attention_c")
    with g:
        x = gc.placeholder("x", shape=("B", "T", heads * dim), dtype=dtype)

        def split(y: gc.Symbol) -> gc.Symbol:
            return gc.transpose(gc.reshape(y, (-1, y.shape[1], heads, dim)), (0, 2, 1, 3))

        q = split(x * 0.5)
        k = q if self_keys else split(x * 0.25 + 1.0)
        v = split(x - 0.5)
        options = {} if scale is None else {"scale": scale}
        gc.output(F.scaled_dot_product_attention(q, k, v, **options), name="y")
    return g


def _feeds(shape: tuple, dtype: Any, seed: int, edges: bool = False) -> dict:
    x = np.random.default_rng(seed).standard_normal(shape)
    if edges:
        x.flat[::11] = np.nan
        x.flat[5::13] = np.inf
        x.flat[3::17] = -0.0
    return {"x": x.astype(dtype)}


def _ran_in_c(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What attention.prepare returned at each setup (None: the numpy kernel runs)."""
    made: list[Any] = []
    prepare = attention.prepare
    monkeypatch.setattr(attention, "prepare", lambda *a: made.append(prepare(*a)) or made[-1])
    return made


# float64: native's fusion leaves float32 chains unfused, their products being matmul.py's
# (test_native_stacked_matmul.py)
@pytest.mark.parametrize("dtype", [np.float64])
@pytest.mark.parametrize(
    "batch,tokens,heads,dim",
    [(1, 32, 4, 32), (3, 7, 2, 5), (2, 130, 2, 40)],  # the zoo's; odd sizes; OpenBLAS-threaded
)
def test_the_c_call_gives_the_unfused_ops_bits(
    batch: int, tokens: int, heads: int, dim: int, dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _ran_in_c(monkeypatch)
    graph = _graph(heads, dim, dtype)
    shape = (batch, tokens, heads * dim)
    feeds = [_feeds(shape, dtype, 1), _feeds(shape, dtype, 2, edges=True)]
    with np.errstate(all="ignore"):
        check_native(graph, feeds, close=normwise(64 * np.finfo(dtype).eps), close_sets=(0,))
    assert made and all(run is not None for run in made), "the C path was not taken"
    exe = gc.compile(graph, opt_level=2, backend="native")
    assert "gc_attention_" in exe.source(**feeds[0])


def test_a_matrix_times_its_own_transpose_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """q is k: numpy's matmul calls syrk for q @ q.T, so the C call (gemm) is not made."""
    made = _ran_in_c(monkeypatch)
    graph = _graph(4, 32, np.float64, self_keys=True)
    feeds = [_feeds((2, 32, 128), np.float64, 3)]
    check_native(graph, feeds, close=normwise(64 * np.finfo(np.float64).eps), close_sets=(0,))
    assert made and all(run is None for run in made)


def test_a_scale_fed_by_the_caller_runs_the_numpy_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _ran_in_c(monkeypatch)
    g = gc.Graph("fed_scale")
    with g:
        x = gc.placeholder("x", shape=(2, 4, 8, 16), dtype="float32")
        s = gc.placeholder("s", shape=(), dtype="float32")
        q, k, v = x * 0.5, x + 1.0, x - 0.5
        w = gc.softmax(gc.matmul(q, gc.transpose(k, (0, 1, 3, 2))) * s, axis=-1)
        gc.output(gc.matmul(w, v), name="y")
    assert "attention" in [n.op for n in gc.fuse(gc.optimize(g, level=2), backend="numpy").op_nodes]
    feeds = [{"x": _feeds((2, 4, 8, 16), np.float32, 4)["x"], "s": np.array(0.25, np.float32)}]
    check_native(g, feeds, close=normwise(64 * np.finfo(np.float32).eps), close_sets=(0,))
    assert made == []  # not prepared: the scale's array exists only per call


def test_the_callers_arrays_run_the_numpy_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """q, k and v fed by the caller: their layout is known only per call."""
    made = _ran_in_c(monkeypatch)
    graph = gc.trace(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        *(np.zeros((2, 4, 32, 16), np.float32) for _ in range(3)),
    )
    rng = np.random.default_rng(5)
    feeds = [{n: rng.standard_normal((2, 4, 32, 16)).astype(np.float32) for n in "qkv"}]
    names = [n.name for n in graph.inputs]
    feeds = [dict(zip(names, f.values(), strict=True)) for f in feeds]
    check_native(graph, feeds, close=normwise(64 * np.finfo(np.float32).eps), close_sets=(0,))
    assert made == []  # not even prepared: the lowering needs arrays that exist at setup


def test_layout_refuses_what_numpy_would_not_pass_to_gemm() -> None:
    q = np.zeros((2, 8, 4), np.float32)
    kt = np.zeros((2, 4, 8), np.float32)
    v = np.zeros((2, 8, 3), np.float32)
    out = np.zeros((2, 8, 3), np.float32)
    assert attention.layout(q, kt, v, out) is not None
    assert attention.layout(q[:, :, ::2], kt[:, ::2], v, out) is None  # strided rows
    assert attention.layout(q, kt, v[:, :, :1], out[:, :, :1]) is None  # a vector: gemv
    assert attention.layout(q, kt, v, np.asfortranarray(out)) is None  # out by columns
    assert attention.layout(q[:1], kt, v, out) is None  # broadcast batch


def test_a_layer_with_the_c_call_runs_as_one_c_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated code calls the kernel itself (not a closure), so an entry in C can
    record it; with the heads merged back (a reshape of a transpose: copies.py), a
    transformer layer's attention block is one C call, with the bits of another
    executable's first call (in Python)."""
    made = _ran_in_c(monkeypatch)
    g = gc.Graph("attention_block")
    heads, dim = 4, 8
    with g:
        x = gc.placeholder("x", shape=(2, 16, heads * dim), dtype="float64")
        split = lambda y: gc.transpose(gc.reshape(y, (2, 16, heads, dim)), (0, 2, 1, 3))  # noqa: E731
        a = F.scaled_dot_product_attention(split(x * 0.5), split(x + 1.0), split(x - 0.5))
        gc.output(gc.reshape(gc.transpose(a, (0, 2, 1, 3)), (2, 16, heads * dim)) * 2.0, name="y")
    x = _feeds((2, 16, heads * dim), np.float64, 7)["x"]
    in_python = gc.compile(g, backend="native")
    want = in_python(x)
    exe = gc.compile(g, backend="native", wait=True)
    for _ in range(20):
        exe(x)
    exe.wait()
    assert "entry: one C call" in exe.explain(x), exe.explain(x).splitlines()[1]
    assert made and all(run is not None for run in made), "the C path was not taken"
    for _ in range(3):
        np.testing.assert_array_equal(exe(x), want)
