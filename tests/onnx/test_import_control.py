"""ONNX If, Loop and Scan read as graphc's cond, scan and while_loop, checked against
onnxruntime on hand-written models of each form (torch's for-loop export, a loop that
ends on its condition, Scan with axes and directions, bodies reading outer values)."""

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
    onnx.checker.check_model(model, full_check=True)
    return model


def _const(name: str, value: object) -> object:
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(value))
    )


def _both(model: onnx.ModelProto, feeds: dict, **kw: object) -> gc.Graph:
    """Import, then compare the reference and O2 with onnxruntime; the graph."""
    graph = gc.onnx.import_model(model, **kw)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    exe = gc.compile(graph, opt_level=2)
    compiled = exe(**{p.name: feeds[p.name] for p in graph.inputs})
    compiled = list(compiled) if isinstance(compiled, tuple) else [compiled]
    for got in (gc.run(graph, {p.name: feeds[p.name] for p in graph.inputs}), compiled):
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    return graph


def _if_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", F, ["N"])
    y = helper.make_tensor_value_info("y", F, ["N"])
    then_out = helper.make_tensor_value_info("t", F, ["N"])
    else_out = helper.make_tensor_value_info("e", F, ["N"])
    then_g = helper.make_graph(
        [_const("two", np.float32(2)), helper.make_node("Mul", ["x", "two"], ["t"])],
        "then", [], [then_out],
    )  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [else_out])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        _const("zero", np.float32(0)),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    return _model(nodes, [x], [y])


def test_if_becomes_cond_reading_outer_values() -> None:
    model = _if_model()
    for x in ([1.0, 2.0, 3.0], [-1.0, -5.0]):
        graph = _both(model, {"x": np.array(x, np.float32)})
    assert [n.op for n in graph.op_nodes].count("cond") == 1


def test_if_on_a_known_condition_is_its_branch() -> None:
    model = _if_model()
    nodes = list(model.graph.node)
    nodes[2] = _const("c", np.array(True))
    model = _model(nodes, list(model.graph.input), list(model.graph.output))
    graph = _both(model, {"x": np.array([1.0, -2.0], np.float32)})
    assert "cond" not in {n.op for n in graph.op_nodes}


