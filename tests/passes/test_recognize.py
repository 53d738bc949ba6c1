"""recognize_softmax (exact: bit for bit at O0 and in the O2 pipeline) and
recognize_layer_norm (value-changing: within rounding, fast_math only): graph text in,
text out, spellings that must not match, values on random and edge feeds, gradients."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.passes import recognize_layer_norm, recognize_softmax
from graphc.passes.report import PassLog
from tests.passes.passcheck import check_pass, edge_feeds, same_numbers

SOFTMAX = """graph g(%x: f32[B,5]) {
  %m: f32[B,1] = max(%x, axis=(1,), keepdims=True)
  %d: f32[B,5] = sub(%x, %m)
  %e: f32[B,5] = exp(%d)
  %s: f32[B,1] = sum(%e, axis=(1,), keepdims=True)
  %y: f32[B,5] = div(%e, %s)
  output %out = %y
}"""

SOFTMAX_OP = """graph g(%x: f32[B,5]) {
  %softmax: f32[B,5] = softmax(%x, axis=1)
  output %out = %softmax
}"""

# torch's TorchScript ONNX export of nn.LayerNorm at opset < 17, as imported
LAYER_NORM = """graph g(%x: f32[B,5], %w: f32[5], %b: f32[5]) {
  %m: f32[B,1] = mean(%x, axis=(1,), keepdims=True)
  %d: f32[B,5] = sub(%x, %m)
  %two: f32[] = constant(value=2.0)
  %q: f32[B,5] = pow(%d, %two)
  %v: f32[B,1] = mean(%q, axis=(1,), keepdims=True)
  %eps: f32[] = constant(value=1e-05)
  %a: f32[B,1] = add(%v, %eps)
  %r: f32[B,1] = sqrt(%a)
  %n: f32[B,5] = div(%d, %r)
  %s: f32[B,5] = mul(%n, %w)
  %y: f32[B,5] = add(%s, %b)
  output %out = %y
}"""

LAYER_NORM_OP = """graph g(%x: f32[B,5], %w: f32[5], %b: f32[5]) {
  %layer_norm_2: f32[B,5] = layer_norm(%x, %w, %b, axis=1, eps=1e-05)
  output %out = %layer_norm_2
}"""


def ops_of(g: gc.Graph) -> list[str]:
    return [n.op for n in g.op_nodes if n.op != "constant"]


def edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


# -- softmax -------------------------------------------------------------------------------


def test_softmax_spelled_out_becomes_the_op() -> None:
    log = PassLog("recognize_softmax")
    result = recognize_softmax(gc.parse(SOFTMAX), log=log)
    assert str(result) == str(gc.parse(SOFTMAX_OP))
    assert log.counts == {"exp(x - max(x)) / sum(exp(x - max(x))) -> softmax": 1}
    check_pass(recognize_softmax, SOFTMAX, SOFTMAX_OP)


def test_softmax_variants_that_match() -> None:
    # along axis 0 of a matrix; over the one axis of a vector (axis None)
    g = gc.Graph("axis0")
    with g:
        x = gc.placeholder("x", shape=(4, 3), dtype="float64")
        e = gc.exp(x - gc.max(x, axis=0, keepdims=True))
        gc.output(e / gc.sum(e, axis=0, keepdims=True), name="y")
    (node,) = recognize_softmax(g).op_nodes
    assert node.op == "softmax" and node.attrs["axis"] == 0
    g = gc.Graph("vector")
    with g:
        x = gc.placeholder("x", shape=(7,))
        # written twice: copies CSE has not merged count as the same exp
        top = gc.exp(x - gc.max(x, keepdims=True))
        bottom = gc.sum(gc.exp(x - gc.max(x, keepdims=True)), keepdims=True)
        gc.output(top / bottom, name="y")
    assert ops_of(recognize_softmax(g)) == ["softmax"]


@pytest.mark.parametrize(
    "old, new",
    [
        ("%s: f32[B,1] = sum(%e, axis=(1,)", "%s: f32[1,5] = sum(%e, axis=(0,)"),  # other axis
        ("%y: f32[B,5] = div(%e, %s)\n  output %out = %y", "%y: f32[B,5] = div(%e, %s)\n"
         "  output %out = %y\n  output %also = %e"),  # an intermediate used elsewhere
        ("%d: f32[B,5] = sub(%x, %m)", "%d: f32[B,5] = sub(%m, %x)"),  # max - x
        ("%e: f32[B,5] = exp(%d)", "%e: f32[B,5] = exp(%x)"),  # no max subtracted
    ],
)  # fmt: skip
def test_softmax_lookalikes_stay(old: str, new: str) -> None:
    g = gc.parse(edit(SOFTMAX, old, new))
    assert str(recognize_softmax(g)) == str(g)


def test_softmax_without_keepdims_stays() -> None:
    g = gc.parse("""graph g(%x: f32[5,5]) {
      %m: f32[5] = max(%x, axis=(1,), keepdims=False)
      %d: f32[5,5] = sub(%x, %m)
      %e: f32[5,5] = exp(%d)
      %s: f32[5,1] = sum(%e, axis=(1,), keepdims=True)
      %y: f32[5,5] = div(%e, %s)
      output %out = %y
    }""")
    assert str(recognize_softmax(g)) == str(g)


def bits(a: np.ndarray) -> np.ndarray:
    """a's values with every nan alike (nan payloads and signs are not compared)."""
    return np.where(np.isnan(a), np.nan, a)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_softmax_is_bit_for_bit(dtype: str) -> None:
    g = gc.parse(SOFTMAX.replace("f32", dtype))
    result = recognize_softmax(g)
    # numpy's kernels: its softmax does the spelled ops in their order. Native computes
    # exp and softmax by kernels of its own, each within its declared bound of numpy's
    # (tests/runtime/test_differential.py), so there the two spellings differ in bits
    spelled = gc.compile(g, opt_level=0, backend="numpy")
    fused = gc.compile(result, opt_level=0, backend="numpy")
    rng = np.random.default_rng(0)
    np_dtype = np.float32 if dtype == "f32" else np.float64
    feeds = [(rng.standard_normal((8, 5)) * 10.0**k).astype(np_dtype) for k in range(-3, 4)]
    feeds.append(edge_feeds(g, seed=1)["x"])  # nan, inf, -0.0, subnormals, the largest
    feeds.append(np.array([[np.inf, 1, 2, 3, 4], [-np.inf] * 5, [np.nan, 0, 0, 0, 0]], np_dtype))
    for x in feeds:
        with np.errstate(all="ignore"):  # inf - inf
            expected = bits(spelled(x=x))
            np.testing.assert_array_equal(bits(fused(x=x)), expected)
            np.testing.assert_array_equal(bits(gc.run(result, {"x": x})[0]), expected)


