"""Per op, over the case table: kernel vs numpy, type rule vs kernel, the `out=` contract."""

from __future__ import annotations

import numpy as np
import pytest

from graphc.ir.graph import OP, PLACEHOLDER, Node
from graphc.ir.registry import all_ops, get_op
from graphc.ir.types import TensorType
from graphc.ops.dispatch import prepare
from tests.op_cases import OpCase, all_cases, build_graph, ops_without_cases

CASES = all_cases()


def test_every_registered_op_has_a_case() -> None:
    assert ops_without_cases() == [], "add cases for these ops to tests/op_cases.py"
    assert {c.op for c in CASES} == set(all_ops())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kernel_matches_numpy(case: OpCase) -> None:
    for seed in (0, 1):
        xs = case.inputs(seed)
        copies = [x.copy() for x in xs]
        with np.errstate(all="ignore"):
            got = np.asarray(case.build(*xs))
            want = np.asarray(case.reference(*xs))
        assert got.shape == want.shape
        assert got.dtype == want.dtype, f"{case.id}: dtype {got.dtype}, numpy gives {want.dtype}"
        rtol, atol = case.tolerance
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        for x, before in zip(xs, copies):
            np.testing.assert_array_equal(x, before)


def op_node_and_inputs(case: OpCase, seed: int = 0) -> tuple[Node, list[np.ndarray]]:
    """The node the case's output comes from, and the arrays its inputs hold."""
    g = build_graph(case)
    node = g.outputs[0].inputs[0]
    assert node.kind == OP and node.op == case.op, f"{case.id} builds {node.op}, not {case.op}"
    feeds = dict(zip((p.name for p in g.inputs), case.inputs(seed)))
    arrays = []
    for x in node.inputs:
        if x.kind == PLACEHOLDER:
            arrays.append(feeds[x.name])
        else:
            assert x.is_constant, (
                f"{case.id}: input {x.name} is neither a placeholder nor a constant"
            )
            arrays.append(np.array(x.value))
    return node, arrays


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_type_rule_matches_kernel(case: OpCase) -> None:
    node, arrays = op_node_and_inputs(case)
    opdef = get_op(case.op)
    attrs, out_type = prepare(opdef, [TensorType.of(x) for x in arrays], dict(node.attrs))
    with np.errstate(all="ignore"):
        result = np.asarray(opdef.kernel(*arrays, **attrs))
    assert out_type == TensorType.of(result)
    assert node.type == out_type


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kernel_writes_into_out(case: OpCase) -> None:
    node, arrays = op_node_and_inputs(case)
    opdef = get_op(case.op)
    copies = [x.copy() for x in arrays]
    attrs, out_type = prepare(opdef, [TensorType.of(x) for x in arrays], dict(node.attrs))
    with np.errstate(all="ignore"):
        fresh = np.asarray(opdef.kernel(*arrays, **attrs))
        for x in arrays:
            assert not np.shares_memory(fresh, x), f"{case.id}: the result is a view of an input"
        out = np.full(fresh.shape, 7, fresh.dtype)
        returned = opdef.kernel(*arrays, out=out, **attrs)
    assert returned is out
    np.testing.assert_array_equal(out, fresh)
    for x, before in zip(arrays, copies):
        np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("case", [c for c in CASES if get_op(c.op).inplace], ids=lambda c: c.id)
def test_inplace_kernel_may_write_over_an_input(case: OpCase) -> None:
    node, arrays = op_node_and_inputs(case)
    opdef = get_op(case.op)
    attrs, _ = prepare(opdef, [TensorType.of(x) for x in arrays], dict(node.attrs))
    with np.errstate(all="ignore"):
        fresh = np.asarray(opdef.kernel(*arrays, **attrs))
        fitting = [
            k for k, x in enumerate(arrays) if x.shape == fresh.shape and x.dtype == fresh.dtype
        ]
        for k in fitting:
            args = list(arrays)
            args[k] = buffer = arrays[k].copy()
            assert opdef.kernel(*args, out=buffer, **attrs) is buffer
            np.testing.assert_array_equal(buffer, fresh, err_msg=f"{case.id}: out= input {k}")
