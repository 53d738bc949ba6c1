"""fuse_one_hot_pick: sum(where(one_hot(labels), x, 0), axis=-1) as one `one_hot_pick` node
giving the chain's bits (nan, inf, -0.0 picks, one class, empty batches, symbolic N);
the cross-entropy head and its gradient at O2 give O0's bits; chains it cannot prove
exact stay as they are."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.backends.numpy import fusion as numpy_fusion
from graphc.backends.numpy.fusion.one_hot_pick import PICK_FROM
from tests.edge_values import assert_bits_equal, float_specials

RNG = np.random.default_rng(0)


def ops(graph: gc.Graph) -> list[str]:
    return [n.op for n in graph.op_nodes if n.op != "constant"]


def head(n: Any, classes: int, dtype: str = "float32") -> gc.Graph:
    """The cross-entropy loss and its gradient with respect to the logits."""
    g = gc.trace(gc.cross_entropy, gc.TensorSpec((n, classes), dtype), gc.TensorSpec((n,), "int64"))
    return gc.gradients(g, wrt=[g.inputs[0].name])


def o0_and_o2(graph: gc.Graph, feeds: dict[str, np.ndarray], backend: str = "numpy") -> None:
    """At O2 the graph holds one_hot_pick nodes and no where over the one-hot rows is
    summed; its results are O0's bits."""
    fused = gc.fuse(gc.optimize(graph, level=2), backend="numpy")
    assert "one_hot_pick" in ops(fused), fused
    assert "sum" not in ops(fused), fused
    with np.errstate(all="ignore"):  # the edge feeds overflow on purpose
        want = gc.compile(graph, opt_level=0, backend=backend)(**feeds)
        got = gc.compile(graph, opt_level=2, backend=backend)(**feeds)
    assert_bits_equal(got, list(want) if isinstance(want, tuple) else [want], str(fused))


# -- text in, text out ------------------------------------------------------------------------


def check_pass(before: str, expected: str) -> gc.Graph:
    """fuse_one_hot_pick turns `before` into `expected`, with the same bits on feeds whose
    labels are in range (passcheck's random feeds draw negative ones)."""
    graph = gc.parse(before)
    result = numpy_fusion.fuse_one_hot_pick(graph)
    gc.verify(result)
    assert str(result) == str(gc.parse(expected)), f"got:\n{result}"
    rng = np.random.default_rng(1)
    feeds = {}
    for p in graph.inputs:
        shape = tuple(3 if isinstance(d, str) else d for d in p.type.shape)
        if p.type.dtype.kind == "i":
            feeds[p.name] = rng.integers(0, 4, shape).astype(p.type.dtype)
        else:
            feeds[p.name] = rng.choice(float_specials(p.type.dtype), shape)
    assert_bits_equal(gc.run(result, feeds), gc.run(graph, feeds), str(result))
    return result


def test_the_losss_pick_becomes_one_node_and_its_where_goes() -> None:
    result = check_pass(
        """graph g(%x: f32[N,5], %y: i64[N]) {
          %h: bool[N,5] = one_hot(%y, num_classes=5, dtype=bool)
          %z: f32[] = constant(value=0.0)
          %w: f32[N,5] = where(%h, %x, %z)
          %s: f32[N] = sum(%w, axis=(1,), keepdims=False)
          output %out = %s
        }""",
        """graph g(%x: f32[N,5], %y: i64[N]) {
          %h: bool[N,5] = one_hot(%y, num_classes=5, dtype=bool)
          %z: f32[] = constant(value=0.0)
          %s: f32[N] = one_hot_pick(%x, %y, %z, num_classes=5, keepdims=False)
          output %out = %s
        }""",
    )  # fmt: skip
    assert str(gc.parse(str(result))) == str(result)
    assert str(gc.from_json(gc.to_json(result))) == str(result)
    assert [m[:2] for m in result.node("s").meta["members"]] == [("w", "where"), ("s", "sum")]


def test_a_where_read_elsewhere_stays_beside_the_pick() -> None:
    check_pass(
        """graph g(%c: f64[N,1], %y: i32[N]) {
          %h: bool[N,4] = one_hot(%y, num_classes=4, dtype=bool)
          %z: f64[] = constant(value=-0.0)
          %w: f64[N,4] = where(%h, %c, %z)
          %s: f64[N,1] = sum(%w, axis=(1,), keepdims=True)
          %d: f64[N,4] = sub(%w, %s)
          output %out = %d
        }""",
        """graph g(%c: f64[N,1], %y: i32[N]) {
          %h: bool[N,4] = one_hot(%y, num_classes=4, dtype=bool)
          %z: f64[] = constant(value=-0.0)
          %w: f64[N,4] = where(%h, %c, %z)
          %s: f64[N,1] = one_hot_pick(%c, %y, %z, num_classes=4, keepdims=True)
          %d: f64[N,4] = sub(%w, %s)
          output %out = %d
        }""",
    )  # fmt: skip