def test_softmax_over_an_empty_axis_gives_an_empty_result() -> None:
    """The spelled-out max of nothing raises; softmax of nothing is empty."""
    g = gc.parse(SOFTMAX.replace("5", "N"))
    x = np.zeros((3, 0), np.float32)
    with pytest.raises(gc.GraphcError):
        gc.compile(g, opt_level=0)(x=x)
    assert gc.compile(recognize_softmax(g), opt_level=0)(x=x).shape == (3, 0)


def test_softmax_gradients_still_work() -> None:
    rng = np.random.default_rng(2)
    weights = rng.standard_normal((3, 5)).astype(np.float32)  # sum(softmax) is constant
    x = rng.standard_normal((3, 5)).astype(np.float32)
    dx = []
    for graph in (gc.parse(SOFTMAX), recognize_softmax(gc.parse(SOFTMAX))):
        traced = gc.trace(lambda v, _g=graph: gc.sum(_g(v) * weights), gc.TensorSpec((3, 5)))
        joint = gc.gradients(traced, wrt=[traced.inputs[0].name])
        dx.append(gc.compile(joint)(x)[-1])
    np.testing.assert_allclose(dx[1], dx[0], rtol=1e-5, atol=1e-7)
    assert np.abs(dx[0]).max() > 0


def test_softmax_is_recognized_at_o2_only_and_bit_for_bit() -> None:
    g = gc.parse(SOFTMAX)
    assert "softmax" in ops_of(gc.optimize(g, level=2))
    assert "softmax" not in ops_of(gc.optimize(g, level=1))
    x = np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32) * 30
    np.testing.assert_array_equal(gc.compile(g, opt_level=2)(x=x), gc.compile(g, opt_level=0)(x=x))


# -- layer norm ----------------------------------------------------------------------------


