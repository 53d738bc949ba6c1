"""Executable behaviour: feeds, signatures and the plan cache, safety of buffers, threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from tests.budget import draws
from tests.strategies import random_feeds, random_graphs


def affine() -> gc.Graph:
    g = gc.Graph("affine")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        w = gc.placeholder("w", shape=(3, 2))
        b = gc.constant(np.arange(2, dtype=np.float32), name="b")
        h = gc.relu(x @ w + b)
        gc.output(h * 2.0, name="y")
        gc.output(gc.sum(h), name="total")
    return g


def feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((batch, 3)).astype(np.float32),
        "w": rng.standard_normal((3, 2)).astype(np.float32),
    }


def test_positional_and_keyword_feeds_agree() -> None:
    g, f = affine(), feeds(4)
    exe = gc.compile(g)
    y1, t1 = exe(f["x"], f["w"])
    y2, t2 = exe(w=f["w"], x=f["x"])
    want = gc.run(g, f)
    np.testing.assert_allclose(y1, want[0], rtol=1e-6)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(t1, t2)


def test_one_output_is_an_array() -> None:
    g = gc.Graph("one")
    with g:
        x = gc.placeholder("x", shape=(2,))
        gc.output(x + 1.0, name="y")
    out = gc.compile(g)(np.zeros(2, np.float32))
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.ones(2, np.float32))


def test_a_new_batch_size_builds_a_new_plan_and_a_repeated_one_does_not() -> None:
    exe = gc.compile(affine())
    assert exe.plans_built == 0  # "B" is symbolic: nothing to plan before a call
    exe(**feeds(4))
    exe(**feeds(4, seed=1))
    assert exe.plans_built == 1
    y, _ = exe(**feeds(7))
    assert y.shape == (7, 2) and exe.plans_built == 2
    exe(**feeds(4))
    assert exe.plans_built == 2


def test_concrete_graph_is_planned_at_compile_time() -> None:
    g = gc.Graph("fixed")
    with g:
        x = gc.placeholder("x", shape=(3,))
        gc.output(gc.exp(x) * x, name="y")
    exe = gc.compile(g)
    assert exe.plans_built == 1
    assert "def run(x)" in exe.source()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda exe, f: exe(x=f["x"]), ["missing", "w"]),
        (lambda exe, f: exe(x=f["x"], w=f["w"], z=f["w"]), ["no placeholder", "z"]),
        (lambda exe, f: exe(f["x"], f["w"], f["w"]), ["takes 2", "got 3"]),
        (lambda exe, f: exe(f["x"], x=f["x"], w=f["w"]), ["fed twice", "x"]),
        (lambda exe, f: exe(f["x"].astype(np.float64), f["w"]), ["'x'", "float32", "float64"]),
        (lambda exe, f: exe(f["x"], f["w"].T), ["'w'", "(3, 2)", "(2, 3)"]),
        (lambda exe, f: exe(f["x"][0], f["w"]), ["'x'", "rank 2"]),
    ],
)
def test_bad_feeds_raise_feed_errors_naming_the_placeholder(call: object, words: list) -> None:
    exe = gc.compile(affine())
    f = feeds(4)
    exe(**f)  # a cached plan must not let bad feeds through
    with pytest.raises(gc.FeedError) as info:
        call(exe, f)  # type: ignore[operator]
    for word in words:
        assert word in str(info.value)


def test_symbol_bound_inconsistently_is_a_feed_error() -> None:
    g = gc.Graph("pair")
    with g:
        a = gc.placeholder("a", shape=("B",))
        b = gc.placeholder("b", shape=("B",))
        gc.output(a + b, name="y")
    with pytest.raises(gc.FeedError, match="symbolic dim B"):
        gc.compile(g)(np.ones(3, np.float32), np.ones(4, np.float32))


def test_compile_refuses_a_function_and_a_bad_opt_level() -> None:
    with pytest.raises(gc.GraphcError, match="compile: expected a gc.Graph, got function.*gc.jit"):
        gc.compile(lambda x: x * 2)  # as torch.compile(fn) would take it
    g = gc.trace(lambda x: x * 2, gc.TensorSpec((2,)))
    for level in (-1, 3, "2"):
        with pytest.raises(gc.GraphcError, match="opt_level must be 0, 1 or 2"):
            gc.compile(g, opt_level=level)  # type: ignore[arg-type]


def test_lists_and_scalars_are_accepted_as_feeds() -> None:
    g = gc.Graph("lists")
    with g:
        x = gc.placeholder("x", shape=(2,))
        s = gc.placeholder("s", shape=())
        gc.output(x * s, name="y")
    out = gc.compile(g)([1.0, 2.0], 3.0)
    np.testing.assert_array_equal(out, np.array([3.0, 6.0], np.float32))


def test_output_that_is_an_input_or_constant_is_a_copy() -> None:
    g = gc.Graph("passthrough")
    with g:
        x = gc.placeholder("x", shape=(2,))
        c = gc.constant(np.ones(2, np.float32), name="c")
        gc.output(x, name="same")
        gc.output(c, name="const")
        y = x + c
        gc.output(y, name="y1")
        gc.output(y, name="y2")
    xv = np.zeros(2, np.float32)
    same, const, y1, y2 = gc.compile(g, opt_level=0)(xv)
    assert same is not xv and not np.shares_memory(same, xv)
    assert const.flags.writeable and not np.shares_memory(y1, y2)
    same[:] = 5
    const[:] = 5
    y1[:] = 7
    np.testing.assert_array_equal(y2, [1.0, 1.0])
    again = gc.compile(g, opt_level=0)(xv)
    np.testing.assert_array_equal(again[1], [1.0, 1.0])


def _snapshot(g: gc.Graph) -> list[np.ndarray]:
    return [n.value.copy() for n in g.nodes if n.is_constant]


@settings(max_examples=draws(60))
@given(random_graphs(min_ops=5, max_ops=20), st.sampled_from([0, 2]))
def test_callers_arrays_constants_and_earlier_results_are_never_written(
    g: gc.Graph, opt_level: int
) -> None:
    exe = gc.compile(g, opt_level=opt_level)
    f1, f2 = random_feeds(g, seed=1), random_feeds(g, seed=2)
    saved_feeds = {k: v.copy() for k, v in f1.items()}
    saved_constants = _snapshot(g)
    first = exe(**f1)
    first = first if isinstance(first, tuple) else (first,)
    kept = [a.copy() for a in first]
    for _ in range(2):
        exe(**f2)
    for k, v in f1.items():
        np.testing.assert_array_equal(v, saved_feeds[k])
    for before, after in zip(saved_constants, _snapshot(g)):
        np.testing.assert_array_equal(before, after)
    for a, b in zip(first, kept):
        np.testing.assert_array_equal(a, b)


def in_threads(work: Callable[[int], None], count: int) -> None:
    """Run work(0) .. work(count - 1) each on its own thread; wait for all."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_eight_threads_give_reference_results() -> None:
    g = affine()
    exe = gc.compile(g)
    batches = [feeds(3000 + 1000 * (k % 3), seed=k) for k in range(8)]
    wants = [gc.run(g, f) for f in batches]
    errors: list[str] = []
    start = threading.Barrier(8)

    def work(k: int) -> None:
        start.wait()
        for i in range(200):
            f = batches[(k + i) % 8]
            y, total = exe(**f)
            want = wants[(k + i) % 8]
            if not (np.allclose(y, want[0], rtol=1e-5) and np.allclose(total, want[1], rtol=1e-5)):
                errors.append(f"thread {k} call {i}")

    in_threads(work, 8)
    assert errors == []
    assert exe.plans_built == 3  # three batch sizes, planned once for all threads
