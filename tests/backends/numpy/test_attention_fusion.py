"""fuse_attention: softmax(mask(q @ kt * scale)) @ v as one `attention` node whose kernel
holds one block of scores at a time, bit for bit with the unfused graph (nan, inf, fully
masked rows, empty axes included); chains whose intermediates are read elsewhere stay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.backends.numpy import fusion as numpy_fusion
from graphc.backends.numpy.nodes import attention as attention_op
from graphc.nn import functional as F
from graphc.runtime.explain import peak_bytes
from tests.edge_values import assert_bits_equal, float_specials
from tests.passes.passcheck import check_pass

RNG = np.random.default_rng(0)


def normal(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def sdpa(**options: Any) -> Any:
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **options)


def ops(graph: gc.Graph) -> list[str]:
    return [n.op for n in graph.op_nodes if n.op != "constant"]


def o0_and_o2(graph: gc.Graph, feeds: dict[str, np.ndarray]) -> None:
    """The graph at O2 has an attention node and gives O0's bits."""
    optimized = gc.fuse(gc.optimize(graph, level=2), backend="numpy")
    assert "attention" in ops(optimized), optimized
    with np.errstate(all="ignore"):  # the edge feeds overflow on purpose
        want = gc.compile(graph, opt_level=0)(**feeds)
        got = gc.compile(graph, opt_level=2)(**feeds)
    assert_bits_equal(got, [want], str(optimized))


# -- text in, text out ------------------------------------------------------------------------


def test_scaled_softmax_product_becomes_one_node() -> None:
    result = check_pass(
        numpy_fusion.fuse_attention,
        """graph g(%q: f64[B,4,3], %k: f64[B,5,3], %v: f64[B,5,2]) {
          %kt: f64[B,3,5] = transpose(%k, axes=(0, 2, 1))
          %s: f64[B,4,5] = matmul(%q, %kt)
          %c: f64[] = constant(value=0.5)
          %m: f64[B,4,5] = mul(%c, %s)
          %w: f64[B,4,5] = softmax(%m, axis=2)
          %o: f64[B,4,2] = matmul(%w, %v)
          output %y = %o
        }""",
        """graph g(%q: f64[B,4,3], %k: f64[B,5,3], %v: f64[B,5,2]) {
          %kt: f64[B,3,5] = transpose(%k, axes=(0, 2, 1))
          %c: f64[] = constant(value=0.5)
          %o: f64[B,4,2] = attention(%q, %kt, %v, %c, scale=True, mask=(), dropout=False)
          output %y = %o
        }""",
    )  # fmt: skip
    assert str(gc.parse(str(result))) == str(result)
    assert str(gc.from_json(gc.to_json(result))) == str(result)
    members = [m[:2] for m in result.node("o").meta["members"]]
    assert members == [("s", "matmul"), ("m", "mul"), ("w", "softmax"), ("o", "matmul")]


