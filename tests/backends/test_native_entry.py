"""The native backend's entry in C (backends/native/entry.py): a small plan run as one C
call. Its results are the Python entry's bit for bit (numpy's where native is exact) on
hostile graphs and values; every call it does not take (another signature, dtype or
layout, keywords, a subclass, a wrong count) reaches the Python entry unchanged; it is
shared by threads, survives a fork, never writes a caller's array or returns one array
twice; plans it refuses say why in explain."""

from __future__ import annotations

import gc as collector
import threading
import time
import warnings
import weakref
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends.native import entry
from graphc.ir.graph import Graph
from graphc.runtime.backend import BackendUnavailableError
from graphc.runtime.executable import WARM_CALLS
from graphc.runtime.recycle import RECYCLE_BYTES
from tests.budget import draws
from tests.differential import describe_feeds, quiet
from tests.edge_graphs import edge_graphs
from tests.edge_values import bits_differ, edge_feeds
from tests.forking import child_status
from tests.native_checks import exact_outputs, needs_native, threaded_mismatches
from tests.runtime.test_recycle import CHANGES, change_in_place

pytestmark = needs_native

IN_C = "entry: one C call"


def _entry_built() -> str | None:
    """Why no entry in C can be built here (None: one can)."""
    try:
        entry.module()
    except BackendUnavailableError as exc:
        return str(exc)
    return None


needs_entry = pytest.mark.skipif(
    needs_native.args[0] or _entry_built() is not None, reason="no entry in C here"
)


def _tiny() -> Graph:
    g = gc.Graph("tiny")
    with g:
        x = gc.placeholder("x", shape=(1,))
        w = gc.placeholder("w", shape=(1,))
        y = gc.sum((x + w) * (w + 1.0))
        gc.output(y, name="y")
        gc.output(w + 1.0, name="dx")
        gc.output((x + w) + (w + 1.0), name="dw")
    return g


def _results(result: Any) -> list[np.ndarray]:
    return list(result) if isinstance(result, tuple) else [result]


@needs_entry
def test_the_tiny_graph_runs_as_one_c_call_with_the_python_entrys_bits() -> None:
    g = _tiny()
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    x, w = np.array([2.0], np.float32), np.array([1.0], np.float32)
    first = exe(x, w)  # the Python entry; the entry in C builds after it
    assert exe.wait()
    assert IN_C in exe.explain()
    rng = np.random.default_rng(0)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e38, 3e38], np.float32)
    for k in range(200):
        x = rng.choice(specials, 1) if k % 3 == 0 else rng.standard_normal(1).astype(np.float32)
        w = rng.choice(specials, 1) if k % 5 == 0 else rng.standard_normal(1).astype(np.float32)
        before = (x.copy(), w.copy())
        with quiet():
            got, want = exe(x, w), reference(x, w)
        for a, b in zip(got, want):
            assert bits_differ(a, b) is None, (x, w, a, b)
        assert bits_differ(x, before[0]) is None and bits_differ(w, before[1]) is None
    assert [type(a) for a in first] == [np.ndarray] * 3
    assert [a.shape for a in first] == [a.shape for a in got]


@needs_entry
def test_the_entry_comes_after_some_calls_without_waiting() -> None:
    """Its build starts at the signature's WARM_CALLS-th call: a program that never
    calls wait() gets it too, and one that calls a plan a few times builds none."""
    exe = gc.compile(_tiny(), backend="native")
    x, w = np.array([2.0], np.float32), np.array([1.0], np.float32)
    want = exe(x, w)
    for _ in range(WARM_CALLS - 2):
        exe(x, w)
    time.sleep(0.2)
    assert "entry: Python, while its entry in C is built" in exe.explain()
    assert exe._last is not None and exe._last.entry_job is not None
    assert not exe._last.entry_job.queued
    exe(x, w)  # the WARM_CALLS-th
    deadline = time.monotonic() + 120
    while IN_C not in exe.explain() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert IN_C in exe.explain()
    assert all(bits_differ(a, b) is None for a, b in zip(exe(x, w), want))


