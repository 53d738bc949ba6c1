"""Loops in C (native/loops.py): a scan or while_loop whose body's steps all run natively
is one C call replaying its body's kernel calls.

- the random control-flow programs of tests/runtime/test_control_differential.py, their
  gradient graphs (forward and reverse scans), random while and fori loops and the
  named programs, on native: numpy's bits where the ops are exact, and the very bits of
  the same plans with their loops run from Python (loops.IN_C off) everywhere;
- a body with a step numpy runs, or whose native code calls Python, keeps the Python
  loop, and explain says why; explain says when a loop runs in C;
- the caller's arrays in any layout, a scan of no steps, a failed scratch allocation in
  a body, 8 threads on one executable, and a forked child after the loop used the pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends.native import loops
from graphc.backends.numpy.control import CompiledBody
from tests.backends.test_native_scratch import _failing_instance
from tests.budget import draws
from tests.control_programs import PROGRAMS
from tests.differential import quiet
from tests.edge_values import bits_differ, edge_feeds
from tests.forking import child_status
from tests.native_checks import check_native, needs_native, normwise
from tests.runtime.test_control_differential import (
    BINARY,
    UNARY,
    Block,
    Program,
    programs,
    run_block,
)

pytestmark = needs_native

Feeds = dict[str, np.ndarray]


def _outcome(graph: gc.Graph, feeds: Feeds, level: int) -> tuple[list, str]:
    """The native plan's results (or its error) at `level`, and its explain text."""
    exe = gc.compile(graph, opt_level=level, backend="native", wait=True)
    try:
        results = exe(**feeds)
    except gc.GraphcError as exc:
        return [exc], ""
    results = list(results) if isinstance(results, tuple) else [results]
    return results, exe.explain(**feeds)


def check_in_c(graph: gc.Graph, feed_sets: list[Feeds], levels: tuple[int, ...] = (0, 2)) -> int:
    """Native against numpy (check_native), and native's results with loops in C the bits
    of its results with the loops run from Python. Returns how many loops ran in C."""
    check_native(graph, feed_sets, levels=levels, close=normwise(2.0**-12), close_sets=(0,))
    in_c = 0
    with quiet(), pytest.MonkeyPatch.context() as patch:
        for level in levels:
            for k, feeds in enumerate(feed_sets):
                patch.setattr(loops, "IN_C", True)
                got, how = _outcome(graph, feeds, level)
                patch.setattr(loops, "IN_C", False)
                want, _ = _outcome(graph, feeds, level)
                in_c += how.count("runs in C")
                where = f"O{level}, feed set {k}\n{graph}\n{how}"
                if isinstance(want[0], gc.GraphcError):
                    assert type(got[0]) is type(want[0]), where
                    continue
                for j, (a, b) in enumerate(zip(got, want)):
                    why = bits_differ(a, b)
                    assert why is None, f"output {j}, in C vs from Python: {why}\n{where}"
    return in_c


def _program_feeds(program: Program, graph: gc.Graph, seed: int) -> list[Feeds]:
    return [program.feeds(graph, seed), edge_feeds(graph, seed=seed, dims=2)]


@settings(max_examples=draws(40), derandomize=True, deadline=None)
@given(programs(), st.integers(0, 2**16))
def test_random_programs_in_c(program: Program, seed: int) -> None:
    g = program.graph()
    check_in_c(g, _program_feeds(program, g, seed))


@settings(max_examples=draws(15), derandomize=True, deadline=None)
@given(programs(dtype="float64"), st.integers(0, 2**16))
def test_random_gradients_in_c(program: Program, seed: int) -> None:
    """Backward scans (reverse, with the saved residuals as xs) run in C too."""
    g = gc.trace(program.loss, *program.specs(), name="random_loss")
    joint = gc.gradients(g, wrt=[p.name for p in g.inputs])
    check_in_c(joint, [program.feeds(joint, seed)])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_named_programs_in_c(name: str) -> None:
    program = PROGRAMS[name]
    for dtype in ("float32", "float64"):
        g = program.graph(dtype)
        feeds = [dict(zip([p.name for p in g.inputs], program.inputs(s, dtype))) for s in (0, 1)]
        check_in_c(g, feeds)
        if program.differentiable:
            check_in_c(gc.gradients(g, wrt=[p.name for p in g.inputs]), feeds)