def test_masks_and_dropout_become_operands() -> None:
    check_pass(
        numpy_fusion.fuse_attention,
        """graph g(%q: f32[2,3,4,8], %kt: f32[2,3,8,6], %v: f32[2,3,6,8], %b: f32[4,6], %keep: bool[2,3,4,6]) {
          %s: f32[2,3,4,6] = matmul(%q, %kt)
          %a: f32[2,3,4,6] = add(%b, %s)
          %w: f32[2,3,4,6] = softmax(%a, axis=3)
          %c: f32[] = constant(value=2.0)
          %d: f32[2,3,4,6] = mul(%w, %c)
          %z: f32[] = constant(value=0.0)
          %e: f32[2,3,4,6] = where(%keep, %d, %z)
          %o: f32[2,3,4,8] = matmul(%e, %v)
          output %y = %o
        }""",
        """graph g(%q: f32[2,3,4,8], %kt: f32[2,3,8,6], %v: f32[2,3,6,8], %b: f32[4,6], %keep: bool[2,3,4,6]) {
          %c: f32[] = constant(value=2.0)
          %z: f32[] = constant(value=0.0)
          %o: f32[2,3,4,8] = attention(%q, %kt, %v, %b, %c, %keep, %z, scale=False, mask=("add",), dropout=True)
          output %y = %o
        }""",
    )  # fmt: skip
    check_pass(
        numpy_fusion.fuse_attention,
        """graph g(%q: f32[4,8], %kt: f32[8,6], %v: f32[6,8], %m: bool[4,6]) {
          %s: f32[4,6] = matmul(%q, %kt)
          %f: f32[] = constant(value=-inf)
          %a: f32[4,6] = where(%m, %s, %f)
          %w: f32[4,6] = softmax(%a, axis=1)
          %o: f32[4,8] = matmul(%w, %v)
          output %y = %o
        }""",
        """graph g(%q: f32[4,8], %kt: f32[8,6], %v: f32[6,8], %m: bool[4,6]) {
          %f: f32[] = constant(value=-inf)
          %o: f32[4,8] = attention(%q, %kt, %v, %m, %f, scale=False, mask=("where",), dropout=False)
          output %y = %o
        }""",
    )  # fmt: skip


# what F.scaled_dot_product_attention traces to, and the attrs of the node it becomes
TRACED = {
    "no mask": ({}, {"scale": True, "mask": (), "dropout": False}),
    "bool mask": ({"attn_mask": RNG.random((6, 7)) > 0.3}, {"mask": ("where",)}),
    "float mask": ({"attn_mask": normal(6, 7)}, {"mask": ("add",)}),
    "causal": ({"is_causal": True}, {"mask": ("where",)}),
    "explicit scale": ({"scale": 0.3}, {"scale": True}),
}


@pytest.mark.parametrize("name", list(TRACED))
@pytest.mark.parametrize("shape", [(6, 5), (2, 6, 5), (2, 3, 6, 5)], ids=["2d", "3d", "heads"])
def test_traced_attention_fuses_and_keeps_the_bits(name: str, shape: tuple[int, ...]) -> None:
    options, attrs = TRACED[name]
    q, v = normal(*shape), normal(*shape[:-2], 7, 4)
    k = normal(*shape[:-2], 7, shape[-1])
    if name == "causal":
        k = normal(*shape)
        v = normal(*shape[:-1], 4)
    graph = gc.trace(sdpa(**options), q, k, v)
    optimized = gc.fuse(gc.optimize(graph, level=2), backend="numpy")
    assert ops(optimized) == ["transpose", "attention"], optimized
    node = next(n for n in optimized.op_nodes if n.op == "attention")
    assert attrs.items() <= node.attrs.items()
    o0_and_o2(graph, {"q": q, "k": k, "v": v})


def test_key_and_value_shared_by_the_batch() -> None:
    """2-D k and v broadcast over the batch and heads: each block sees the same matrices."""
    q, k, v = normal(2, 3, 6, 5), normal(7, 5), normal(7, 4)
    mask = normal(3, 1, 7)  # per head, per key
    graph = gc.trace(sdpa(attn_mask=mask), q, k, v)
    o0_and_o2(graph, {"q": q, "k": k, "v": v})


def test_a_backend_keeping_matmul_fuses_only_batched_products() -> None:
    """With matmul in `keep` (the native backend computes products by a constant matrix
    with its own bits), a chain whose k or v is one matrix stays unfused, so its
    products run as at O0; batched k and v still fuse."""
    q = normal(2, 3, 6, 5)
    shared = gc.trace(sdpa(), q, normal(7, 5), normal(7, 4))
    batched = gc.trace(sdpa(), q, normal(2, 3, 7, 5), normal(2, 3, 7, 4))
    keep = frozenset({"matmul"})
    assert "attention" in ops(numpy_fusion.fuse_attention(shared))
    assert "attention" not in ops(numpy_fusion.fuse_attention(shared, keep=keep))
    assert "attention" in ops(numpy_fusion.fuse_attention(batched, keep=keep))


