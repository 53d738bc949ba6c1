"""The program's names: values named after the user's variables, gc.named, name scopes,
nn modules' attribute paths (graphc/frontend/names.py, graphc/ir/scope.py)."""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn


def op_names(g: gc.Graph) -> list[str]:
    return [n.name for n in g.op_nodes]


def test_a_declared_graph_names_values_after_the_variables_holding_them() -> None:
    g = gc.Graph("tutorial")
    with g:
        x = gc.placeholder("x", ())
        w = gc.placeholder("w", ())
        a = x + w
        b = w + 1
        gc.output(a * b)
    assert op_names(g) == ["a", "const", "b", "mul"]
    assert [n.inputs[0].name for n in g.outputs] == ["mul"]


def test_a_helper_s_value_takes_its_name_inside_the_helper_not_the_caller_s() -> None:
    def step(h: Any, x: Any, w_ih: Any, w_hh: Any) -> Any:
        i2h = x @ w_ih
        h2h = h @ w_hh
        next_h = gc.tanh(i2h + h2h)
        return next_h

    def rnn(xs: Any, h0: Any, w_ih: Any, w_hh: Any) -> Any:
        h = h0
        for t in range(2):
            h = step(h, xs[t], w_ih, w_hh)
        return h

    specs = [gc.TensorSpec(s) for s in [(2, 1, 3), (1, 4), (3, 4), (4, 4)]]
    names = op_names(gc.trace(rnn, *specs))
    assert names == [
        "x", "i2h", "h2h", "add", "next_h",
        "x_1", "i2h_1", "h2h_1", "add_1", "next_h_1",
    ]  # fmt: skip


def test_reassignment_in_a_loop_names_each_value_with_a_suffix() -> None:
    def chain(x: Any) -> Any:
        y = x
        for _ in range(3):
            y = gc.tanh(y)
        return y * 2

    assert op_names(gc.trace(chain, gc.TensorSpec((2,)))) == ["y", "y_1", "y_2", "const", "mul"]


def test_a_scan_body_s_values_are_named_too() -> None:
    def rnn(xs: Any, h0: Any, w: Any) -> Any:
        def step(h: Any, x: Any) -> Any:
            h2h = h @ w
            next_h = gc.tanh(h2h + x)
            return next_h, None

        last, _ = gc.scan(step, h0, xs)
        return last

    g = gc.trace(rnn, gc.TensorSpec((5, 1, 3)), gc.TensorSpec((1, 3)), gc.TensorSpec((3, 3)))
    scan = next(n for n in g.op_nodes if n.op == "scan")
    assert op_names(scan.attrs["body"]) == ["h2h", "add", "next_h"]
    assert "last" in op_names(g)


def test_names_with_an_underscore_first_are_not_used() -> None:
    def f(x: Any) -> Any:
        _tmp = x * 2
        return _tmp + 1

    assert op_names(gc.trace(f, gc.TensorSpec((2,)))) == ["const", "mul", "const_1", "add"]


def test_an_explicit_name_asked_later_wins_and_the_variable_s_name_moves_aside() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2,))
        y = x * 2
        z = y + 1  # y is used here: it is named "y" by now
        gc.output(z, name="y")
    assert g.outputs[0].name == "y"
    assert "y_1" in op_names(g) and g.node("y_1").op == "mul"


def test_trace_keys_may_reuse_a_variable_s_name() -> None:
    def f(x: Any) -> Any:
        doubled = x * 2
        total = doubled + 1
        return {"doubled": total}

    g = gc.trace(f, gc.TensorSpec((2,)))
    assert g.outputs[0].name == "doubled"
    assert g.node("doubled_1").op == "mul"


def test_named_gives_a_value_the_name_asked() -> None:
    def f(x: Any) -> Any:
        parts = [x * k for k in (2, 3)]
        return gc.named(parts[0], "twice") + gc.named(parts[1], "thrice")

    assert {"twice", "thrice"} <= set(op_names(gc.trace(f, gc.TensorSpec((2,)))))


def test_named_is_never_overridden_by_a_variable() -> None:
    def f(x: Any) -> Any:
        y = gc.named(x * 2, "i2h")
        return y + 1

    names = op_names(gc.trace(f, gc.TensorSpec((2,))))
    assert "i2h" in names and "y" not in names


def test_named_refuses_a_name_the_user_gave_another_node() -> None:
    g = gc.Graph("g")
    with g, pytest.raises(gc.GraphcError, match=r"already has placeholder 'w'.*another name"):
        x = gc.placeholder("x", (2,))
        gc.placeholder("w", (2,))
        gc.named(x * 2, "w")


def test_named_leaves_eager_tensors_and_arrays_alone() -> None:
    t = ge.ones(2)
    assert gc.named(t, "w") is t
    with pytest.raises(gc.GraphcError, match="non-empty str"):
        gc.named(t, "")


def test_name_scopes_nest_into_a_path_in_meta() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2,))
        with gc.name_scope("encoder"):
            h = gc.tanh(x)
            with gc.name_scope("attn"):
                a = h * 2
        gc.output(a + 1)
    scopes = {n.name: n.meta.get("scope") for n in g.op_nodes}
    assert scopes == {"h": "encoder", "const": "encoder/attn", "a": "encoder/attn"} | {
        "const_1": None,
        "add": None,
    }
    assert "scope" not in g.node("x").meta  # absent outside every scope