def test_the_rnn_and_its_gradient_run_in_c() -> None:
    """Not vacuous: both scans of the RNN's gradient graph (forward, then BPTT) run in C."""
    program = PROGRAMS["rnn"]
    g = program.graph("float32")
    joint = gc.gradients(g, wrt=[p.name for p in g.inputs])
    feeds = dict(zip([p.name for p in g.inputs], program.inputs(0, "float32")))
    assert check_in_c(joint, [feeds], levels=(2,)) == 2 * 1  # two scans, one feed set


# -- while loops and fori loops with bounds known at run time --------------------------


@st.composite
def while_programs(draw: Any) -> tuple[Callable[..., Any], list[gc.TensorSpec], str]:
    """A while_loop over a float counter and 1-2 carries, its body 1-4 of the random
    programs' elementwise instructions; the bound is an input (a condition constant)."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    shapes = draw(st.lists(st.sampled_from([(), (3,), (2, 3), (0,)]), min_size=1, max_size=2))
    count = draw(st.integers(1, 4))
    instrs = []
    for k in range(count):
        env = 1 + len(shapes) + k  # the counter, the carries, the values made so far
        if draw(st.booleans()):
            instrs.append(("unary", draw(st.sampled_from(UNARY)), draw(st.integers(1, env - 1))))
        else:
            i = draw(st.integers(1, env - 1))
            same = [
                j
                for j in range(1, env)
                if j == i or _shape(j, shapes, instrs) == _shape(i, shapes, instrs)
            ]
            instrs.append(("binary", draw(st.sampled_from(BINARY)), i, draw(st.sampled_from(same))))
    outputs = [draw(st.sampled_from([j for j in range(1, 1 + len(shapes) + count)
                                     if _shape(j, shapes, instrs) == s])) for s in shapes]  # fmt: skip
    block = Block(tuple(instrs), tuple(outputs))

    def fn(bound: Any, *carries: Any) -> Any:
        start = gc.sum(bound) * 0.0

        def body(state: Any) -> Any:
            counter, *values = state
            return (counter + 1.0, *run_block(block, [counter, *values]))

        return gc.while_loop(lambda state: state[0] < bound, body, (start, *carries))

    specs = [gc.TensorSpec((), dtype), *(gc.TensorSpec(s, dtype) for s in shapes)]
    return fn, specs, dtype


def _shape(j: int, shapes: list[tuple], instrs: list[tuple]) -> tuple:
    """The shape of environment value j of a while program's body (all elementwise)."""
    if j == 0:
        return ()
    if j <= len(shapes):
        return shapes[j - 1]
    instr = instrs[j - 1 - len(shapes)]
    return _shape(instr[2], shapes, instrs)


