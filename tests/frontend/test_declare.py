"""The declare API and Python operators on graph values."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def affine_graph() -> gc.Graph:
    g = gc.Graph("affine")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        w = gc.placeholder("w", shape=(3, 2))
        b = gc.constant(np.array([0.5, -0.5], np.float32), name="b")
        y = gc.relu(x @ w + b)
        gc.output(gc.mean(y * y), name="loss")
    return g


def test_design_example_builds_and_runs() -> None:
    g = affine_graph()
    assert [p.name for p in g.inputs] == ["x", "w"]
    assert [o.name for o in g.outputs] == ["loss"]
    assert str(g.inputs[0].type) == "f32[B,3]"
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((5, 3)).astype(np.float32)
    wv = rng.standard_normal((3, 2)).astype(np.float32)
    y = np.maximum(xv @ wv + np.array([0.5, -0.5], np.float32), 0)
    np.testing.assert_allclose(g(x=xv, w=wv), np.mean(y * y), rtol=1e-6)
    np.testing.assert_allclose(g(xv, wv), np.mean(y * y), rtol=1e-6)


def test_printed_graph_is_readable() -> None:
    text = str(affine_graph())
    assert text.splitlines()[0] == "graph affine(%x: f32[B,3], %w: f32[3,2]) {"
    assert "  %matmul: f32[B,2] = matmul(%x, %w)" in text
    assert "  %mean: f32[] = mean(%mul, axis=None, keepdims=False)" in text
    assert "  output %loss = %mean" in text


def test_symbolic_dim_flows_through_types() -> None:
    g = affine_graph()
    types = {n.name: str(n.type) for n in g.nodes}
    assert types["add"] == "f32[B,2]"
    assert types["loss"] == "f32[]"


@pytest.mark.parametrize(
    ("expr", "reference"),
    [
        (lambda a, b: a + b, lambda a, b: a + b),
        (lambda a, b: a - b, lambda a, b: a - b),
        (lambda a, b: a * b, lambda a, b: a * b),
        (lambda a, b: a / (b * b + 1), lambda a, b: a / (b * b + 1)),
        (lambda a, b: (a * a) ** b, lambda a, b: (a * a) ** b),
        (lambda a, b: -a, lambda a, b: -a),
        (lambda a, b: 2.0 - a, lambda a, b: 2.0 - a),
        (lambda a, b: 1.0 / (1 + a * a), lambda a, b: 1.0 / (1 + a * a)),
        (lambda a, b: a < b, lambda a, b: a < b),
        (lambda a, b: a >= b, lambda a, b: a >= b),
        (lambda a, b: a == b, lambda a, b: a == b),
        (lambda a, b: a != b, lambda a, b: a != b),
        (lambda a, b: a[1:3, None], lambda a, b: a[1:3, None]),
        (lambda a, b: a[..., ::-1], lambda a, b: a[..., ::-1]),
        (lambda a, b: a.T, lambda a, b: a.T),
        (lambda a, b: a @ b.T, lambda a, b: a @ b.T),
        (lambda a, b: abs(a), lambda a, b: np.abs(a)),
        (lambda a, b: a.sum(axis=0), lambda a, b: a.sum(axis=0)),
    ],
)
def test_operators_match_numpy(expr, reference) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    av = rng.standard_normal((4, 3))
    bv = rng.standard_normal((4, 3))
    g = gc.Graph("ops")
    with g:
        a = gc.placeholder("a", shape=(4, 3), dtype="float64")
        b = gc.placeholder("b", shape=(4, 3), dtype="float64")
        gc.output(expr(a, b))
    np.testing.assert_allclose(g(av, bv), reference(av, bv), rtol=1e-12)


def test_value_properties() -> None:
    with gc.Graph("props"):
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        assert x.shape == ("B", 3)
        assert x.dtype == np.float64
        assert (x * 2).dtype == np.float64  # Python scalars are weak
        assert (x.T).shape == (3, "B")
        assert x[0].shape == (3,)


def test_python_scalar_keeps_float32() -> None:
    with gc.Graph("weak"):
        x = gc.placeholder("x", shape=(2,))
        assert (x * 2.5).dtype == np.float32
        assert (x + 1).dtype == np.float32


def test_strong_float64_array_promotes() -> None:
    with gc.Graph("strong"):
        x = gc.placeholder("x", shape=(2,))
        assert (x + np.ones(2)).dtype == np.float64


def test_constant_is_a_private_copy() -> None:
    value = np.ones(3, np.float32)
    g = gc.Graph("const")
    with g:
        c = gc.constant(value, name="c")
        gc.output(c * 2)
    value[:] = 7
    np.testing.assert_array_equal(g(), np.full(3, 2, np.float32))
    assert not g.node("c").value.flags.writeable


def test_graph_call_does_not_modify_inputs() -> None:
    g = affine_graph()
    xv = np.ones((2, 3), np.float32)
    wv = np.ones((3, 2), np.float32)
    before = (xv.copy(), wv.copy())
    g(x=xv, w=wv)
    np.testing.assert_array_equal(xv, before[0])
    np.testing.assert_array_equal(wv, before[1])


def test_outputs_are_fresh_arrays() -> None:
    g = gc.Graph("identity")
    with g:
        x = gc.placeholder("x", shape=(2,))
        gc.output(x)
    xv = np.ones(2, np.float32)
    out = g(xv)
    out[:] = 5
    np.testing.assert_array_equal(xv, np.ones(2, np.float32))


def test_several_outputs_return_a_tuple() -> None:
    g = gc.Graph("two")
    with g:
        x = gc.placeholder("x", shape=(2,))
        gc.output(x + 1, name="a")
        gc.output(x * 3, name="b")
    a, b = g(np.ones(2, np.float32))
    np.testing.assert_array_equal(a, [2, 2])
    np.testing.assert_array_equal(b, [3, 3])


def test_node_locations_name_the_user_line() -> None:
    g = gc.Graph("loc")
    with g:
        x = gc.placeholder("x", shape=(2,))
        y = gc.exp(x)  # this line
    assert y.node.loc is not None
    assert y.node.loc.startswith(__file__)
    line = int(y.node.loc.rsplit(":", 1)[1])
    with open(__file__) as source:
        assert "# this line" in source.readlines()[line - 1]


def test_ops_on_plain_arrays_compute_directly() -> None:
    np.testing.assert_allclose(gc.softmax(np.array([0.0, 0.0])), [0.5, 0.5])
    np.testing.assert_allclose(gc.add(np.ones(2), 1.0), [2.0, 2.0])


# -- what a TF1 or PyTensor user writes by hand ------------------------------------------


@pytest.mark.parametrize("name", [["x"], {"x": 1}, 3, "", None, b"x"])
def test_node_names_must_be_strings(name) -> None:  # type: ignore[no-untyped-def]
    # an unhashable name was a bare TypeError, an int a VerifyError, "" silently "out"
    with gc.Graph("names"):
        x = gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.GraphcError, match="placeholder: expected a non-empty str"):
            gc.placeholder(name, shape=(2,))
        if name is not None:
            with pytest.raises(gc.GraphcError, match="output: expected a non-empty str"):
                gc.output(x, name=name)
            with pytest.raises(gc.GraphcError, match="constant: expected a non-empty str"):
                gc.constant(1.0, name=name)


def test_placeholder_in_tf1_argument_order_says_so() -> None:
    with gc.Graph("tf1"), pytest.raises(gc.GraphcError, match="takes the dtype first"):
        gc.placeholder(np.float32, (None, 784))


def test_placeholder_none_dim_names_the_symbolic_spelling() -> None:
    # TF1's tf.placeholder(tf.float32, [None, 784]): graphc names unknown sizes
    with gc.Graph("mnist"):
        with pytest.raises(gc.ShapeError, match=r"placeholder 'x': dim 0 .* is None.*\('B', 3\)"):
            gc.placeholder("x", shape=(None, 784))
        with pytest.raises(gc.ShapeError, match="placeholder 'x': shape None"):
            gc.placeholder("x", shape=None)
        dims = iter(["B", 3])  # any iterable of dims, read once
        assert gc.placeholder("x", shape=dims).type.shape == ("B", 3)


def test_constant_keeps_the_dtype_of_typed_values() -> None:
    # as a traced np.float64 scalar and torch.tensor(np.float64(2)) do; only Python floats
    # (and lists of them) default to float32
    torch = pytest.importorskip("torch")
    with gc.Graph("consts"):
        assert gc.constant(np.float64(2.5)).dtype == np.float64
        assert gc.constant(torch.ones(2, dtype=torch.float64)).dtype == np.float64
        assert gc.constant(np.float16(1)).dtype == np.float16
        assert gc.constant(2.5).dtype == np.float32
        assert gc.constant([1.0, 2.0]).dtype == np.float32
        assert gc.constant(2.5, dtype="float64").dtype == np.float64


def test_constant_that_numpy_cannot_read_is_a_named_error() -> None:
    with gc.Graph("consts"):
        with pytest.raises(gc.DTypeError, match="constant 'k'.*300"):
            gc.constant([1, 300], name="k", dtype="int8")  # numpy: a bare OverflowError
        with pytest.raises(gc.DTypeError, match="constant: .*complex128"):
            gc.constant(1j)
        with pytest.raises(gc.DTypeError, match="constant: not a dtype"):
            gc.constant(1.0, dtype="floaty")


def test_reentering_a_graph_inside_another_leaves_the_other_open() -> None:
    # leaving the inner `with g:` removed g's outer entry, so g, not h, took the ops
    # declared next in h's block (TF1's nested as_default() keeps h)
    g, h = gc.Graph("g"), gc.Graph("h")
    with g:
        x = gc.placeholder("x", shape=(2,))
        with h:
            with g:
                gc.output(x * 2, name="doubled")
            c = gc.constant(np.float32(3), name="c")
            gc.output(c, name="three")
        gc.output(x + 1, name="plus")
    assert [o.name for o in h.outputs] == ["three"]
    assert [o.name for o in g.outputs] == ["doubled", "plus"]
    np.testing.assert_array_equal(h(), np.float32(3))
    doubled, plus = g(np.array([1, 2], np.float32))
    np.testing.assert_array_equal(doubled, [2, 4])
    np.testing.assert_array_equal(plus, [2, 3])


def test_placeholders_named_self_args_kwargs_are_fed_by_name() -> None:
    # g(self=...) was a TypeError: "got multiple values for argument 'self'"
    g = gc.Graph("keywords")
    with g:
        total = sum(gc.placeholder(name, shape=(2,)) for name in ("self", "args", "kwargs"))
        gc.output(total, name="y")
    v = np.array([1, 2], np.float32)
    np.testing.assert_array_equal(g(self=v, args=v, kwargs=v), 3 * v)


def test_constant_of_a_graph_value_says_it_is_no_data() -> None:
    # was a TracingError about converting a graph value to a numpy array
    with gc.Graph("consts"):
        x = gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.GraphcError, match="constant 'k': placeholder 'x' is a graph value"):
            gc.constant(x, name="k")


def test_output_of_a_list_asks_for_one_call_per_value() -> None:
    # gc.output([a, b]) was a TracingError from numpy reading the graph values as data
    with gc.Graph("outs"):
        x = gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.GraphcError, match="output: marks one value, got a list"):
            gc.output([x, x * 2])
