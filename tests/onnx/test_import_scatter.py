"""ScatterND and ScatterElements with reductions mul, max and min against onnx's reference
evaluator, on repeated and negative indices (every update of a position combines), in
float and int: max and min exactly, products within rounding (another order)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc as gc  # noqa: E402


def _model(op: str, data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
           **attrs: object) -> onnx.ModelProto:  # fmt: skip
    """data and updates are inputs, the indices an initializer."""
    elem = helper.np_dtype_to_tensor_dtype(data.dtype)
    node = helper.make_node(op, ["data", "indices", "updates"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "m",
        [helper.make_tensor_value_info("data", elem, data.shape),
         helper.make_tensor_value_info("updates", elem, updates.shape)],
        [helper.make_tensor_value_info("y", elem, data.shape)],
        [numpy_helper.from_array(indices, "indices")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model


def _check(model: onnx.ModelProto, data: np.ndarray, updates: np.ndarray) -> None:
    feeds = {"data": data, "updates": updates}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    graph = gc.onnx.import_model(model)
    for got in (gc.run(graph, feeds)[0], gc.compile(graph, opt_level=2)(**feeds)):
        assert got.dtype == want.dtype
        # a position's products multiply in another order than ONNX's one by one
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_scatter_elements_reductions_combine_every_update(reduction: str, dtype: str) -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(-5, 6, (3, 4)).astype(dtype)
    indices = np.array([[0, 2, -3], [1, 1, 2], [-1, 0, 2]], np.int64)  # repeats in each row
    for axis in (0, 1):
        updates = rng.integers(-5, 6, (3, 3)).astype(dtype)
        model = _model("ScatterElements", data, indices, updates, axis=axis, reduction=reduction)
        _check(model, data, updates)


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
def test_scatter_nd_reductions_combine_every_update(reduction: str) -> None:
    rng = np.random.default_rng(1)
    data = rng.standard_normal((4, 3, 2)).astype(np.float32)
    rows = np.array([[1], [3], [1], [-4]], np.int64)  # row 1 and row 0 (-4) twice
    updates = rng.standard_normal((4, 3, 2)).astype(np.float32)
    _check(_model("ScatterND", data, rows, updates, reduction=reduction), data, updates)
    elements = np.array([[0, 1, 1], [2, 2, 0], [0, 1, 1], [3, -1, 1]], np.int64)
    updates = rng.standard_normal(4).astype(np.float32)
    _check(_model("ScatterND", data, elements, updates, reduction=reduction), data, updates)


def test_a_large_scatter_reduction_is_refused_by_name() -> None:
    data = np.zeros((1 << 13, 1 << 10), np.float32)
    indices = np.zeros((1 << 12, 1), np.int64)
    updates = np.zeros((1 << 12, 1 << 10), np.float32)
    model = _model("ScatterND", data, indices, updates, reduction="max")
    with pytest.raises(gc.onnx.OnnxError, match="with reduction 'max' of 4096 updates"):
        gc.onnx.import_model(model)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize(
    ("op", "indices"),
    [
        ("ScatterElements", np.array([[1, 7]], np.int64)),  # 7 past the 4 rows
        ("ScatterND", np.array([[0, 5]], np.int64)),  # column 5 of 4: flat 5 is in range
    ],
    ids=["elements", "nd coordinate"],
)
def test_indices_out_of_range_raise(op: str, indices: np.ndarray, reduction: str) -> None:
    """An index outside its dim is an error (at import, naming the node, when the
    indices are known then; else at run time), never dropped or moved into another row
    (the mask of mul/max/min matched nothing; ScatterND's flattening put (0, 5) at row
    1, column 1)."""
    if op == "ScatterElements" and reduction == "none":
        pytest.skip("ScatterElements without a reduction is the plain scatter, checked elsewhere")
    data = np.ones((4, 4), np.float32)
    updates = np.full(indices.shape if op == "ScatterElements" else (1,), 5.0, np.float32)
    attrs = {"axis": 0} if op == "ScatterElements" else {}
    model = _model(op, data, indices, updates, reduction=reduction, **attrs)
    feeds = {"data": data, "updates": updates}
    with pytest.raises(gc.GraphcError, match="out of range"):
        gc.compile(gc.onnx.import_model(model), opt_level=2)(**feeds)
