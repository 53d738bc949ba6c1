"""Shapes of imported models: symbolic dims (dim_params), the shape computations
exporters write on them, and the sizes `import_model(dims=...)` gives them; checked
against onnxruntime on hand-written models."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.onnx import OnnxError  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes: list, inputs: list, outputs: list, inits: list = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _ints(name: str, values: list[int]) -> object:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _checked(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx.checker.check_model(model, full_check=True)
    return model


def _heads_model() -> onnx.ModelProto:
    """(batch, 4, 6) reshaped to (batch * 2, 4, 3), the shape computed as torch's
    MultiheadAttention export computes batch * heads: Shape, Gather, Mul, Concat."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Mul", ["batch", "two"], ["rows"]),
        helper.make_node("Unsqueeze", ["rows", "axes"], ["rows1"]),
        helper.make_node("Concat", ["rows1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [
        _ints("zero", 0), _ints("two", 2), _ints("axes", [0]), _ints("rest", [4, 3]),
    ]  # fmt: skip
    x = helper.make_tensor_value_info("x", F, ["batch", 4, 6])
    y = helper.make_tensor_value_info("y", F, [None, 4, 3])
    return _checked(_model(nodes, [x], [y], inits))


def test_a_shape_computed_from_a_symbolic_dim_is_read_at_a_given_size() -> None:
    """graphc's symbolic dims are names, so batch * 2 has no form: the error named a
    dtype object (the shape's array) instead of the dim, and no import could read the
    model. It names the dim and `dims=`, which reads the model at that size."""
    model = _heads_model()
    with pytest.raises(OnnxError, match=r"Mul.*symbolic dim\(s\) \['batch'\].*dims="):
        gc.onnx.import_model(model)
    graph = gc.onnx.import_model(model, dims={"batch": 3})
    assert graph.inputs[0].type.shape == (3, 4, 6)
    x = np.random.default_rng(0).standard_normal((3, 4, 6)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(gc.run(graph, {"x": x})[0], want.run(None, {"x": x})[0])
    with pytest.raises(OnnxError, match=r"\['batc'\].*symbolic dims are \['batch'\]"):
        gc.onnx.import_model(model, dims={"batc": 3})
    with pytest.raises(OnnxError, match="int >= 0"):
        gc.onnx.import_model(model, dims={"batch": -1})


def test_a_reshape_inferring_a_product_of_dims_names_them() -> None:
    """A Reshape whose -1 would be batch * 2 (torch.export's attention) says which
    symbolic dim and how to give it a size."""
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"])]
    x = helper.make_tensor_value_info("x", F, [5, "batch", 8])
    y = helper.make_tensor_value_info("y", F, [5, None, 4])
    model = _checked(_model(nodes, [x], [y], [_ints("target", [5, -1, 4])]))
    with pytest.raises(OnnxError, match=r"Reshape.*\['batch'\].*dims=\{'batch': \.\.\.\}"):
        gc.onnx.import_model(model)
    graph = gc.onnx.import_model(model, dims={"batch": 2})
    x = np.arange(80, dtype=np.float32).reshape(5, 2, 8)
    np.testing.assert_array_equal(gc.run(graph, {"x": x})[0], x.reshape(5, 4, 4))


def _session_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _opset(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    model.opset_import[0].version = opset
    model.ir_version = 4 if opset < 8 else 5 if opset < 13 else 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("spatial", [1, 0])
def test_older_opsets_pools_batch_norm_and_pad(spatial: int) -> None:
    """Models of opsets 7 to 10 (the older model zoo's) use MaxPool 1, AveragePool 1,
    BatchNormalization 7 and Pad 2, whose pads and value are attributes: each was
    refused ("supported from opset 8 / 9 / 11 on"), with the same meaning as later."""
    rng = np.random.default_rng(1)
    stats = (4,) if spatial else (4, 5, 5)
    params = [rng.uniform(0.5, 2.0, stats).astype(np.float32) for _ in range(4)]
    inits = [numpy_helper.from_array(p, n) for p, n in zip(params, ("s", "b", "m", "v"))]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Pad", ["n"], ["p"], pads=[0, 0, 1, 2, 0, 0, 0, 1], value=-1.5),
        helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[2, 2], strides=[2, 1]),
        helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Pad", ["x"], ["r"], pads=[0, 0, 2, 1, 0, 0, 1, 2], mode="reflect"),
    ]
    x = helper.make_tensor_value_info("x", F, ["N", 4, 5, 5])
    shapes = {"y": ["N", 4, 3, 7], "a": ["N", 4, 6, 8], "r": ["N", 4, 8, 8]}
    outs = [helper.make_tensor_value_info(n, F, shape) for n, shape in shapes.items()]
    feeds = {"x": rng.standard_normal((2, 4, 5, 5)).astype(np.float32)}
    for opset in (7, 10) if spatial else (7,):  # (spatial is gone in opset 9)
        kept = {"spatial": spatial} if opset == 7 else {}
        nodes[0] = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], **kept)
        model = _opset(_model(nodes, [x], outs, inits), opset)
        graph = gc.onnx.import_model(model)
        for got, want in zip(gc.run(graph, feeds), _session_run(model, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_input_returned_as_an_output_and_an_input_of_no_shape() -> None:
    """A graph input also listed as a graph output (onnx's checker and onnxruntime
    accept it) raised a VerifyError (two nodes named 'x'): the output is named x_output,
    in its place. An input with no shape at all (any rank) was read as a scalar, so
    every feed failed; it is refused by name."""
    nodes = [helper.make_node("Neg", ["x"], ["y"])]
    x = helper.make_tensor_value_info("x", F, [3])
    outs = [helper.make_tensor_value_info("x", F, [3]), helper.make_tensor_value_info("y", F, [3])]
    model = _checked(_model(nodes, [x], outs))
    graph = gc.onnx.import_model(model)
    assert [o.name for o in graph.outputs] == ["x_output", "y"]
    feeds = {"x": np.array([1.0, -0.0, np.inf], np.float32)}
    for got, want in zip(gc.run(graph, feeds), _session_run(model, feeds)):
        np.testing.assert_array_equal(got, want)
    anything = helper.make_tensor_value_info("x", F, None)
    with pytest.raises(OnnxError, match="graph input 'x': has no shape"):
        gc.onnx.import_model(_model(nodes, [anything], outs[1:]))


def test_tile_is_read_as_graphcs_tile() -> None:
    """Tile (what torch's Tensor.repeat exports as) was refused as an unknown op type:
    it is graphc's tile, over a symbolic batch dim repeated once, and refused by name
    where it would repeat that dim."""
    nodes = [helper.make_node("Tile", ["x", "reps"], ["y"])]
    x = helper.make_tensor_value_info("x", F, ["batch", 3])
    y = helper.make_tensor_value_info("y", F, ["batch", 6])
    model = _checked(_model(nodes, [x], [y], [_ints("reps", [1, 2])]))
    graph = gc.onnx.import_model(model)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    np.testing.assert_array_equal(gc.run(graph, feeds)[0], _session_run(model, feeds)[0])
    y = helper.make_tensor_value_info("y", F, [None, 3])
    twice = _checked(_model(nodes, [x], [y], [_ints("reps", [2, 1])]))
    with pytest.raises(OnnxError, match=r"Tile.*symbolic dim 'batch' 2 times.*dims="):
        gc.onnx.import_model(twice)
    graph = gc.onnx.import_model(twice, dims={"batch": 2})
    np.testing.assert_array_equal(gc.run(graph, feeds)[0], _session_run(twice, feeds)[0])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back_over_a_symbolic_batch(mode: str) -> None:
    """DepthToSpace (torch's PixelShuffle, CRD) and SpaceToDepth were unknown op types:
    they are reshapes around a transpose, the batch dim staying symbolic."""
    nodes = [
        helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode),
        helper.make_node("SpaceToDepth", ["y"], ["z"], blocksize=2),
    ]
    x = helper.make_tensor_value_info("x", F, ["batch", 8, 3, 2])
    outs = [
        helper.make_tensor_value_info("y", F, ["batch", 2, 6, 4]),
        helper.make_tensor_value_info("z", F, ["batch", 8, 3, 2]),
    ]
    model = _checked(_model(nodes, [x], outs))
    graph = gc.onnx.import_model(model)
    feeds = {"x": np.arange(96, dtype=np.float32).reshape(2, 8, 3, 2)}
    for got, want in zip(gc.run(graph, feeds), _session_run(model, feeds)):
        np.testing.assert_array_equal(got, want)


def test_resize_modes_over_a_symbolic_batch() -> None:
    """Resize (torch's F.interpolate and nn.Upsample, both exporters) was an unknown op
    type: it is read one axis at a time as takes of the input weighted by tables made
    at import (nearest, linear, cubic; the batch and channel dims left alone), matching
    onnxruntime; a symbolic dim resized is refused by name."""
    floats = numpy_helper.from_array
    inits = [
        floats(np.array([1, 1, 2, 2], np.float32), "twice"),
        floats(np.array([1, 1, 0.6, 1.5], np.float32), "odd"),
        _ints("sizes", [5, 7]),
    ]
    resize = helper.make_node
    nodes = [
        resize("Resize", ["x", "", "twice"], ["near"], mode="nearest", nearest_mode="floor",
               coordinate_transformation_mode="asymmetric"),
        resize("Resize", ["x", "", "odd"], ["lin"], mode="linear"),
        resize("Resize", ["x", "", "", "sizes"], ["cub"], mode="cubic", axes=[2, 3],
               coordinate_transformation_mode="align_corners"),
    ]  # fmt: skip
    x = helper.make_tensor_value_info("x", F, ["batch", 2, 4, 6])
    shapes = {"near": ["batch", 2, 8, 12], "lin": ["batch", 2, 2, 9], "cub": ["batch", 2, 5, 7]}
    outs = [helper.make_tensor_value_info(n, F, s) for n, s in shapes.items()]
    model = _opset(_model(nodes, [x], outs, inits), 19)
    graph = gc.onnx.import_model(model)
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 2, 4, 6)).astype(np.float32)}
    for got, want in zip(gc.run(graph, feeds), _session_run(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    batch = helper.make_tensor_value_info("y", F, None)
    grow = _model([resize("Resize", ["x", "", "twice"], ["y"])], [x], [batch], inits[:1])
    grow.graph.initializer[0].CopyFrom(floats(np.array([2, 1, 1, 1], np.float32), "twice"))
    with pytest.raises(OnnxError, match=r"symbolic dim 'batch' \(axis 0\).*dims="):
        gc.onnx.import_model(grow)


def test_einsum_over_a_symbolic_batch() -> None:
    """Einsum (torch.einsum, both exporters) was an unknown op type: graphc's einsum,
    matching onnxruntime, a batch dim left symbolic."""
    nodes = [helper.make_node("Einsum", ["q", "k"], ["s"], equation="bhqd,bhkd->bhqk")]
    q = helper.make_tensor_value_info("q", F, ["batch", 2, 3, 4])
    k = helper.make_tensor_value_info("k", F, ["batch", 2, 5, 4])
    s = helper.make_tensor_value_info("s", F, ["batch", 2, 3, 5])
    model = _checked(_model(nodes, [q, k], [s]))
    graph = gc.onnx.import_model(model)
    rng = np.random.default_rng(0)
    feeds = {"q": rng.standard_normal((2, 2, 3, 4)), "k": rng.standard_normal((2, 2, 5, 4))}
    feeds = {n: v.astype(np.float32) for n, v in feeds.items()}
    np.testing.assert_allclose(
        gc.run(graph, feeds)[0], _session_run(model, feeds)[0], rtol=1e-5, atol=1e-6
    )


def test_gather_nd_with_batch_dims_and_negative_indices() -> None:
    """GatherND (torch.export's nearest-exact and 1-d interpolations, advanced indexing)
    was an unknown op type: each index tuple is one flat position found by a lookup in a
    table of strides per component, so an index out of range is take's error, as in
    onnxruntime; batch_dims offset each example's positions."""
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = helper.make_tensor_value_info("x", F, [2, 3, 4])
    cases = ((0, ["n", 2], ["n", 4], [[1, 2], [0, -3], [1, 0]]), (1, [2, 2], [2], [[1, 2], [0, 3]]))
    for batch_dims, index_shape, shape, idx in cases:
        i = helper.make_tensor_value_info("i", TensorProto.INT64, index_shape)
        y = helper.make_tensor_value_info("y", F, shape)
        nodes = [helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)]
        model = _checked(_model(nodes, [x, i], [y]))
        graph = gc.onnx.import_model(model)
        feeds = {"x": data, "i": np.array(idx)}
        np.testing.assert_array_equal(gc.run(graph, feeds)[0], _session_run(model, feeds)[0])
    with pytest.raises(gc.GraphcError, match="index 4 is out of range for axis 0 of size 4"):
        gc.run(gc.onnx.import_model(model), {"x": data, "i": np.array([[1, 4], [0, 0]])})


@pytest.mark.parametrize("noop", [0, 1])
def test_a_reduction_with_its_axes_input_left_out(noop: int) -> None:
    """ReduceSum(x, "") reduces every axis, or with noop_with_empty_axes=1 none: x as it
    is, as onnxruntime gives (graphc reduced everything either way)."""
    node = helper.make_node("ReduceSum", ["x", ""], ["y"], noop_with_empty_axes=noop, keepdims=1)
    model = _checked(
        _model(
            [node],
            [helper.make_tensor_value_info("x", F, [2, 3])],
            [helper.make_tensor_value_info("y", F, [2, 3] if noop else [1, 1])],
        )
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = gc.onnx.import_model(model)(x)
    np.testing.assert_array_equal(got, want)
    assert got.shape == ((2, 3) if noop else (1, 1))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_integer_div_truncates_in_integers(dtype: type) -> None:
    """ONNX's integer Div truncates toward zero; graphc computed it through float64,
    which lost the low bits past 2**53 ((2**62 + 1) / 1 came back 2**62)."""
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _checked(
        _model(
            [helper.make_node("Div", ["a", "b"], ["y"])],
            [helper.make_tensor_value_info(n, kind, [8]) for n in ("a", "b")],
            [helper.make_tensor_value_info("y", kind, [8])],
        )
    )
    if dtype is np.uint8:
        a, b = np.array([0, 1, 7, 255, 254, 9, 100, 3]), np.array([1, 2, 3, 2, 255, 9, 7, 5])
    else:
        a, b = np.array([7, -7, 7, -7, 0, 2**30 + 1, -6, 5]), np.array([2, 2, -2, -2, 3, 1, 3, -5])
    a, b = a.astype(dtype), b.astype(dtype)
    if dtype is np.int64:
        a[5] = 2**62 + 1
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"a": a, "b": b})[0]
    got = gc.onnx.import_model(model)(a, b)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
