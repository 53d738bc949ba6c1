"""fuse_conv_body: conv2d -> fused (a batch norm in eval mode, a residual add, a ReLU) as
one conv2d_fused node, bit for bit with the unfused graph on hostile values, by graph
text, on random geometries and bodies, in chunks, backward, and to ONNX."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc import nn
from graphc.backends.numpy import fusion as numpy_fusion
from graphc.backends.numpy.nodes.fused import BodySlots, run_body
from graphc.ir.registry import ops_with
from graphc.ops import conv_kernels
from graphc.ops.conv_ops import conv2d
from graphc.ops.dispatch import bind
from graphc.passes.report import PassLog
from tests.budget import draws
from tests.edge_values import assert_bits_equal, sprinkled_feeds
from tests.passes.passcheck import check_pass

BEFORE = """graph g(%x: f64[B,2,5,5], %w: f64[3,2,3,3], %m: f64[3,1,1], %r: f64[B,3,5,5]) {
  %c: f64[B,3,5,5] = conv2d(%x, %w, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
  %f: f64[B,3,5,5] = fused(%m, %c, %r, body=graph body(%m: f64[3,1,1], %c: f64[B,3,5,5], %r: f64[B,3,5,5]) {
    %s: f64[B,3,5,5] = sub(%c, %m)
    %a: f64[B,3,5,5] = add(%s, %r)
    %y: f64[B,3,5,5] = relu(%a)
    output %out = %y
  })
  output %out = %f
}"""  # fmt: skip


def test_conv_and_its_fused_reader_become_one_node_with_the_conv_first() -> None:
    after = """graph g(%x: f64[B,2,5,5], %w: f64[3,2,3,3], %m: f64[3,1,1], %r: f64[B,3,5,5]) {
      %f: f64[B,3,5,5] = conv2d_fused(%x, %w, %m, %r, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1, body=graph body(%c: f64[B,3,5,5], %m: f64[3,1,1], %r: f64[B,3,5,5]) {
        %s: f64[B,3,5,5] = sub(%c, %m)
        %a: f64[B,3,5,5] = add(%s, %r)
        %y: f64[B,3,5,5] = relu(%a)
        output %out = %y
      })
      output %out = %f
    }"""  # fmt: skip
    result = check_pass(numpy_fusion.fuse_conv_body, BEFORE, after)
    assert str(gc.parse(str(result))) == str(result)  # the text round-trips
    again = gc.from_json(gc.to_json(result))
    assert str(again) == str(result)


def test_a_convolution_read_elsewhere_stays() -> None:
    graph = gc.parse(BEFORE.replace("  output %out = %f", "  output %out = %f\n  output %c2 = %c"))
    assert [n.op for n in numpy_fusion.fuse_conv_body(graph).op_nodes] == ["conv2d", "fused"]


def _conv_then(other: tuple) -> gc.Graph:
    """relu(conv2d(x, w) + r) with r of shape `other`, after elementwise fusion."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2, 2, 5, 5))
        w = gc.placeholder("w", (3, 2, 3, 3))
        r = gc.placeholder("r", other)
        gc.output(gc.relu(conv2d(x, w, padding=1) + r), name="y")
    fused = numpy_fusion.fuse_elementwise(g)
    assert [n.op for n in fused.op_nodes] == ["conv2d", "fused"]
    return fused


@pytest.mark.parametrize(
    ("other", "fuses"),
    [((5, 5), True), ((3, 1, 1), True), ((1, 3, 5, 5), True), ((2, 3, 5, 5), True),
     ((4, 2, 3, 5, 5), False)],
)  # fmt: skip
def test_inputs_that_cannot_be_cut_into_images_stop_the_fusion(other: tuple, fuses: bool) -> None:
    """Inputs the same for every image or with one row per image can follow the chunks;
    a rank-5 one (the result broadcasts past the convolution's type) cannot."""
    result = numpy_fusion.fuse_conv_body(_conv_then(other))
    assert ("conv2d_fused" in [n.op for n in result.op_nodes]) == fuses


def test_a_body_with_a_kept_op_is_left_alone() -> None:
    graph = gc.parse(BEFORE)
    kept = numpy_fusion.fuse_conv_body(graph, keep=frozenset({"relu"}))
    assert [n.op for n in kept.op_nodes] == ["conv2d", "fused"]
    log = PassLog("fuse_conv_body")
    numpy_fusion.fuse_conv_body(graph, log=log)
    assert any("conv2d_fused" in note or "<- conv2d -> fused" in note for note in log.notes)


@pytest.mark.parametrize(
    ("other", "body", "message"),
    [
        ("f32[1,2,3,2,2]", "%a: f32[1,2,3,2,2] = add(%c, %r)\n        output %out = %a",
         "must keep the convolution's type"),
        ("f32[4,1,3,2,2]", "output %out = %c", "cannot be cut into the images"),
    ],
)  # fmt: skip
def test_type_rule_refuses_a_body_it_cannot_run_by_chunks(
    other: str, body: str, message: str
) -> None:
    text = f"""graph g(%x: f32[2,2,4,4], %w: f32[3,2,3,3], %r: {other}) {{
      %y: f32[2,3,2,2] = conv2d_fused(%x, %w, %r, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, body=graph body(%c: f32[2,3,2,2], %r: {other}) {{
        {body}
      }})
      output %o = %y
    }}"""  # fmt: skip
    with pytest.raises(gc.ParseError, match=f"conv2d_fused: .*{message}"):
        gc.parse(text)


# -- bit for bit ----------------------------------------------------------------------------


def _block(n: int, dtype: str, geometry: dict) -> gc.Graph:
    """conv -> batch norm (eval) -> + residual -> relu, spelled out as the trace makes it."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (n, 4, 7, 6), dtype)
        w = gc.placeholder("w", (4, 4 // geometry.get("groups", 1), 3, 3), dtype)
        mean = gc.placeholder("mean", (4,), dtype)
        var = gc.placeholder("var", (4,), dtype)
        gamma = gc.placeholder("gamma", (4,), dtype)
        beta = gc.placeholder("beta", (4,), dtype)
        c = conv2d(x, w, **{"padding": 1, **geometry})

        def col(v: object) -> object:
            return gc.reshape(v, (-1, 1, 1))

        y = (c - col(mean)) * col(gc.rsqrt(var + 1e-5)) * col(gamma) + col(beta)
        gc.output(gc.relu(y + x), name="y")
    return g


def _hostile(g: gc.Graph, seed: int) -> dict[str, np.ndarray]:
    """Normal values with one in eight an edge value, and one image of zeros."""
    feeds = sprinkled_feeds(g, seed)
    if len(feeds["x"]):
        feeds["x"][0] = 0.0
    return feeds


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "geometry", [{}, {"groups": 2}, {"groups": 4}, {"dilation": 2, "padding": 2}]
)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_the_fused_block_gives_the_unfused_bits(n: int, geometry: dict, dtype: str) -> None:
    g = _block(n, dtype, geometry)
    assert "conv2d_fused" in [
        m.op for m in gc.fuse(gc.optimize(g, level=2), backend="numpy").op_nodes
    ]
    o0, o2 = gc.compile(g, opt_level=0), gc.compile(g, opt_level=2)
    for seed in range(2):
        feeds = _hostile(g, seed)
        with np.errstate(all="ignore"):
            assert_bits_equal([o2(**feeds)], [o0(**feeds)], f"n={n} {geometry} {dtype}")


def test_bits_hold_when_each_image_is_its_own_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _block(5, "float32", {})
    feeds = _hostile(g, 3)
    with np.errstate(all="ignore"):
        want = [gc.compile(g, opt_level=0)(**feeds)]
        monkeypatch.setattr(conv_kernels, "SCRATCH_BYTES", 1)
        assert_bits_equal([gc.compile(g, opt_level=2)(**feeds)], want, "one image per chunk")


@settings(max_examples=draws(60), derandomize=True, deadline=None)
@given(
    st.integers(0, 3), st.sampled_from([1, 2]), st.integers(2, 6), st.integers(2, 6),
    st.sampled_from([1, 2]), st.sampled_from([0, 1, (1, 0, 0, 2)]),
    st.sampled_from(["add", "mul", "maximum", "sub"]), st.sampled_from(["relu", "tanh", "abs"]),
    st.sampled_from([(1,), (3, 1, 1), (1, 3, 1, 1), "image", "whole", "row"]),
    st.sampled_from(["float32", "float64"]), st.integers(0, 2**16),
)  # fmt: skip
def test_random_bodies_keep_the_bits(
    n: int, groups: int, h: int, w: int, stride: int, padding: object, binary: str,
    unary: str, other: object, dtype: str, seed: int,
) -> None:  # fmt: skip
    """conv2d, then unary(binary(conv, other) * conv): the O2 plan (fused or not, as the
    pass decides) gives O0's bits on hostile values."""
    g = gc.Graph("g")
    try:
        with g:
            x = gc.placeholder("x", (n, 2, h, w), dtype)
            k = gc.placeholder("w", (3 * groups, 2 // groups, 2, 2), dtype)
            c = conv2d(x, k, stride=stride, padding=padding, groups=groups)
            shape = {"image": c.shape, "whole": (1, *c.shape[1:]), "row": c.shape[-1:]}
            o = gc.placeholder("o", shape.get(other, other), dtype)  # type: ignore[arg-type]
            gc.output(getattr(gc, unary)(getattr(gc, binary)(c, o) * c), name="y")
    except gc.ShapeError:
        return  # the window does not fit the input
    ops = [m.op for m in gc.fuse(gc.optimize(g, level=2), backend="numpy").op_nodes]
    assert "conv2d_fused" in ops and "conv2d" not in ops
    feeds = _hostile(g, seed) if n else {p.name: np.ones(p.type.shape, dtype) for p in g.inputs}
    with np.errstate(all="ignore"):
        want = [gc.compile(g, opt_level=0)(**feeds)]
        assert_bits_equal([gc.compile(g, opt_level=2)(**feeds)], want, str(g))


# -- scratch, backward, ONNX ----------------------------------------------------------------


def test_slots_reuse_dead_values_and_count_what_the_kernel_keeps() -> None:
    body = gc.fuse(gc.optimize(_block(2, "float32", {}), level=2), backend="numpy")
    fused = next(m for m in body.op_nodes if m.op == "conv2d_fused")
    slots = BodySlots(fused.attrs["body"])
    members = [m for m in fused.attrs["body"].op_nodes if not m.is_constant]
    # a chain of in-place ops needs one buffer for all but the root, which writes out
    assert len(members) >= 4 and slots.count == 1
    assert slots.root not in slots.slot


def test_a_traced_blocks_gradient_fuses_when_planned() -> None:
    """Differentiated first (a fused node has no gradient rule: fusion comes after every
    transformation), the block's gradient graph fuses when planned at O2, and gives O0's
    bits."""
    rng = np.random.default_rng(0)
    block = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3))
    block.eval()
    g = gc.trace(
        lambda x: gc.sum(gc.relu(block(x) + x) ** 2), gc.TensorSpec((2, 3, 5, 5), "float64")
    )
    grads = gc.gradients(g, wrt=[p.name for p in g.inputs])
    feeds = {p.name: rng.uniform(0.5, 1.5, p.type.shape).astype(p.type.dtype) for p in grads.inputs}
    fused = gc.compile(grads, opt_level=2, backend="numpy")
    planned = {m.op for m in fused.plan(**feeds).graph.op_nodes}
    assert planned & ops_with("fusion"), planned  # (the convolution has other readers here)
    want = gc.compile(grads, opt_level=0, backend="numpy")(**feeds)
    assert_bits_equal(fused(**feeds), list(want), "O2 against O0")


@pytest.mark.parametrize("returns", ["c", "o"])
def test_a_body_that_computes_nothing_returns_its_placeholder(returns: str) -> None:
    """A hand-written body may return the convolution or another input as it is."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((5, 2, 4, 4)), rng.standard_normal((3, 2, 3, 3))
    other = rng.standard_normal((5, 3, 2, 2))
    body = gc.Graph("body")
    with body:
        c = gc.placeholder("c", (5, 3, 2, 2), "float64")
        o = gc.placeholder("o", (5, 3, 2, 2), "float64")
        gc.output(c if returns == "c" else o, name="out")
    want = gc.conv2d(x, w) if returns == "c" else other
    np.testing.assert_array_equal(bind("conv2d_fused", x, w, other, body=body), want)


def test_slots_never_give_a_live_value_s_buffer_away() -> None:
    """b = a * a frees a's slot once, not twice: c must not share b's slot while b lives."""
    body = gc.Graph("body")
    with body:
        x = gc.placeholder("x", (4, 6), "float64")
        a = gc.exp(x)
        b = a * a
        c = gc.sin(x)
        gc.output(b + c, name="out")
    slots = BodySlots(body)
    ops = {n.op: n for n in body.op_nodes}
    assert slots.slot[ops["mul"]] != slots.slot[ops["sin"]]
    xs = np.random.default_rng(0).standard_normal((4, 6))
    out = np.empty_like(xs)
    run_body(body, slots, [np.empty(xs.size) for _ in slots.types], [xs], out)
    np.testing.assert_array_equal(out, np.exp(xs) * np.exp(xs) + np.sin(xs))