def test_a_name_scope_needs_a_name() -> None:
    with (
        pytest.raises(gc.GraphcError, match="name_scope: expected a non-empty name"),
        gc.name_scope(""),
    ):
        pass


def test_json_keeps_the_scope_and_text_keeps_the_names() -> None:
    def f(x: Any) -> Any:
        with gc.name_scope("encoder"):
            hidden = gc.relu(x)
        return hidden * 2

    g = gc.trace(f, gc.TensorSpec((2,)))
    again = gc.from_json(gc.to_json(g))
    assert again.node("hidden").meta["scope"] == "encoder"
    assert str(gc.parse(str(g))) == str(g)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3, generator=0)

    def forward(self, x: Any) -> Any:
        return gc.relu(self.linear(x))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(Block(), Block())

    def forward(self, x: Any) -> Any:
        return self.encoder(x)


def test_modules_name_parameters_and_scope_ops_by_attribute_path() -> None:
    g = gc.trace(Encoder(), gc.TensorSpec(("B", 3)))
    assert [p.name for p in g.inputs] == [
        "x",
        "encoder.0.linear.weight",
        "encoder.0.linear.bias",
        "encoder.1.linear.weight",
        "encoder.1.linear.bias",
    ]
    assert g.node("encoder.1.linear.bias").meta["scope"] == "encoder/1/linear"
    scopes = [n.meta.get("scope") for n in g.op_nodes]
    assert scopes[0] == "encoder/0/linear" and "encoder/0" in scopes and "encoder/1" in scopes


def test_a_module_called_from_a_traced_function_names_its_parameters_too() -> None:
    model = Encoder()
    g = gc.trace(lambda x: model(x) * 2, gc.TensorSpec((1, 3)))
    assert "encoder.0.linear.weight" in [p.name for p in g.inputs]
    x = np.ones((1, 3), np.float32)
    want = model(ge.from_numpy(x)).detach().numpy() * 2
    np.testing.assert_allclose(g(x, **gc.lifted_feeds(g)), want, rtol=1e-6)


def test_jit_names_values_too() -> None:
    def f(x: Any) -> Any:
        scaled = x * 3
        return scaled + 1

    jitted = gc.jit(f)
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(jitted(x), [4.0, 4.0])
    assert "scaled" in op_names(jitted.graph_for(x))


def test_threads_name_values_from_their_own_frames() -> None:
    barrier = threading.Barrier(2)
    results: dict[str, list[str]] = {}

    def left(x: Any) -> Any:
        barrier.wait()
        apples = x * 2
        barrier.wait()
        return apples + 1

    def right(x: Any) -> Any:
        barrier.wait()
        pears = x * 3
        barrier.wait()
        return pears - 1

    def run(fn: Any) -> None:
        results[fn.__name__] = op_names(gc.trace(fn, gc.TensorSpec((2,))))

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (left, right)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "apples" in results["left"] and "pears" not in results["left"]
    assert "pears" in results["right"] and "apples" not in results["right"]


def test_a_debugger_s_trace_function_stays_and_keeps_seeing_the_traced_code() -> None:
    seen: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "call":
            seen.append(frame.f_code.co_name)
        return None

    def traced_fn(x: Any) -> Any:
        doubled = x * 2
        return doubled + 1

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        g = gc.trace(traced_fn, gc.TensorSpec((2,)))
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(previous)
    assert "traced_fn" in seen
    assert "doubled" in op_names(g)


def test_the_text_form_and_explain_show_the_variables_names() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2,))
        scaled = x * 2
        gc.output(gc.exp(scaled))
    assert "%scaled: f32[2] = mul(%x, %const)" in str(g)
    assert "exp(scaled)" in gc.compile(g, opt_level=0).explain()


def test_an_error_names_the_value_by_its_variable() -> None:
    first = gc.Graph("first")
    with first:
        x = gc.placeholder("x", (2,))
        scaled = x * 2
        gc.output(scaled)
    with gc.Graph("second"), pytest.raises(gc.GraphMismatchError, match="value 'scaled'"):
        y = gc.placeholder("y", (2,))
        gc.output(scaled + y)


def test_onnx_import_keeps_initializer_and_value_names() -> None:
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "0.weight")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "0.bias")
    scale = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "1.weight")
    nodes = [
        helper.make_node("Gemm", ["x", "0.weight", "0.bias"], ["hidden"], "/0/Gemm", transB=1),
        helper.make_node("Relu", ["hidden"], ["act"], "/relu/Relu"),
        helper.make_node("MatMul", ["act", "1.weight"], ["y"], "/1/MatMul"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph(nodes, "mlp", [x], [y], [weight, bias, scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    g = gc.onnx.import_model(model)
    names = {n.name for n in g.nodes}
    assert {"0.weight", "0.bias", "1.weight", "hidden", "act"} <= names
    assert not any(name.startswith("const") for name in names)
    assert g.node("0.weight").is_constant and g.node("hidden").meta["scope"] == "0"
    assert g.outputs[0].name == "y"  # the output node keeps the model's output name
    assert str(gc.parse(str(g))) == str(g)
    feed = rng.standard_normal((2, 3)).astype(np.float32)
    arrays = [numpy_helper.to_array(t) for t in (weight, bias, scale)]
    want = np.maximum(feed @ arrays[0].T + arrays[1], 0) @ arrays[2]
    np.testing.assert_allclose(g(feed), want, rtol=1e-5)
