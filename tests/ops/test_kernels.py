"""Per op, over the case table: kernel vs numpy, type rule vs kernel, the `out=` contract."""

from __future__ import annotations

import numpy as np
import pytest

from graphc.ir.graph import OP, PLACEHOLDER, Node
from graphc.ir.registry import all_ops, get_op
from graphc.ir.types import TensorType, TupleType
from graphc.ops.dispatch import prepare
from tests.budget import sample
from tests.op_cases import OpCase, all_cases, build_graph, ops_without_cases
from tests.ops.op_grads import forward_values

CASES = sample(all_cases())


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
    """The (last) node of the case's op, and the arrays its inputs hold."""
    g = build_graph(case)
    nodes = [n for n in g.nodes if n.kind == OP and n.op == case.op]
    assert nodes, f"{case.id} builds no {case.op} node"
    node = nodes[-1]
    feeds = dict(zip((p.name for p in g.inputs), case.inputs(seed)))
    values = forward_values(g, feeds)
    return node, [values[x] if x.kind != PLACEHOLDER else feeds[x.name] for x in node.inputs]


def type_of(value: object) -> TensorType | TupleType:
    if isinstance(value, tuple):
        return TupleType(TensorType.of(np.asarray(v)) for v in value)
    return TensorType.of(np.asarray(value))


def copy_value(value: object) -> object:
    if isinstance(value, tuple):
        return tuple(np.array(v, copy=True) for v in value)
    return np.array(value, copy=True)


def fresh_like(value: object, fill: float) -> object:
    """A buffer (or a tuple of them) of the value's types, filled with `fill`."""
    if isinstance(value, tuple):
        return tuple(np.full(np.shape(v), fill, np.asarray(v).dtype) for v in value)
    return np.full(np.shape(value), fill, np.asarray(value).dtype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_type_rule_matches_kernel(case: OpCase) -> None:
    node, arrays = op_node_and_inputs(case)
    opdef = get_op(case.op)
    attrs, out_type = prepare(opdef, [type_of(x) for x in arrays], dict(node.attrs))
    with np.errstate(all="ignore"):
        result = opdef.kernel(*arrays, **attrs)
    assert out_type == type_of(result)
    assert node.type == out_type


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kernel_writes_into_out(case: OpCase) -> None:
    node, arrays = op_node_and_inputs(case)
    opdef = get_op(case.op)
    copies = [copy_value(x) for x in arrays]
    attrs, out_type = prepare(opdef, [type_of(x) for x in arrays], dict(node.attrs))
    with np.errstate(all="ignore"):
        fresh = opdef.kernel(*arrays, **attrs)
        parts = fresh if isinstance(fresh, tuple) else (fresh,)
        for x in arrays:
            for part in parts:
                for item in x if isinstance(x, tuple) else (x,):
                    assert not np.shares_memory(part, item), f"{case.id}: a result views an input"
        out = fresh_like(fresh, 7)
        returned = opdef.kernel(*arrays, out=out, **attrs)
    if isinstance(fresh, tuple):  # several results: each written into its buffer
        assert all(r is o for r, o in zip(returned, out)) and len(returned) == len(out)
        for o, f in zip(out, fresh):
            np.testing.assert_array_equal(o, f)
    else:
        assert returned is out
        np.testing.assert_array_equal(out, fresh)
    for x, before in zip(arrays, copies):
        for item, old in zip(*(v if isinstance(v, tuple) else (v,) for v in (x, before))):
            np.testing.assert_array_equal(item, old)


@pytest.mark.parametrize("case", [c for c in CASES if get_op(c.op).inplace], ids=lambda c: c.id)
def test_inplace_kernel_may_write_over_an_input(case: OpCase) -> None:
    node, arrays = op_node_and_inputs(case)
    opdef = get_op(case.op)
    attrs, _ = prepare(opdef, [type_of(x) for x in arrays], dict(node.attrs))
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
