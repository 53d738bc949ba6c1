"""Every op's VJP rule, run by the eager tape, against finite differences (float64).

Parametrized over the shared case table (tests/op_cases.py), so a new op is covered
by adding its cases there. First order: the full Jacobian from `autograd.grad`
against central differences (`gradcheck`). Second order, for the cases that are
smooth at their inputs: the gradient built with `create_graph=True`, differentiated
again (`gradgradcheck`).
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc.eager as ge
from graphc.eager.autograd import gradcheck, gradgradcheck
from graphc.ir.errors import AutodiffError
from graphc.ir.registry import all_ops
from tests.budget import sample
from tests.op_cases import BUILDER_CASES, OpCase, all_cases

GRAD_CASES = sample(
    c for c in all_cases() + BUILDER_CASES if c.has_grad and c.float_dtype == "float64"
)
SECOND_ORDER = [c for c in GRAD_CASES if c.smooth]


def _tensors(case: OpCase, seed: int) -> list[ge.Tensor]:
    return [
        ge.tensor(x, requires_grad=bool(d))
        for x, d in zip(case.inputs(seed=seed), case.differentiable)
    ]


def _tolerance(case: OpCase, xs: list[ge.Tensor]) -> dict:
    out = case.build(*xs)
    if out.dtype == np.float32:  # a cast down to float32: too coarse for tiny steps
        return {"eps": 1e-2, "atol": 1e-3, "rtol": 1e-3}
    return {"eps": 1e-6, "atol": 1e-6, "rtol": 1e-5}


def test_every_differentiable_op_has_a_tape_case() -> None:
    differentiable = {name for name, op in all_ops().items() if op.vjp is not None}
    covered = {c.op for c in GRAD_CASES}
    # ops whose rule only returns None (no float input to differentiate) need no case
    constant_rules = {"full_like", "count", "one_hot"}
    refusing = {"while_loop"}  # its rule says why it cannot be differentiated
    assert differentiable - constant_rules - refusing <= covered


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_tape_vjp_matches_finite_differences(case: OpCase) -> None:
    xs = _tensors(case, seed=3)
    out = case.build(*xs)
    assert out.requires_grad, f"{case.id}: the result is not on the tape"
    assert gradcheck(case.build, xs, **_tolerance(case, xs))


@pytest.mark.parametrize("case", SECOND_ORDER, ids=lambda c: c.id)
def test_tape_second_derivative_matches_finite_differences(case: OpCase) -> None:
    xs = _tensors(case, seed=5)
    tol = _tolerance(case, xs)
    tol.update(atol=1e-5, rtol=1e-4)
    assert gradgradcheck(case.build, xs, **tol)


FLOAT32_CASES = [
    c for c in all_cases() + BUILDER_CASES if c.has_grad and c.float_dtype == "float32"
]


@pytest.mark.parametrize("case", FLOAT32_CASES, ids=lambda c: c.id)
def test_tape_gradients_keep_each_input_dtype_and_shape(case: OpCase) -> None:
    xs = _tensors(case, seed=1)
    wanted = [x for x in xs if x.requires_grad]
    out = case.build(*xs)
    grads = ge.autograd.grad(out, wanted, ge.ones_like(out), allow_unused=True)
    for x, g in zip(wanted, grads):
        assert g is not None, f"{case.id}: no gradient reached an input"
        assert (g.dtype, g.shape) == (x.dtype, x.shape)


def test_broadcast_gradient_is_summed_back_to_the_input_shape() -> None:
    x = ge.tensor(np.arange(3.0).reshape(3, 1), requires_grad=True)
    y = ge.tensor(np.arange(4.0), requires_grad=True)
    (x * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 1), 6.0))
    np.testing.assert_allclose(y.grad.numpy(), np.full(4, 3.0))
    assert x.grad.shape == (3, 1) and y.grad.shape == (4,)


def test_gradcheck_catches_a_wrong_backward() -> None:
    class WrongSquare(ge.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            (x,) = ctx.saved_tensors
            return grad * x  # should be 2 x

    x = ge.randn(4, dtype="float64", requires_grad=True)
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False
    with pytest.raises(AutodiffError, match="mismatch"):
        gradcheck(WrongSquare.apply, (x,))