def test_torch_onnx_layer_norm_becomes_the_op() -> None:
    log = PassLog("recognize_layer_norm")
    graph = gc.parse(LAYER_NORM)
    result = recognize_layer_norm(graph, log=log)
    gc.verify(result)
    assert str(result) == str(gc.parse(LAYER_NORM_OP))
    assert log.counts == {
        "(x - mean(x)) / sqrt(var(x) + eps) -> layer_norm [fast_math]": 1,
        "layer_norm(x, 1, 0) * g": 1,
        "layer_norm(x, w, 0) + b": 1,
    }
    same_numbers(graph, result, rtol=1e-5)


def spelled_norm(form: str, shape: tuple = (4, 6), axis: int = 1, dtype: str = "float32",
                 eps: float = 1e-5) -> gc.Graph:  # fmt: skip
    g = gc.Graph(form)
    with g:
        x = gc.placeholder("x", shape=shape, dtype=dtype)
        axes = tuple(range(axis, len(shape)))
        d = x - gc.mean(x, axis=axes, keepdims=True)
        e = np.array(eps, dtype)
        if form == "var":  # gc.var makes its own x - mean(x): two copies until CSE
            y = d / gc.sqrt(gc.var(x, axis=axes, keepdims=True) + e)
        elif form == "rsqrt":
            y = d * gc.rsqrt(gc.mean(d * d, axis=axes, keepdims=True) + e)
        elif form == "reciprocal":
            y = gc.reciprocal(gc.sqrt(gc.mean(d * d, axis=axes, keepdims=True) + e)) * d
        else:
            y = d / gc.sqrt(gc.mean(d * d, axis=axes, keepdims=True) + e)
        gc.output(y, name="y")
    return g


@pytest.mark.parametrize("form", ["div", "var", "rsqrt", "reciprocal"])
@pytest.mark.parametrize("shape, axis", [((4, 6), 1), ((2, 3, 4), 1), ((5,), 0)])
def test_layer_norm_variants_match(form: str, shape: tuple, axis: int) -> None:
    g = spelled_norm(form, shape, axis)
    result = recognize_layer_norm(g)
    (node,) = [n for n in result.op_nodes if n.op != "constant"]
    assert node.op == "layer_norm" and node.attrs == {"axis": axis, "eps": 1e-5}
    same_numbers(g, result, rtol=1e-5)


def test_layer_norm_keeps_its_eps() -> None:
    result = recognize_layer_norm(spelled_norm("div", eps=1e-3, dtype="float64"))
    (node,) = [n for n in result.op_nodes if n.op == "layer_norm"]
    assert node.attrs["eps"] == 1e-3


@pytest.mark.parametrize(
    "old, new",
    [
        # the means over another axis than the normalized one
        ("%m: f32[B,1] = mean(%x, axis=(1,)", "%m: f32[1,5] = mean(%x, axis=(0,)"),
        # an eps computed at run time, or a negative one
        ("%eps: f32[] = constant(value=1e-05)", "%eps: f32[] = sum(%w, axis=None, keepdims=False)"),
        ("constant(value=1e-05)", "constant(value=-1e-05)"),
        # squared by 3, not 2
        ("constant(value=2.0)", "constant(value=3.0)"),
        # an intermediate used elsewhere
        ("output %out = %y", "output %out = %y\n  output %dev = %d"),
    ],
)  # fmt: skip
def test_layer_norm_lookalikes_stay(old: str, new: str) -> None:
    g = gc.parse(edit(LAYER_NORM, old, new))
    assert "layer_norm" not in ops_of(recognize_layer_norm(g))


