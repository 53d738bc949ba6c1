"""Per op, over the case table: static gradients against central finite differences.

Each float64 case is differentiated twice, with a random cotangent seeded into its
output: through `gc.gradients(..., seeds=True)` (the joint graph) and through
`gc.split_backward` (forward graph feeding the backward graph). Both must agree
with finite differences of <ct, f(x)>, computed on the op's own kernels, and the
joint graph's gradients with the eager tape's `backward(ct)`.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.budget import sample
from tests.op_cases import BUILDER_CASES, OpCase, all_cases, build_graph

NAMES = [f"x{i}" for i in range(8)]
GRAD_CASES = sample(
    c for c in all_cases() + BUILDER_CASES if c.has_grad and c.float_dtype == "float64"
)


def numeric_vjp(
    case: OpCase, xs: list[np.ndarray], ct: np.ndarray, i: int, eps: float
) -> np.ndarray:
    """d/dx_i of sum(ct * f(xs)) by central differences, f run by the numpy kernels."""
    grad = np.zeros(xs[i].shape, np.float64)
    for position in np.ndindex(*xs[i].shape):
        sides = []
        for step in (eps, -eps):
            moved = [x.copy() for x in xs]
            moved[i][position] += step
            sides.append(np.sum(ct * np.asarray(case.build(*moved), np.float64)))
        grad[position] = (sides[0] - sides[1]) / (2 * eps)
    return grad


def setup(case: OpCase) -> tuple[gc.Graph, list[np.ndarray], np.ndarray, list[str]]:
    g = build_graph(case)
    xs = case.inputs(seed=11)
    out = g.outputs[0]
    ct = np.random.default_rng(12).standard_normal(out.type.shape).astype(out.type.dtype)
    wrt = [p.name for p, d in zip(g.inputs, case.differentiable) if d]
    return g, xs, ct, wrt


def check(case: OpCase, xs: list[np.ndarray], ct: np.ndarray, wrt: list[str], grads: list) -> None:
    low = ct.dtype != np.float64  # a float32 result is too coarse for tiny steps
    eps, tol = (1e-2, 1e-3) if low else (1e-6, 1e-6)
    names = [f"x{i}" for i in range(len(xs))]
    assert len(grads) == len(wrt)
    for name, got in zip(wrt, grads):
        i = names.index(name)
        want = numeric_vjp(case, xs, ct, i, eps)
        assert got.shape == xs[i].shape and got.dtype == xs[i].dtype, f"{case.id}: d/{name}"
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(
            got, want, rtol=tol, atol=tol * scale, err_msg=f"{case.id}: d/{name}"
        )


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_gradients_match_finite_differences(case: OpCase) -> None:
    g, xs, ct, wrt = setup(case)
    gg = gc.gradients(g, wrt=wrt, seeds=True)
    gc.verify(gg)
    results = gc.run(gg, {**{f"x{i}": x for i, x in enumerate(xs)}, "ct_out": ct})
    np.testing.assert_allclose(results[0], gc.run(g, {f"x{i}": x for i, x in enumerate(xs)})[0])
    check(case, xs, ct, wrt, results[1:])


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_split_backward_matches_finite_differences(case: OpCase) -> None:
    g, xs, ct, wrt = setup(case)
    fwd, bwd = gc.split_backward(g, wrt=wrt)
    gc.verify(fwd)
    gc.verify(bwd)
    outs = gc.run(fwd, {f"x{i}": x for i, x in enumerate(xs)})
    saved = outs[len(g.outputs) :]
    assert len(saved) == len(bwd.inputs) - 1  # the saved values, then one cotangent
    grads = gc.run(bwd, {**{p.name: v for p, v in zip(bwd.inputs, saved)}, "ct_out": ct})
    check(case, xs, ct, wrt, grads)


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_static_gradients_equal_eager_gradients(case: OpCase) -> None:
    g, xs, ct, wrt = setup(case)
    static = gc.run(gc.gradients(g, wrt=wrt, seeds=True), {**dict(zip(NAMES, xs)), "ct_out": ct})
    tensors = [
        ge.tensor(x, requires_grad=f"x{i}" in wrt) if np.issubdtype(x.dtype, np.floating)
        else ge.tensor(x)
        for i, x in enumerate(xs)
    ]  # fmt: skip
    case.build(*tensors).backward(ge.tensor(ct))
    for name, got in zip(wrt, static[1:]):
        eager = tensors[NAMES.index(name)].grad.numpy()
        np.testing.assert_allclose(got, eager, rtol=1e-12, atol=1e-12, err_msg=f"{case.id}: {name}")
