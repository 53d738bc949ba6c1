"""ONNX layer forms graphc builds from its own ops, checked on hand-written models where
the backend node cases leave gaps: BatchNormalization in training mode against a numpy
reference, 3-D and dilated pools (separable) against a brute-force pool, 3-D Conv and
ConvTranspose (folded into grouped 2-D ones) against onnx's reference evaluator, MaxPool's
column-major Indices, LSTM peepholes at every gate, and ReduceProd of data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc as gc  # noqa: E402

F = TensorProto.FLOAT


def _model(node: object, inputs: dict, outputs: dict, opset: int = 22) -> onnx.ModelProto:
    """A one-node model; inputs and outputs map names to shapes (None: unknown)."""
    graph = helper.make_graph(
        [node], "m",
        [helper.make_tensor_value_info(k, F, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, F, v) for k, v in outputs.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _run(model: onnx.ModelProto, feeds: dict) -> list[list[np.ndarray]]:
    """The imported graph's outputs by the reference interpreter and at O2."""
    graph = gc.onnx.import_model(model)
    feeds = {p.name: feeds[p.name] for p in graph.inputs}
    compiled = gc.compile(graph, opt_level=2)(**feeds)
    compiled = list(compiled) if isinstance(compiled, tuple) else [compiled]
    return [list(gc.run(graph, feeds)), compiled]


# -- BatchNormalization in training mode ----------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_training_mode_matches_numpy(shape: tuple) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    scale, bias = rng.standard_normal((2, 3)).astype(np.float32)
    mean, var = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    momentum, eps = 0.8, 1e-3
    node = helper.make_node(
        "BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
        training_mode=1, momentum=momentum, epsilon=eps,
    )  # fmt: skip
    dims = {"x": ["N", *shape[1:]], "s": [3], "b": [3], "m": [3], "v": [3]}
    model = _model(node, dims, {"y": None, "rm": [3], "rv": [3]}, opset=15)
    axes = (0, *range(2, len(shape)))
    x64 = x.astype(np.float64)
    batch_mean, batch_var = x64.mean(axis=axes), x64.var(axis=axes)  # population variance
    per = (3, *[1] * (len(shape) - 2))
    y = (x64 - batch_mean.reshape(per)) / np.sqrt(batch_var.reshape(per) + eps)
    want = [
        y * scale.reshape(per) + bias.reshape(per),
        mean * momentum + batch_mean * (1 - momentum),
        var * momentum + batch_var * (1 - momentum),
    ]
    for got in _run(model, {"x": x, "s": scale, "b": bias, "m": mean, "v": var}):
        for a, b in zip(got, want):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_batch_norm_training_outputs_before_opset_14_are_refused_by_name() -> None:
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"])
    dims = {"x": [2, 3], "s": [3], "b": [3], "m": [3], "v": [3]}
    model = _model(node, dims, {"y": None, "rm": [3], "rv": [3]}, opset=9)
    with pytest.raises(gc.onnx.OnnxError, match="training mode is not supported before opset 14"):
        gc.onnx.import_model(model)


# -- pools ------------------------------------------------------------------------------------