def test_layer_norm_without_keepdims_or_over_leading_dims_stays() -> None:
    g = gc.parse("""graph g(%x: f32[5,5]) {
      %m: f32[5] = mean(%x, axis=(1,), keepdims=False)
      %d: f32[5,5] = sub(%x, %m)
      %q: f32[5,5] = mul(%d, %d)
      %v: f32[5,1] = mean(%q, axis=(1,), keepdims=True)
      %eps: f32[] = constant(value=1e-05)
      %a: f32[5,1] = add(%v, %eps)
      %r: f32[5,1] = sqrt(%a)
      %y: f32[5,5] = div(%d, %r)
      output %out = %y
    }""")
    assert str(recognize_layer_norm(g)) == str(g)
    leading = spelled_norm("div", shape=(4, 6, 3), axis=1)  # axes (1, 2): trailing, matches
    assert "layer_norm" in ops_of(recognize_layer_norm(leading))
    g = gc.Graph("leading")
    with g:
        x = gc.placeholder("x", shape=(4, 6))
        d = x - gc.mean(x, axis=0, keepdims=True)  # over the leading dim: no layer_norm
        gc.output(d / gc.sqrt(gc.mean(d * d, axis=0, keepdims=True) + np.float32(1e-5)), "y")
    assert "layer_norm" not in ops_of(recognize_layer_norm(g))
    g = gc.Graph("variance_across")
    with g:
        x = gc.placeholder("x", shape=(5, 5))
        d = x - gc.mean(x, axis=1, keepdims=True)  # the variance over the other axis
        gc.output(d / gc.sqrt(gc.mean(d * d, axis=0, keepdims=True) + np.float32(1e-5)), "y")
    assert "layer_norm" not in ops_of(recognize_layer_norm(g))