@needs_entry
def test_calls_the_entry_does_not_take_reach_the_python_entry() -> None:
    """Another dtype (converted or refused as before), layout, keywords, a subclass, a
    list, a wrong count: each gives what the Python entry gives."""
    g = _tiny()
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    x, w = np.array([2.0], np.float32), np.array([1.5], np.float32)
    exe(x, w)
    assert exe.wait() and IN_C in exe.explain()

    class Sub(np.ndarray):
        pass

    strided = np.array([3.0, 9.0], np.float32)[::2]  # (one element: C-ordered all the same)
    swapped = np.array([2.0], ">f4")
    calls = [
        ((x, w), {}),
        ((), {"x": x, "w": w}),
        ((x,), {"w": w}),
        ((strided, w), {}),
        ((swapped, w), {}),
        ((x.view(Sub), w), {}),
        (([2.0], w), {}),
        ((np.array([2], np.int64), w), {}),
    ]
    calls += [((x,), {}), ((x, w, w), {}), ((np.zeros((2,), np.float32), w), {})]
    for args, feeds in calls:
        got, want = _outcome(exe, args, feeds), _outcome(reference, args, feeds)
        if isinstance(want, str):
            assert got == want, (args, feeds)
            continue
        assert not isinstance(got, str), (got, args, feeds)
        for a, b in zip(got, want):
            assert bits_differ(a, b) is None, (args, feeds)
    assert sum(isinstance(_outcome(reference, a, f), str) for a, f in calls) == 5


def _outcome(exe: gc.Executable, args: tuple, feeds: dict) -> list[np.ndarray] | str:
    """The call's results, or its graphc error's message."""
    try:
        return _results(exe(*args, **feeds))
    except gc.GraphcError as exc:
        return f"{type(exc).__name__}: {exc}"


@needs_entry
def test_feeds_in_another_layout_reach_the_python_entry() -> None:
    """A strided view, a transposed one, an offset that breaks alignment: the tape was
    recorded for C-ordered, aligned feeds, so these run in Python: the values of their
    C-ordered copies."""
    g = gc.Graph("layouts")
    with g:
        x = gc.placeholder("x", shape=(4, 8), dtype="float32")
        gc.output(gc.exp(x) * 2.0 - x, name="y")
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    rng = np.random.default_rng(5)
    exe(rng.standard_normal((4, 8)).astype(np.float32))
    assert exe.wait() and IN_C in exe.explain()
    raw = np.empty(129, np.uint8)[1:].view(np.float32)  # one byte into its buffer
    raw[...] = rng.standard_normal(32)
    feeds = [
        rng.standard_normal((4, 16)).astype(np.float32)[:, ::2],
        rng.standard_normal((8, 4)).astype(np.float32).T,
        raw.reshape(4, 8),
    ]
    assert not feeds[0].flags.c_contiguous and not feeds[1].flags.c_contiguous
    assert not feeds[2].flags.aligned
    for x in feeds:  # (exp is native's own: the same kernel whichever entry calls it)
        assert bits_differ(exe(x), exe(np.ascontiguousarray(x))) is None
        assert np.allclose(exe(x), reference(x), rtol=1e-6)


@needs_entry
def test_outputs_are_fresh_arrays_even_where_the_graph_returns_an_input_twice() -> None:
    g = gc.Graph("echo")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        gc.output(x, name="same")
        gc.output(x, name="again")
        gc.output(x * 2.0, name="twice")
    exe = gc.compile(g, backend="native")
    x = np.array([1.0, -0.0, np.nan])
    exe(x)
    assert exe.wait() and IN_C in exe.explain()
    first = exe(x)
    second = exe(x)
    arrays = [*first, *second, x]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1 :]:
            assert not np.shares_memory(a, b)
    assert bits_differ(first[0], x) is None and bits_differ(first[1], x) is None
    first[0][0] = 7.0
    assert x[0] == 1.0 and second[0][0] == 1.0