def _pool_reference(x: np.ndarray, kind: str, kernel: list, strides: list, dilations: list,
                    pads: list, ceil_mode: bool, count_include_pad: bool) -> np.ndarray:  # fmt: skip
    """Pooling as the ONNX spec states it, one window at a time."""
    n = len(kernel)
    sizes = x.shape[2:]
    outs = []
    for k in range(n):
        room = sizes[k] + pads[k] + pads[n + k] - (kernel[k] - 1) * dilations[k] - 1
        out = (-(-room // strides[k]) if ceil_mode else room // strides[k]) + 1
        if ceil_mode and (out - 1) * strides[k] >= sizes[k] + pads[k]:
            out -= 1
        outs.append(out)
    y = np.zeros((*x.shape[:2], *outs))
    for position in itertools.product(*[range(o) for o in outs]):
        taps = [
            [p * strides[k] + j * dilations[k] - pads[k] for j in range(kernel[k])]
            for k, p in enumerate(position)
        ]
        inside = [[t for t in axis if 0 <= t < sizes[k]] for k, axis in enumerate(taps)]
        window = x[(slice(None), slice(None), *np.ix_(*inside))].reshape(*x.shape[:2], -1)
        if kind == "max":
            y[(slice(None), slice(None), *position)] = window.max(axis=-1)
            continue
        counted = [
            [t for t in axis if -pads[k] <= t < sizes[k] + pads[n + k]] if count_include_pad
            else inside[k]
            for k, axis in enumerate(taps)
        ]  # fmt: skip
        divisor = np.prod([len(c) for c in counted])
        y[(slice(None), slice(None), *position)] = window.sum(axis=-1) / divisor
    return y


POOLS = [
    # (kernel, strides, dilations, pads, ceil_mode, count_include_pad)
    ([2, 2, 2], [1, 1, 1], [1, 1, 1], [0] * 6, False, False),
    ([3, 2, 3], [2, 1, 2], [1, 2, 1], [1, 0, 1, 1, 1, 0], True, False),
    ([3, 3, 2], [3, 2, 2], [2, 1, 2], [1, 1, 0, 2, 0, 1], True, True),
    ([2, 3, 2], [2, 2, 3], [2, 2, 1], [0, 1, 1, 1, 1, 1], False, True),
    ([3, 2], [2, 1], [2, 2], [1, 0, 1, 1], True, False),  # 2-D, dilated
    ([2, 3], [1, 2], [3, 2], [1, 1, 0, 2], True, True),
    ([3, 3], [2, 2], [2, 1], [0, 0, 0, 0], False, False),
]


# 2-D MaxPool is graphc's max_pool2d; separable are 3-D pools and dilated 2-D averages
SEPARABLE = [("average", w) for w in POOLS] + [("max", w) for w in POOLS if len(w[0]) == 3]


@pytest.mark.parametrize("kind, window", SEPARABLE, ids=lambda v: str(v))
def test_separable_pools_match_the_spec(kind: str, window: tuple) -> None:
    kernel, strides, dilations, pads, ceil_mode, count_include_pad = window
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads}
    attrs["ceil_mode"] = int(ceil_mode)
    if kind == "average":
        attrs["count_include_pad"] = int(count_include_pad)
    shape = (2, 3, 7, 6, 8)[: 2 + len(kernel)]
    op = "MaxPool" if kind == "max" else "AveragePool"
    model = _model(helper.make_node(op, ["x"], ["y"], **attrs), {"x": ["N", *shape[1:]]},
                   {"y": None})  # fmt: skip
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = _pool_reference(x.astype(np.float64), kind, kernel, strides, dilations, pads,
                           ceil_mode, count_include_pad)  # fmt: skip
    for (got,) in _run(model, {"x": x}):
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_max_pool_indices_in_column_major_order() -> None:
    node = helper.make_node(
        "MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3], strides=[2, 1], pads=[1, 0, 0, 1],
        storage_order=1,
    )  # fmt: skip
    model = _model(node, {"x": [2, 3, 5, 4]}, {"y": None, "i": None})
    model.graph.output[1].type.tensor_type.elem_type = TensorProto.INT64
    x = np.random.default_rng(2).permutation(120).reshape(2, 3, 5, 4).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    for got in _run(model, {"x": x}):
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].dtype == np.int64
        np.testing.assert_array_equal(got[1], want[1])


# -- 3-D convolutions -------------------------------------------------------------------------