def test_symbolic_batch_fuses_and_runs_at_any_batch() -> None:
    spec = gc.TensorSpec(("B", 4, 16, 8))
    graph = gc.trace(sdpa(is_causal=True), spec, spec, spec)
    optimized = gc.fuse(gc.optimize(graph, level=2), backend="numpy")
    (node,) = [n for n in optimized.op_nodes if n.op == "attention"]
    assert isinstance(node.type.shape[0], str)
    for batch in (1, 3, 0):
        q, k, v = (normal(batch, 4, 16, 8) for _ in range(3))
        o0_and_o2(graph, {"q": q, "k": k, "v": v})


def test_dropout_fuses_and_keeps_the_bits() -> None:
    q, k, v = (normal(2, 3, 6, 5) for _ in range(3))
    graph = gc.trace(sdpa(dropout_p=0.25, is_causal=True), q, k, v)
    optimized = gc.fuse(gc.optimize(graph, level=2), backend="numpy")
    (node,) = [n for n in optimized.op_nodes if n.op == "attention"]
    assert node.attrs == {"scale": True, "mask": ("where",), "dropout": True}
    for key in (0, 7):
        o0_and_o2(graph, {"q": q, "k": k, "v": v, "rng_key": np.int64(key)})


def test_attention_fed_by_attention_fuses_both() -> None:
    x = normal(2, 6, 4)

    def twice(x: Any) -> Any:
        h = F.scaled_dot_product_attention(x, x, x)
        return F.scaled_dot_product_attention(h, x, x)

    graph = gc.trace(twice, x)
    assert ops(gc.fuse(gc.optimize(graph, level=2), backend="numpy")).count("attention") == 2
    o0_and_o2(graph, {"x": x})


def test_multihead_attention_and_an_encoder_layer_fuse() -> None:
    """nn.MultiheadAttention masks with where(mask, -inf, s) (True: not attended), once
    for attn_mask and once for key_padding_mask; need_weights=True returns the weights
    (averaged over heads), which keeps the chain."""
    attention = gc.nn.MultiheadAttention(16, 4, batch_first=True, generator=0)
    causal = ~np.tril(np.ones((6, 6), np.bool_))
    padding = np.zeros((2, 6), np.bool_)
    padding[1, 4:] = True

    def masked(x: Any, need_weights: bool = False) -> Any:
        out, weights = attention(
            x, x, x, attn_mask=causal, key_padding_mask=padding, need_weights=need_weights
        )
        return out if weights is None else (out, weights)

    x = normal(2, 6, 16)
    graph = gc.trace(masked, x)
    (node,) = [
        n
        for n in gc.fuse(gc.optimize(graph, level=2), backend="numpy").op_nodes
        if n.op == "attention"
    ]
    assert node.attrs["mask"] == ("where_not", "where_not")
    o0_and_o2(graph, {"x": x, **gc.lifted_feeds(graph)})
    returned = gc.trace(lambda x: masked(x, need_weights=True), x)
    assert "attention" not in ops(gc.fuse(gc.optimize(returned, level=2), backend="numpy"))

    layer = gc.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    layer.eval()
    encoder = gc.trace(lambda x: layer(x, src_mask=causal), x)
    assert "attention" in ops(gc.fuse(gc.optimize(encoder, level=2), backend="numpy"))
    o0_and_o2(encoder, {"x": x, **gc.lifted_feeds(encoder)})


# -- what must not fuse -----------------------------------------------------------------------

CHAIN = """graph g(%q: f32[2,4,8], %kt: f32[2,8,6], %v: f32[2,6,8]) {
  %s: f32[2,4,6] = matmul(%q, %kt)
  %c: f32[] = constant(value=0.5)
  %m: f32[2,4,6] = mul(%s, %c)
  %w: f32[2,4,6] = softmax(%m, axis=AXIS)
  %o: f32[2,4,8] = matmul(%w, %v)
  output %y = %o
EXTRA}"""

