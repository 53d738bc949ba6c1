"""Per op, over the case table: VJP rules against central finite differences (float64).

First order on every differentiable case (the rule run on numpy arrays); second order
on every case that is smooth at its inputs (all elementwise ops among them), by
differentiating the backward graph the rules record, against finite differences of
the first-order gradient.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.budget import sample
from tests.op_cases import BUILDER_CASES, OpCase, all_cases, build_graph
from tests.ops.op_grads import backward_graph, forward_values, numeric_vjp, pullback

GRAD_CASES = sample(
    c for c in all_cases() + BUILDER_CASES if c.has_grad and c.float_dtype == "float64"
)
SECOND_ORDER = [c for c in GRAD_CASES if c.smooth]


def assert_grads_close(got: np.ndarray, want: np.ndarray, what: str, tol: float = 1e-6) -> None:
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_vjp_matches_finite_differences(case: OpCase) -> None:
    g = build_graph(case)
    xs = case.inputs(seed=3)
    values = forward_values(g, {p.name: x for p, x in zip(g.inputs, xs)})
    out = g.outputs[0].inputs[0]
    ct = np.random.default_rng(4).standard_normal(out.type.shape).astype(out.type.dtype)
    wrt = [p for p, d in zip(g.inputs, case.differentiable) if d]
    cts = pullback(g.nodes, values, {out: ct}, wrt)
    # a float32 result (cast down) is too coarse for tiny steps; such ops are linear
    eps, tol = (1e-6, 1e-6) if out.type.dtype == np.float64 else (1e-2, 1e-3)
    for p in wrt:
        i = g.inputs.index(p)
        assert p in cts, f"{case.id}: no gradient reaches input {i}"
        want = numeric_vjp(case.build, xs, ct, i, eps)
        assert_grads_close(np.asarray(cts[p]), want, f"{case.id}: d/dx{i}", tol)


@pytest.mark.parametrize("case", SECOND_ORDER, ids=lambda c: c.id)
def test_second_derivative_matches_finite_differences(case: OpCase) -> None:
    xs = case.inputs(seed=5)
    wrt = [i for i, d in enumerate(case.differentiable) if d]
    bwd = backward_graph(case.build, xs, wrt)
    rng = np.random.default_rng(6)
    ct_node = bwd.node("ct")
    ct = rng.standard_normal(ct_node.type.shape).astype(ct_node.type.dtype)
    seeds = {o.inputs[0]: rng.standard_normal(o.type.shape) for o in bwd.outputs}

    def h(*args: np.ndarray) -> np.ndarray:
        # sum over outputs of <seed, gradient>: a scalar function of the inputs
        values = forward_values(bwd, {**{f"x{i}": a for i, a in enumerate(args)}, "ct": ct})
        return np.asarray(sum(np.sum(s * values[n]) for n, s in seeds.items()))

    values = forward_values(bwd, {**{f"x{i}": a for i, a in enumerate(xs)}, "ct": ct})
    targets = [bwd.node(f"x{i}") for i in wrt]
    cts = pullback(bwd.nodes, values, seeds, targets)
    for i, node in zip(wrt, targets):
        want = numeric_vjp(h, xs, np.ones(()), i)
        got = np.asarray(cts[node]) if node in cts else np.zeros_like(want)
        assert_grads_close(got, want, f"{case.id}: second derivative d/dx{i}")


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype"),
    [("float32", "float64"), ("float64", "float32"), ("int64", "float32"), ("float32", "int32")],
)
def test_batched_matmul_gradients_keep_each_operands_dtype(x_dtype: str, w_dtype: str) -> None:
    """A batch of rows times a matrix of another dtype: the weight's gradient is one GEMM
    over the rows (contract_rows) in the wider dtype, and must come back in the weight's
    own (found by the slow random gradient graphs: float32 weight, float64 cotangent)."""
    import graphc as gc

    g = gc.Graph("mixed")
    with g:
        x = gc.placeholder("x", ("B", 3, 4), x_dtype)
        w = gc.placeholder("w", (4, 2), w_dtype)
        gc.output(gc.sum(gc.matmul(x, w)), name="loss")
    floats = [n for n, d in (("x", x_dtype), ("w", w_dtype)) if d.startswith("float")]
    joint = gc.gradients(g, wrt=floats)
    grads = {o.name: o.type.dtype for o in joint.outputs[1:]}
    assert grads == {
        f"grad_{n}": np.dtype(d) for n, d in (("x", x_dtype), ("w", w_dtype)) if n in floats
    }
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.integers(-3, 4, (2, 3, 4)).astype(x_dtype),
        "w": rng.integers(-3, 4, (4, 2)).astype(w_dtype),
    }
    results = gc.compile(joint)(**feeds)
    for name, got in zip([o.name for o in joint.outputs[1:]], results[1:]):
        want = feeds["x"].sum(axis=(0, 1))[:, None] * np.ones((1, 2)) if name == "grad_w" else None
        if want is not None:
            np.testing.assert_array_equal(got, want.astype(got.dtype))