@pytest.mark.slow  # the quick run keeps the random scan programs and gradients
@settings(max_examples=draws(30), derandomize=True, deadline=None)
@given(while_programs(), st.integers(0, 2**16))
def test_random_while_loops_in_c(program: Any, seed: int) -> None:
    fn, specs, dtype = program
    g = gc.trace(fn, *specs, name="random_while")
    rng = np.random.default_rng(seed)
    tame = {p.name: rng.uniform(-1, 1, p.type.shape).astype(dtype) for p in g.inputs}
    tame[g.inputs[0].name] = np.asarray(rng.integers(0, 5), dtype)
    hostile = edge_feeds(g, seed=seed, dims=2)
    hostile[g.inputs[0].name] = np.asarray(3, dtype)  # nan bounds end at once, tame ones not
    check_in_c(g, [tame, hostile])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_fori_loop_with_bounds_given_at_run_time(dtype: str) -> None:
    """Dynamic bounds: a while_loop on an integer counter. Native's kernels compute
    int64 (the counter's compare and add), so an int64 loop runs in C, with the bits of
    the loop run from Python; it has no int32 kernels, so an int32 counter's steps run on
    numpy and the loop from Python, with the same results; explain says so."""

    def fn(lo: Any, hi: Any, x: Any) -> Any:
        return gc.fori_loop(lo, hi, lambda i, v: gc.tanh(v) * 0.5 + gc.cast(i, v.dtype), x)

    g = gc.trace(fn, gc.TensorSpec((), dtype), gc.TensorSpec((), dtype), gc.TensorSpec((4,)))
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    sets = [{"lo": np.asarray(a, dtype), "hi": np.asarray(b, dtype), "x": x} for a, b in ((0, 5), (3, 3), (2, -1), (0, 60))]  # fmt: skip
    in_c = check_in_c(g, sets, levels=(2,))
    how = gc.compile(g, backend="native", wait=True).explain(**sets[0])
    if dtype == "int64":
        assert in_c == len(sets) and "runs in C" in how, how
    else:
        assert in_c == 0, how
        assert "the while_loop of step 0 runs from Python: step 0 (lt) runs on numpy" in how, how


# -- what stays in Python, and why -------------------------------------------------------


def _scan_graph(dtype: str, step: Callable[[Any, Any], Any]) -> gc.Graph:
    def fn(h: Any, xs: Any) -> Any:
        return gc.scan(lambda c, x: (step(c, x), c), h, xs)

    return gc.trace(fn, gc.TensorSpec((2, 3), dtype), gc.TensorSpec(("T", 2, 3), dtype))


def _scan_feeds(dtype: str) -> Feeds:
    rng = np.random.default_rng(0)
    return {"h": rng.standard_normal((2, 3)).astype(dtype), "xs": rng.standard_normal((5, 2, 3)).astype(dtype)}  # fmt: skip


def test_a_body_step_on_numpy_keeps_the_python_loop() -> None:
    """An integer product: native declines it, so the loop runs its steps from Python."""
    w = np.arange(9, dtype=np.int64).reshape(3, 3) % 3 - 1
    g = _scan_graph("int64", lambda c, x: (c @ w) % 7 + x)
    feeds = {k: (v * 3).astype(np.int64) for k, v in _scan_feeds("float64").items()}
    assert check_in_c(g, [feeds], levels=(2,)) == 0
    how = gc.compile(g, backend="native", wait=True).explain(**feeds)
    assert (
        "the scan of step" in how
        and "runs from Python: step" in how
        and "(matmul) runs on numpy" in how
    )


def test_a_body_calling_python_keeps_the_python_loop() -> None:
    """A float64 product with a tanh after it: numpy's product from Python, then the C
    epilogue; the recording refuses the Python call and says which."""
    w = np.linspace(-1, 1, 9).reshape(3, 3)
    g = _scan_graph("float64", lambda c, x: gc.tanh(c @ w + x))
    feeds = _scan_feeds("float64")
    assert check_in_c(g, [feeds], levels=(2,)) == 0
    how = gc.compile(g, backend="native", wait=True).explain(**feeds)
    assert "runs from Python: it calls" in how, how


def test_explain_says_the_loop_runs_in_c() -> None:
    g = _scan_graph("float32", lambda c, x: gc.tanh(c * 0.5 + x))
    how = gc.compile(g, backend="native", wait=True).explain(**_scan_feeds("float32"))
    assert "native: the scan of step" in how and "runs in C (calls a step: body" in how, how


# -- the caller's arrays, empty loops, errors, threads, fork -----------------------------


