"""The native backend's entry in C (backends/native/entry.py): a small plan run as one C
call. Its results are the Python entry's bit for bit (numpy's where native is exact) on
hostile graphs and values; every call it does not take (another signature, dtype or
layout, keywords, a subclass, a wrong count) reaches the Python entry unchanged; it is
shared by threads, survives a fork, never writes a caller's array or returns one array
twice; plans it refuses say why in explain."""

from __future__ import annotations

import gc as collector
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
from tests.budget import draws
from tests.differential import describe_feeds, quiet
from tests.edge_graphs import edge_graphs
from tests.edge_values import bits_differ, edge_feeds
from tests.forking import child_status
from tests.native_checks import exact_outputs, needs_native, threaded_mismatches

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
    g = gc.Graph("stateful")
    with g:
        w = gc.placeholder("w", shape=(3,), dtype="float32")
        x = gc.placeholder("x", shape=(3,), dtype="float32")
        gc.output(w + x, name="w_new")
        gc.output(gc.sum(w * x), name="loss")
    exe = gc.compile(g, backend="native", updates={"w": "w_new"})
    exe(np.ones(3, np.float32), w=np.zeros(3, np.float32))
    assert exe.wait()
    assert "entry: Python (the plan holds state)" in exe.explain()

    big = gc.Graph("big")
    with big:
        x = gc.placeholder("x", shape=(512, 1024), dtype="float32")
        gc.output(x * 2.0, name="y")
    exe = gc.compile(big, backend="native")
    exe(np.ones((512, 1024), np.float32))
    assert exe.wait()
    assert "bytes (an entry in C takes at most" in exe.explain()

    loop = gc.trace(
        lambda x: gc.fori_loop(0, 3, lambda i, c: c * 2.0, x), gc.TensorSpec((2,), "float32")
    )
    exe = gc.compile(loop, backend="native")
    exe(np.ones(2, np.float32))
    assert exe.wait()
    assert "entry: Python (the plan has loops or branches)" in exe.explain()


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
    g = gc.Graph("labels")
    with g:
        y = gc.placeholder("y", shape=(4,), dtype="int64")
        gc.output(gc.one_hot(y, 5), name="h")
    exe = gc.compile(g, backend="native")
    labels = np.array([0, 4, 2, 1])
    exe(labels)
    assert exe.wait()
    assert "entry: Python (no entry in C:" in exe.explain()
    with pytest.raises(gc.GraphcError, match="out of range"):
        exe(np.array([0, 5, 2, 1]))


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
