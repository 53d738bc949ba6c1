"""Executable.profile: per-step times of a plan, on copies of the state."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.runtime.profile import Profile


def _step() -> gc.Graph:
    """A loss and an update of w, so that w may be an executable's state."""
    g = gc.Graph("step")
    with g:
        x = gc.placeholder("x", shape=("B", 8))
        w = gc.placeholder("w", shape=(8, 4))
        h = gc.relu(x @ w)
        gc.output(gc.mean(h * h), name="loss")
        gc.output(w - 0.1 * (gc.transpose(x) @ h), name="w_new")
    return g


def _needs_entry() -> None:
    """Skip where native's entry in C cannot be made: no C compiler, or no Python
    headers to build its module with."""
    from graphc.backends.native import entry, toolchain
    from graphc.runtime.backend import BackendUnavailableError

    if isinstance(toolchain.toolchain(), str):
        pytest.skip("no C compiler: the native backend is off")
    try:
        entry.module()
    except BackendUnavailableError as exc:
        pytest.skip(f"no entry in C here: {exc}")


def test_every_step_of_the_plan_gets_a_time_in_plan_order() -> None:
    x = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    exe = gc.compile(gc.trace(lambda x: gc.tanh(x) @ x.T + 1.0, x), backend="numpy")
    profile = exe.profile(x, runs=3)
    plan = exe.plan(x)
    assert isinstance(profile, Profile) and profile.runs == 3
    assert [(s.index, s.name) for s in profile.steps] == [(s.index, s.output) for s in plan.steps]
    assert [s.op for s in profile.steps] == [str(s.node.op) for s in plan.steps]
    assert all(s.seconds >= 0 for s in profile.steps) and profile.total > 0
    assert profile.call > 0 and profile.tier == "numpy"
    assert profile.top(1)[0].seconds == max(s.seconds for s in profile.steps)
    assert len(profile.top(2)) == 2
    by_op = profile.by_op()
    assert sum(n for _, n, _ in by_op) == len(plan.steps)
    assert sum(t for _, _, t in by_op) == pytest.approx(profile.total)
    assert [t for _, _, t in by_op] == sorted((t for _, _, t in by_op), reverse=True)
    text = str(profile)
    assert text.startswith("profile of graph 'lambda' on numpy: medians of 3 runs")
    for step in plan.steps:
        assert f"{step.output} = " in text
    assert "per op:" in text


def test_a_fused_step_names_its_ops() -> None:
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    exe = gc.compile(gc.trace(lambda x: gc.exp(gc.tanh(x) * 2.0), x), backend="numpy")
    (step,) = exe.profile(x, runs=2).steps
    assert step.op == "fused" and set(step.members) == {"tanh", "mul", "exp"}
    assert "fused(" in str(exe.profile(x, runs=2))


def test_the_state_is_as_before_and_the_clock_is_not_in_the_calls_code() -> None:
    g = _step()
    exe = gc.compile(g, updates={"w": "w_new"}, backend="numpy")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    exe.set_state(w=w)
    before = exe.state["w"].copy()
    profile = exe.profile(x, runs=4)
    assert exe.state["w"].tobytes() == before.tobytes()  # profiling trained nothing
    assert len(profile.steps) == len(exe.plan(x).steps)
    loss = exe(x)  # the calls still train, from the same state
    assert float(loss) == float(gc.compile(g, backend="numpy")(x, before)[0])
    assert exe.state["w"].tobytes() != before.tobytes()
    assert "laps" not in exe.source(x) and "clock" not in exe.source(x)


def test_a_one_element_graph_is_profiled_step_by_step() -> None:
    x = np.array([0.5], np.float32)
    exe = gc.compile(gc.trace(lambda x: gc.exp(x) * x + 1.0, x), opt_level=0)
    profile = exe.profile(x, runs=2)  # its calls run as a scalar plan
    assert [s.op for s in profile.steps] == [str(s.node.op) for s in exe.plan(x).steps]
    assert len(profile.steps) >= 3


def test_native_steps_say_native() -> None:
    from graphc.backends.native import toolchain

    if isinstance(toolchain.toolchain(), str):
        pytest.skip("no C compiler: the native backend is off")
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    exe = gc.compile(gc.trace(lambda x: gc.tanh(x) * 0.5 + x, x), backend="native", wait=False)
    profile = exe.profile(x, runs=2)  # waits for the native tier
    assert profile.tier == "native"
    assert [s.backend for s in profile.steps] == ["native"]


def test_the_table_says_how_the_plans_own_call_starts() -> None:
    # numpy makes no entry: no line; from native's entry in C the steps are the entry's,
    # clocked in C, each a kernel (where a clocked Python walk would leave this small
    # step to numpy), and the table says so
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    plain = gc.compile(gc.trace(lambda x: gc.tanh(x) * 0.5 + x, x), backend="numpy")
    profile = plain.profile(x, runs=2)
    assert profile.entry is None and not profile.one_call
    assert "the plan's own call:" not in str(profile)
    _needs_entry()
    exe = gc.compile(gc.trace(lambda x: gc.abs(x) * 0.5 + x, x), backend="native")
    profile = exe.profile(x, runs=2)  # waits for the entry in C too
    explained = exe.explain(x)
    assert profile.one_call and profile.in_c
    assert profile.entry is not None and profile.entry in explained
    text = str(profile)
    assert "the plan's own call: one C call" in text
    assert "clocked in C after each kernel call" in text
    assert [(s.backend, s.op) for s in profile.steps] == [("native", "fused")]
    assert profile.steps[0].seconds > 0