def test_the_callers_arrays_in_any_layout_and_untouched() -> None:
    g = _scan_graph("float32", lambda c, x: gc.tanh(c * 0.5 + x))
    feeds = _scan_feeds("float32")
    exe = gc.compile(g, backend="native", wait=True)
    want = exe(**feeds)
    xs_f = np.asfortranarray(feeds["xs"])
    h_t = np.ascontiguousarray(feeds["h"].T).T  # a transposed view of the same values
    copies = (xs_f.copy(), h_t.copy())
    got = exe(h=h_t, xs=xs_f)
    for a, b in zip(got, want):
        assert bits_differ(a, b) is None
    assert np.array_equal(xs_f, copies[0]) and np.array_equal(h_t, copies[1])


def test_a_scan_of_no_steps() -> None:
    g = _scan_graph("float32", lambda c, x: gc.tanh(c * 0.5 + x))
    exe = gc.compile(g, backend="native", wait=True)
    h = np.ones((2, 3), np.float32)
    last, ys = exe(h=h, xs=np.zeros((0, 2, 3), np.float32))
    assert np.array_equal(last, h) and ys.shape == (0, 2, 3)
    assert "runs in C" in exe.explain(h=h, xs=np.zeros((0, 2, 3), np.float32))


def test_a_failed_scratch_allocation_in_a_body_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """log_softmax's row kernel allocates; built to fail, the loop's C call stops and
    raises MemoryError naming the op (the tape's status check)."""
    from graphc.backends.native import rows

    monkeypatch.setattr(rows, "instance", _failing_instance)
    g = _scan_graph("float32", lambda c, x: gc.log_softmax(c + x, axis=-1))
    exe = gc.compile(g, backend="native", wait=True)
    assert "runs in C" in exe.explain(**_scan_feeds("float32"))
    with pytest.raises(MemoryError, match="native kernel for log_softmax"):
        exe(**_scan_feeds("float32"))


def _rnn() -> tuple[gc.Executable, Feeds]:
    program = PROGRAMS["batched_rnn"]
    g = program.graph("float32")
    joint = gc.gradients(g, wrt=[p.name for p in g.inputs])
    feeds = dict(zip([p.name for p in g.inputs], program.inputs(0, "float32")))
    exe = gc.compile(joint, backend="native", wait=True)
    assert exe.explain(**feeds).count("runs in C") == 2
    return exe, feeds


def test_eight_threads_call_one_loop() -> None:
    exe, feeds = _rnn()
    want = exe(**feeds)
    results: list[Any] = [None] * 8

    def work(k: int) -> None:
        for _ in range(20):
            results[k] = exe(**feeds)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for got in results:
        assert got is not None
        for a, b in zip(got, want):
            assert bits_differ(a, b) is None


def test_a_forked_child_runs_the_loop() -> None:
    """After the loop's kernels used the OpenMP pool (the matmul at this size goes
    parallel), a forked child runs the loop to the same result in bounded time."""
    from graphc.backends.native.calls import POOL_CLOCK

    def fn(h: Any, xs: Any, w: Any) -> Any:
        return gc.scan(lambda c, x: (gc.tanh(c @ w + x), None), h, xs)[0]

    specs = [gc.TensorSpec((256, 512)), gc.TensorSpec((3, 256, 512)), gc.TensorSpec((512, 512))]
    exe = gc.compile(gc.trace(fn, *specs), backend="native", wait=True)
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(s.shape) / 20).astype(np.float32) for s in specs]
    before = int(POOL_CLOCK[0])
    want = exe(*args)
    assert int(POOL_CLOCK[0]) > before, "no kernel ran on the pool"
    assert "runs in C" in exe.explain(*args)
    assert child_status(lambda: np.array_equal(exe(*args), want), 60) == 0