UNFUSED = {
    "a fill other than zero": (
        "%z: f32[] = constant(value=1.0)\n %w: f32[N,4] = where(%h, %x, %z)",
        "sum(%w, axis=(1,), keepdims=False)",
    ),
    "a fill that is not a constant": (
        "%z: f32[] = neg(%q)\n %w: f32[N,4] = where(%h, %x, %z)",
        "sum(%w, axis=(1,), keepdims=False)",
    ),
    "the fill and x swapped": (
        "%z: f32[] = constant(value=0.0)\n %w: f32[N,4] = where(%h, %z, %x)",
        "sum(%w, axis=(1,), keepdims=False)",
    ),
    "a sum over the batch axis": (
        "%z: f32[] = constant(value=0.0)\n %w: f32[N,4] = where(%h, %x, %z)",
        "sum(%w, axis=(0,), keepdims=False)",
    ),
}


@pytest.mark.parametrize("why", sorted(UNFUSED))
def test_chains_it_cannot_prove_exact_stay(why: str) -> None:
    where, total = UNFUSED[why]
    out = "f32[4]" if "axis=(0,)" in total else "f32[N]"
    text = f"""graph g(%x: f32[N,4], %y: i64[N], %q: f32[]) {{
      %h: bool[N,4] = one_hot(%y, num_classes=4, dtype=bool)
      {where}
      %s: {out} = {total}
      output %out = %s
    }}"""
    graph = gc.parse(text)
    assert str(numpy_fusion.fuse_one_hot_pick(graph)) == str(graph)


def test_an_integer_x_is_left_alone() -> None:
    graph = gc.trace(
        lambda x, y: gc.sum(gc.where(gc.one_hot(y, num_classes=4, dtype=bool), x, 0), axis=-1),
        gc.TensorSpec(("N", 4), "int32"),
        gc.TensorSpec(("N",), "int64"),
    )
    assert "one_hot_pick" not in ops(numpy_fusion.fuse_one_hot_pick(gc.optimize(graph)))


# -- the bits ---------------------------------------------------------------------------------


def pick_graph(classes: int, dtype: str, zero: float) -> gc.Graph:
    def pick(x: Any, y: Any) -> Any:
        hot = gc.one_hot(y, num_classes=classes, dtype=bool)
        fill = gc.constant(np.array(zero, dtype))
        return gc.sum(gc.where(hot, x, fill), axis=-1)

    return gc.trace(pick, gc.TensorSpec(("N", classes), dtype), gc.TensorSpec(("N",), "int64"))


@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize("classes", [1, 2, 9, 130])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_picks_of_edge_values_are_the_chains_bits(dtype: str, classes: int, zero: float) -> None:
    """A -0.0 picked sums as the unfused row does (numpy 2's sum starts from +0.0, so to
    +0.0 here); nan, inf and the largest floats stay."""
    specials = float_specials(np.dtype(dtype))
    x = RNG.choice(specials, size=(len(specials) * 3, classes)).astype(dtype)
    y = RNG.integers(0, classes, len(x))
    x[np.arange(len(specials)), y[: len(specials)]] = specials  # every special picked
    graph = pick_graph(classes, dtype, zero)
    o0_and_o2(graph, {"x": x, "y": y})
    rows = np.where(np.eye(classes, dtype=bool)[y], x, np.array(zero, dtype))
    assert_bits_equal(gc.compile(graph, opt_level=2)(x=x, y=y), [rows.sum(axis=-1)], "numpy")


def test_an_empty_batch_and_a_0d_label() -> None:
    graph = pick_graph(4, "float32", 0.0)
    o0_and_o2(graph, {"x": np.ones((0, 4), np.float32), "y": np.zeros(0, np.int64)})
    one = gc.trace(
        lambda x, y: gc.sum(
            gc.where(gc.one_hot(y, num_classes=PICK_FROM, dtype=bool), x, 0.0), axis=-1
        ),
        gc.TensorSpec((PICK_FROM,)),
        gc.TensorSpec((), "int64"),
    )
    x = np.linspace(-1.0, 1.0, PICK_FROM).astype(np.float32)
    x[1] = -0.0
    o0_and_o2(one, {"x": x, "y": np.array(1)})


