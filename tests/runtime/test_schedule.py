"""The steps' order (runtime/schedule.py): a step whose result leaves the arena runs
right after another reader of its operand, never before what it needs, and never before
another reader of the state it overwrites. Checked on graph text, on a training step's
plan, and on random graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import graphc as gc
import graphc.runtime.plan as planning
from graphc.ir.graph import OP
from graphc.runtime.schedule import schedule
from tests.budget import draws
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


def mlp_step() -> gc.Graph:
    """Two layers, softmax cross-entropy, an SGD update of both weights (graph order:
    the updates after the whole backward pass)."""
    g = gc.Graph("step")
    with g:
        x = gc.placeholder("x", shape=(64, 32))
        t = gc.placeholder("t", shape=(64, 8))
        w1 = gc.placeholder("w1", shape=(16, 32))
        w2 = gc.placeholder("w2", shape=(8, 16))
        h = gc.relu(x @ gc.transpose(w1))
        z = h @ gc.transpose(w2)
        loss = gc.sum((z - t) * (z - t))
        dz = 2.0 * (z - t)
        dh = (dz @ w2) * (h > 0)
        gc.output(loss, name="loss")
        gc.output(w1 - 0.01 * (gc.transpose(dh) @ x), name="w1_new")
        gc.output(w2 - 0.01 * (gc.transpose(dz) @ h), name="w2_new")
    return g


def test_a_training_step_updates_each_weight_next_to_its_gradient(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in
             [("x", (64, 32)), ("t", (64, 8)), ("w1", (16, 32)), ("w2", (8, 16))]}  # fmt: skip
    updates = {"w1": "w1_new", "w2": "w2_new"}

    def step(exe: gc.Executable) -> list[str]:
        exe.set_state(w1=feeds["w1"], w2=feeds["w2"])
        exe(feeds["x"], feeds["t"])
        return [s.node.op for s in exe.plan().steps]

    scheduled = gc.compile(mlp_step(), opt_level=0, updates=updates, backend="numpy")
    ops = step(scheduled)
    monkeypatch.setattr(planning, "schedule", lambda graph, steps, updates: steps)
    in_graph_order = gc.compile(mlp_step(), opt_level=0, updates=updates, backend="numpy")
    plain = step(in_graph_order)
    assert ops != plain and sorted(ops) == sorted(plain)
    # the same results, bit for bit, and the state updated the same
    for exe in (scheduled, in_graph_order):
        exe.set_state(w1=feeds["w1"], w2=feeds["w2"])
    a = scheduled(feeds["x"], feeds["t"])
    b = in_graph_order(feeds["x"], feeds["t"])
    np.testing.assert_array_equal(a, b)
    for name in updates:
        np.testing.assert_array_equal(scheduled.state[name], in_graph_order.state[name])
    # w2's update (dz^T h) ran while dz was still needed (by dz w2), so dz's buffer is
    # free sooner: the arena holds no more than in graph order
    assert scheduled.plan().arena_bytes <= in_graph_order.plan().arena_bytes
    # and each update is still written straight into its state buffer
    assert scheduled.plan().late_updates == {}


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


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_scheduled_training_step_matches_the_reference(backend: str) -> None:
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 8), np.float32)
    w1, w2 = rng.standard_normal((16, 32), np.float32), rng.standard_normal((8, 16), np.float32)
    exe = gc.compile(mlp_step(), updates={"w1": "w1_new", "w2": "w2_new"}, backend=backend)
    exe.set_state(w1=w1, w2=w2)
    loss = exe(x, t)
    want = gc.run(mlp_step(), {"x": x, "t": t, "w1": w1, "w2": w2})
    np.testing.assert_allclose(loss, want[0], rtol=1e-5)
    np.testing.assert_allclose(exe.state["w1"], want[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe.state["w2"], want[2], rtol=1e-5, atol=1e-6)
