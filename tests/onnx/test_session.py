"""gc.onnx.InferenceSession against onnxruntime's: the same model, the same calls, the
same descriptions of inputs and outputs, the same results, and a refusal (a graphc
error naming the name) wherever onnxruntime refuses."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.ir.errors import FeedError  # noqa: E402

RNG = np.random.default_rng(0)


def _model() -> Any:
    """y = x + w (w an initializer also listed as an input: overridable), z = relu(y);
    x's batch a dim_param, its second dim a size; one input named as a Python keyword."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])
    k = helper.make_tensor_value_info("self", TensorProto.INT64, [None, 3])
    k.type.tensor_type.shape.dim[0].Clear()  # a dim with neither size nor name
    outputs = [
        helper.make_tensor_value_info(name, elem, None)
        for name, elem in (
            ("y", TensorProto.FLOAT),
            ("z", TensorProto.FLOAT),
            ("n", TensorProto.INT64),
        )
    ]
    nodes = [
        helper.make_node("Add", ["x", "w"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
        helper.make_node("Neg", ["self"], ["n"]),
    ]
    init = numpy_helper.from_array(np.array([1.0, -2.0], np.float32), "w")
    graph = helper.make_graph(nodes, "two_paths", [x, w, k], outputs, [init], doc_string="gd")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.producer_name, model.model_version, model.doc_string = "tests", 3, "a model"
    helper.set_model_props(model, {"purpose": "parity"})
    return model


def _sessions(model: Any) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ours = gc.onnx.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return theirs, ours


def _described(args: list) -> list[tuple]:
    return [(a.name, a.type, list(a.shape)) for a in args]


def test_inputs_outputs_and_metadata_are_described_as_onnxruntime_describes_them() -> None:
    theirs, ours = _sessions(_model())
    assert _described(ours.get_inputs()) == _described(theirs.get_inputs())
    assert _described(ours.get_outputs()) == _described(theirs.get_outputs())
    overridable = ours.get_overridable_initializers()
    assert _described(overridable) == _described(theirs.get_overridable_initializers())
    mine, meta = ours.get_modelmeta(), theirs.get_modelmeta()
    for name in ("producer_name", "graph_name", "domain", "description", "graph_description"):
        assert getattr(mine, name) == getattr(meta, name), name
    assert (mine.version, mine.custom_metadata_map) == (meta.version, meta.custom_metadata_map)


@pytest.mark.parametrize("batch", [0, 1, 5])
@pytest.mark.parametrize("output_names", [None, [], ["z"], ["n", "y"]])
def test_runs_give_onnxruntimes_outputs_in_the_order_asked(output_names: Any, batch: int) -> None:
    theirs, ours = _sessions(_model())
    feed = {
        "x": np.array(
            [[-0.0, np.nan], [np.inf, -3.5], [1e-40, 2.0], [1.5, -1.5], [7, 0]], np.float32
        )[:batch],
        "self": RNG.integers(-9, 9, (batch + 1, 3)),
    }
    want = theirs.run(output_names, feed)
    got = ours.run(output_names, feed)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_an_overridable_initializer_may_be_fed() -> None:
    theirs, ours = _sessions(_model())
    feed = {"x": RNG.standard_normal((4, 2)).astype(np.float32), "self": np.zeros((1, 3), np.int64)}
    w = np.array([5.0, -9.0], np.float32)
    for fed in ({}, {"w": w}, {}):  # fed, then the initializer's own value again
        want, got = theirs.run(None, feed | fed), ours.run(None, feed | fed)
        for g, v in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, v)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s, feed: s.run(["q"], feed), id="unknown output"),
        pytest.param(lambda s, feed: s.run(None, {"x": feed["x"]}), id="missing input"),
        pytest.param(lambda s, feed: s.run(None, feed | {"k": feed["x"]}), id="unknown input"),
        pytest.param(
            lambda s, feed: s.run(None, feed | {"x": feed["x"].astype(np.float64)}), id="dtype"
        ),
        pytest.param(
            lambda s, feed: s.run(None, feed | {"x": np.ones((2, 3), np.float32)}), id="size"
        ),
        pytest.param(lambda s, feed: s.run(None, feed | {"x": np.ones(2, np.float32)}), id="rank"),
    ],
)
def test_what_onnxruntime_refuses_is_a_graphc_error_naming_it(call: Any) -> None:
    theirs, ours = _sessions(_model())
    feed = {"x": np.ones((2, 2), np.float32), "self": np.zeros((1, 3), np.int64)}
    with pytest.raises(Exception):  # noqa: B017, PT011 - onnxruntime's own error classes
        call(theirs, feed)
    with pytest.raises(FeedError) as caught:
        call(ours, feed)
    assert any(name in str(caught.value) for name in ("'q'", "'x'", "'self'", "'k'"))


def test_output_names_given_as_one_string_are_refused() -> None:
    _, ours = _sessions(_model())
    with pytest.raises(FeedError, match="output_names"):
        ours.run("z", {"x": np.ones((1, 2), np.float32), "self": np.zeros((1, 3), np.int64)})


def test_results_are_new_arrays_and_feeds_are_left_alone() -> None:
    _, ours = _sessions(_model())
    x = np.array([[1.0, 2.0]], np.float32)
    kept = x.copy()
    first = ours.run(["z"], {"x": x, "self": np.zeros((1, 3), np.int64)})[0]
    held = first.copy()
    ours.run(["z"], {"x": -x, "self": np.zeros((1, 3), np.int64)})
    np.testing.assert_array_equal(first, held)  # the second run wrote elsewhere
    np.testing.assert_array_equal(x, kept)


def test_an_exported_graphc_model_runs_as_in_onnxruntime(tmp_path: Any) -> None:
    g = gc.trace(
        lambda x, w: gc.softmax(gc.tanh(x @ w), axis=-1),
        gc.TensorSpec(("batch", 3), "float64"),
        gc.TensorSpec((3, 4), "float64"),
    )
    path = tmp_path / "model.onnx"
    gc.onnx.export_model(g, str(path))
    theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ours = gc.onnx.InferenceSession(path, backend="numpy")
    assert _described(ours.get_inputs()) == _described(theirs.get_inputs())
    feed = {"x": RNG.standard_normal((6, 3)), "w": RNG.standard_normal((3, 4))}
    np.testing.assert_allclose(ours.run(None, feed)[0], theirs.run(None, feed)[0], rtol=1e-12)


def test_a_fixed_input_must_be_fed_its_fixed_value() -> None:
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3])
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 2])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["data", "shape"], ["out"])], "reshape", [data, shape], [out]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ours = gc.onnx.InferenceSession(model, fixed={"shape": [3, 2]})
    assert [a.name for a in ours.get_inputs()] == ["data"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ours.run(None, {"data": x})[0], x.reshape(3, 2))
    same = ours.run(None, {"data": x, "shape": np.array([3, 2])})[0]
    np.testing.assert_array_equal(same, x.reshape(3, 2))
    with pytest.raises(FeedError, match="'shape' was fixed"):
        ours.run(None, {"data": x, "shape": np.array([6, 1])})
