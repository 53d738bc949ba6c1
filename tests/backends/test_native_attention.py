"""The attention node on the native backend: numpy's kernel with the native softmax row
kernel, so that O2 (one attention node) gives the bits of O0 and O1 (matmul, scale,
mask, softmax and matmul as ops, softmax on the row kernel), whatever the masks, the
dropout, the blocks, the dtypes and the edge values; close to numpy's results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.backends.numpy.nodes import attention as attention_op
from graphc.nn import functional as F
from tests.native_checks import check_native, needs_native, normwise

pytestmark = needs_native


def _feeds(shape: tuple, keys: int, dtype: Any, seed: int, scale: float = 1.0) -> dict:
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(shape) * scale
    k = rng.standard_normal((*shape[:-2], keys, shape[-1]))
    v = rng.standard_normal((*shape[:-2], keys, 3))
    feeds = {"q": q, "k": k, "v": v}
    if seed % 2:  # edge values among the normal ones
        for name, x in feeds.items():
            x.flat[:: 7 + len(name)] = [np.nan, np.inf, -np.inf, -0.0, 1e30][: x.size // 7 or 1][0]
    return {n: x.astype(dtype) for n, x in feeds.items()}


MASKS: dict[str, Any] = {
    "none": lambda rows, keys: {},
    "bool": lambda rows, keys: {"attn_mask": np.arange(rows * keys).reshape(rows, keys) % 3 > 0},
    "float": lambda rows, keys: {"attn_mask": np.linspace(-2, 2, rows * keys).reshape(rows, keys)},
    "causal": lambda rows, keys: {"is_causal": True},
}


def _graph(shape: tuple, keys: int, dtype: Any, mask: str) -> gc.Graph:
    options = MASKS[mask](shape[-2], keys)
    if "attn_mask" in options and options["attn_mask"].dtype.kind == "f":
        options["attn_mask"] = options["attn_mask"].astype(dtype)
    feeds = _feeds(shape, keys, dtype, 0)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **options)

    return gc.trace(f, *(feeds[n] for n in ("q", "k", "v")))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("shape", [(2, 4, 6, 5), (6, 5), (1, 4, 32, 32)])
def test_levels_agree_and_stay_close_to_numpy(shape: tuple, mask: str, dtype: Any) -> None:
    keys = shape[-2] if mask == "causal" else 7
    graph = _graph(shape, keys, dtype, mask)
    assert "attention" in [
        n.op for n in gc.fuse(gc.optimize(graph, level=2), backend="numpy").op_nodes
    ]
    feeds = [_feeds(shape, keys, dtype, seed) for seed in (1, 2)]
    feeds.append(_feeds(shape, keys, dtype, 4, scale=1e30))  # inf scores, nan weights
    with np.errstate(all="ignore"):
        check_native(graph, feeds, close=normwise(64 * np.finfo(dtype).eps), close_sets=(1,))


@pytest.mark.parametrize("block_bytes", [1, 4 * 6 * 7 * 4])
def test_any_block_of_the_batch_gives_the_same_bits(
    block_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = _graph((2, 4, 6, 5), 7, np.float32, "float")
    feeds = _feeds((2, 4, 6, 5), 7, np.float32, 2)
    whole = gc.compile(graph, opt_level=2, backend="native")(**feeds)
    monkeypatch.setattr(attention_op, "BLOCK_BYTES", block_bytes)  # read per call
    blocked = gc.compile(graph, opt_level=2, backend="native")(**feeds)
    np.testing.assert_array_equal(blocked.view(np.uint32), whole.view(np.uint32))


def test_the_step_runs_the_row_kernel_and_says_so() -> None:
    # float64: native leaves float32 chains unfused (their products are matmul.py's)
    graph = _graph((1, 4, 32, 32), 32, np.float64, "none")
    exe = gc.compile(graph, opt_level=2, backend="native")
    feeds = _feeds((1, 4, 32, 32), 32, np.float64, 2)
    line = next(s for s in exe.explain(**feeds).splitlines() if "attention(" in s)
    assert line.endswith("[native]"), line
    assert "softmax_rows=" in exe.source(**feeds)
    numpy = gc.compile(graph, opt_level=2, backend="numpy")
    assert "softmax_rows" not in numpy.source(**feeds)


def test_dropout_inside_the_node_keeps_the_levels_together() -> None:
    rng = np.random.default_rng(5)
    keep = rng.random((2, 3, 6, 7)) > 0.2
    g = gc.Graph("dropout")
    with g:
        q = gc.placeholder("q", shape=(2, 3, 6, 5), dtype="float32")
        kt = gc.placeholder("kt", shape=(2, 3, 5, 7), dtype="float32")
        v = gc.placeholder("v", shape=(2, 3, 7, 4), dtype="float32")
        w = gc.softmax((q @ kt) * 0.5, axis=-1)
        w = gc.where(gc.constant(keep), w * 1.25, 0.0)
        gc.output(w @ v, name="y")
    assert "attention" in [n.op for n in gc.fuse(gc.optimize(g, level=2), backend="numpy").op_nodes]
    feeds = [
        {n: rng.standard_normal(s).astype(np.float32) for n, s in
         (("q", (2, 3, 6, 5)), ("kt", (2, 3, 5, 7)), ("v", (2, 3, 7, 4)))}
    ]  # fmt: skip
    check_native(g, feeds, close=normwise(64 * float(np.finfo(np.float32).eps)), close_sets=(0,))


@pytest.mark.parametrize("rows, keys", [(0, 5), (4, 0), (0, 0), (1, 5), (4, 1)])
def test_empty_and_single_row_or_key_axes(rows: int, keys: int) -> None:
    rng = np.random.default_rng(6)
    q, k = rng.standard_normal((2, 3, rows, 4)), rng.standard_normal((2, 3, keys, 4))
    v = rng.standard_normal((2, 3, keys, 6))
    feeds = {"q": q, "k": k, "v": v}
    feeds32 = {n: a.astype(np.float32) for n, a in feeds.items()}
    graph = gc.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), *feeds32.values())
    with np.errstate(all="ignore"):
        check_native(graph, [feeds32], close=normwise(1e-5), close_sets=(0,))
