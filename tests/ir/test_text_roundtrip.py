"""Text form: print(graph) is read back by gc.parse into a graph that prints the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import graphc as gc
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs


def affine() -> gc.Graph:
    g = gc.Graph("affine")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        w = gc.placeholder("w", shape=(3, 2))
        b = gc.constant(np.array([0.5, -1.25], np.float32), name="b")
        y = gc.relu(x @ w + b)
        gc.output(gc.mean(y * y), name="loss")
    return g


def assorted() -> gc.Graph:
    """Every kind of attribute literal the printer can write."""
    g = gc.Graph("assorted attrs")  # not an identifier: printed quoted
    with g:
        x = gc.placeholder("x", shape=("B", 4), dtype="float64")
        w = gc.placeholder("fc1.weight", shape=(4, 3), dtype="float64")
        m = gc.placeholder("a mask", shape=(1,), dtype="bool")
        big = gc.constant(np.linspace(-1, 1, 40).reshape(4, 10), name="big")
        y = gc.cast(x @ w, "float32")[:, None, 1:3]
        gc.output(gc.sum(y, axis=(0, 2), keepdims=True), name="y_sum")
        gc.output(gc.transpose(big, (1, 0)).reshape((10, 4)) * float("nan"), name="y_nan")
        gc.output(gc.clip(x, -np.inf, 1e-5), name="y_clip")
        gc.output(gc.where(m, gc.constant(np.array([[True], [False]])), False), name="y_where")
        gc.output(gc.constant(np.zeros((2, 0), np.float32)), name="y_empty")
        gc.output(
            gc.constant(np.array([-0.0, 1e300, 3], np.float64), name="floats"), name="y_floats"
        )
        gc.output(gc.constant(np.array([[1, -2]], np.int64), name="ints"), name="y_ints")
    return g


HAND_WRITTEN = """\
graph affine(%x: f32[B,3], %w: f32[3,2]) {
  %b: f32[2] = constant(value=[0.5, -1.25])
  %matmul: f32[B,2] = matmul(%x, %w)
  %add: f32[B,2] = add(%matmul, %b)
  %y: f32[B,2] = relu(%add)
  %mul: f32[B,2] = mul(%y, %y)
  %mean: f32[] = mean(%mul, axis=None, keepdims=False)
  output %loss = %mean
}"""


def test_print_is_the_documented_text() -> None:
    assert str(affine()) == HAND_WRITTEN


def test_parse_hand_written_text_prints_it_back() -> None:
    g = gc.parse(HAND_WRITTEN)
    assert str(g) == HAND_WRITTEN
    assert [p.name for p in g.inputs] == ["x", "w"]
    assert g.inputs[0].type == gc.TensorType(("B", 3), "float32")
    assert [o.name for o in g.outputs] == ["loss"]
    gc.verify(g)


@pytest.mark.parametrize("build", [affine, assorted])
def test_round_trip_prints_the_same_and_computes_the_same(build: object) -> None:
    g = build()  # type: ignore[operator]
    g2 = gc.parse(str(g))
    assert str(g2) == str(g)
    assert g2.name == g.name
    gc.verify(g2)
    feeds = random_feeds(g, seed=1)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b, err_msg=str(g))


def test_constants_come_back_bit_exact_and_read_only() -> None:
    g2 = gc.parse(str(assorted()))
    big = g2.node("big").value
    np.testing.assert_array_equal(big, np.linspace(-1, 1, 40).reshape(4, 10))
    assert not big.flags.writeable
    floats = g2.node("floats").value
    assert np.signbit(floats[0]) and floats[1] == 1e300
    assert g2.node("ints").value.dtype == np.int64


def test_float32_constants_round_trip_bit_exact() -> None:
    values = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    g = gc.Graph("f32")
    with g:
        gc.output(gc.constant(values, name="c"), name="y")
    back = gc.parse(str(g)).node("c").value
    assert back.dtype == np.float32
    assert back.tobytes() == values.tobytes()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_small_constants_keep_a_nans_sign_and_payload(dtype: str) -> None:
    """The literal nan reads back as numpy's quiet NaN: a small constant holding -nan or
    a NaN with a payload is printed as b64 instead, so its bits come back; a plain nan
    stays readable."""
    unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
    quiet = np.array(np.nan, dtype).view(unsigned)
    odd = np.array([quiet | 1, quiet | (quiet >> 2)], unsigned)  # payloads
    values = np.concatenate([np.array([-np.nan, np.nan, -0.0, 1.5], dtype), odd.view(dtype)])
    g = gc.Graph("nans")
    with g:
        gc.output(gc.constant(values, name="c"), name="y")
        gc.output(gc.constant(np.array([np.nan, 2.0], dtype), name="plain"), name="z")
    text = str(g)
    back = gc.parse(text)
    assert back.node("c").value.tobytes() == values.tobytes()
    assert "value=[nan, 2.0]" in text and str(back) == text


def test_blank_lines_and_comments_are_ignored() -> None:
    text = "# a comment\n\n" + HAND_WRITTEN.replace("\n  %mul", "\n\n  # square\n  %mul") + "\n\n"
    assert str(gc.parse(text)) == HAND_WRITTEN


def test_calling_a_parsed_graph_works_like_the_original() -> None:
    g = affine()
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_array_equal(gc.parse(str(g))(x, w), g(x, w))


@settings(max_examples=draws(25))
@given(random_graphs())
def test_random_graphs_round_trip(g: gc.Graph) -> None:
    text = str(g)
    g2 = gc.parse(text)
    assert str(g2) == text
    feeds = random_feeds(g, seed=0)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        np.testing.assert_array_equal(a, b, err_msg=text)


@settings(max_examples=draws(10))
@given(random_graphs(min_ops=5, max_ops=10, dtype="float32"))
def test_random_float32_graphs_round_trip(g: gc.Graph) -> None:
    g2 = gc.parse(str(g))
    assert str(g2) == str(g)
    feeds = random_feeds(g, seed=3)
    for a, b in zip(gc.run(g, feeds), gc.run(g2, feeds)):
        assert a.dtype == np.float32, str(g)
        np.testing.assert_array_equal(a, b, err_msg=str(g))