LEFT_ALONE = {
    "weights returned": ("2", "  output %weights = %w\n"),
    "scores returned": ("2", "  output %scores = %s\n"),
    "scaled scores read twice": ("2", "  %t: f32[2,4,6] = exp(%m)\n  output %t2 = %t\n"),
    "softmax over another axis": ("1", ""),
}


@pytest.mark.parametrize("name", list(LEFT_ALONE))
def test_intermediates_read_elsewhere_are_not_fused(name: str) -> None:
    axis, extra = LEFT_ALONE[name]
    text = CHAIN.replace("AXIS", axis).replace("EXTRA", extra)
    check_pass(numpy_fusion.fuse_attention, text, text)


def test_weights_on_the_right_or_a_widening_value_are_not_fused() -> None:
    right = CHAIN.replace("AXIS", "2").replace("EXTRA", "")
    right = right.replace("%v: f32[2,6,8]", "%v: f32[2,8,4]").replace(
        "%o: f32[2,4,8] = matmul(%w, %v)", "%o: f32[2,8,6] = matmul(%v, %w)"
    )
    check_pass(numpy_fusion.fuse_attention, right, right)
    wide = """graph g(%q: f32[4,8], %kt: f32[8,6], %v: f32[3,6,8]) {
      %s: f32[4,6] = matmul(%q, %kt)
      %w: f32[4,6] = softmax(%s, axis=1)
      %o: f32[3,4,8] = matmul(%w, %v)
      output %y = %o
    }"""
    check_pass(numpy_fusion.fuse_attention, wide, wide)


def test_training_graphs_do_not_fuse() -> None:
    """The backward pass reads the softmax weights: the chain is not the forward's own."""
    q, k, v = (normal(2, 6, 4) for _ in range(3))
    graph = gc.trace(lambda q, k, v: gc.sum(sdpa(is_causal=True)(q, k, v)), q, k, v)
    joint = gc.gradients(graph, wrt=["q", "k", "v"])
    assert "attention" not in ops(gc.fuse(gc.optimize(joint, level=2), backend="numpy"))
    feeds = {"q": q, "k": k, "v": v}
    want = gc.compile(joint, opt_level=0)(**feeds)
    assert_bits_equal(gc.compile(joint, opt_level=2)(**feeds), list(want), "gradients")


# -- bit for bit ------------------------------------------------------------------------------


