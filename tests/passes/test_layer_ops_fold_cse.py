"""Constant folding and CSE see through the layer ops of real models (conv2d, pooling,
layer_norm, pad, cumsum, ...): text in, text out for each, then a sweep over every op
case of those families."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.registry import get_op
from tests.op_cases import OpCase, all_cases
from tests.passes.passcheck import assert_bits_equal, check_pass

X4 = "%x: f32[1,1,4,4] = constant(value=[[[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]]])"  # fmt: skip
X3 = "%x: f32[1,1,3,3] = constant(value=[[[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]]])"
ONES = "%w: f32[1,1,2,2] = constant(value=[[[[1.0, 1.0], [1.0, 1.0]]]])"

# name -> (constants, the op line on %x, its folded value as text)
FOLDS = {
    "conv2d": (
        [X3, ONES],
        "%y: f32[1,1,2,2] = conv2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)",
        "f32[1,1,2,2] = constant(value=[[[[8.0, 12.0], [20.0, 24.0]]]])",
    ),
    "conv_transpose2d": (
        ["%x: f32[1,1,1,2] = constant(value=[[[[1.0, 2.0]]]])", ONES],
        "%y: f32[1,1,2,3] = conv_transpose2d(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1)",
        "f32[1,1,2,3] = constant(value=[[[[1.0, 3.0, 2.0], [1.0, 3.0, 2.0]]]])",
    ),
    "max_pool2d": (
        [X4],
        "%y: f32[1,1,2,2] = max_pool2d(%x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1), ceil_mode=False)",
        "f32[1,1,2,2] = constant(value=[[[[5.0, 7.0], [13.0, 15.0]]]])",
    ),
    "avg_pool2d": (
        [X4],
        "%y: f32[1,1,2,2] = avg_pool2d(%x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), ceil_mode=False, count_include_pad=True, divisor_override=None)",
        "f32[1,1,2,2] = constant(value=[[[[2.5, 4.5], [10.5, 12.5]]]])",
    ),
    "layer_norm": (
        ["%x: f32[2,2] = constant(value=[[1.0, 3.0], [-2.0, 2.0]])",
         "%g: f32[2] = constant(value=[1.0, 2.0])", "%b: f32[] = constant(value=0.5)"],
        "%y: f32[2,2] = layer_norm(%x, %g, %b, axis=1, eps=0.0)",
        "f32[2,2] = constant(value=[[-0.5, 2.5], [-0.5, 2.5]])",
    ),
    "pad": (
        ["%x: f32[2,2] = constant(value=[[1.0, 2.0], [3.0, 4.0]])"],
        '%y: f32[3,3] = pad(%x, pad_width=((1, 0), (0, 1)), mode="constant", constant_values=0.0)',
        "f32[3,3] = constant(value=[[0.0, 0.0, 0.0], [1.0, 2.0, 0.0], [3.0, 4.0, 0.0]])",
    ),
    "cumsum": (
        ["%x: f32[4] = constant(value=[1.0, 2.0, 3.0, 4.0])"],
        "%y: f32[4] = cumsum(%x, axis=0)",
        "f32[4] = constant(value=[1.0, 3.0, 6.0, 10.0])",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(FOLDS))
def test_constant_folding_runs_the_layer_op(name: str) -> None:
    constants, line, folded = FOLDS[name]
    body = "\n  ".join(constants)
    before = f"graph g() {{\n  {body}\n  {line}\n  output %out = %y\n}}"
    after = f"graph g() {{\n  %y: {folded}\n  output %out = %y\n}}"
    check_pass(gc.passes.fold_constants, before, after)


# name -> (inputs, the op line on %x as %{v})
CSES = {
    "conv2d": ("%x: f32[B,2,5,5], %w: f32[3,2,3,3]", "f32[B,3,5,5] = conv2d(%x, %w, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)"),
    "conv2d_epilogue": ("%x: f32[B,2,5,5], %w: f32[3,2,3,3]", 'f32[B,3,3,3] = conv2d_epilogue(%x, %w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, bias=False, activation="relu")'),
    "max_pool2d": ("%x: f32[B,2,4,4]", "f32[B,2,2,2] = max_pool2d(%x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1), ceil_mode=False)"),
    "avg_pool2d": ("%x: f32[B,2,4,4]", "f32[B,2,3,3] = avg_pool2d(%x, kernel_size=(2, 2), stride=(1, 1), padding=(0, 0, 0, 0), ceil_mode=False, count_include_pad=False, divisor_override=None)"),
    "layer_norm": ("%x: f32[B,4], %w: f32[4]", "f32[B,4] = layer_norm(%x, %w, %w, axis=1, eps=1e-05)"),
    "pad": ("%x: f32[B,3]", 'f32[B,5] = pad(%x, pad_width=((0, 0), (1, 1)), mode="reflect", constant_values=0.0)'),
    "cumsum": ("%x: f32[B,3]", "f32[B,3] = cumsum(%x, axis=1)"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CSES))
def test_cse_merges_twin_layer_ops(name: str) -> None:
    inputs, line = CSES[name]
    before = f"""graph g({inputs}) {{
      %a: {line}
      %b: {line}
      %s: {line.split(" =")[0]} = add(%a, %b)
      output %y = %s
    }}"""
    after = f"""graph g({inputs}) {{
      %a: {line}
      %s: {line.split(" =")[0]} = add(%a, %a)
      output %y = %s
    }}"""
    check_pass(gc.passes.eliminate_common_subexpressions, before, after)


# -- every case of the layer families ---------------------------------------------------------

# the modules whose kernels the layer ops of real models brought (issue 15)
FAMILIES = {
    f"graphc.ops.{m}"
    for m in ("activation", "along_axis", "arrays", "conv_epilogue", "conv_kernels", "maxpool", "norm",
              "padding", "pool", "rounding", "sequences", "sorting", "special")
}  # fmt: skip
# and the ones whose kernel is defop.py's generic ufunc kernel or sits among older ops' kernels
# in elementwise.py
MORE = {"expm1", "log1p", "logical_and", "logical_not", "logical_or", "logical_xor", "reciprocal",
        "rsqrt"}  # fmt: skip


def _layer_cases() -> list[OpCase]:
    def layer(op: str) -> bool:
        return getattr(get_op(op).kernel, "__module__", None) in FAMILIES or op in MORE

    return [c for c in all_cases() if layer(c.op) and c.float_dtype == "float64" and c.args]


def _on(case: OpCase, make: object) -> gc.Graph | None:
    g = gc.Graph("g")
    try:
        with g:
            values = [make(i, x) for i, x in enumerate(case.inputs(0))]  # type: ignore[operator]
            gc.output(case.build(*values), name="out")
    except gc.GraphcError:
        return None
    return g


@pytest.mark.parametrize("case", _layer_cases(), ids=lambda c: c.id)
def test_every_layer_case_folds_to_its_kernel_value_and_merges_with_its_twin(
    case: OpCase,
) -> None:
    g = _on(case, lambda i, x: gc.constant(x, name=f"c{i}"))
    if g is None or any(not get_op(n.op).pure for n in g.op_nodes):
        pytest.skip("a builder's refusal, or a random op")
    folded = gc.passes.fold_constants(g)
    with np.errstate(all="ignore"):
        want = gc.run(g, {})
        got = gc.run(folded, {})
    assert_bits_equal(got[0], want[0], case.id)
    sizes = [x.size for x in case.inputs(0)]
    if want[0].size <= max(sizes + [16]):  # no larger than what it reads: it folds
        assert [n.op for n in folded.op_nodes] == ["constant"], str(folded)
    twins = gc.Graph("twins")
    with twins:
        ps = [gc.placeholder(f"x{i}", x.shape, x.dtype) for i, x in enumerate(case.inputs(0))]
        gc.output(case.build(*ps), name="a")
        gc.output(case.build(*ps), name="b")
    merged = gc.passes.eliminate_common_subexpressions(twins)
    # (a Python scalar both builds read is one constant already: tracing reuses it)
    computed = lambda graph: [n for n in graph.op_nodes if not n.is_constant]  # noqa: E731
    assert 2 * len(computed(merged)) == len(computed(twins)), str(merged)
