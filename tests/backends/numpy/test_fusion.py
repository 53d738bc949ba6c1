"""fuse_elementwise and fuse_matmul_epilogue: groups formed, legality, text, locations."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.backends.numpy import fusion as numpy_fusion
from graphc.passes.report import PassLog
from tests.passes.passcheck import check_pass, same_numbers


def test_a_chain_with_broadcast_inputs_becomes_one_node() -> None:
    before = """graph g(%x: f64[B,4], %b: f64[4]) {
      %two: f64[] = constant(value=2.0)
      %a: f64[B,4] = add(%x, %b)
      %t: f64[B,4] = tanh(%a)
      %m: f64[B,4] = mul(%t, %two)
      output %y = %m
    }"""
    after = """graph g(%x: f64[B,4], %b: f64[4]) {
      %two: f64[] = constant(value=2.0)
      %fused: f64[B,4] = fused(%x, %b, body=graph m_body(%x: f64[B,4], %b: f64[4]) {
        %a: f64[B,4] = add(%x, %b)
        %t: f64[B,4] = tanh(%a)
        %two: f64[] = constant(value=2.0)
        %m: f64[B,4] = mul(%t, %two)
        output %out = %m
      })
      output %y = %fused
    }"""
    result = check_pass(numpy_fusion.fuse_elementwise, before, after)
    assert str(gc.parse(str(result))) == str(result)
    assert str(gc.from_json(gc.to_json(result))) == str(result)


def test_an_intermediate_used_outside_ends_its_group() -> None:
    before = """graph g(%x: f64[3,4]) {
      %e: f64[3,4] = exp(%x)
      %s: f64[3,4] = sin(%e)
      %c: f64[3,4] = cos(%s)
      %r: f64[3] = sum(%s, axis=(1,), keepdims=False)
      %t: f64[3,4] = tanh(%c)
      output %y = %t
      output %z = %r
    }"""
    log = PassLog("fuse_elementwise")
    result = numpy_fusion.fuse_elementwise(gc.parse(before), log=log)
    gc.verify(result)
    fused = [n for n in result.op_nodes if n.op == "fused"]
    members = sorted(tuple(m[0] for m in n.meta["members"]) for n in fused)
    assert members == [("c", "t"), ("e", "s")]
    assert any("'s'" in note and "node 'r' (op sum)" in note for note in log.notes)
    same_numbers(gc.parse(before), result)


def test_a_graph_output_ends_its_group_and_shapes_must_match() -> None:
    before = """graph g(%x: f64[3,4], %v: f64[4]) {
      %e: f64[3,4] = exp(%x)
      %s: f64[3,4] = sin(%e)
      %n: f64[4] = neg(%v)
      %a: f64[3,4] = add(%s, %n)
      output %y = %a
      output %z = %e
    }"""
    log = PassLog("fuse_elementwise")
    result = numpy_fusion.fuse_elementwise(gc.parse(before), log=log)
    fused = [n for n in result.op_nodes if n.op == "fused"]
    assert [tuple(m[0] for m in n.meta["members"]) for n in fused] == [("s", "a")]
    notes = "\n".join(log.notes)
    assert "output 'z'" in notes and "shape f64[4] differs" in notes
    same_numbers(gc.parse(before), result)


def test_a_shared_input_inside_the_group_is_fine() -> None:
    # t is used twice, both times inside the group: no reason to stop
    before = """graph g(%x: f64[5]) {
      %t: f64[5] = tanh(%x)
      %a: f64[5] = mul(%t, %t)
      %b: f64[5] = sub(%a, %t)
      output %y = %b
    }"""
    result = numpy_fusion.fuse_elementwise(gc.parse(before))
    assert [n.op for n in result.op_nodes] == ["fused"]
    assert [m[0] for m in result.op_nodes[0].meta["members"]] == ["t", "a", "b"]
    same_numbers(gc.parse(before), result)


def test_fused_nodes_keep_member_locations() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        a = gc.exp(x)
        b = gc.sin(a)
        gc.output(b, name="y")
    result = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    (node,) = result.op_nodes
    assert node.op == "fused"
    assert [m[2] for m in node.meta["members"]] == [a.node.loc, b.node.loc]
    assert node.loc == b.node.loc and "test_fusion.py" in node.loc
    body = node.attrs["body"]
    assert [n.loc for n in body.op_nodes] == [a.node.loc, b.node.loc]


def test_fused_op_rejects_mismatched_inputs() -> None:
    g = gc.parse("""graph g(%x: f64[3]) {
      %e: f64[3] = exp(%x)
      %s: f64[3] = sin(%e)
      output %y = %s
    }""")
    body = numpy_fusion.fuse_elementwise(g).op_nodes[0].attrs["body"]
    with pytest.raises(gc.ShapeError, match="placeholder 'x'"):
        gc.ops.bind("fused", np.ones(4), body=body)
    with pytest.raises(gc.DTypeError, match="placeholder 'x'"):
        gc.ops.bind("fused", np.ones(3, np.float32), body=body)


EPILOGUE_BEFORE = """graph g(%x: f64[B,3], %w: f64[3,2], %b: f64[2]) {
  %m: f64[B,2] = matmul(%x, %w)
  %a: f64[B,2] = add(%b, %m)
  %r: f64[B,2] = ACT(%a)
  output %y = %r
}"""


@pytest.mark.parametrize("act", ["relu", "gelu", "tanh", "sigmoid"])
def test_matmul_bias_activation(act: str) -> None:
    after = f"""graph g(%x: f64[B,3], %w: f64[3,2], %b: f64[2]) {{
      %r: f64[B,2] = matmul_epilogue(%x, %w, %b, bias=True, activation="{act}")
      output %y = %r
    }}"""
    check_pass(numpy_fusion.fuse_matmul_epilogue, EPILOGUE_BEFORE.replace("ACT", act), after)


def test_epilogue_without_bias_or_activation() -> None:
    no_bias = """graph g(%x: f64[4,3], %w: f64[3,2]) {
      %m: f64[4,2] = matmul(%x, %w)
      %r: f64[4,2] = sigmoid(%m)
      output %y = %r
    }"""
    check_pass(
        numpy_fusion.fuse_matmul_epilogue,
        no_bias,
        """graph g(%x: f64[4,3], %w: f64[3,2]) {
          %r: f64[4,2] = matmul_epilogue(%x, %w, bias=False, activation="sigmoid")
          output %y = %r
        }""",
    )
    bias_only = """graph g(%x: f64[4,3], %w: f64[3,2], %b: f64[2]) {
      %m: f64[4,2] = matmul(%x, %w)
      %a: f64[4,2] = add(%m, %b)
      output %y = %a
    }"""
    check_pass(
        numpy_fusion.fuse_matmul_epilogue,
        bias_only,
        """graph g(%x: f64[4,3], %w: f64[3,2], %b: f64[2]) {
          %a: f64[4,2] = matmul_epilogue(%x, %w, %b, bias=True, activation=None)
          output %y = %a
        }""",
    )


def test_epilogue_leaves_shared_or_widening_chains() -> None:
    text = """graph g(%x: f64[4,3], %w: f64[3,2], %b: f64[5,4,2]) {
      %m: f64[4,2] = matmul(%x, %w)
      %a: f64[5,4,2] = add(%m, %b)
      %n: f64[4,2] = matmul(%x, %w)
      %r: f64[4,2] = relu(%n)
      %s: f64[4,2] = sin(%n)
      output %y = %a
      output %z = %r
      output %v = %s
    }"""
    check_pass(numpy_fusion.fuse_matmul_epilogue, text, text)


def test_epilogue_then_elementwise_at_o2_keeps_numbers() -> None:
    g = gc.parse(EPILOGUE_BEFORE.replace("ACT", "gelu"))
    result, report = gc.fuse(gc.optimize(g, level=2), backend="numpy", explain=True)
    assert [n.op for n in result.op_nodes] == ["matmul_epilogue"]
    assert "matmul -> add -> gelu" in str(report)
    same_numbers(g, result)