def test_the_rnn_gradient_in_place_packed_once_and_read_where_it_lies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backward scan's carry (the state's cotangent) runs in place; the forward's
    carry does not (its ys save the old state); the recurrent weight's cotangent is no
    carry but one product of two stacks after the loop (control_ad). Each scan packs
    its weight once per call, before its steps (the tape's prologue), and the backward
    scan's weight, a transposed view, is read where it lies: a tape recorded for that
    layout, not a copy per call."""
    tapes: list[tuple[loops.Tape, list[bool]]] = []
    real = loops.record

    def spy(run: Any, kernels: Any, slots: Any, constants: range) -> loops.Tape:
        tape = real(run, kernels, slots, constants)
        tapes.append((tape, [s.flags.c_contiguous for s in slots]))
        return tape

    monkeypatch.setattr(loops, "record", spy)
    program = PROGRAMS["rnn"]
    g = program.graph("float32")
    joint = gc.gradients(g, wrt=[p.name for p in g.inputs])
    feeds = dict(zip([p.name for p in g.inputs], program.inputs(0, "float32")))
    exe = gc.compile(joint, backend="native", wait=True)
    exe(**feeds)
    assert _in_place(exe, feeds) == {"scan_body_fwd": [False], "scan_body_bwd": [True]}
    assert all(int(tape.prologue[0][0]) == 1 for tape, _ in tapes)
    assert any(not all(contiguous) for _, contiguous in tapes), "no strided constant's tape"


def _in_place(exe: gc.Executable, feeds: Feeds) -> dict[str, list[bool]]:
    """Per scan body (by name), which carries run in place (loops.in_place_carries)."""
    compiled = exe._compiled_for((), feeds)  # noqa: SLF001 - the bodies' plans and code
    found = {}
    for index, bodies in compiled.generated.bodies.items():
        plan = compiled.plan.bodies[index]["body"]
        body = CompiledBody(plan, bodies["body"], [], [])
        nc = compiled.plan.steps[index].attrs["num_carry"]
        found[plan.graph.name] = loops.in_place_carries(body, nc)
    return found


@pytest.mark.parametrize(("ys", "in_place"), [("old", False), ("new", True), ("none", True)])
def test_a_carry_read_after_its_new_value_is_written_is_not_in_place(
    ys: str, in_place: bool
) -> None:
    """A body returning its old carry as ys reads it (the copy into the ys, last) after
    the step writing the new carry: that carry keeps two buffers. Returning the new one,
    or nothing, it runs in place. Results as from Python either way."""

    def step(c: Any, x: Any) -> Any:
        new = gc.tanh(c * 0.5 + x)
        return new, {"old": c, "new": new, "none": None}[ys]

    def fn(h: Any, xs: Any) -> Any:
        last, saved = gc.scan(step, h, xs)
        return last if saved is None else (last, saved)

    g = gc.trace(fn, gc.TensorSpec((3,)), gc.TensorSpec((4, 3)))
    feeds = {"h": np.linspace(-1, 1, 3, dtype=np.float32), "xs": np.ones((4, 3), np.float32)}
    assert check_in_c(g, [feeds], levels=(0, 2)) == 2
    exe = gc.compile(g, backend="native", wait=True)
    assert list(_in_place(exe, feeds).values()) == [[in_place]]


def test_a_long_chain_on_a_carry_in_place() -> None:
    """A body of 150 elementwise ops on its carry: one kernel in segments of at most
    100 ops (kernels.SEGMENT_OPS), each loading the carry by the block; run in place,
    its results are those of the loop from Python (two buffers) bit for bit."""

    def step(c: Any, x: Any) -> Any:
        for k in range(50):
            c = gc.tanh(c * 0.9 + x) - 0.01 * k
        return c, None

    def fn(h: Any, xs: Any) -> Any:
        return gc.scan(step, h, xs)[0]

    g = gc.trace(fn, gc.TensorSpec((4, 33)), gc.TensorSpec((3, 4, 33)))
    rng = np.random.default_rng(3)
    feeds = {"h": rng.standard_normal((4, 33)), "xs": rng.standard_normal((3, 4, 33))}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    assert check_in_c(g, [feeds], levels=(2,)) == 1
    exe = gc.compile(g, backend="native", wait=True)
    assert list(_in_place(exe, feeds).values()) == [[True]]
