"""gc.trace: specs, placeholder and output naming, source locations, control-flow errors."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import OP


def affine(x, w, b):
    return gc.relu(x @ w + b)


def test_placeholders_are_named_after_the_parameters() -> None:
    g = gc.trace(affine, gc.TensorSpec(("B", 3)), gc.TensorSpec((3, 2)), np.zeros(2, np.float32))
    assert [p.name for p in g.inputs] == ["x", "w", "b"]
    assert [str(p.type) for p in g.inputs] == ["f32[B,3]", "f32[3,2]", "f32[2]"]
    assert g.name == "affine"
    gc.verify(g)


def test_none_in_a_shape_is_a_fresh_symbolic_dim() -> None:
    g = gc.trace(lambda x, y: (x, y), gc.TensorSpec((None, 3)), gc.TensorSpec((None, None)))
    dims = [d for p in g.inputs for d in p.type.shape if isinstance(d, str)]
    assert len(dims) == len(set(dims)) == 3


def test_an_example_array_gives_its_shape_and_dtype() -> None:
    g = gc.trace(lambda n: n + 1, np.arange(6).reshape(2, 3))
    assert str(g.inputs[0].type) == "i64[2,3]"


def test_a_spec_that_is_neither_a_spec_nor_an_array_is_refused() -> None:
    with pytest.raises(gc.GraphcError, match="input 'x'"):
        gc.trace(lambda x: x, object())


def test_a_spec_count_that_does_not_fit_the_function_is_refused() -> None:
    def affine(x, w):
        return x @ w

    with pytest.raises(gc.TracingError, match="affine.*1 input"):
        gc.trace(affine, gc.TensorSpec((2, 3)))
    with pytest.raises(gc.TracingError, match="affine.*3 input"):
        gc.trace(affine, *[gc.TensorSpec((3, 3))] * 3)


def test_star_args_are_numbered() -> None:
    def total(*xs):
        return gc.concat(list(xs))

    g = gc.trace(total, *(gc.TensorSpec((2,)) for _ in range(3)))
    assert [p.name for p in g.inputs] == ["xs_0", "xs_1", "xs_2"]


@pytest.mark.parametrize(
    ("fn", "names"),
    [
        (lambda x: x * 2, ["out"]),
        (lambda x: (x * 2, x + 1), ["out", "out_1"]),
        (lambda x: [x * 2, x + 1, x], ["out", "out_1", "out_2"]),
        (lambda x: {"double": x * 2, "next": x + 1}, ["double", "next"]),
    ],
    ids=["one", "tuple", "list", "dict"],
)
def test_outputs_follow_what_the_function_returns(fn, names) -> None:
    g = gc.trace(fn, gc.TensorSpec((3,)))
    assert [o.name for o in g.outputs] == names
    x = np.array([1.0, 2.0, 3.0], np.float32)
    results = gc.run(g, {"x": x})
    expected = fn(x)
    expected = list(expected.values()) if isinstance(expected, dict) else expected
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


def test_returning_a_plain_value_outputs_a_constant() -> None:
    g = gc.trace(lambda x: (x, np.arange(3), 2.5), gc.TensorSpec((3,)))
    outs = g(np.ones(3, np.float32))
    np.testing.assert_array_equal(outs[1], np.arange(3))
    assert outs[2].dtype == np.float32 and float(outs[2]) == 2.5


def test_a_scalar_read_again_reuses_its_constant() -> None:
    """One constant per scalar value, dtype and name scope (not one per use, for CSE to
    merge); values that differ in their bits (0.0 and -0.0, nan payloads) stay apart."""

    def fn(x):
        y = x * 1.5 + 1.5 - np.float32(1.5)
        y = y + 0.0 - (-0.0) + float("nan")
        with gc.name_scope("inner"):
            y = y * 1.5
        return y + np.float64(1.5) + np.float32(np.frombuffer(b"\x01\x00\xc0\x7f", np.float32)[0])

    g = gc.trace(fn, gc.TensorSpec((3,)))
    values = [
        (n.value.dtype.str, n.value.tobytes(), n.meta.get("scope"))
        for n in g.nodes
        if n.is_constant
    ]
    assert len(values) == len(set(values)) == 7, values
    x = np.array([1.0, -2.0, 0.5], np.float32)
    want = fn(x)
    np.testing.assert_array_equal(g(x), want)


def test_a_reused_constant_dropped_from_its_graph_is_made_again() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(2,))
        mark = len(g.nodes)
        _ = x * 3.0
        g.discard_since(mark)
        y = x * 3.0
        gc.output(y, name="y")
    gc.verify(g)
    np.testing.assert_array_equal(g(np.ones(2, np.float32)), [3.0, 3.0])


def test_output_names_that_clash_with_placeholders_are_refused() -> None:
    with pytest.raises(gc.TracingError, match="'x' is already taken by placeholder 'x'"):
        gc.trace(lambda x: {"x": x * 2}, gc.TensorSpec((3,)))


def test_returning_none_is_refused() -> None:
    with pytest.raises(gc.TracingError, match="returned None"):
        gc.trace(lambda x: None, gc.TensorSpec((3,)))


def test_nested_outputs_are_refused_with_what_to_return() -> None:
    with pytest.raises(gc.TracingError, match="output 1 is a tuple.*flat tuple or a dict"):
        gc.trace(lambda x: (x, (x * 2, x)), gc.TensorSpec((3,)))


def test_the_name_argument_names_the_graph() -> None:
    assert gc.trace(lambda x: x, gc.TensorSpec(()), name="ident").name == "ident"


def test_a_traced_module_or_partial_names_the_graph_by_what_it_calls() -> None:
    # both were named "traced": a module by its class, as torch.fx names a GraphModule
    from graphc import nn

    def affine(x, w):  # type: ignore[no-untyped-def]
        return x @ w

    odd = type('a "net"\n', (nn.Module,), {"forward": lambda self, x: x * 2})()
    spec = gc.TensorSpec((2, 3))
    g = gc.trace(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), spec)
    assert g.name == "Sequential" and repr(g).startswith("<Graph 'Sequential':")
    assert str(g).startswith("graph Sequential(")
    assert gc.viz.to_dot(g).source.startswith("digraph Sequential {")
    assert gc.trace(functools.partial(affine, w=np.ones((3, 2), np.float32)), spec).name == "affine"
    weird = gc.trace(odd, spec)  # a class name is user text: printed quoted, read back
    assert weird.name == 'a "net"\n' and str(weird).startswith('graph "a \\"net\\"\\n"(')
    assert gc.parse(str(weird)).name == weird.name
    np.testing.assert_array_equal(gc.compile(weird)(np.ones((2, 3), np.float32)), 2.0)


def test_traced_graph_computes_what_the_function_computes_on_arrays() -> None:
    def f(x, y):
        z = gc.softmax(x @ y, axis=-1)
        return gc.sum(z * gc.log(z + 1.0), axis=0), z.T[1:, None]

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    g = gc.trace(f, x, y)
    for got, want in zip(g(x, y), f(x, y)):
        np.testing.assert_allclose(got, want)


def test_static_shapes_may_drive_python_control_flow() -> None:
    def rows(x):
        return gc.stack([x[i] * i for i in range(len(x))])

    g = gc.trace(rows, gc.TensorSpec((3, 2)))
    np.testing.assert_array_equal(g(np.ones((3, 2), np.float32)), [[0, 0], [1, 1], [2, 2]])


def test_every_node_records_the_users_line() -> None:
    def f(x):
        y = x * 2
        return gc.exp(y)

    first = inspect.getsourcelines(f)[1]
    g = gc.trace(f, gc.TensorSpec((3,)))
    lines = {n.op: n.meta["loc"] for n in g.nodes if n.kind == OP and n.op != "constant"}
    assert lines["mul"] == f"{__file__}:{first + 1}"
    assert lines["exp"] == f"{__file__}:{first + 2}"


def test_a_traced_graph_inlines_into_another_trace() -> None:
    inner = gc.trace(lambda x: x * x, gc.TensorSpec((2,)))
    outer = gc.trace(lambda v: inner(v) + 1, gc.TensorSpec((2,)))
    assert "mul" in {n.op for n in outer.nodes}
    np.testing.assert_array_equal(outer(np.array([2.0, 3.0], np.float32)), [5.0, 10.0])


def test_an_inlined_graph_takes_the_dims_it_is_called_with() -> None:
    # the symbolic batch dim inside the inner graph's shape attrs becomes the caller's
    inner = gc.trace(
        lambda x: gc.broadcast_to(np.arange(3, dtype=np.float32), x.shape) * x,
        gc.TensorSpec(("B", 3)),
    )
    for spec, shape in ((gc.TensorSpec((4, 3)), (4, 3)), (gc.TensorSpec(("N", 3)), ("N", 3))):
        outer = gc.trace(lambda v: gc.sum(inner(v)), spec)
        assert {n.attrs["shape"] for n in outer.op_nodes if n.op == "broadcast_to"} == {shape}
    x = np.ones((4, 3), np.float32)
    assert outer(x) == inner(x).sum() == 12.0
    # and gradients through it (the failing case behind mean's second derivatives)
    loss = gc.trace(lambda v: gc.sum(inner(v) * v), gc.TensorSpec((4, 3)))
    dx = gc.run(gc.gradients(loss, wrt=["v"]), {"v": x})[-1]
    np.testing.assert_array_equal(dx, 2 * np.arange(3, dtype=np.float32) * x)


# -- data-dependent control flow ---------------------------------------------------------


def branch_if(x):
    if gc.sum(x) > 0:  # the line the error names
        return x
    return -x


def branch_while(x):
    while gc.max(x) < 10:  # the line the error names
        x = x * 2
    return x


def branch_bool(x):
    flag = bool(x[0])  # the line the error names
    return x * flag


def branch_len(x):
    n = len(x)  # the line the error names
    return x * n


def branch_item(x):
    scale = gc.mean(x).item()  # the line the error names
    return x * scale


IF_HINTS = ("gc.cond(pred, true_fn, false_fn", "gc.while_loop(", "gc.where(")
LOOP_HINTS = ("gc.scan(f, init, xs)", "gc.fori_loop(")


@pytest.mark.parametrize(
    ("fn", "what", "hints"),
    [
        (branch_if, "bool()", IF_HINTS),
        (branch_while, "bool()", IF_HINTS),
        (branch_bool, "bool()", IF_HINTS),
        (branch_len, "len()", LOOP_HINTS),
        (branch_item, ".item()", ("keep computing with graphc's ops", "return the value")),
    ],
    ids=["if", "while", "bool", "len", "item"],
)
def test_data_dependent_control_flow_names_the_line_and_the_op_that_says_it(
    fn, what, hints
) -> None:
    source, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(source) if "the line the error names" in text)
    with pytest.raises(gc.TracingError) as info:
        gc.trace(fn, gc.TensorSpec((None,)))
    message = str(info.value)
    assert what in message
    assert f"{__file__}:{line}" in message
    assert "static graph" in message or "no data until the graph runs" in message
    for hint in hints:
        assert hint in message, (hint, message)


def test_iterating_a_traced_value_points_at_scan() -> None:
    def loop(x):
        total = 0.0
        for row in x:  # a Python for over a graph value
            total = total + row
        return total

    with pytest.raises(gc.TracingError, match=r"iteration.*gc\.scan"):
        gc.trace(loop, gc.TensorSpec((None, 2)))  # a length known only at run time


def test_iterating_a_traced_value_of_known_length_unrolls() -> None:
    def loop(x):
        total = x[0] * 0.0
        for row in x:
            total = total * 2.0 + row
        return total

    g = gc.trace(loop, gc.TensorSpec((3, 2), "float64"))
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(g(x), ((x[0] * 2 + x[1]) * 2) + x[2])
    assert sum(n.op == "getitem" or n.op == "slice" for n in g.op_nodes) == 4


def test_lifted_tensors_is_empty_without_eager_tensors() -> None:
    assert gc.lifted_tensors(gc.trace(lambda x: x, gc.TensorSpec(()))) == {}