CONVS = [
    # (input shape, weight shape, attrs)
    ((2, 2, 5, 6, 4), (3, 2, 3, 2, 3), {}),
    ((1, 4, 6, 5, 5), (4, 2, 2, 3, 2), {"group": 2, "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}),
    ((2, 2, 7, 5, 6), (2, 2, 3, 2, 2), {"dilations": [2, 1, 2], "strides": [2, 2, 1]}),
    ((1, 3, 5, 4, 4), (6, 1, 2, 2, 3), {"group": 3, "auto_pad": "SAME_UPPER"}),
]  # fmt: skip


@pytest.mark.parametrize("case", CONVS, ids=lambda c: str(c[2]))
def test_conv_3d_matches_onnx_reference(case: tuple) -> None:
    x_shape, w_shape, attrs = case
    rng = np.random.default_rng(3)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in (x_shape, w_shape))
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    dims = {"x": ["N", *x_shape[1:]], "w": list(w_shape), "b": [w_shape[0]]}
    model = _model(node, dims, {"y": None})
    want = ReferenceEvaluator(model).run(None, {"x": x, "w": w, "b": b})[0]
    for (got,) in _run(model, {"x": x, "w": w, "b": b}):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


TRANSPOSED = [
    ((1, 1, 3, 4, 5), (1, 2, 3, 3, 3), {}),
    ((2, 4, 3, 4, 3), (4, 1, 3, 2, 2), {"group": 2, "strides": [2, 1, 3], "pads": [1, 0, 1, 0, 1, 1]}),
    ((1, 2, 4, 3, 3), (2, 3, 2, 3, 2), {"strides": [3, 2, 2], "dilations": [2, 1, 2],
                                        "output_padding": [1, 1, 0]}),
    ((1, 2, 3, 3, 2), (2, 2, 3, 2, 2), {"strides": [2, 2, 2], "output_shape": [7, 6, 5]}),
]  # fmt: skip


def _conv_transpose_reference(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, attrs: dict
) -> np.ndarray:
    """Each input element times each kernel tap, added at input * stride + tap * dilation
    (pads cropped), per group; explicit pads and strides only."""
    groups, strides = attrs.get("group", 1), attrs.get("strides", [1, 1, 1])
    pads, dilations = attrs.get("pads", [0] * 6), attrs.get("dilations", [1, 1, 1])
    n, c, *sizes = x.shape
    per_in, (_, per_out, *kernel) = c // groups, w.shape  # w: (C, O / groups, *kernel)
    full = [
        (s - 1) * st + (k - 1) * d + 1 for s, st, k, d in zip(sizes, strides, kernel, dilations)
    ]
    y = np.zeros((n, per_out * groups, *full))
    for g in range(groups):
        xs = x[:, g * per_in : (g + 1) * per_in]
        ws = w[g * per_in : (g + 1) * per_in]
        for tap in itertools.product(*[range(k) for k in kernel]):
            index = tuple(
                slice(t * d, t * d + (s - 1) * st + 1, st)
                for t, d, s, st in zip(tap, dilations, sizes, strides)
            )
            contribution = np.einsum("nc...,co->no...", xs, ws[(slice(None), slice(None), *tap)])
            y[(slice(None), slice(g * per_out, (g + 1) * per_out), *index)] += contribution
    crop = tuple(slice(p, f - e) for p, e, f in zip(pads[:3], pads[3:], full))
    return y[(slice(None), slice(None), *crop)] + b.reshape(-1, 1, 1, 1)


@pytest.mark.parametrize("case", TRANSPOSED, ids=lambda c: str(c[2]))
def test_conv_transpose_3d_matches_onnx_reference(case: tuple) -> None:
    x_shape, w_shape, attrs = case
    rng = np.random.default_rng(4)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in (x_shape, w_shape))
    out_channels = w_shape[1] * attrs.get("group", 1)
    b = rng.standard_normal(out_channels).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    dims = {"x": list(x_shape), "w": list(w_shape), "b": [out_channels]}
    model = _model(node, dims, {"y": None})
    if attrs.get("group", 1) == 1:
        want = ReferenceEvaluator(model).run(None, {"x": x, "w": w, "b": b})[0]
    else:  # onnx's reference has no groups here
        want = _conv_transpose_reference(x, w, b, attrs)
    for (got,) in _run(model, {"x": x, "w": w, "b": b}):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- LSTM peepholes ---------------------------------------------------------------------------