@needs_entry
def test_a_large_output_is_recycled_once_the_caller_drops_it() -> None:
    """Guards the entry's recycling (runtime/recycle.py's rule): a large output the
    caller dropped is handed out again, rather than a fresh mmap whose pages fault in
    on every call (GELU over 1e7 floats: 6.3 -> 1.9 ms a call); one that the caller, a
    view or a container still holds is never written again."""
    n = RECYCLE_BYTES // 4 + 1
    g = gc.Graph("large")
    with g:
        x = gc.placeholder("x", shape=(n,), dtype="float32")
        gc.output(gc.tanh(x) * 2.0 + 1.0, name="y")
        gc.output(gc.sum(x), name="total")
    exe = gc.compile(g, backend="native")
    x = np.linspace(-1, 1, n, dtype=np.float32)
    exe(x)
    assert exe.wait() and IN_C in exe.explain(x)
    python_entry = gc.compile(g, backend="native")  # its first call: the Python entry

    def want(feed: np.ndarray) -> np.ndarray:
        return python_entry(feed)[0]

    first = exe(x)[0]
    kept = weakref.ref(first)
    del first
    collector.collect()
    assert kept() is not None, "the entry did not keep the dropped output"
    second = exe(x + 1)[0]
    assert second is kept()
    assert bits_differ(second, want(x + 1)) is None
    held = exe(x)[0]  # `second` is held: a fresh array
    assert not np.shares_memory(held, second)
    # on a cache line, where numpy's own allocation starts 16 bytes past one
    assert second.ctypes.data % 64 == 0 and held.ctypes.data % 64 == 0
    assert bits_differ(second, want(x + 1)) is None
    view = exe(x - 1)[0][:10]
    container = [exe(x - 2)[0]]
    later = exe(x + 3)[0]
    for other in (second, held, view, container[0]):
        assert not np.shares_memory(later, other)
    assert bits_differ(view, want(x - 1)[:10]) is None
    assert bits_differ(container[0], want(x - 2)) is None
    assert bits_differ(later, want(x + 3)) is None


@needs_entry
@pytest.mark.parametrize("change", CHANGES)
def test_a_dropped_output_changed_in_place_is_not_recycled(change: str) -> None:
    """Guards the entry's recycling against an array its caller changed before letting
    it go: a new shape, dtype or read-only flag set in place must not reach the next
    caller, who gets an array of the plan's shape and dtype, writeable, with the
    Python entry's bits."""
    n = RECYCLE_BYTES // 4 + 1
    g = gc.Graph("large")
    with g:
        x = gc.placeholder("x", shape=(n + 1,), dtype="float32")
        gc.output(gc.tanh(x) * 2.0, name="y")
    exe = gc.compile(g, backend="native")
    x = np.linspace(-1, 1, n + 1, dtype=np.float32)
    exe(x)
    assert exe.wait() and IN_C in exe.explain(x)
    first = exe(x)
    change_in_place(first, change)
    del first
    collector.collect()
    again = exe(x + 1)
    assert again.shape == (n + 1,) and again.dtype == np.float32 and again.flags.writeable
    assert bits_differ(again, gc.compile(g, backend="native")(x + 1)) is None


@needs_entry
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3)])
def test_zero_d_and_empty_arrays(shape: tuple[int, ...]) -> None:
    g = gc.Graph("edge")
    with g:
        x = gc.placeholder("x", shape=shape, dtype="float32")
        gc.output(gc.exp(x) * 2.0, name="y")
        gc.output(gc.sum(x), name="s")
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    x = np.full(shape, 0.5, np.float32)
    first = exe(x)
    assert exe.wait()
    for a, b, c in zip(exe(x), first, reference(x)):
        assert bits_differ(a, b) is None
        assert a.shape == c.shape and a.dtype == c.dtype