def _counting_loop(trips: object, stop_early: bool) -> onnx.ModelProto:
    """acc = x; for i in range(trips): acc = acc * 0.5 + i; ys[i] = acc (scan output);
    with stop_early the body's condition is sum(acc) > 1 (no scan output then)."""
    x = helper.make_tensor_value_info("x", F, [3])
    y = helper.make_tensor_value_info("y", F, [3])
    body_in = [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("acc", F, [3]),
    ]
    nodes = [
        _const("half", np.float32(0.5)),
        helper.make_node("Mul", ["acc", "half"], ["scaled"]),
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Add", ["scaled", "fi"], ["acc_out"]),
    ]
    outs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])]
    outs.append(helper.make_tensor_value_info("acc_out", F, [3]))
    if stop_early:
        nodes += [
            helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
            _const("one", np.float32(1)),
            helper.make_node("Greater", ["total", "one"], ["cond_out"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
        nodes.append(helper.make_node("Identity", ["acc_out"], ["y_t"]))
        outs.append(helper.make_tensor_value_info("y_t", F, [3]))
    body = helper.make_graph(nodes, "body", body_in, outs)
    graph_outs = [y]
    loop_outs = ["y"]
    if not stop_early:
        graph_outs.append(helper.make_tensor_value_info("ys", F, [None, 3]))
        loop_outs.append("ys")
    top = [_const("cond", np.array(True))]
    inputs = [x]
    if isinstance(trips, int):
        top.append(_const("M", np.int64(trips)))
    else:
        inputs.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
    top.append(helper.make_node("Loop", ["M", "cond", "x"], loop_outs, body=body))
    return _model(top, inputs, graph_outs)


def test_for_loop_becomes_scan_with_stacked_outputs() -> None:
    model = _counting_loop(5, stop_early=False)
    graph = _both(model, {"x": np.array([8.0, -4.0, 1.0], np.float32)})
    assert "scan" in {n.op for n in graph.op_nodes}
    # a scan can be differentiated: d y / d x = 0.5**5
    grad = gc.gradients(graph, wrt=["x"], outputs=["y"], seeds=True)
    seed = [p.name for p in grad.inputs if p.name != "x"]
    feeds = {"x": np.ones(3, np.float32), seed[0]: np.ones(3, np.float32)}
    dx = gc.run(grad, feeds)[-1]
    np.testing.assert_allclose(dx, np.full(3, 0.5**5), rtol=1e-6)


def test_loop_ending_on_its_condition_becomes_while_loop() -> None:
    model = _counting_loop(100, stop_early=True)
    for x in ([8.0, -4.0, 1.0], [0.1, 0.1, 0.1], [-9.0, 0.0, 0.0]):
        graph = _both(model, {"x": np.array(x, np.float32)})
    assert "while_loop" in {n.op for n in graph.op_nodes}


def test_loop_with_a_trip_count_fed_at_run_time() -> None:
    model = _counting_loop("M", stop_early=True)
    for trips in (0, 1, 7):
        _both(model, {"x": np.array([0.5, 0.0, 0.0], np.float32), "M": np.array(trips, np.int64)})


def test_scan_outputs_of_a_loop_that_may_stop_early_are_refused() -> None:
    model = _counting_loop("M", stop_early=False)
    with pytest.raises(OnnxError, match=r"\(Loop, opset 17\).*scan outputs"):
        gc.onnx.import_model(model)


@pytest.mark.parametrize("axis, direction", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_with_axes_and_directions(axis: int, direction: int) -> None:
    """Running sum over the scan axis of x (outer weight w read by the body)."""
    x = helper.make_tensor_value_info("x", F, [4, 3] if axis == 0 else [3, 4])
    w = helper.make_tensor_value_info("w", F, [3])
    final = helper.make_tensor_value_info("final", F, [3])
    ys = helper.make_tensor_value_info("ys", F, [4, 3] if axis == 0 else [3, 4])
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x_t", "w"], ["wx"]),
            helper.make_node("Add", ["s", "wx"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y_t"]),
        ],
        "body",
        [helper.make_tensor_value_info(n, F, [3]) for n in ("s", "x_t")],
        [helper.make_tensor_value_info(n, F, [3]) for n in ("s_out", "y_t")],
    )
    nodes = [
        _const("s0", np.zeros(3, np.float32)),
        helper.make_node(
            "Scan", ["s0", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
            scan_input_axes=[axis], scan_input_directions=[direction],
            scan_output_axes=[axis], scan_output_directions=[direction],
        ),
    ]  # fmt: skip
    model = _model(nodes, [x, w], [final, ys])
    rng = np.random.default_rng(axis * 2 + direction)
    feeds = {"x": rng.normal(size=(4, 3) if axis == 0 else (3, 4)).astype(np.float32)}
    feeds["w"] = rng.normal(size=3).astype(np.float32)
    graph = _both(model, feeds)
    assert "scan" in {n.op for n in graph.op_nodes}


@pytest.mark.parametrize("direction", [0, 1])
def test_opset_8_scan_runs_each_example_of_its_batch(direction: int) -> None:
    """Opset 8's Scan: states (batch, ...) and inputs (batch, sequence, ...), sequence_lens
    all full; a running sum and a running product over each example."""
    x = helper.make_tensor_value_info("x", F, [3, 4, 2])
    s0 = helper.make_tensor_value_info("s0", F, [3, 2])
    outs = [helper.make_tensor_value_info(n, F, None) for n in ("sum", "prod", "ys")]
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s", "x_t"], ["s_out"]),
            helper.make_node("Mul", ["p", "x_t"], ["p_out"]),
            helper.make_node("Sub", ["s_out", "p_out"], ["y_t"]),
        ],
        "body",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s", "p", "x_t")],
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s_out", "p_out", "y_t")],
    )
    lens = numpy_helper.from_array(np.full(3, 4, np.int64), "lens")
    node = helper.make_node(
        "Scan", ["lens", "s0", "s0", "x"], ["sum", "prod", "ys"], body=body, num_scan_inputs=1,
        directions=[direction],
    )  # fmt: skip
    graph = helper.make_graph([node], "m", [s0, x], outs, [lens])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 8
    rng = np.random.default_rng(direction)
    feeds = {"s0": rng.normal(size=(3, 2)).astype(np.float32)}
    feeds["x"] = rng.normal(size=(3, 4, 2)).astype(np.float32)
    sums, prods, ys = [], [], []
    for b in range(3):
        s, p, y = feeds["s0"][b], feeds["s0"][b], []
        for t in range(4)[:: -1 if direction else 1]:
            s, p = s + feeds["x"][b, t], p * feeds["x"][b, t]
            y.append(s - p)
        sums, prods, ys = [*sums, s], [*prods, p], [*ys, np.stack(y)]
    graph = gc.onnx.import_model(model)
    for got in (gc.run(graph, feeds), gc.compile(graph, opt_level=2)(**feeds)):
        for a, want in zip(got, (np.stack(sums), np.stack(prods), np.stack(ys))):
            np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-6)


def _slicing_loop(trips: int) -> onnx.ModelProto:
    """acc = x; for i in range(trips): acc = acc + table[i:i+1] (a Slice at the counter,
    which a static graph must know); ys[i] = acc."""
    x = helper.make_tensor_value_info("x", F, [1])
    body_in = [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("acc", F, [1]),
    ]
    nodes = [
        _const("zero", np.array([0], np.int64)),
        _const("one", np.int64(1)),
        helper.make_node("Add", ["i", "one"], ["end"]),
        helper.make_node("Unsqueeze", ["i", "zero"], ["start_1"]),
        helper.make_node("Unsqueeze", ["end", "zero"], ["end_1"]),
        helper.make_node("Slice", ["table", "start_1", "end_1"], ["row"]),
        helper.make_node("Add", ["acc", "row"], ["acc_out"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Identity", ["acc_out"], ["y_t"]),
    ]
    outs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])]
    outs += [helper.make_tensor_value_info(n, F, [1]) for n in ("acc_out", "y_t")]
    body = helper.make_graph(nodes, "body", body_in, outs)
    top = [
        _const("table", np.arange(trips, dtype=np.float32) ** 2),
        _const("cond", np.array(True)),
        _const("M", np.int64(trips)),
        helper.make_node("Loop", ["M", "cond", "x"], ["y", "ys"], body=body),
    ]
    y = helper.make_tensor_value_info("y", F, [1])
    return _model(top, [x], [y, helper.make_tensor_value_info("ys", F, [trips, 1])])


def test_a_for_loop_slicing_at_its_counter_is_unrolled() -> None:
    graph = _both(_slicing_loop(6), {"x": np.array([0.5], np.float32)})
    assert not {"scan", "while_loop"} & {n.op for n in graph.op_nodes}
    users = graph.users()
    assert all(users.get(n) for n in graph.op_nodes)  # nothing of the abandoned scan is left
    with pytest.raises(OnnxError, match="loop-carried.*unrolled for it up to 64 trips"):
        gc.onnx.import_model(_slicing_loop(65))  # past the unrolling limit: refused by name


def test_a_for_loop_over_a_symbolic_dim_is_a_scan_of_that_length() -> None:
    """graphc writes a scan over a symbolic dim as a Loop counting Shape(x)[0]: reading
    it back failed (int() of the symbol, a tracing error about the user's line). A trip
    count that is a symbolic dim is the scan's length; its rows, outputs and gradient
    are those of the graph exported, at any length."""

    def running(x: object) -> object:
        def body(c: object, row: object) -> tuple:
            c = gc.tanh(c + row)
            return c, c * 2.0

        return gc.scan(body, gc.constant(np.zeros(3, np.float32)), x)

    graph = gc.trace(running, gc.TensorSpec(("T", 3)))
    back = gc.onnx.import_model(gc.onnx.export_model(graph))
    assert back.inputs[0].type.shape == ("T", 3)
    session = ort.InferenceSession(
        gc.onnx.export_model(back).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    for length in (4, 1):
        x = np.random.default_rng(length).standard_normal((length, 3)).astype(np.float32)
        want = gc.run(graph, {"x": x})
        for got in (gc.run(back, {"x": x}), session.run(None, {"x": x})):
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    loss = gc.trace(lambda v: gc.sum(back(v)[1]), gc.TensorSpec(("T", 3)))
    grads = gc.trace(lambda v: gc.sum(graph(v)[1]), gc.TensorSpec(("T", 3)))
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        gc.run(gc.gradients(loss, wrt=["v"]), {"v": x})[-1],
        gc.run(gc.gradients(grads, wrt=["v"]), {"v": x})[-1],
        rtol=1e-6,
    )


def test_a_loop_that_may_stop_early_within_a_symbolic_count_is_named() -> None:
    """A while loop bounded by a symbolic dim needs the bound as a value, which graphc
    cannot compute: refused naming the dim and `dims=`, which reads it."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["a", "a"], ["a2"]),
            helper.make_node("ReduceSum", ["a2"], ["s"], keepdims=0),
            helper.make_node("Less", ["s", "limit"], ["go"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a", F, [3]),
        ],
        [
            helper.make_tensor_value_info("go", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a2", F, [3]),
        ],
        [numpy_helper.from_array(np.array(100.0, np.float32), "limit")],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
        helper.make_node("Loop", ["n", "", "a0"], ["a"], body=body),
    ]
    inits = [
        numpy_helper.from_array(np.int64(0), "zero"),
        numpy_helper.from_array(np.full(3, 2.0, np.float32), "a0"),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, ["T", 2])],
        [helper.make_tensor_value_info("a", F, [3])],
        inits,
    )
    with pytest.raises(OnnxError, match=r"stop early.*symbolic dim 'T'.*dims="):
        gc.onnx.import_model(model)
    _both(model, {"x": np.zeros((2, 2), np.float32)}, dims={"T": 2})  # 2 -> 4 -> 16
    _both(model, {"x": np.zeros((5, 2), np.float32)}, dims={"T": 5})  # stops at 256