def _lstm_reference(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray,
                    p: np.ndarray, reverse: bool) -> tuple:  # fmt: skip
    """One direction of ONNX's LSTM as its spec writes it (gates i, o, f, c; P: i, o, f)."""
    hidden = r.shape[-1]
    h = c = np.zeros((x.shape[1], hidden))
    gate = lambda v, k: v[..., k * hidden : (k + 1) * hidden]  # noqa: E731
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    ys = []
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        g = x[t] @ w.T + h @ r.T + b[: 4 * hidden] + b[4 * hidden :]
        i = sigmoid(gate(g, 0) + gate(p, 0) * c)
        f = sigmoid(gate(g, 2) + gate(p, 2) * c)
        c = f * c + i * np.tanh(gate(g, 3))
        o = sigmoid(gate(g, 1) + gate(p, 1) * c)
        h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys[::-1] if reverse else ys), h, c


def test_lstm_peepholes_at_each_gate_match_the_spec() -> None:
    rng = np.random.default_rng(5)
    steps, batch, size, hidden = 4, 2, 3, 5
    x = rng.standard_normal((steps, batch, size)).astype(np.float32)
    w = rng.standard_normal((2, 4 * hidden, size)).astype(np.float32) * 0.5
    r = rng.standard_normal((2, 4 * hidden, hidden)).astype(np.float32) * 0.5
    b = rng.standard_normal((2, 8 * hidden)).astype(np.float32) * 0.5
    p = rng.standard_normal((2, 3 * hidden)).astype(np.float32)  # a different weight per gate
    node = helper.make_node(
        "LSTM", ["x", "w", "r", "b", "", "", "", "p"], ["y", "h", "c"],
        hidden_size=hidden, direction="bidirectional",
    )  # fmt: skip
    dims = {"x": [steps, "B", size], "w": list(w.shape), "r": list(r.shape)}
    dims |= {"b": list(b.shape), "p": list(p.shape)}
    model = _model(node, dims, {"y": None, "h": None, "c": None})
    directions = [_lstm_reference(x, w[d], r[d], b[d], p[d], reverse=d == 1) for d in (0, 1)]
    want_y = np.stack([d[0] for d in directions], axis=1)  # (T, 2, B, H)
    want_h, want_c = (np.stack([d[k] for d in directions]) for k in (1, 2))
    for got in _run(model, {"x": x, "w": w, "r": r, "b": b, "p": p}):
        for a, want in zip(got, (want_y, want_h, want_c)):
            np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)