@needs_entry
def test_each_signature_keeps_its_results_when_another_has_the_entry() -> None:
    g = gc.Graph("batch")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        gc.output(gc.tanh(x) * 3.0 + x, name="y")
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((b, 3)).astype(np.float32) for b in (1, 2, 5, 2, 1, 7)]
    for x in batches:
        exe(x)
        assert exe.wait()
    assert IN_C in exe.explain(batches[-1])
    assert "the entry in C holds the signature built last" in exe.explain(batches[0])
    firsts = [exe(x) for x in batches]
    for x, first in zip(batches * 3, firsts * 3):
        assert bits_differ(exe(x), first) is None
    # tanh is native's own (an ulp bound): the same kernel whichever entry runs it
    for x in batches:
        assert np.allclose(exe(x), reference(x), rtol=1e-6, atol=1e-6)


@needs_entry
def test_threads_share_the_entry() -> None:
    g = gc.Graph("shared")
    with g:
        x = gc.placeholder("x", shape=(4, 8), dtype="float64")
        y = gc.placeholder("y", shape=(8,), dtype="float64")
        gc.output(gc.sum(x * y + x, axis=1), name="s")
        gc.output(x - y, name="d")
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    rng = np.random.default_rng(2)
    feeds = [(rng.standard_normal((4, 8)), rng.standard_normal(8)) for _ in range(8)]
    exe(*feeds[0])
    assert exe.wait() and IN_C in exe.explain()
    wants = [reference(*f) for f in feeds]
    assert threaded_mismatches(exe, feeds, wants, threads=8, calls=300) == []


@needs_entry
def test_a_forked_child_calls_the_entry() -> None:
    g = _tiny()
    exe = gc.compile(g, backend="native")
    x, w = np.array([2.0], np.float32), np.array([1.0], np.float32)
    want = exe(x, w)
    assert exe.wait() and IN_C in exe.explain()

    def child() -> bool:
        return all(bits_differ(a, b) is None for a, b in zip(exe(x, w), want))

    assert child_status(child, 60) == 0


@needs_entry
def test_plans_refused_say_why() -> None:
    loop = gc.trace(
        lambda x: gc.fori_loop(0, 3, lambda i, c: c * 2.0, x), gc.TensorSpec((2,), "float32")
    )
    exe = gc.compile(loop, backend="native")
    exe(np.ones(2, np.float32))
    assert exe.wait()
    assert "entry: Python (the plan has loops or branches)" in exe.explain()


@needs_entry
def test_a_large_plan_releases_the_gil_through_its_tape() -> None:
    """Above entry.NOGIL_BYTES the tape runs without the GIL, under the entry's own lock:
    threads calling it at once get their own results (a call finding the lock taken runs
    the Python entry on its thread's arena)."""
    big = gc.Graph("big")
    with big:
        x = gc.placeholder("x", shape=(512, 1024), dtype="float32")
        gc.output(gc.tanh(x) * 2.0, name="y")
        gc.output(gc.sum(x, axis=0), name="s")
    exe = gc.compile(big, backend="native")
    rng = np.random.default_rng(4)
    feeds = [(rng.standard_normal((512, 1024)).astype(np.float32),) for _ in range(4)]
    exe(*feeds[0])
    assert exe.wait()
    assert IN_C in exe.explain() and "the GIL released" in exe.explain(), exe.explain()
    assert "the GIL released" not in gc.compile(_tiny(), backend="native", wait=True).explain(
        np.ones(1, np.float32), np.ones(1, np.float32)
    )
    wants = [exe(*f) for f in feeds]
    for f, want in zip(feeds, wants):
        reference = gc.compile(big, backend="native")(*f)  # the Python entry
        assert all(bits_differ(a, b) is None for a, b in zip(want, reference))
    assert threaded_mismatches(exe, feeds, wants, threads=4, calls=20) == []


@needs_entry
def test_a_large_plans_entry_bound_again_shares_its_lock() -> None:
    """An executable binds its entry again when another signature's tier comes in; a
    call still running the tape must keep every binding out: one lock per entry, and a
    call finding it taken goes to the fallback."""
    big = gc.Graph("big")
    with big:
        x = gc.placeholder("x", shape=(512, 1024), dtype="float32")
        gc.output(x + 1.0, name="y")
    exe = gc.compile(big, backend="native")
    x = np.zeros((512, 1024), np.float32)
    exe(x)
    assert exe.wait() and "the GIL released" in exe.explain()
    made = exe._in_c
    first, again = made.bind(lambda *a: "fallback"), made.bind(lambda *a: "fallback")
    assert bits_differ(first(x), x + 1) is None
    with made.lock:
        assert first(x) == "fallback" and again(x) == "fallback"
    assert bits_differ(again(x), x + 1) is None


