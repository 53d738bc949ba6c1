"""fuse_conv_epilogue: conv2d + per-channel bias + activation as one conv2d_epilogue node,
bit for bit with the unfused graph (nan, inf, -0.0 included), as text, JSON and backward."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends.numpy import fusion as numpy_fusion
from graphc.ops import conv_kernels
from graphc.ops.conv_ops import conv2d
from graphc.passes.report import PassLog
from tests.budget import draws
from tests.edge_values import assert_bits_equal, float_specials
from tests.passes.passcheck import check_pass

BEFORE = """graph g(%x: f64[B,2,5,5], %w: f64[3,2,3,3], %b: f64[3]) {
  %c: f64[B,3,5,5] = conv2d(%x, %w, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
  %r: f64[3,1,1] = reshape(%b, shape=(3, 1, 1))
  %a: f64[B,3,5,5] = add(%c, %r)
  %y: f64[B,3,5,5] = ACT(%a)
  output %out = %y
}"""


@pytest.mark.parametrize("act", ["relu", "tanh", "sigmoid", "gelu"])
def test_conv_bias_activation_becomes_one_node(act: str) -> None:
    after = f"""graph g(%x: f64[B,2,5,5], %w: f64[3,2,3,3], %b: f64[3]) {{
      %r: f64[3,1,1] = reshape(%b, shape=(3, 1, 1))
      %y: f64[B,3,5,5] = conv2d_epilogue(%x, %w, %r, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1, bias=True, activation="{act}")
      output %out = %y
    }}"""  # fmt: skip
    result = check_pass(numpy_fusion.fuse_conv_epilogue, BEFORE.replace("ACT", act), after)
    assert str(gc.parse(str(result))) == str(result)
    assert str(gc.from_json(gc.to_json(result))) == str(result)
    node = result.node("y")
    assert [m[:2] for m in node.meta["members"]] == [("c", "conv2d"), ("a", "add"), ("y", act)]


def test_bias_alone_activation_alone_and_the_bias_on_the_left() -> None:
    check_pass(
        numpy_fusion.fuse_conv_epilogue,
        """graph g(%x: f32[1,2,4,4], %w: f32[3,2,3,3]) {
          %c: f32[1,3,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
          %s: f32[1,3,2,2] = sigmoid(%c)
          output %y = %s
        }""",
        """graph g(%x: f32[1,2,4,4], %w: f32[3,2,3,3]) {
          %s: f32[1,3,2,2] = conv2d_epilogue(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, bias=False, activation="sigmoid")
          output %y = %s
        }""",
    )  # fmt: skip
    check_pass(
        numpy_fusion.fuse_conv_epilogue,
        """graph g(%x: f32[1,2,4,4], %w: f32[3,2,3,3], %b: f32[3,1,1]) {
          %c: f32[1,3,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
          %a: f32[1,3,2,2] = add(%b, %c)
          %n: f32[1,3,2,2] = neg(%a)
          output %y = %n
        }""",
        """graph g(%x: f32[1,2,4,4], %w: f32[3,2,3,3], %b: f32[3,1,1]) {
          %a: f32[1,3,2,2] = conv2d_epilogue(%x, %w, %b, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, bias=True, activation=None)
          %n: f32[1,3,2,2] = neg(%a)
          output %y = %n
        }""",
    )  # fmt: skip


LEFT_ALONE = {
    # the bias varies along the width: it cannot be added image chunk by chunk per channel
    "bias along the width": ("%b: f32[2]", "add(%c, %b)", ""),
    # a bias per image
    "bias per image": ("%b: f32[2,1,1,1]", "add(%c, %b)", ""),
    # a float64 bias widens the float32 convolution: the add's type is not the product's
    "widening bias": ("%b: f64[3,1,1]", "add(%c, %b)", "f64"),
    # the convolution is read elsewhere too
    "shared product": ("%b: f32[3,1,1]", "add(%c, %b)", "shared"),
}


@pytest.mark.parametrize("name", list(LEFT_ALONE))
def test_chains_the_kernel_cannot_take_are_left_alone(name: str) -> None:
    bias, add, how = LEFT_ALONE[name]
    t = "f64" if how == "f64" else "f32"
    shared = "output %z = %c" if how == "shared" else ""
    text = f"""graph g(%x: f32[2,2,4,4], %w: f32[3,2,3,3], {bias}) {{
      %c: f32[2,3,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
      %a: {t}[2,3,2,2] = {add}
      output %y = %a
      {shared}
    }}"""  # fmt: skip
    check_pass(numpy_fusion.fuse_conv_epilogue, text, text)


def test_other_activations_and_transposed_convolutions_stay() -> None:
    text = """graph g(%x: f32[1,2,4,4], %w: f32[2,3,3,3], %b: f32[3,1,1]) {
      %c: f32[1,3,6,6] = conv_transpose2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1)
      %a: f32[1,3,6,6] = add(%c, %b)
      %r: f32[1,3,6,6] = relu(%a)
      output %y = %r
    }"""  # fmt: skip
    check_pass(numpy_fusion.fuse_conv_epilogue, text, text)
    log = PassLog("fuse_conv_epilogue")
    g = gc.parse("""graph g(%x: f32[1,2,4,4], %w: f32[3,2,3,3], %b: f32[3,1,1]) {
      %c: f32[1,3,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
      %a: f32[1,3,2,2] = add(%c, %b)
      %e: f32[1,3,2,2] = silu(%a)
      output %y = %e
    }""")  # fmt: skip
    result = numpy_fusion.fuse_conv_epilogue(g, log=log)
    assert [n.op for n in result.op_nodes] == ["conv2d_epilogue", "silu"]
    assert log.notes == ["'a' <- conv2d -> add"]


# -- bit for bit ----------------------------------------------------------------------------

GEOMETRIES = {
    "windows": ((4, 3, 9, 9), (5, 3, 3, 3), {"padding": 1}),
    "depthwise": ((3, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "stride": 2}),
    "taps": ((3, 2, 4, 4), (3, 2, 4, 4), {}),  # the kernel covers the input: (image, taps) buffer
    "groups": ((2, 4, 7, 5), (6, 2, 2, 3), {"groups": 2, "dilation": (2, 1), "padding": (1, 0, 0, 2)}),
}  # fmt: skip


def _graph(geometry: str, act: str | None, dtype: str) -> gc.Graph:
    xs, ws, attrs = GEOMETRIES[geometry]
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", xs, dtype)
        w = gc.placeholder("w", ws, dtype)
        b = gc.placeholder("b", (ws[0],), dtype)
        y = conv2d(x, w, **attrs) + gc.reshape(b, (-1, 1, 1))
        gc.output(y if act is None else getattr(gc, act)(y), name="y")
    return g


def _hostile(g: gc.Graph, seed: int) -> dict[str, np.ndarray]:
    """Normal values with one in ten an edge value (nan, inf, -0.0, subnormals, the
    largest finite), the bias half edge values, and one image of zeros (0 * w is -0.0
    where w < 0, so the bias decides the sign of zero)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in g.inputs:
        specials = float_specials(p.type.dtype)
        a = rng.standard_normal(p.type.shape).astype(p.type.dtype)
        mask = rng.random(a.shape) < (0.5 if p.name == "b" else 0.1)
        a[mask] = rng.choice(specials, int(mask.sum()))
        feeds[p.name] = a
    feeds["x"][0] = 0.0
    feeds["b"][0] = -0.0
    return feeds


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", [None, "relu", "tanh", "sigmoid", "gelu"])
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_fused_gives_the_unfused_bits(geometry: str, act: str | None, dtype: str) -> None:
    g = _graph(geometry, act, dtype)
    fused = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    assert [n.op for n in fused.op_nodes] == ["reshape", "conv2d_epilogue"]
    unfused = gc.compile(g, opt_level=0)
    o2 = gc.compile(g, opt_level=2)
    assert "kernel_conv2d_epilogue" in o2.source()
    for seed in range(3):
        feeds = _hostile(g, seed)
        with np.errstate(all="ignore"):
            want = [unfused(**feeds)]
            assert_bits_equal([o2(**feeds)], want, f"O2 {geometry} {act} {dtype}")
            assert_bits_equal(gc.run(fused, feeds), want, f"interpreter {geometry} {act}")


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_bits_hold_when_the_batch_runs_in_several_chunks(
    act: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The epilogue runs on each chunk of images as it is finished: one image per chunk
    here (the forward buffer's chunking does not change the convolution's own bits)."""
    g = _graph("windows", act, "float32")
    feeds = _hostile(g, 7)
    with np.errstate(all="ignore"):
        want = [gc.compile(g, opt_level=0)(**feeds)]
        monkeypatch.setattr(conv_kernels, "SCRATCH_BYTES", 1)
        assert_bits_equal([gc.compile(g, opt_level=2)(**feeds)], want, "one image per chunk")


def test_a_traced_conv_layer_fuses_at_o2_and_differentiates() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal(4)

    def layer(x: object, w: object, b: object) -> object:
        return gc.relu(gc.conv2d(x, w, b, padding=1))

    g = gc.trace(layer, gc.TensorSpec((2, 3, 6, 6), "float64"), w, b)
    fused = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    assert [n.op for n in fused.op_nodes] == ["reshape", "conv2d_epilogue"]
    # differentiated before fusion (the fused node has no gradient rule), the gradient
    # graph fuses its forward layer when planned at O2, with O0's bits
    specs = [gc.TensorSpec(p.type.shape, p.type.dtype) for p in g.inputs]
    loss = gc.trace(lambda x, w, b: gc.sum(g(x, w, b) ** 2), *specs)
    grads = gc.gradients(loss, wrt=["x", "w", "b"])
    feeds = {"x": rng.standard_normal((2, 3, 6, 6)), "w": w, "b": b}
    exe = gc.compile(grads, opt_level=2, backend="numpy")
    assert "conv2d_epilogue" in [n.op for n in exe.plan(**feeds).graph.op_nodes]
    want = gc.compile(grads, opt_level=0, backend="numpy")(**feeds)
    for got, expected in zip(exe(**feeds), want):
        np.testing.assert_array_equal(got, expected)


def test_type_rule_refuses_a_bias_that_is_not_per_channel() -> None:
    text = """graph g(%x: f32[1,2,4,4], %w: f32[3,2,3,3], %b: f32[2]) {
      %y: f32[1,3,2,2] = conv2d_epilogue(%x, %w, %b, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, bias=True, activation=None)
      output %o = %y
    }"""  # fmt: skip
    with pytest.raises(gc.ParseError, match="per channel"):
        gc.parse(text)


@settings(max_examples=draws(80), derandomize=True, deadline=None)
@given(
    st.integers(0, 3), st.sampled_from([1, 2, 3]), st.integers(1, 3), st.integers(1, 7),
    st.integers(1, 7), st.integers(1, 3), st.integers(1, 3), st.sampled_from([1, 2, (2, 1)]),
    st.sampled_from([0, 1, (1, 0, 0, 2)]), st.sampled_from([1, 2, (1, 2)]),
    st.sampled_from([None, "relu", "tanh", "sigmoid", "gelu"]),
    st.sampled_from(["float32", "float64"]), st.integers(0, 2**16),
)  # fmt: skip
def test_random_geometries_keep_the_bits(
    n: int, groups: int, per_group: int, h: int, w: int, kh: int, kw: int, stride: object,
    padding: object, dilation: object, act: str | None, dtype: str, seed: int,
) -> None:  # fmt: skip
    """Any convolution geometry (empty batches, depthwise, strided, dilated, padded), any
    activation: the fused graph at O2 gives O0's bits on hostile feeds."""
    channels, out = groups * per_group, groups * 2
    g = gc.Graph("g")
    try:
        with g:
            x = gc.placeholder("x", (n, channels, h, w), dtype)
            k = gc.placeholder("w", (out, per_group, kh, kw), dtype)
            b = gc.placeholder("b", (out,), dtype)
            attrs = {"stride": stride, "padding": padding, "dilation": dilation}
            y = conv2d(x, k, groups=groups, **attrs) + gc.reshape(b, (-1, 1, 1))
            gc.output(y if act is None else getattr(gc, act)(y), name="y")
    except gc.ShapeError:
        return  # the window does not fit the input
    assert "conv2d_epilogue" in [
        n.op for n in gc.fuse(gc.optimize(g, level=2), backend="numpy").op_nodes
    ]
    feeds = _hostile(g, seed) if n else _hostile_empty(g, seed)
    with np.errstate(all="ignore"):
        want = [gc.compile(g, opt_level=0)(**feeds)]
        assert_bits_equal([gc.compile(g, opt_level=2)(**feeds)], want, str(g))


def _hostile_empty(g: gc.Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {p.name: rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in g.inputs}