# -- ReduceProd -------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [1, 0])  # 0: along the symbolic dim
def test_reduce_prod_of_data_with_zeros_and_its_gradient(axis: int) -> None:
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [axis])
    node = helper.make_node("ReduceProd", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph(
        [node], "m", [helper.make_tensor_value_info("x", F, ["N", 4 if axis == 1 else 3])],
        [helper.make_tensor_value_info("y", F, None)], [axes],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.array([[1.5, -2.0, 0.5, 3.0], [0.0, 2.0, -1.5, 0.5], [0.0, 2.0, 0.0, 0.5]], np.float32)
    x = x if axis == 1 else np.ascontiguousarray(x.T)  # columns: no zero, one, two
    for (got,) in _run(model, {"x": x}):
        np.testing.assert_array_equal(got, np.prod(x, axis=axis))
    g = gc.onnx.import_model(model, as_placeholders=True)
    traced = gc.trace(lambda v: gc.sum(g(v)), gc.TensorSpec(("N", x.shape[1])))
    _, dx = gc.compile(gc.gradients(traced, wrt=[traced.inputs[0].name]))(x)
    lines = x if axis == 1 else x.T
    others = [[np.prod(np.delete(line, k)) for k in range(len(line))] for line in lines]
    others = np.asarray(others, np.float32)  # the product of the others: no division
    np.testing.assert_allclose(dx, others if axis == 1 else others.T, rtol=1e-6)


# -- Mean of half-precision inputs ---------------------------------------------------------


def test_a_float16_mean_is_summed_in_float32_as_onnxruntime_does() -> None:
    """3 x 60000 overflows float16 (max 65504); their mean does not."""
    h = TensorProto.FLOAT16
    graph = helper.make_graph(
        [helper.make_node("Mean", ["a", "b", "a"], ["y"])], "m",
        [helper.make_tensor_value_info("a", h, [3]), helper.make_tensor_value_info("b", h, [3])],
        [helper.make_tensor_value_info("y", h, [3])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    a = np.array([60000, 1.5, -3], np.float16)
    b = np.array([60000, 2.25, 7.1], np.float16)
    want = ((2 * a.astype(np.float32) + b) / 3).astype(np.float16)
    for got in _run(model, {"a": a, "b": b}):
        assert got[0].dtype == np.float16
        np.testing.assert_array_equal(got[0], want)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString())
    np.testing.assert_array_equal(session.run(None, {"a": a, "b": b})[0], want)


def test_softmax_cross_entropy_with_weights_and_an_ignored_label_and_its_gradient() -> None:
    """SoftmaxCrossEntropyLoss (torch's F.cross_entropy, a training export) was an
    unknown op type: over a symbolic batch, class weights and an ignored label (whose
    weight leaves the mean's divisor), it matches onnxruntime, with its log_prob output,
    and is differentiable as graphc's ops are (torch's gradient)."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    node = helper.make_node(
        "SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["loss", "log_prob"], ignore_index=-1
    )
    graph = helper.make_graph(
        [node], "m",
        [helper.make_tensor_value_info("x", F, ["N", 4, 3]),
         helper.make_tensor_value_info("t", TensorProto.INT64, ["N", 3])],
        [helper.make_tensor_value_info("loss", F, []),
         helper.make_tensor_value_info("log_prob", F, ["N", 4, 3])],
        [onnx.numpy_helper.from_array(np.array([0.5, 1, 2, 0.25], np.float32), "w")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    t = rng.integers(0, 4, (5, 3))
    t[1, 2] = t[3, 0] = -1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got in _run(model, {"x": x, "t": t}):
        for a, b in zip(got, session.run(None, {"x": x, "t": t})):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    loss = gc.onnx.import_model(model)
    grad = gc.run(gc.gradients(loss, wrt=["x"], outputs=["loss"]), {"x": x, "t": t})[-1]
    xt = torch.tensor(x, requires_grad=True)
    weight = torch.tensor([0.5, 1, 2, 0.25])
    torch.nn.functional.cross_entropy(xt, torch.tensor(t), weight, ignore_index=-1).backward()
    np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op, gates", [("LSTM", 4), ("GRU", 3)])
def test_recurrent_layers_with_sequences_shorter_than_the_input(op: str, gates: int) -> None:
    """sequence_lens shorter than the sequence (tf2onnx's masked RNNs, padded batches)
    were refused: past its length an example keeps its state and outputs zeros (a
    reversed one starts at its own last step; one of no steps ends in zeros), as in
    onnxruntime, both directions at once."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    steps, batch, size, hidden = 5, 3, 2, 4
    tensor = onnx.numpy_helper.from_array
    inits = [
        tensor(rng.standard_normal((2, gates * hidden, size)).astype(np.float32), "W"),
        tensor((rng.standard_normal((2, gates * hidden, hidden)) / 2).astype(np.float32), "R"),
        tensor(rng.standard_normal((2, 2 * gates * hidden)).astype(np.float32), "B"),
        tensor(np.array([5, 2, 0], np.int32), "lens"),
    ]
    outs = ["y", "h"] + (["c"] if op == "LSTM" else [])
    node = helper.make_node(
        op, ["x", "W", "R", "B", "lens", "h0"], outs, hidden_size=hidden,
        direction="bidirectional",
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "m",
        [helper.make_tensor_value_info("x", F, [steps, batch, size]),
         helper.make_tensor_value_info("h0", F, [2, batch, hidden])],
        [helper.make_tensor_value_info(o, F, None) for o in outs], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {
        "x": rng.standard_normal((steps, batch, size)).astype(np.float32),
        "h0": rng.standard_normal((2, batch, hidden)).astype(np.float32),
    }
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    for got in _run(model, feeds):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not want[0][2:, :, 1].any() and not want[0][:, :, 2].any()
