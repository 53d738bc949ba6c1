"""Declaring and tracing are per thread: another thread's ops are not recorded."""

from __future__ import annotations

import threading

import numpy as np

import graphc as gc


def _in_other_thread(fn):  # type: ignore[no-untyped-def]
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_ops_in_another_thread_compute_while_a_graph_is_declared() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,))
        before = len(g.nodes)
        result = _in_other_thread(lambda: gc.exp(np.zeros(3, np.float32)))
        assert isinstance(result, np.ndarray)
        np.testing.assert_array_equal(result, np.ones(3, np.float32))
        assert len(g.nodes) == before
        gc.output(x * 2, name="y")
    assert [n.op for n in g.op_nodes] == ["constant", "mul"]


def test_ops_in_another_thread_compute_while_a_function_is_traced() -> None:
    seen: list = []

    def fn(x):  # type: ignore[no-untyped-def]
        seen.append(_in_other_thread(lambda: gc.tanh(np.zeros(2))))
        return gc.exp(x)

    g = gc.trace(fn, gc.TensorSpec((2,)))
    assert isinstance(seen[0], np.ndarray)
    assert [n.op for n in g.op_nodes] == ["exp"]


def test_two_threads_declare_their_own_graphs_at_once() -> None:
    barrier = threading.Barrier(2, timeout=30)  # a broken test fails, not hangs

    def declare(name: str) -> gc.Graph:
        g = gc.Graph(name)
        with g:
            x = gc.placeholder("x", shape=(2,))
            barrier.wait()
            y = gc.exp(x) + 1.0
            barrier.wait()
            gc.output(y, name="y")
        return g

    graphs: dict = {}
    threads = [threading.Thread(target=lambda n=n: graphs.__setitem__(n, declare(n))) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for g in graphs.values():
        gc.verify(g)
        assert [n.op for n in g.op_nodes] == ["exp", "constant", "add"]