def _sgd_step(n_in: int = 6, n_out: int = 3) -> tuple[gc.Graph, dict[str, str]]:
    """One SGD step of a softmax regression: data x (B, n_in) and labels y (B,); state w
    and b, updated in place; returns the loss."""
    g = gc.Graph("sgd")
    with g:
        w = gc.placeholder("w", shape=(n_in, n_out), dtype="float32")
        b = gc.placeholder("b", shape=(n_out,), dtype="float32")
        x = gc.placeholder("x", shape=("B", n_in), dtype="float32")
        y = gc.placeholder("y", shape=("B",), dtype="int64")
        loss, (gw, gb) = gc.value_and_grad(
            lambda w, b: gc.cross_entropy(x @ w + b, y), argnums=(0, 1)
        )(w, b)
        gc.output(loss, name="loss")
        gc.output(w - 0.5 * gw, name="w_new")
        gc.output(b - 0.5 * gb, name="b_new")
    return g, {"w": "w_new", "b": "b_new"}


def _sgd_feeds(seed: int, batch: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 6)).astype(np.float32), rng.integers(0, 3, batch)


@needs_entry
def test_a_plan_holding_state_runs_in_c_with_the_python_entrys_bits() -> None:
    """Thirty training steps in C leave the weights and losses of thirty steps on the
    Python entry, bit for bit; set_state into the same buffers reaches the entry, and
    new buffers (another shape) drop it."""
    g, updates = _sgd_step()
    w0 = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    b0 = np.zeros(3, np.float32)
    exes = [gc.compile(g, backend="native", updates=updates) for _ in range(2)]
    for exe in exes:
        exe.set_state(w=w0, b=b0)
        exe(*_sgd_feeds(0))
    assert exes[0].wait() and IN_C in exes[0].explain(), exes[0].explain()
    losses: list[list[np.ndarray]] = [[], []]
    for step in range(30):
        feeds = _sgd_feeds(step)
        losses[0].append(exes[0](*feeds))
        losses[1].append(exes[1]._slow(*feeds))  # the Python entry's run function
    assert IN_C in exes[0].explain()
    for a, b in zip(*losses):
        assert bits_differ(a, b) is None
    for name in ("w", "b"):
        assert bits_differ(exes[0].state[name], exes[1].state[name]) is None
    assert not np.array_equal(exes[0].state["w"], w0)  # (it trained)

    exe = exes[0]
    exe.set_state(w=w0)  # same shape: copied into the buffer the entry writes
    fresh = gc.compile(g, backend="numpy", updates=updates)
    fresh.set_state(w=w0, b=exe.state["b"])
    feeds = _sgd_feeds(99)
    np.testing.assert_allclose(exe(*feeds), fresh(*feeds), rtol=1e-5)
    np.testing.assert_allclose(exe.state["w"], fresh.state["w"], rtol=1e-5, atol=1e-6)


@needs_entry
def test_state_given_new_buffers_drops_the_entry() -> None:
    g = gc.Graph("counter")
    with g:
        c = gc.placeholder("c", shape=("N",), dtype="float64")
        x = gc.placeholder("x", shape=(2,), dtype="float64")
        gc.output(c + 1.0, name="c_new")
        gc.output(gc.sum(c) + gc.sum(x), name="total")
    exe = gc.compile(g, backend="native", updates={"c": "c_new"})
    exe.set_state(c=np.zeros(3))
    x = np.ones(2)
    exe(x)
    assert exe.wait() and IN_C in exe.explain()
    assert exe(x) == 5.0  # c was [1, 1, 1]
    exe.set_state(c=np.full(4, 10.0))  # another shape: new buffers, plans made again
    assert exe(x) == 42.0 and exe(x) == 46.0
    np.testing.assert_array_equal(exe.state["c"], np.full(4, 12.0))
    assert exe.wait() and IN_C in exe.explain()
    assert exe(x) == 50.0


