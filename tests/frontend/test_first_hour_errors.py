"""The mistakes of a first hour with graphc (issue 34): each is a graphc error that names
the value, says what was expected and suggests the fix."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.native_checks import needs_native

ENGINES: dict[str, Callable[[gc.Graph, dict[str, Any]], Any]] = {
    "run": lambda g, feeds: gc.run(g, feeds)[0],  # every graph here has one output
    "call": lambda g, feeds: g(**feeds),
    "compiled": lambda g, feeds: gc.compile(g, backend="numpy")(**feeds),
}


def weighted() -> gc.Graph:
    g = gc.Graph("weighted")
    with g:
        x = gc.placeholder("x", shape=(3,))
        w = gc.placeholder("w", shape=(3,))
        gc.output(gc.sum(x * w), name="loss")
    return g


# -- feeds: names -------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_a_misspelled_feed_is_named_with_the_missing_one_and_a_guess(engine: str) -> None:
    ones = np.ones(3, np.float32)
    with pytest.raises(gc.FeedError) as info:
        ENGINES[engine](weighted(), {"x": ones, "ww": ones})
    message = str(info.value)
    assert "has no placeholder(s) ['ww']" in message
    assert "missing feed(s) for placeholder(s) ['w']" in message
    assert "Did you mean 'w' for 'ww'?" in message


def test_every_engine_words_a_name_mistake_alike() -> None:
    ones = np.ones(3, np.float32)
    messages = set()
    for engine in ENGINES.values():
        with pytest.raises(gc.FeedError) as info:
            engine(weighted(), {"x": ones, "ww": ones})
        messages.add(str(info.value))
    assert len(messages) == 1, messages


def test_a_feed_far_from_every_name_gets_no_guess() -> None:
    ones = np.ones(3, np.float32)
    with pytest.raises(gc.FeedError) as info:
        gc.run(weighted(), {"x": ones, "w": ones, "learning_rate": ones})
    assert "has no placeholder(s) ['learning_rate']" in str(info.value)
    assert "missing" not in str(info.value) and "Did you mean" not in str(info.value)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_captured_tensor_left_unfed_points_to_lifted_feeds(engine: str) -> None:
    w = ge.ones(3, requires_grad=True)
    g = gc.trace(lambda x: x * w, gc.TensorSpec((3,)))
    with pytest.raises(gc.FeedError) as info:
        ENGINES[engine](g, {"x": np.ones(3, np.float32)})
    message = str(info.value)
    assert "['param'] was lifted by gc.trace from eager tensor(s)" in message
    assert "gc.lifted_feeds(graph)" in message
    # and the fix it names works
    fixed = ENGINES[engine](g, {"x": np.full(3, 2, np.float32), **gc.lifted_feeds(g)})
    np.testing.assert_array_equal(fixed, np.full(3, 2, np.float32))


def test_an_unfed_placeholder_of_ones_own_is_not_called_lifted() -> None:
    with pytest.raises(gc.FeedError) as info:
        gc.run(weighted(), {"x": np.ones(3, np.float32)})
    assert "lifted" not in str(info.value)


# -- feeds: dtypes --------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_an_array_of_another_dtype_is_refused_with_its_cast(engine: str) -> None:
    with pytest.raises(gc.FeedError, match=r"'w' expects dtype float32, got an array of dtype "):
        ENGINES[engine](weighted(), {"x": np.ones(3, np.float32), "w": np.ones(3)})
    with pytest.raises(gc.FeedError, match=r"cast it with \.astype\(np\.float32\)"):
        ENGINES[engine](weighted(), {"x": np.ones(3, np.float32), "w": np.ones(3, np.int64)})


@pytest.mark.parametrize("engine", ENGINES)
def test_python_numbers_take_the_placeholder_dtype_when_nothing_is_lost(engine: str) -> None:
    got = ENGINES[engine](weighted(), {"x": [1.5, 2, 3], "w": [True, 1, 1]})
    assert got.dtype == np.float32 and got == np.float32(6.5)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "dtype, value, problem",
    [
        ("int64", [1.5, 2.0], "float64 values do not convert to int64 without loss"),
        ("bool", [0, 1], "int64 values do not convert to bool without loss"),
        ("float32", [1e40, 0.0], "1e+40 does not fit dtype float32"),
        ("int32", [2**40, 1], "1099511627776 does not fit dtype int32"),
        ("float32", ["a", "b"], "not numbers of a dtype graphc feeds"),
    ],
)
def test_python_values_that_would_lose_something_are_refused(
    engine: str, dtype: str, value: list, problem: str
) -> None:
    g = gc.Graph("one")
    with g:
        gc.output(gc.placeholder("v", shape=(2,), dtype=dtype) == 0, name="zero")
    with pytest.raises(gc.FeedError) as info:
        ENGINES[engine](g, {"v": value})
    message = str(info.value)
    assert f"placeholder 'v' expects dtype {dtype}, got a list" in message
    assert problem in message and f"np.asarray(value, dtype=np.{dtype})" in message


def test_a_ragged_list_is_a_feed_error() -> None:
    with pytest.raises(gc.FeedError, match="'x' expects f32\\[3\\], got a list numpy cannot read"):
        gc.run(weighted(), {"x": [1.0, [2.0, 3.0]], "w": np.ones(3, np.float32)})


# -- gradients --------------------------------------------------------------------------


@pytest.mark.parametrize("wrt", [None, 3, np.ones(2)])
def test_gradients_says_what_wrt_takes(wrt: Any) -> None:
    g = gc.trace(lambda x, w: gc.sum(x * w), gc.TensorSpec((3,)), gc.TensorSpec((3,)))
    with pytest.raises(gc.AutodiffError) as info:
        gc.gradients(g, wrt=wrt)
    message = str(info.value)
    assert "wrt takes the names of placeholders" in message and "wrt=['x', 'w']" in message
    assert f"got {wrt!r}" in message and "graph 'lambda' has placeholders ['x', 'w']" in message


def test_gradients_takes_a_placeholder_value_by_name_only() -> None:
    g = gc.trace(lambda x, w: gc.sum(x * w), gc.TensorSpec((3,)), gc.TensorSpec((3,)))
    with pytest.raises(gc.AutodiffError, match="wrt takes the names of placeholders"):
        gc.gradients(g, wrt=[g.inputs[0]])
    assert [o.name for o in gc.gradients(g, wrt={"w": None}.keys()).outputs] == ["out", "grad_w"]


# -- dim= beside axis= ----------------------------------------------------------------------

X = np.arange(6.0, dtype=np.float32).reshape(2, 3)
SAME_AS_AXIS = {  # op function -> its other arguments
    "sum": {},
    "mean": {},
    "prod": {},
    "max": {},
    "min": {},
    "argmax": {},
    "argmin": {},
    "logsumexp": {},
    "var": {},
    "std": {},
    "softmax": {},
    "log_softmax": {},
    "cumsum": {},
    "squeeze": {},
    "expand_dims": {},
    "unsqueeze": {},
}


@pytest.mark.parametrize("name", SAME_AS_AXIS)
@pytest.mark.parametrize("side", ["numpy", "graph", "eager"])
def test_dim_is_axis_on_every_side(name: str, side: str) -> None:
    fn = getattr(gc, name)
    x = X[None] if name == "squeeze" else X
    want = fn(x, axis=0)

    def run(**kwargs: Any) -> Any:
        if side == "numpy":
            return fn(x, **kwargs)
        if side == "eager":
            return fn(ge.tensor(x), **kwargs).numpy()
        return gc.trace(lambda v: fn(v, **kwargs), x)(x)

    np.testing.assert_array_equal(run(dim=0), want)
    op = "expand_dims" if name == "unsqueeze" else name  # one function, two names
    with pytest.raises(gc.GraphcError, match=f"{op}: give either dim= .* or axis= .*, not both"):
        run(dim=0, axis=0)


def test_keepdim_is_keepdims_and_joins_take_dim_too() -> None:
    np.testing.assert_array_equal(gc.sum(X, dim=1, keepdim=True), gc.sum(X, 1, True))
    np.testing.assert_array_equal(gc.concat([X, X], dim=1), np.concatenate([X, X], axis=1))
    np.testing.assert_array_equal(gc.stack([X, X], dim=2), np.stack([X, X], axis=2))
    labels = np.array([0, 2])
    assert gc.cross_entropy(X, labels, dim=-1) == gc.cross_entropy(X, labels, axis=-1)
    with pytest.raises(gc.GraphcError, match="sum: give either dim= .* not both"):
        gc.sum(X, 0, dim=1)  # axis by position, dim by name
    with pytest.raises(gc.GraphcError, match="sum: give either keepdim= .* or keepdims="):
        gc.sum(X, keepdims=True, keepdim=True)


# -- ONNX -----------------------------------------------------------------------------------


@pytest.mark.parametrize("domain, op", [("com.microsoft", "FusedGemm"), ("com.example", "Relu")])
def test_an_op_of_a_custom_onnx_domain_is_named_with_its_domain(domain: str, op: str) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node(op, ["x"], ["y"], name="fused", domain=domain)
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "y")]
    graph = helper.make_graph([node], "g", info[:1], info[1:])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    assert onnx.checker.check_model(model) is None  # well-formed: only the domain is foreign
    with pytest.raises(gc.onnx.OnnxError) as error:
        gc.onnx.import_model(model)
    message = str(error.value)
    assert message.startswith(f"node 'fused' ({domain}::{op}, opset 17): op {domain}::{op} ")
    assert f"not those of domain '{domain}'" in message and "default-domain ops" in message


# -- a range over a symbolic dim ----------------------------------------------------------


def running_sum(x: Any) -> Any:
    h = x[0]
    for t in range(1, x.shape[0]):
        h = h + x[t]
    return h


def test_a_range_over_a_symbolic_dim_names_the_dim_and_suggests_loops() -> None:
    with pytest.raises(gc.TracingError) as info:
        gc.trace(running_sum, gc.TensorSpec((None, 3)))
    message = str(info.value)
    assert message.startswith("dim 'x_0' (axis 0 of graph value 'x' (f32[x_0,3])) at ")
    assert "test_first_hour_errors.py" in message and "is symbolic" in message
    assert "used as an int (by range()" in message
    assert "gc.scan(f, init, xs)" in message and "gc.fori_loop(lower, upper" in message
    # a concrete size, as the message says, unrolls the loop
    g = gc.trace(running_sum, gc.TensorSpec((4, 3)))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(g(x), x.sum(axis=0))


@pytest.mark.parametrize(
    "use, what",
    [
        (lambda d: int(d), "converted by int()"),
        (lambda d: float(d), "converted by float()"),
        (lambda d: [0, 1][d], "used as an int"),
        (lambda d: np.zeros((d, 3)), "used as an int"),
        (lambda d: d * 3, "computed with"),
        (lambda d: 2 + d, "computed with"),
        (lambda d: d - 1, "computed with"),
    ],
)
def test_a_symbolic_dim_refuses_every_use_as_a_number(use: Callable, what: str) -> None:
    def fn(x: Any) -> Any:
        use(x.shape[0])
        return x

    with pytest.raises(gc.TracingError, match=f"dim 'B' .* is symbolic.* cannot be {what}"):
        gc.trace(fn, gc.TensorSpec(("B", 3)))


def test_a_symbolic_dim_still_compares_prints_and_shapes_as_its_symbol() -> None:
    seen = {}

    def fn(x: Any) -> Any:
        d = x.shape[0]
        seen.update(eq=d == "B", text=f"{d}", hashed={d: 1}["B"], shape=str(x.shape))
        y = gc.reshape(x, (d, 3, 1))[:, :, 0]
        return y + gc.broadcast_to(gc.sum(x, axis=0), x.shape)

    g = gc.trace(fn, gc.TensorSpec(("B", 3)))
    assert seen == {"eq": True, "text": "B", "hashed": 1, "shape": "('B', 3)"}
    # nodes hold plain str dims: the text form round-trips and verify passes
    assert all(type(d) is str for n in g.nodes for d in n.type.shape if not isinstance(d, int))
    assert str(gc.parse(str(g))) == str(g)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(gc.compile(g)(x), x + 2)


# -- numpy on graph values --------------------------------------------------------------


@pytest.mark.parametrize(
    "call, numpy_name, op",
    [
        (lambda v: np.exp(v), "exp", "gc.exp, graphc's op of the same name"),
        (lambda v: np.tanh(v), "tanh", "gc.tanh, graphc's op of the same name"),
        (lambda v: np.sum(v, axis=0), "sum", "gc.sum, graphc's op of the same name"),
        (lambda v: np.concatenate([v, v]), "concatenate", "gc.concatenate, graphc's op"),
        (lambda v: np.dot(v, v), "dot", "gc.dot, graphc's op of the same name"),
        (lambda v: np.arctan(v), "arctan", "gc.arctan, graphc's op of the same name"),
    ],
)
def test_numpy_on_a_graph_value_advises_graphcs_op(
    call: Callable, numpy_name: str, op: str
) -> None:
    with pytest.raises(gc.TracingError) as info:
        gc.trace(call, gc.TensorSpec((3,)))
    message = str(info.value)
    assert message.startswith(f"numpy.{numpy_name} of graph value 'v' (f32[3]) at ")
    assert f"Use {op}" in message and "gc.where" not in message
    assert getattr(gc, op.split(",")[0][3:]) is not None  # the advice names a real function


def test_numpy_without_a_graphc_op_says_so() -> None:
    with pytest.raises(
        gc.TracingError, match="numpy.percentile of graph value 'v'.*graphc has no op"
    ):
        gc.trace(lambda v: np.percentile(v, 50), gc.TensorSpec((3,)))


def test_bool_conversion_keeps_its_control_flow_advice() -> None:
    def fn(v: Any) -> Any:
        return v if v > 0 else -v

    with pytest.raises(gc.TracingError, match=r"bool\(\).*gc\.cond.*gc\.where"):
        gc.trace(fn, gc.TensorSpec(()))


def test_numpy_arrays_on_the_left_of_operators_still_record_nodes() -> None:
    a = np.array([1.0, 2.0, 4.0], np.float32)
    ops = {
        "add": lambda v: a + v,
        "sub": lambda v: a - v,
        "mul": lambda v: np.float32(2) * v,
        "div": lambda v: a / v,
        "pow": lambda v: a**v,
        "remainder": lambda v: a % v,
        "gt": lambda v: a < v,  # v > a
        "eq": lambda v: a == v,
        "matmul": lambda v: a @ v,
    }
    x = np.array([2.0, 2.0, 2.0], np.float32)
    for op, fn in ops.items():
        g = gc.trace(fn, gc.TensorSpec((3,)))
        assert [n.op for n in g.op_nodes if n.op != "constant"] == [op]
        np.testing.assert_array_equal(g(x), fn(x))
    assert np.shape(gc.trace(lambda v: v + np.ndim(v) + len(np.shape(v)), x)(x)) == (3,)


# -- exe.source() and exe.source("c") -----------------------------------------------------


def three_ops() -> gc.Graph:
    return gc.trace(lambda x: gc.tanh(x) * 2.0 + 1.0, np.ones(8, np.float32))


def test_source_is_the_python_and_numpy_has_no_c() -> None:
    exe = gc.compile(three_ops(), backend="numpy")
    python = exe.source()
    assert "def run(x):" in python and "#include" not in python
    assert exe.source(np.ones(8, np.float32)) == python  # example feeds still follow
    with pytest.raises(gc.GraphcError, match="has no C source: its backend, numpy, runs the"):
        exe.source("c")
    with pytest.raises(gc.GraphcError, match='the language is "python" or "c", got \'C\\+\\+\''):
        exe.source("C++")


@needs_native
def test_source_c_is_the_native_kernels_and_source_the_python_alone() -> None:
    exe = gc.compile(three_ops(), backend="native")
    python, c = exe.source(), exe.source("c")
    assert python == exe.source("python") and "def run(x):" in python
    assert "#include" not in python and "GC_EXPORT" not in python
    assert c.startswith("/* native kernels, compiled with ") and "GC_EXPORT void gk_" in c
    assert len(python.splitlines()) < 20 < len(c.splitlines())
    kernel = re.search(r"\b(gk_\w+)\(", python)  # the Python calls what the C defines
    assert kernel is not None and f"void {kernel.group(1)}(" in c


@pytest.mark.parametrize(
    "call, what",
    [
        (lambda v: float(gc.sum(v)), r"float\(\)"),
        (lambda v: math.exp(gc.sum(v)), r"float\(\) \(math\.\* functions call it\)"),
        (lambda v: gc.sum(v).item(), r"\.item\(\)"),
        (lambda v: v.numpy(), r"\.numpy\(\)"),
        (lambda v: v.tolist(), r"\.tolist\(\)"),
        (lambda v: np.asarray(v), "conversion to a numpy array"),
    ],
)
def test_asking_a_graph_value_for_its_data_says_to_keep_to_graphcs_ops(
    call: Callable, what: str
) -> None:
    """Not control-flow advice (gc.cond, gc.where): the value has no data until the graph
    runs, so compute on with gc.* and return it."""
    with pytest.raises(gc.TracingError, match=what) as info:
        gc.trace(call, gc.TensorSpec((3,)))
    message = str(info.value)
    assert "keep computing with graphc's ops" in message and "gc.exp" in message
    assert "gc.cond" not in message


def test_using_a_graph_value_as_a_python_index_says_take() -> None:
    with pytest.raises(gc.TracingError, match=r"use as an index.*gc\.take"):
        gc.trace(lambda i: [1, 2, 3][i], gc.TensorSpec((), "int64"))


@pytest.mark.parametrize("spec", [(3, 4), [3], ("B", 3), ()])
def test_a_shape_given_where_a_spec_goes_is_refused(spec: Any) -> None:
    """gc.trace(f, (3, 4)) once traced an example array [3, 4] (an i64[2] input)."""
    with pytest.raises(gc.GraphcError, match=r"looks like a shape; give gc\.TensorSpec"):
        gc.trace(lambda x: x * 2, spec)
    assert str(gc.trace(lambda x: x * 2, [1.5, 2.0]).inputs[0].type) == "f64[2]"  # an example


def test_differentiating_a_graph_without_outputs_names_gc_output() -> None:
    """Forgetting gc.output: gradients said 'no floating point output'."""
    g = gc.Graph("forgot")
    with g:
        a = gc.placeholder("a", shape=(2,))
        _ = a * 2
    with pytest.raises(gc.AutodiffError, match=r"graph 'forgot' has no outputs.*gc\.output"):
        gc.gradients(g, wrt=["a"])


def test_a_value_kept_from_a_finished_trace_takes_no_more_ops() -> None:
    """JAX's leaked tracer: an op on it once appended nodes after the graph's outputs."""
    saved = {}

    def f(x):
        saved["v"] = x * 2
        return x + 1

    g = gc.trace(f, gc.TensorSpec((3,)))
    before = str(g)
    with pytest.raises(gc.TracingError, match=r"graph 'f', whose trace has finished.*return it"):
        saved["v"] + 1
    assert str(g) == before
    with g:  # adding to it on purpose is still possible
        gc.output(saved["v"] + 1, name="extra")
    np.testing.assert_array_equal(g(np.ones(3, np.float32))[1], [3.0, 3.0, 3.0])


def test_small_mistakes_get_graphc_errors_that_say_the_fix(tmp_path: Any) -> None:
    a = np.ones((2, 2))
    with pytest.raises(
        gc.GraphcError, match=r"gc\.concat\(\[a, b, \.\.\.\]\), not gc\.concat\(a, b\)"
    ):
        gc.concatenate(a, a)
    assert gc.concatenate([a, a], 1).shape == (2, 4)  # numpy's positional axis still works
    for call in (lambda: gc.grad(lambda x: gc.sum(x * 2))(np.ones(3, np.int64)),
                 lambda: gc.grad(lambda x: x * x)(3)):  # fmt: skip
        with pytest.raises(
            gc.AutodiffError, match=r"argument 0 \('x'\) has dtype int64; only floating"
        ):
            call()
    path = tmp_path / "g.txt"
    path.write_text(str(gc.trace(lambda x: x * 2, gc.TensorSpec((2,)))))
    with pytest.raises(gc.ParseError, match=r"text form: read it with gc\.parse"):
        gc.load(path)