def test_an_entry_in_c_is_clocked_step_by_step() -> None:
    # the entry's calls, each given to the step whose code made it: the kernels' steps
    # take time, the views none; the rows are the entry's own plan's steps
    _needs_entry()
    x = np.linspace(-1, 1, 48 * 48, dtype=np.float32).reshape(48, 48)
    exe = gc.compile(gc.trace(lambda x: gc.tanh(x) @ x.T + 1.0, x), backend="native")
    exe(x)
    exe.wait()
    profile = exe.profile(x, runs=3)
    assert profile.in_c
    ops = [s.op for s in profile.steps]
    assert "transpose" in ops and "matmul_epilogue" in ops, ops
    for s in profile.steps:
        if s.op == "transpose":
            assert s.seconds == 0.0, s
        else:
            assert s.seconds > 0.0, s
    assert "clocked in Python" not in str(profile)


def test_a_train_step_in_c_is_profiled_on_copies_of_its_state() -> None:
    # the entry's clocked runs write copies of the weights: the executable's stay
    _needs_entry()
    g = _step()
    exe = gc.compile(g, updates={"w": "w_new"}, backend="native")
    w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    exe.set_state(w=w)
    x = np.linspace(-2, 2, 64 * 8, dtype=np.float32).reshape(64, 8)
    exe(x)
    exe.wait()
    exe.set_state(w=w)
    profile = exe.profile(x, runs=3)
    assert profile.in_c
    assert exe.state["w"].tobytes() == w.tobytes()
    exe(x)  # the entry itself still trains it
    assert exe.state["w"].tobytes() != w.tobytes()
    assert sum(s.seconds for s in profile.steps) > 0


def test_bad_arguments_are_named() -> None:
    g = _step()
    exe = gc.compile(g, updates={"w": "w_new"}, backend="numpy")
    x = np.ones((2, 8), np.float32)
    with pytest.raises(gc.GraphcError, match="runs must be a positive int, got 0"):
        exe.profile(x, runs=0)
    with pytest.raises(gc.FeedError, match="state is not fed here"):
        exe.profile(x, w=np.ones((8, 4), np.float32))
    with pytest.raises(gc.FeedError, match="'w' is state of this executable and has no value"):
        exe.profile(x)


def test_a_train_step_is_profiled_without_training() -> None:
    from graphc import nn, optim

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32)
    y = np.arange(32) % 3
    train = optim.compile_train_step(
        model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1), (x, y)
    )
    before = {k: v.copy() for k, v in train.parameters().items()}
    profile = train.profile(x, y, runs=3)
    assert any("matmul" in s.op for s in profile.steps)  # the layers' products
    after = train.parameters()
    assert all(after[k].tobytes() == v.tobytes() for k, v in before.items())
    train.step(x, y)
    assert any(train.parameters()[k].tobytes() != v.tobytes() for k, v in before.items())


def test_calls_after_the_steps_are_a_row_of_their_own() -> None:
    # an input returned as it is: the entry copies it into its output after the steps
    _needs_entry()
    g = gc.Graph("passed_on")
    with g:
        x = gc.placeholder("x", (256, 256))
        gc.output(x, name="same")
        gc.output(x * 2.0, name="twice")
    exe = gc.compile(g, backend="native")
    x = np.linspace(-1, 1, 256 * 256, dtype=np.float32).reshape(256, 256)
    exe(x)
    exe.wait()
    profile = exe.profile(x, runs=3)
    assert profile.in_c
    last = profile.steps[-1]
    assert (last.name, last.op) == ("(after the steps)", "copy")
    assert last.index == profile.steps[-2].index + 1
    assert last.seconds > 0


def test_each_steps_lines_are_where_its_code_is() -> None:
    # Generated.step_lines: the lines step k's code has in run, its comment first, in
    # plan order and not overlapping, as the profile of an entry in C reads them
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    exe = gc.compile(gc.trace(lambda x: gc.tanh(x) @ x.T + 1.0, x), backend="numpy")
    exe(x)
    generated = exe._last.generated
    lines = generated.source.splitlines()
    spans = [generated.step_lines[s.index] for s in exe.plan(x).steps]
    for step, span in zip(exe.plan(x).steps, spans):
        assert lines[span[0] - 1].strip().startswith(f"# {step.index}: "), (step, span)
    assert all(a[-1] < b[0] for a, b in zip(spans, spans[1:]))
    assert spans[-1][-1] < len(lines)  # the return follows the steps


def test_a_scalar_plans_entry_in_c_is_clocked_as_native() -> None:
    # the tiny graph's plan runs numpy scalars in Python, its entry a native kernel: the
    # profile clocks the entry's call, and says native
    _needs_entry()
    x, w = np.ones((1,), np.float32), np.full((1,), 2.0, np.float32)
    exe = gc.compile(gc.trace(lambda x, w: (x + w) * (w + 1.0), x, w), backend="native")
    exe(x, w)
    exe.wait()
    assert exe.plan(x, w).scalar
    profile = exe.profile(x, w, runs=3)
    assert profile.in_c and profile.tier == "native"
    assert [s.backend for s in profile.steps] == ["native"] * len(profile.steps)
    assert profile.steps and all(s.seconds >= 0 for s in profile.steps)
