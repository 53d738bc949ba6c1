"""Passes run again per signature once symbolic dims are bound (Executable._graph_for)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc import nn, optim
from tests.budget import draws
from tests.differential import check_levels
from tests.native_checks import needs_native
from tests.passes.passcheck import assert_bits_equal
from tests.strategies import random_feeds, random_graphs


def mean_loss_gradient() -> gc.Graph:
    g = gc.Graph("mse")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        w = gc.placeholder("w", shape=(3, 2))
        gc.output(gc.mean((x @ w) ** 2), name="loss")
    return gc.gradients(g, wrt=["w"])


def assert_outputs_equal(got: object, want: list[np.ndarray], msg: str) -> None:
    """Every level computes the reference's results bit for bit (NaNs aside)."""
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want), msg
    for a, b in zip(got, want):
        assert_bits_equal(a, b, msg)


def test_a_count_of_symbolic_dims_is_a_constant_in_the_plan() -> None:
    g = mean_loss_gradient()
    exe = gc.compile(g)
    assert "count" in {n.op for n in exe.optimized.op_nodes}  # B unknown at compile time
    rng = np.random.default_rng(0)
    for batch in (5, 9):
        feeds = {"x": rng.standard_normal((batch, 3)), "w": rng.standard_normal((3, 2))}
        feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
        got = exe(**feeds)
        assert "count" not in {s.node.op for s in exe.plan().steps}
        assert_outputs_equal(got, gc.run(g, feeds), exe.explain())
    assert exe.plans_built == 2


def test_opt_level_0_plans_the_graph_as_declared() -> None:
    g = mean_loss_gradient()
    exe = gc.compile(g, opt_level=0)
    feeds = {"x": np.ones((4, 3), np.float32), "w": np.ones((3, 2), np.float32)}
    exe(**feeds)
    assert "count" in {s.node.op for s in exe.plan().steps}


def test_sgd_step_scales_the_batch_operand_and_subtracts_straight_into_the_weights() -> None:
    """On the numpy backend (no gemm of its own, so no SGD fold) fast_math scales the
    small batch operand and subtracts the product straight into the weights."""
    model = nn.Sequential(nn.Linear(20, 16, generator=0), nn.ReLU(), nn.Linear(16, 3, generator=1))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 20)).astype(np.float32)
    y = rng.integers(0, 3, 4)
    sgd = optim.SGD(model.parameters(), 0.1)
    train = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), sgd, (x, y), fast_math=True, backend="numpy"
    )
    train.step(x, y)
    plan = train.executable.plan(x, y)
    weights = {name for name in plan.state if name.endswith("weight")}
    writers = {
        plan.values[s.output].base: s.node.op
        for s in plan.steps
        if plan.values[s.output].kind == "state"
    }
    assert {writers[w] for w in weights} == {"sub"}, plan
    # each weight's gradient matmul reads lr * (batch, features) gradient, transposed
    producer = {s.output: s for s in plan.steps}
    checked = 0
    for step in plan.steps:
        if step.node.op == "sub" and plan.values[step.output].base in weights:
            matmul = producer[step.inputs[1]]
            transpose = producer[matmul.inputs[0]]
            scale = producer[transpose.inputs[0]]
            assert (matmul.node.op, transpose.node.op, scale.node.op) == (
                "matmul",
                "transpose",
                "mul",
            ), plan
            assert plan.values[scale.output].type.shape[0] == 4, plan
            checked += 1
    assert checked == len(weights) == 2


@needs_native
def test_sgd_step_folds_each_weight_update_into_one_gemm_writing_the_weight() -> None:
    """fast_math's SGD fold on a backend with a gemm of its own (native): w - lr * g.T @ x
    is one gemm(g, x, w, alpha=-lr, beta=1, trans_a) on the (batch, features) gradient,
    written straight into the weight."""
    model = nn.Sequential(nn.Linear(20, 16, generator=0), nn.ReLU(), nn.Linear(16, 3, generator=1))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 20)).astype(np.float32)
    y = rng.integers(0, 3, 4)
    train = gc.compile_train_step(
        model,
        nn.CrossEntropyLoss(),
        optim.SGD(model.parameters(), 0.1),
        (x, y),
        fast_math=True,
        backend="native",
    )
    train.step(x, y)
    plan = train.executable.plan(x, y)
    weights = {name for name in plan.state if name.endswith("weight")}
    writers = {
        plan.values[s.output].base: s for s in plan.steps if plan.values[s.output].kind == "state"
    }
    for w in weights:
        step = writers[w]
        assert step.node.op == "gemm" and step.inputs[2] == w, plan
        assert step.attrs["trans_a"] and not step.attrs["trans_b"], plan
        assert abs(step.attrs["alpha"] + 0.1) < 1e-7 and step.attrs["beta"] == 1.0, plan
        assert plan.values[step.inputs[0]].type.shape[0] == 4, plan  # the batch operand
    assert len(weights) == 2


@settings(
    max_examples=draws(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(random_graphs(min_ops=10, max_ops=25, symbolic=True), st.integers(0, 2**16))
def test_symbolic_graphs_compiled_per_signature_match_the_reference(g: gc.Graph, seed: int) -> None:
    # one executable called at two signatures, each planned from the graph optimized again
    # at its sizes: bit for bit on numpy, on native each inexact op within its declared
    # bound (tests/differential.py)
    feed_sets = [random_feeds(g, seed=seed, dims=dims) for dims in (2, 5)]
    check_levels(g, feed_sets, levels=(2,))