def edge_array(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Normal values with a sprinkle of nan, ±inf, -0.0, subnormals and the largest values."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    special = rng.random(shape) < 0.15
    x[special] = rng.choice(float_specials(dtype), size=int(special.sum()))
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_bytes", [1, 3 * 6 * 7 * 8, attention_op.BLOCK_BYTES])
@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal"])
def test_edge_values_and_blocks_keep_the_bits(
    dtype: Any, block_bytes: int, mask: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any block size gives O0's bits: one matrix per block, several, all at once."""
    monkeypatch.setattr(attention_op, "BLOCK_BYTES", block_bytes)
    shape = (2, 3, 6, 5)
    q, k = edge_array(shape, dtype, 1), edge_array((2, 3, 7, 5), dtype, 2)
    v = edge_array((2, 3, 7, 4), dtype, 3)
    rng = np.random.default_rng(4)
    options: dict[str, Any] = {
        "none": {},
        "bool": {"attn_mask": rng.random((2, 1, 6, 7)) > 0.4},  # with fully masked rows
        "float": {"attn_mask": edge_array((3, 6, 7), dtype, 5)},
        "causal": {"is_causal": True},
    }[mask]
    if mask == "causal":
        k, v = edge_array(shape, dtype, 2), edge_array(shape[:-1] + (4,), dtype, 3)
    graph = gc.trace(sdpa(**options), q, k, v)
    for scale in (1.0, 1e30):  # large magnitudes: inf scores, nan weights
        with np.errstate(over="ignore"):
            feeds = {"q": q * dtype(scale), "k": k, "v": v}
        o0_and_o2(graph, feeds)


def test_fully_masked_rows_give_zero_as_torch() -> None:
    """A query row with every key masked: torch 2.13 gives zeros (softmax alone would
    give nan), and the fused attention keeps that, a where after it."""
    q, k, v = (normal(1, 2, 4, 3) for _ in range(3))
    mask = np.ones((4, 4), np.bool_)
    mask[1] = False
    graph = gc.trace(sdpa(attn_mask=mask), q, k, v)
    out = gc.compile(graph, opt_level=2)(q=q, k=k, v=v)
    assert (out[:, :, 1] == 0).all() and not np.isnan(out).any()
    o0_and_o2(graph, {"q": q, "k": k, "v": v})
    torch = pytest.importorskip("torch")
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask)
    )
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows, cols", [(0, 5), (4, 0), (0, 0), (1, 5), (4, 1), (1, 1)])
def test_empty_and_single_row_or_key_axes(rows: int, cols: int) -> None:
    q, k, v = normal(2, 3, rows, 4), normal(2, 3, cols, 4), normal(2, 3, cols, 6)
    graph = gc.trace(sdpa(), q, k, v)
    o0_and_o2(graph, {"q": q, "k": k, "v": v})


# -- memory -----------------------------------------------------------------------------------


def without_attention_fusion(monkeypatch: pytest.MonkeyPatch) -> None:
    """O2 as it would be without fuse_attention (in the numpy backend's fusion step)."""
    passes = tuple(p for p in numpy_fusion.FUSION if p is not numpy_fusion.fuse_attention)
    monkeypatch.setattr(numpy_fusion, "FUSION", passes)


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_peak_bytes_are_smaller_with_the_pass(mask: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q, k, v = (normal(4, 4, 256, 32) for _ in range(3))
    graph = gc.trace(sdpa(is_causal=mask == "causal"), q, k, v)
    feeds = {"q": q, "k": k, "v": v}
    fused = gc.compile(graph, opt_level=2)
    fused_peak = peak_bytes(fused.plan(**feeds))
    text = fused.explain(**feeds)
    assert "attention" in text and "of which kernels' scratch" in text
    without_attention_fusion(monkeypatch)
    plain = gc.compile(graph, opt_level=2)
    assert "attention" not in plain.explain(**feeds)
    plain_peak = peak_bytes(plain.plan(**feeds))
    scores = 4 * 4 * 256 * 256 * 4  # one full (B, H, Lq, Lk) float32 buffer
    assert plain_peak >= scores > fused_peak
    assert_bits_equal(fused(**feeds), [plain(**feeds)], "with and without the pass")


def test_scratch_rule_counts_what_the_kernel_allocates() -> None:
    """The scratch rule against tracemalloc, as tests/runtime/test_scratch.py does."""
    from tests.runtime.test_scratch import rule_and_measured, slack

    for shape, mask in [((4, 4, 256, 32), ""), ((2, 3, 64, 16), "where"), ((96, 8), "add")]:
        q, kt, v = normal(*shape), np.swapaxes(normal(*shape), -1, -2), normal(*shape)
        rows = shape[-2]
        extra = {
            "": [],
            "where": [np.tril(np.ones((rows, rows), np.bool_)), np.float32(-np.inf)],
            "add": [normal(rows, rows)],
        }[mask]
        arrays = [q, kt, v, np.float32(0.25), *extra]
        steps = (mask,) if mask else ()
        rule, measured = rule_and_measured("attention", arrays, scale=True, mask=steps)
        assert measured <= rule + slack(np.float32), (shape, mask)
        assert rule <= measured + slack(np.float32), (shape, mask)


# -- ONNX -------------------------------------------------------------------------------------