def _counter(n: int, **outputs: Any) -> gc.Executable:
    """On native: state c of n float64 zeros, updated to c + x each call, returning each
    of `outputs` (a function of c) by its name."""
    g = gc.Graph("counter")
    with g:
        c = gc.placeholder("c", shape=(n,), dtype="float64")
        x = gc.placeholder("x", shape=(n,), dtype="float64")
        gc.output(c + x, name="c_new")
        for name, make in outputs.items():
            gc.output(make(c), name=name)
    exe = gc.compile(g, backend="native", updates={"c": "c_new"})
    exe.set_state(c=np.zeros(n))
    return exe


@needs_entry
def test_threads_calling_a_plan_holding_state_take_turns() -> None:
    """Eight threads call a counter: every call sees the count the one before it left
    (the C entry and the Python entry share the executable's call lock), none twice."""
    exe = _counter(1, seen=lambda c: c * 2.0)
    one = np.ones(1)
    exe(one)
    assert exe.wait() and IN_C in exe.explain()
    seen: list[float] = []

    def work() -> None:
        for _ in range(200):
            seen.append(float(exe(one)[0]))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == [2.0 * k for k in range(1, 1601)]
    assert exe.state["c"][0] == 1601.0


@needs_entry
def test_a_failing_call_in_a_plan_holding_state_gives_its_lock_back() -> None:
    g, updates = _sgd_step()
    exe = gc.compile(g, backend="native", updates=updates)
    exe.set_state(w=np.ones((6, 3), np.float32), b=np.zeros(3, np.float32))
    x, y = _sgd_feeds(0)
    exe(x, y)
    assert exe.wait() and IN_C in exe.explain()
    before = exe.state
    with pytest.raises(gc.IndexRangeError, match="one_hot: label 3 is out of range for 3"):
        exe(x, np.where(np.arange(16) == 9, 3, y))
    for name, value in before.items():  # the labels are checked before anything is written
        assert bits_differ(exe.state[name], value) is None
    assert exe._call_lock is not None and not exe._call_lock.locked()
    assert np.isfinite(exe(x, y))


@needs_entry
def test_a_step_native_does_not_run_is_refused_from_the_plans_code() -> None:
    """Found in the plan's generated code, before any planning for C: an op native has
    no kernel for, a step it declined (int32)."""
    g = gc.Graph("refused")
    with g:
        x = gc.placeholder("x", shape=(4,), dtype="float32")
        i = gc.placeholder("i", shape=(4,), dtype="int32")
        gc.output(gc.concat([x, x], axis=0), name="c")
        gc.output(i + i, name="j")
    exe = gc.compile(g, backend="native")
    feeds = (np.ones(4, np.float32), np.arange(4, dtype=np.int32))
    exe(*feeds)
    assert exe.wait()
    line = next(x for x in exe.explain().splitlines() if x.startswith("entry: "))
    assert "(concat) has no native kernel" in line or "stays on numpy: no native" in line, line
    assert exe._last is not None and exe._last.entry_job is None  # nothing built


@needs_entry
def test_a_step_that_cannot_be_recorded_keeps_the_python_entry() -> None:
    """Two states swapped: one is read into a new array made during the call before the
    other overwrites it (array_copy), which a tape cannot hold: the recording refuses it
    and the Python entry keeps the plan."""
    g = gc.Graph("swap")
    with g:
        a = gc.placeholder("a", shape=(2,), dtype="float64")
        b = gc.placeholder("b", shape=(2,), dtype="float64")
        x = gc.placeholder("x", shape=(2,), dtype="float64")
        gc.output(b * 1.0, name="a_new")
        gc.output(a * 1.0, name="b_new")
        gc.output(a + x, name="y")
    exe = gc.compile(g, backend="native", updates={"a": "a_new", "b": "b_new"})
    exe.set_state(a=np.zeros(2), b=np.ones(2))
    x = np.full(2, 5.0)
    assert bits_differ(exe(x), np.full(2, 5.0)) is None
    assert exe.wait()
    assert "entry: Python (no entry in C: it calls array_copy from Python)" in exe.explain()
    assert bits_differ(exe(x), np.full(2, 6.0)) is None  # a was b's 1
    assert bits_differ(exe(x), np.full(2, 5.0)) is None  # and 0 again after two swaps


