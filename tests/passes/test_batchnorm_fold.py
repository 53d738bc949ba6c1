"""fold_batch_norm: eval-mode batch norm on constants folded into conv2d's and matmul's
weight and one bias. Value-changing, so opt-in (alone or with fast_math): checked as text
and within rounding of the unfolded graph, never in the exact pipeline."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.passes.report import PassLog
from tests.passes.passcheck import same_numbers

FOLDED = "fold a per-channel scale and shift into conv2d's weight [fast_math]"

# conv2d, its bias, then batch norm's (x - mean) * rsqrt(var + eps) * gamma + beta, as
# fold_constants leaves them; values chosen so the folded constants print exactly
CONV_BN = """graph g(%x: f32[B,1,3,3]) {
  %w: f32[2,1,2,2] = constant(value=[[[[1.0, 2.0], [3.0, 4.0]]], [[[-1.0, 0.5], [0.25, 2.0]]]])
  %b: f32[2,1,1] = constant(value=[[[1.0]], [[2.0]]])
  %mean: f32[2,1,1] = constant(value=[[[0.5]], [[-1.0]]])
  %rs: f32[2,1,1] = constant(value=[[[2.0]], [[0.5]]])
  %gamma: f32[2,1,1] = constant(value=[[[0.5]], [[4.0]]])
  %beta: f32[2,1,1] = constant(value=[[[3.0]], [[-3.0]]])
  %c: f32[B,2,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
  %a: f32[B,2,2,2] = add(%c, %b)
  %s: f32[B,2,2,2] = sub(%a, %mean)
  %m: f32[B,2,2,2] = mul(%s, %rs)
  %n: f32[B,2,2,2] = mul(%m, %gamma)
  %y: f32[B,2,2,2] = add(%n, %beta)
  %r: f32[B,2,2,2] = relu(%y)
  output %out = %r
}"""

# s = rs * gamma = (1, 2); t = ((b - mean) * rs) * gamma + beta = (3.5, 3.0)
CONV_BN_FOLDED = """graph g(%x: f32[B,1,3,3]) {
  %w_folded: f32[2,1,2,2] = constant(value=[[[[1.0, 2.0], [3.0, 4.0]]], [[[-2.0, 1.0], [0.5, 4.0]]]])
  %c: f32[B,2,2,2] = conv2d(%x, %w_folded, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
  %c_bias: f32[2,1,1] = constant(value=[[[3.5]], [[3.0]]])
  %y: f32[B,2,2,2] = add(%c, %c_bias)
  %r: f32[B,2,2,2] = relu(%y)
  output %out = %r
}"""  # fmt: skip


def _check(before: str, expected: str, log: PassLog | None = None) -> gc.Graph:
    graph = gc.parse(before)
    result = gc.passes.fold_batch_norm(graph, log=log)
    gc.verify(result)
    assert str(result) == str(gc.parse(expected)), f"got:\n{result}"
    same_numbers(graph, result, rtol=1e-5)
    return result


def test_conv_bias_and_batch_norm_fold_into_the_weight_and_one_bias() -> None:
    log = PassLog("fold_batch_norm")
    _check(CONV_BN, CONV_BN_FOLDED, log)
    assert log.counts == {FOLDED: 1}
    assert log.notes == ["'y' <- conv2d -> add -> sub -> mul -> mul -> add"]


def test_linear_then_batch_norm_keeps_the_transposed_weight() -> None:
    _check(
        """graph g(%x: f64[B,3]) {
          %w: f64[2,3] = constant(value=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
          %wt: f64[3,2] = transpose(%w, axes=(1, 0))
          %s: f64[2] = constant(value=[0.5, -2.0])
          %t: f64[2] = constant(value=[1.0, 1.0])
          %m: f64[B,2] = matmul(%x, %wt)
          %d: f64[B,2] = div(%m, %s)
          %a: f64[B,2] = add(%t, %d)
          output %y = %a
        }""",
        """graph g(%x: f64[B,3]) {
          %w_folded: f64[2,3] = constant(value=[[2.0, 4.0, 6.0], [-2.0, -2.5, -3.0]])
          %wt: f64[3,2] = transpose(%w_folded, axes=(1, 0))
          %m: f64[B,2] = matmul(%x, %wt)
          %m_bias: f64[2] = constant(value=[1.0, 1.0])
          %a: f64[B,2] = add(%m, %m_bias)
          output %y = %a
        }""",
    )


WEIGHT = (
    "%w: f32[2,1,2,2] = constant(value=[[[[1.0, 2.0], [3.0, 4.0]]], [[[1.0, 2.0], [3.0, 4.0]]]])"
)
SCALE = "%k: f32[2,1,1] = constant(value=[[[2.0]], [[3.0]]])"
LEFT_ALONE = {
    "weight not constant": ("%w: f32[2,1,2,2]", "", SCALE, "mul(%c, %k)"),
    "shifts only": ("", WEIGHT, SCALE, "add(%c, %k)"),
    "constant on the left of sub": ("", WEIGHT, SCALE, "sub(%k, %c)"),
    "varies along the width": ("", WEIGHT, "%k: f32[2] = constant(value=[2.0, 3.0])", "mul(%c, %k)"),
    "scale not finite": ("", WEIGHT, "%k: f32[2,1,1] = constant(value=[[[inf]], [[3.0]]])", "mul(%c, %k)"),
    "product read elsewhere": ("", WEIGHT, SCALE, "mul(%c, %k)"),
}  # fmt: skip


def _one_op(weight_input: str, weight: str, constant: str, op: str, shared: bool) -> str:
    inputs = ", ".join(["%x: f32[1,1,3,3]"] + ([weight_input] if weight_input else []))
    return f"""graph g({inputs}) {{
      {weight}
      {constant}
      %c: f32[1,2,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
      %y: f32[1,2,2,2] = {op}
      output %out = %y
      {"output %z = %c" if shared else ""}
    }}"""  # fmt: skip


@pytest.mark.parametrize("name", list(LEFT_ALONE))
def test_chains_that_do_not_fold_are_left_alone(name: str) -> None:
    graph = gc.parse(_one_op(*LEFT_ALONE[name], shared=name == "product read elsewhere"))
    assert str(gc.passes.fold_batch_norm(graph)) == str(graph)
    # the same graph with a constant weight, a scale per channel and no other reader folds
    control = gc.parse(_one_op("", WEIGHT, SCALE, "mul(%c, %k)", shared=False))
    assert "conv2d(%x, %w_folded" in str(gc.passes.fold_batch_norm(control))


# -- models: parameters bound as constants ---------------------------------------------------


def _stats(rng: np.random.Generator, c: int) -> list[np.ndarray]:
    """running_mean, running_var, weight, bias of a trained-looking batch norm."""
    return [
        rng.standard_normal(c).astype(np.float32),
        rng.uniform(0.2, 3.0, c).astype(np.float32),
        rng.uniform(0.5, 1.5, c).astype(np.float32),
        rng.standard_normal(c).astype(np.float32),
    ]


@pytest.mark.parametrize("groups", [1, 4])
def test_conv_bn_relu_with_constant_parameters(groups: int) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4 // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    mean, var, gamma, beta = _stats(rng, 8)

    def block(x: object) -> object:
        y = gc.conv2d(x, w, b, padding=1, groups=groups)
        return gc.relu(gc.batch_norm(y, mean, var, gamma, beta, training=False).output)

    g = gc.trace(block, gc.TensorSpec(("B", 4, 6, 6)))
    exact = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    assert any(n.op in ("mul", "fused") for n in exact.op_nodes)  # not folded by default
    fast, report = gc.optimize(g, level=2, fast_math=True, explain=True)
    fast = gc.fuse(fast, backend="numpy", fast_math=True)
    assert [n.op for n in fast.op_nodes] == ["constant", "constant", "conv2d_epilogue"]
    assert report.value_changing == [FOLDED]
    x = rng.standard_normal((3, 4, 6, 6)).astype(np.float32)
    (want,) = gc.run(g, {"x": x})
    (got,) = gc.run(fast, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gc.compile(g, fast_math=True)(x=x), want, rtol=1e-5, atol=1e-5)


def test_an_nn_model_in_eval_mode_bound_to_its_state() -> None:
    """Conv2d -> BatchNorm2d -> ReLU -> Flatten -> Linear -> BatchNorm1d: trace it, bind its
    parameters and buffers as constants by calling the graph on arrays inside a trace,
    and both batch norms fold away."""
    rng = np.random.default_rng(1)
    model = nn.Sequential(
        nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(16, 3),
        nn.BatchNorm1d(3),
    )  # fmt: skip
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    for key in state:
        if key.endswith(("running_mean", "bias")):
            state[key] = rng.standard_normal(state[key].shape).astype(np.float32)
        elif key.endswith(("running_var", "1.weight", "5.weight")):
            state[key] = rng.uniform(0.3, 2.0, state[key].shape).astype(np.float32)
    model.load_state_dict(state)
    model.eval()
    own = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    g = gc.trace(model, gc.TensorSpec(("B", 2, 4, 4)), params=own)
    arrays = [state[p.name] for p in g.inputs[1:]]  # named by their state_dict keys
    bound = gc.trace(lambda x: g(x, *arrays), gc.TensorSpec(("B", 2, 4, 4)))
    folded = gc.fuse(gc.optimize(bound, level=2, fast_math=True), backend="numpy", fast_math=True)
    ops = [n.op for n in folded.op_nodes if n.op != "constant"]
    assert ops == ["conv2d_epilogue", "reshape", "transpose", "matmul_epilogue"], folded
    x = rng.standard_normal((5, 2, 4, 4)).astype(np.float32)
    want = model(gc.eager.tensor(x)).detach().numpy()
    np.testing.assert_allclose(gc.run(folded, {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_the_exact_pipeline_never_folds() -> None:
    g = gc.parse(CONV_BN)
    for level in (1, 2):
        result, report = gc.optimize(g, level=level, explain=True)
        assert "fold_batch_norm" not in [p.name for p in report.passes]
        assert any(n.op == "conv2d" or n.op == "conv2d_epilogue" for n in result.op_nodes)
        assert len([n for n in result.op_nodes if n.op != "constant"]) > 1
    _, report = gc.optimize(g, level=1, fast_math=True, explain=True)
    assert report.value_changing == [FOLDED]
    exe = gc.compile(g, fast_math=True)
    x = np.ones((2, 1, 3, 3), np.float32)
    assert FOLDED in exe.explain(x=x).splitlines()[0]


def test_a_float32_weight_of_a_float64_convolution_folds_in_float64() -> None:
    before = CONV_BN.replace("%x: f32[B,1,3,3]", "%x: f64[B,1,3,3]")
    for name in ("c", "a", "s", "m", "n", "y", "r"):
        before = before.replace(f"%{name}: f32[B,2,2,2]", f"%{name}: f64[B,2,2,2]")
    result = gc.passes.fold_batch_norm(gc.parse(before))
    gc.verify(result)
    assert str(result.node("w_folded").type) == "f64[2,1,2,2]"
    assert str(result.node("c_bias").type) == "f64[2,1,1]"
    same_numbers(gc.parse(before), result, rtol=1e-12)