def test_an_affine_step_of_another_dtype_is_not_absorbed() -> None:
    g = gc.parse(edit(LAYER_NORM, "%w: f32[5]", "%w: f64[5]").replace("%y: f32", "%y: f64")
                 .replace("%s: f32", "%s: f64"))  # fmt: skip
    result = recognize_layer_norm(g)
    assert ops_of(result) == ["layer_norm", "mul", "add"]
    same_numbers(g, result, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_values_within_rounding_and_not_bit_for_bit(dtype: str) -> None:
    g = spelled_norm("div", shape=(16, 64), dtype=dtype)
    spelled, fused = gc.compile(g, opt_level=0), gc.compile(recognize_layer_norm(g), opt_level=0)
    rng = np.random.default_rng(5)
    differ = 0
    for k in (-3, 0, 3, 15):
        x = (rng.standard_normal((16, 64)) * 10.0**k + 10.0**k).astype(dtype)
        a, b = spelled(x=x), fused(x=x)
        np.testing.assert_allclose(b, a, rtol=2e-5 if dtype == "float32" else 1e-12, atol=1e-6)
        differ += not np.array_equal(a, b)
    assert differ  # which is why it runs only with fast_math


def test_layer_norm_at_the_edges() -> None:
    g = spelled_norm("div", shape=(6, 5))
    spelled, fused = gc.compile(g, opt_level=0), gc.compile(recognize_layer_norm(g), opt_level=0)
    x = edge_feeds(g, seed=3)["x"]  # nan, inf, the largest float32 (whose square is inf)
    x[0] = [1e30, -1e30, 3e29, 0, 1]  # large magnitudes: the variance overflows in both
    with np.errstate(all="ignore"):
        a, b = spelled(x=x), fused(x=x)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    empty = spelled_norm("div", shape=("B", "N"))
    with np.errstate(all="ignore"):
        x = np.zeros((3, 0), np.float32)
        assert gc.compile(recognize_layer_norm(empty))(x=x).shape == (3, 0)


def test_layer_norm_gradients_still_work() -> None:
    g = gc.parse(LAYER_NORM)
    result = recognize_layer_norm(g)
    rng = np.random.default_rng(6)
    feeds = {"x": rng.standard_normal((3, 5)), "w": rng.standard_normal(5),
             "b": rng.standard_normal(5)}  # fmt: skip
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    weights = rng.standard_normal((3, 5)).astype(np.float32)
    grads = []
    for graph in (g, result):
        spec = [gc.TensorSpec(v.shape) for v in feeds.values()]
        traced = gc.trace(lambda x, w, b, _g=graph: gc.sum(_g(x, w, b) * weights), *spec)
        joint = gc.gradients(traced, wrt=[p.name for p in traced.inputs])
        grads.append(gc.compile(joint)(*feeds.values())[1:])
    for spelled, fused in zip(*grads):
        np.testing.assert_allclose(fused, spelled, rtol=1e-4, atol=1e-5)


def test_layer_norm_is_recognized_with_fast_math_only_and_tagged() -> None:
    g = gc.parse(LAYER_NORM)
    for level in (1, 2):
        assert "layer_norm" not in ops_of(gc.optimize(g, level=level))
    result, report = gc.optimize(g, level=2, explain=True, fast_math=True)
    assert "layer_norm" in ops_of(result)
    assert report.value_changing == ["(x - mean(x)) / sqrt(var(x) + eps) -> layer_norm [fast_math]"]
    exe = gc.compile(g, fast_math=True)
    assert "fired: (x - mean(x)) / sqrt(var(x) + eps) -> layer_norm [fast_math]" in (
        exe.explain(
            x=np.zeros((2, 5), np.float32), w=np.ones(5, np.float32), b=np.zeros(5, np.float32)
        )  # fmt: skip
    )


AFFINE = """graph g(%x: f32[B,5], %w: f32[5], %b: f32[5]) {
  %one: f32[] = constant(value=1.0)
  %zero: f32[] = constant(value=0.0)
  %n: f32[B,5] = layer_norm(%x, %one, %zero, axis=1, eps=1e-05)
  %s: f32[B,5] = mul(%n, %w)
  %y: f32[B,5] = add(%s, %b)
  output %out = %y
}"""


def test_absorbing_the_affine_step_is_bit_for_bit() -> None:
    g = gc.parse(AFFINE)
    result = recognize_layer_norm(g)
    assert ops_of(result) == ["layer_norm"]
    spelled, fused = gc.compile(g, opt_level=0), gc.compile(result, opt_level=0)
    x = edge_feeds(g, seed=4)["x"]
    x[0] = [1, 2, 3, 4, 5]  # 3 is the mean: +0.0, times a negative weight: -0.0
    w = np.array([-1, -2, -3, 0.5, -0.0], np.float32)
    for b in (np.array([-0.0, 0.0, -0.0, 1, -1], np.float32), edge_feeds(g, seed=5)["b"]):
        with np.errstate(all="ignore"):
            expected, actual = spelled(x=x, w=w, b=b), fused(x=x, w=w, b=b)
        same = (expected.view(np.uint32) == actual.view(np.uint32)) | (
            np.isnan(expected) & np.isnan(actual)
        )
        assert same.all(), (expected, actual)


def test_a_one_element_bias_is_not_absorbed() -> None:
    """The kernel skips a bias equal to 0: a +0.0 the graph adds to -0.0 would be lost."""
    g = gc.parse(AFFINE.replace("%b: f32[5]", "%b: f32[1]"))
    assert ops_of(recognize_layer_norm(g)) == ["layer_norm", "add"]


@pytest.mark.parametrize(
    ("axes", "eps"),
    [((), np.float32(1e-5)), ((-1,), np.array(True)), ((-1,), np.int64(1))],
    ids=["mean over no axis", "bool eps", "integer eps"],
)
def test_layer_norm_lookalikes_that_do_not_fit_are_declined(axes: tuple, eps: object) -> None:
    """A mean over no axis is the identity and an eps that is not a float is not
    layer_norm's: the pass leaves them (it raised IndexError and ValueError on them)."""

    def spelled(x: object) -> object:
        d = x - gc.mean(x, axis=axes, keepdims=True)
        return d / gc.sqrt(gc.mean(d * d, axis=axes, keepdims=True) + eps)

    g = gc.trace(spelled, gc.TensorSpec(("B", 3), "float32"))
    assert "layer_norm" not in str(recognize_layer_norm(g))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    with np.errstate(all="ignore"):
        got = gc.compile(g, opt_level=2, fast_math=True)(x)
        want = gc.compile(g, opt_level=0)(x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("short", ["bf16", "f16"])
def test_16_bit_softmax_and_affine_steps_stay_spelled_out(short: str) -> None:
    """The fused kernels compute 16-bit floats in float32 and round once; the spelled-out
    ops round each result, so fusing them would change O2's bits."""
    if short == "bf16":
        pytest.importorskip("ml_dtypes")
    softmax = gc.parse(SOFTMAX.replace("f32", short))
    assert "softmax" not in ops_of(gc.optimize(softmax, level=2))
    affine = gc.parse(AFFINE.replace("f32", short))
    assert ops_of(recognize_layer_norm(affine)) == ops_of(affine)
    x = (np.random.default_rng(5).standard_normal((8, 5)) * 30).astype(softmax.inputs[0].type.dtype)
    (want,), (got,) = gc.run(softmax, {"x": x}), gc.run(gc.optimize(softmax, 2), {"x": x})
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