@needs_entry
def test_a_returned_state_value_is_the_one_before_the_update_in_c() -> None:
    """A state placeholder returned (and once more as w * 1.0) is copied into the
    caller's output buffers before the update writes the state, in the entry as in
    Python."""
    exe = _counter(2, before=lambda c: c * 1.0, again=lambda c: c)
    x = np.ones(2)
    exe(x)
    assert exe.wait() and IN_C in exe.explain(), exe.explain()
    for k in range(1, 5):
        before, again = exe(x)
        assert bits_differ(before, np.full(2, float(k))) is None
        assert bits_differ(again, before) is None and again is not before
    assert bits_differ(exe.state["c"], np.full(2, 5.0)) is None


def test_an_unavailable_module_keeps_the_python_entry_silently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(compile: bool = True) -> Any:
        raise BackendUnavailableError("Python's C headers are not installed (a test)")

    monkeypatch.setattr(entry, "module", missing)
    g = _tiny()
    exe = gc.compile(g, backend="native")
    x, w = np.array([2.0], np.float32), np.array([1.0], np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe(x, w)
        assert exe.wait()
    assert [str(w.message) for w in caught if "graphc" in str(w.message)] == []
    assert "no entry in C: Python's C headers are not installed (a test)" in exe.explain()
    assert IN_C not in exe.explain()


@needs_entry
def test_an_executable_with_an_entry_is_collected() -> None:
    exe = gc.compile(_tiny(), backend="native")
    exe(np.array([2.0], np.float32), np.array([1.0], np.float32))
    assert exe.wait() and IN_C in exe.explain()
    ref = weakref.ref(exe)
    del exe
    collector.collect()
    assert ref() is None


@needs_entry
@pytest.mark.slow  # every draw builds its kernels
@settings(max_examples=draws(60), derandomize=True, deadline=None)
@given(edge_graphs(max_ops=8), st.integers(0, 2**16))
def test_hostile_graphs_through_the_entry(graph: Graph, seed: int) -> None:
    """The entry's results are the Python entry's on native bit for bit, and numpy's
    wherever no op with an ulp bound is upstream; errors alike; feeds never written."""
    if any(isinstance(d, str) for p in graph.inputs for d in p.type.shape):
        feeds = edge_feeds(graph, seed, {"B": 2})
    else:
        feeds = edge_feeds(graph, seed)
    args = [feeds[p.name] for p in graph.inputs]
    exact = exact_outputs(graph)
    where = f"{graph}\nfeeds = {describe_feeds(feeds)}"
    with quiet():
        try:
            want = gc.compile(graph, backend="numpy")(*args)
        except gc.GraphcError as exc:
            exe = gc.compile(graph, backend="native")
            for _ in range(2):  # the Python entry, then (once built) the entry in C
                with pytest.raises(type(exc)):
                    exe(*args)
                exe.wait()
            return
        exe = gc.compile(graph, backend="native")
        first = exe(*args)  # the Python entry
        assert exe.wait()
        assert "entry: " in exe.explain(*args), "explain says nothing of the entry"
        before = [a.copy() for a in args]
        got = exe(*args)
    for j, (a, b, c) in enumerate(zip(_results(got), _results(first), _results(want))):
        assert bits_differ(a, b) is None, f"output {j} vs the Python entry\n{where}"
        if exact[j]:
            assert bits_differ(a, c) is None, f"output {j} vs numpy\n{where}"
    for a, b in zip(args, before):
        assert bits_differ(a, b) is None, f"a feed was written\n{where}"
