"""The steps' order (runtime/schedule.py): a step whose result leaves the arena runs
right after another reader of its operand, never before what it needs, and never before
another reader of the state it overwrites. Checked on graph text, on a training step's
plan, and on random graphs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import graphc as gc
import graphc.runtime.plan as planning
from graphc.ir.graph import OP
from graphc.runtime.schedule import schedule
from tests.budget import draws
from tests.native_checks import needs_native
from tests.strategies import random_graphs

# a layer's backward as reverse mode emits it: the input gradient g w, then (after an
# unrelated step) the weight gradient g^T x, which reads g through a transpose
BACKWARD = """graph layer(%g: f32[8,4], %w: f32[4,3], %x: f32[8,3]) {
  %gw: f32[8,3] = matmul(%g, %w)
  %act: f32[8,3] = tanh(%gw)
  %gt: f32[4,8] = transpose(%g, axes=(1, 0))
  %dw: f32[4,3] = matmul(%gt, %x)
  %s: f32[3] = sum(%act, axis=(0,), keepdims=False)
  output %dx = %act
  output %grad_w = %dw
  output %total = %s
}"""

# an SGD update of w (a state) placed last, and a product reading the old w before it
SGD = """graph sgd(%g: f32[8,4], %w: f32[4,3], %x: f32[8,3]) {
  %gt: f32[4,8] = transpose(%g, axes=(1, 0))
  %dw: f32[4,3] = matmul(%gt, %x)
  %wt: f32[3,4] = transpose(%w, axes=(1, 0))
  %a: f32[8,4] = matmul(%x, %wt)
  %e: f32[8,4] = exp(%a)
  %w_new: f32[4,3] = sub(%w, %dw)
  output %out = %e
  output %w_next = %w_new
}"""


def order_of(text: str, updates: dict[str, str] | None = None) -> list[str]:
    graph = gc.parse(text)
    steps = [n for n in graph.nodes if n.kind == OP]
    return [n.name for n in schedule(graph, steps, updates or {})]


def test_a_weight_gradient_runs_right_after_its_sibling_product() -> None:
    # dw reads g (through gt, which runs first), as gw did: it runs right after gw
    assert order_of(BACKWARD) == ["gw", "gt", "dw", "act", "s"]


def test_a_state_update_waits_for_every_reader_of_the_old_state() -> None:
    # as an output like any other, w_new runs right after dw, the product it reads
    assert order_of(SGD) == ["gt", "dw", "w_new", "wt", "a", "e"]
    # overwriting w, it waits for a, which reads w through a view, then runs at once
    assert order_of(SGD, {"w": "w_next"}) == ["gt", "dw", "wt", "a", "w_new", "e"]


def test_steps_whose_results_stay_in_the_arena_keep_their_order() -> None:
    # c reads x as a does, but its result is no output: it is not pulled forward
    text = """graph g(%x: f32[8,8], %y: f32[8,8]) {
  %a: f32[8,8] = matmul(%x, %x)
  %b: f32[8,8] = tanh(%y)
  %c: f32[8,8] = exp(%x)
  %d: f32[8,8] = add(%a, %c)
  %e: f32[8,8] = mul(%d, %b)
  output %out = %e
}"""
    assert order_of(text) == ["a", "b", "c", "d", "e"]


# a returned step reading g through a reshape: of g itself a view, pulled with it; of
# g's transpose a copy the plan makes (an arena value), so the step waits
RESHAPED = """graph r(%g: f32[4,6], %x: f32[6,4]) {
  %a: f32[4,4] = matmul(%g, %x)
  %e: f32[4,4] = exp(%a)
  %t: f32[6,4] = TRANSPOSE
  %r: f32[4,6] = reshape(%t, shape=(4, 6))
  %d: f32[4,6] = mul(%r, %r)
  output %out = %e
  output %twice = %d
}"""


def test_a_step_reading_a_copy_is_not_pulled_with_it() -> None:
    viewed = RESHAPED.replace("TRANSPOSE", "reshape(%g, shape=(6, 4))")
    assert order_of(viewed) == ["a", "t", "r", "d", "e"]
    copied = RESHAPED.replace("TRANSPOSE", "transpose(%g, axes=(1, 0))")
    assert order_of(copied) == ["a", "e", "t", "r", "d"]


def mlp(sgd: bool) -> gc.Graph:
    """Two layers and a squared error; the weights' gradients returned, or with `sgd`
    each weight updated in their place (graph order: each weight's after the whole
    backward pass to the first layer)."""
    g = gc.Graph("step" if sgd else "grads")
    with g:
        x = gc.placeholder("x", shape=(64, 32))
        t = gc.placeholder("t", shape=(64, 8))
        w1 = gc.placeholder("w1", shape=(16, 32))
        w2 = gc.placeholder("w2", shape=(8, 16))
        h = gc.relu(x @ gc.transpose(w1))
        z = h @ gc.transpose(w2)
        dz = 2.0 * (z - t)
        dh = (dz @ w2) * (h > 0)
        gc.output(gc.sum((z - t) * (z - t)), name="loss")
        for w, grad, name in ((w1, gc.transpose(dh) @ x, "w1"), (w2, gc.transpose(dz) @ h, "w2")):
            gc.output(
                w - 0.01 * grad if sgd else grad, name=f"{name}_new" if sgd else f"grad_{name}"
            )
    return g


def test_a_weight_gradient_runs_next_to_the_input_gradient(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    shapes = {"x": (64, 32), "t": (64, 8), "w1": (16, 32), "w2": (8, 16)}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    scheduled = gc.compile(mlp(sgd=False), opt_level=0, backend="numpy")
    got = scheduled(**feeds)
    plan = scheduled.plan()
    monkeypatch.setattr(planning, "schedule", lambda graph, steps, updates: steps)
    in_graph_order = gc.compile(mlp(sgd=False), opt_level=0, backend="numpy")
    want = in_graph_order(**feeds)
    unscheduled = in_graph_order.plan()

    def products(p: planning.Plan) -> list[tuple[str, ...]]:
        return [s.inputs for s in p.steps if s.node.op == "matmul"]

    def is_grad_w2(inputs: tuple[str, ...]) -> bool:  # dz^T h: a transpose of dz, then h
        return inputs[1] == "h" and inputs[0].startswith("transpose")

    # grad_w2's product runs next to dz w2, the other product reading dz; in the graph's
    # order it came after the whole backward pass
    assert is_grad_w2(products(unscheduled)[-1])
    order = products(plan)
    w2 = order.index(("dz", "w2"))
    assert any(is_grad_w2(order[k]) for k in (w2 - 1, w2 + 1) if 0 <= k < len(order))
    for a, b in zip(got, want):  # the same bits
        np.testing.assert_array_equal(a, b)
    assert plan.arena_bytes <= unscheduled.arena_bytes


@settings(max_examples=draws(40), deadline=None)
@given(random_graphs())
def test_random_graphs_keep_every_step_and_their_dependencies(g: gc.Graph) -> None:
    steps = [n for n in g.nodes if n.kind == OP]
    outputs = [o.name for o in g.outputs]
    for updates in ({}, {p.name: o for p, o in zip(g.inputs, outputs)}):
        order = schedule(g, steps, updates)
        assert sorted(n.name for n in order) == sorted(n.name for n in steps)
        seen: set = set()
        for n in order:
            assert all(x in seen or x not in steps for x in n.inputs), n.name
            seen.add(n)


@needs_native
def test_a_training_steps_updates_run_next_to_their_siblings_and_stay_in_place() -> None:
    # on native at O2 each update is one gemm (the SGD fold): w2's runs next to dz w2
    # (both read dz), written straight into w2's buffer, and the step computes what
    # the reference does (native's products sum in their own order: a tolerance)
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 8), np.float32)
    w1, w2 = rng.standard_normal((16, 32), np.float32), rng.standard_normal((8, 16), np.float32)
    exe = gc.compile(mlp(sgd=True), updates={"w1": "w1_new", "w2": "w2_new"}, backend="native")
    exe.set_state(w1=w1, w2=w2)
    loss = exe(x, t)
    plan = exe.plan()
    ops = [(s.node.op, s.inputs) for s in plan.steps]
    gemms = [k for k, (op, inputs) in enumerate(ops) if op == "gemm" and "w2" in inputs]
    assert len(gemms) == 1, ops
    before = [op for op, _ in ops[: gemms[0]] if op not in ("transpose", "reshape")]
    assert before[-1] == "matmul", ops  # dz w2, the product before it
    assert plan.late_updates == {}
    want = gc.run(mlp(sgd=True), {"x": x, "t": t, "w1": w1, "w2": w2})
    for got, expected in zip([loss, exe.state["w1"], exe.state["w2"]], want):
        scale = float(np.max(np.abs(expected)))  # sums of 64 products: normwise
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * scale)