@pytest.mark.parametrize("bad", [-1, 4])
def test_a_label_outside_the_classes_is_one_hots_error_at_every_level(bad: int) -> None:
    graph = gc.trace(gc.cross_entropy, gc.TensorSpec(("N", 4)), gc.TensorSpec(("N",), "int64"))
    x, y = np.zeros((3, 4), np.float32), np.array([0, bad, 1])
    for level in (0, 2):
        with pytest.raises(gc.IndexRangeError, match=f"one_hot: label {bad} is out of range"):
            gc.compile(graph, opt_level=level)(x, y)


def edge_logits(n: int, classes: int, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (3.0 * rng.standard_normal((n, classes))).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e30, -1e30, 88.0], dtype)
    x.flat[::11] = rng.choice(specials, size=x.flat[::11].shape)
    return x


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("n", "classes"), [(64, 10), (5, 1), (0, 7), (33, 300)])
def test_the_head_and_its_gradient_give_o0s_bits(n: int, classes: int, dtype: str) -> None:
    graph = head("N", classes, dtype)
    feeds = {"logits": edge_logits(n, classes, dtype, n), "labels": np.arange(n) % classes}
    o0_and_o2(graph, feeds)


def test_the_fused_gradient_group_reads_the_one_hot_rows_not_a_summed_copy() -> None:
    """The gradient's where (the seed at each label) joins the elementwise group: the
    head's (N, C) values are the log-probabilities, the one-hot mask and the gradient."""
    fused = gc.fuse(gc.optimize(head(4096, 1000), level=2), backend="numpy")
    wide = [n.op for n in fused.op_nodes if n.type.shape == (4096, 1000)]
    assert sorted(wide) == ["fused", "log_softmax", "one_hot"], fused


def test_the_gradient_matches_finite_differences_in_float64() -> None:
    rng = np.random.default_rng(3)
    logits, labels = rng.standard_normal((6, 5)), rng.integers(0, 5, 6)
    exe = gc.compile(head("N", 5, "float64"), opt_level=2)
    loss, grad = exe(logits, labels)
    eps = 1e-6
    numeric = np.zeros_like(logits)
    for index in np.ndindex(logits.shape):
        up, down = logits.copy(), logits.copy()
        up[index] += eps
        down[index] -= eps
        numeric[index] = (exe(up, labels)[0] - exe(down, labels)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_the_head_agrees_with_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    logits, labels = rng.standard_normal((16, 7)), rng.integers(0, 7, 16)
    loss, grad = gc.compile(head("N", 7, "float64"), opt_level=2)(logits, labels)
    t = torch.tensor(logits, requires_grad=True)
    want = torch.nn.functional.cross_entropy(t, torch.from_numpy(labels))
    (want_grad,) = torch.autograd.grad(want, [t])
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("x_shape", [("N", 5), ("N", 1), (1, 5), (5,), (), (2, "N", 5), (2, 1, 5)])
@pytest.mark.parametrize("labels_dtype", ["int64", "int8", "uint64"])
def test_a_broadcast_x_is_read_through_its_own_axes(x_shape: tuple, labels_dtype: str) -> None:
    labels_shape = (2, "N") if len(x_shape) == 3 else ("N",)

    def pick(x: Any, y: Any) -> Any:
        hot = gc.one_hot(y, num_classes=5, dtype=bool)
        return gc.sum(gc.where(hot, x, gc.constant(np.float64(0.0))), axis=-1, keepdims=True)

    graph = gc.trace(
        pick, gc.TensorSpec(x_shape, "float64"), gc.TensorSpec(labels_shape, labels_dtype)
    )
    specials = float_specials(np.dtype("float64"))

    def concrete(shape: tuple) -> tuple:
        return tuple(6 if d == "N" else d for d in shape)

    x = RNG.choice(specials, size=concrete(x_shape))
    y = RNG.integers(0, 5, concrete(labels_shape)).astype(labels_dtype)
    o0_and_o2(graph, {"x": x, "y": y})


def test_small_static_rows_stay_unfused() -> None:
    """Below PICK_FROM elements the where and sum steps cost less than the node's call."""
    assert PICK_FROM > 64 * 10
    small = gc.fuse(gc.optimize(head(64, 10), level=2), backend="numpy")
    assert "one_hot_pick" not in ops(small)
    assert ops(small).count("one_hot_pick") == 0 and "sum" in ops(small)
    large = gc.fuse(gc.optimize(head(64, 1000), level=2), backend="numpy")
    assert ops(large).count("one_hot_pick") == 2
