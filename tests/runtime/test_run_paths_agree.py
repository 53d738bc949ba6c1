"""One graph, every way to run and transform it, the same answer: edge graphs (no outputs,
a placeholder or a constant as the output, a value output twice, 0-d, empty and
symbolic dims fed 0, bool and int outputs) run by calling the graph, by gc.run, compiled
on each backend and level, optimized then compiled, and after the text and JSON round
trips; and graphs broken through the low-level API refused by every transformation
with the error gc.verify gives, as gc.compile refuses them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import Graph, Node
from graphc.ir.types import TensorType
from graphc.runtime.executable import WARM_CALLS
from tests.ir.test_verify import VIOLATIONS, base

F32 = np.float32


def _declared(build: Callable[[], None], name: str = "edge") -> gc.Graph:
    g = gc.Graph(name)
    with g:
        build()
    return g


def _no_outputs() -> None:
    gc.placeholder("x", shape=(3,))


def _placeholder_output() -> None:
    gc.output(gc.placeholder("x", shape=(3,)), name="y")


def _value_twice() -> None:
    x = gc.placeholder("x", shape=(3,))
    y = x * 2.0
    gc.output(y, name="a")
    gc.output(y, name="b")
    gc.output(x, name="c")
    gc.output(x, name="d")


def _constant_only() -> None:
    gc.output(gc.constant(np.arange(3, dtype=F32)), name="c")


def _zero_d() -> None:
    x = gc.placeholder("x", shape=())
    gc.output(x * 3.0, name="y")
    gc.output(gc.constant(F32(2.0)), name="c")


def _empty_dim() -> None:
    x = gc.placeholder("x", shape=(0, 3))
    gc.output(gc.sum(x, axis=0), name="s")
    gc.output(x + 1.0, name="y")


def _bool_and_int() -> None:
    x = gc.placeholder("x", shape=(3,))
    n = gc.placeholder("n", shape=(3,), dtype="int64")
    gc.output(x > 1.0, name="b")
    gc.output(n * 2, name="i")
    gc.output(gc.argmax(x), name="k")


def _symbolic() -> None:
    x = gc.placeholder("x", shape=("B", 3))
    gc.output(gc.sum(x, axis=0), name="s")
    gc.output(x * x, name="y")
    gc.output(x, name="x_again")


# name -> (builder, feeds, the expected results computed with numpy)
X3 = np.array([0.5, 2.0, -1.0], F32)
EDGES: dict[str, tuple[Callable[[], None], list[dict[str, np.ndarray]], Callable[..., Any]]] = {
    "no outputs": (_no_outputs, [{"x": X3}], lambda x: ()),
    "placeholder output": (_placeholder_output, [{"x": X3}], lambda x: x),
    "value twice": (_value_twice, [{"x": X3}], lambda x: (x * 2, x * 2, x, x)),
    "constant only": (_constant_only, [{}], lambda: np.arange(3, dtype=F32)),
    "0-d": (_zero_d, [{"x": np.array(1.5, F32)}], lambda x: (x * F32(3), np.array(2.0, F32))),
    "empty dim": (
        _empty_dim,
        [{"x": np.zeros((0, 3), F32)}],
        lambda x: (x.sum(axis=0), x + F32(1)),
    ),
    "bool and int": (
        _bool_and_int,
        [{"x": X3, "n": np.array([1, -2, 3])}],
        lambda x, n: (x > 1, n * 2, np.argmax(x)),
    ),
    "symbolic fed 0 and 2": (
        _symbolic,
        [{"x": np.zeros((0, 3), F32)}, {"x": np.arange(6, dtype=F32).reshape(2, 3)}],
        lambda x: (x.sum(axis=0), x * x, x),
    ),
}


def _saved_and_loaded(g: gc.Graph, folder: str) -> gc.Graph:
    path = os.path.join(folder, "edge.json")
    gc.save(g, path)
    return gc.load(path)


def _paths(g: gc.Graph, folder: str) -> dict[str, Callable[..., Any]]:
    """Every way to run `g` on positional feeds."""
    optimized = gc.optimize(g)
    return {
        "call": g,
        "run": lambda *a: _as_called(gc.run(g, dict(zip([p.name for p in g.inputs], a)))),
        "numpy O0": gc.compile(g, opt_level=0, backend="numpy"),
        "numpy O2": gc.compile(g, opt_level=2, backend="numpy"),
        "native O2": gc.compile(g, opt_level=2, backend="native"),
        "optimize, then compile": gc.compile(optimized, opt_level=0, backend="numpy"),
        "text round trip": gc.parse(str(g)),
        "JSON round trip": _saved_and_loaded(g, folder),
    }


def _as_called(results: list) -> Any:
    """gc.run's list as calling a graph gives it: one array, or a tuple."""
    return results[0] if len(results) == 1 else tuple(results)


def _same(got: Any, want: Any, path: str) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (path, got)
        for a, b in zip(got, want):
            _same(a, b, path)
        return
    assert isinstance(got, np.ndarray), (path, type(got))
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (path, got, want)
    np.testing.assert_array_equal(got, want, err_msg=path)


@pytest.mark.parametrize("edge", list(EDGES))
def test_edge_graphs_give_numpys_answer_on_every_run_path(edge: str, tmp_path: Any) -> None:
    build, feed_sets, numpy_answer = EDGES[edge]
    g = _declared(build)
    for feeds in feed_sets:
        args = [feeds[p.name] for p in g.inputs]
        want = numpy_answer(*args)
        for path, run in _paths(g, str(tmp_path)).items():
            got = run(*args)
            _same(got, want, f"{edge}: {path}")
            again = run(*args)  # a second call is served by the plan cache
            _same(again, want, f"{edge}: {path}, called again")
            for a in got if isinstance(got, tuple) else (got,):
                assert not any(np.shares_memory(a, x) for x in args), (path, "returns a feed")


def test_edge_graphs_give_numpys_answer_through_the_native_entry_in_c() -> None:
    # a signature called WARM_CALLS times gets the backend's entry (one C call per call,
    # where the plan allows it): the same results as the Python entry
    for edge, (build, feed_sets, numpy_answer) in EDGES.items():
        g = _declared(build)
        exe = gc.compile(g, backend="native")
        for feeds in feed_sets:
            args = [feeds[p.name] for p in g.inputs]
            for _ in range(WARM_CALLS + 1):
                exe(*args)
            exe.wait()
            for _ in range(2):
                got = exe(*args)
                _same(got, numpy_answer(*args), f"{edge}: native entry")
                for a in got if isinstance(got, tuple) else (got,):
                    assert not any(np.shares_memory(a, x) for x in args), edge


def test_a_compiled_graph_without_outputs_returns_an_empty_tuple_as_the_graph_does() -> None:
    # the executable returned None (the generated code's `return None`) where g() gives ()
    g = _declared(_no_outputs)
    assert g(X3) == ()
    for backend in ("numpy", "native"):
        for level in (0, 2):
            assert gc.compile(g, opt_level=level, backend=backend)(X3) == ()


def test_an_executable_whose_every_output_is_an_update_returns_an_empty_tuple() -> None:
    g = gc.Graph("step")
    with g:
        w = gc.placeholder("w", shape=(3,))
        x = gc.placeholder("x", shape=(3,))
        gc.output(w - 0.5 * x, name="w_new")
    exe = gc.compile(g, updates={"w": "w_new"}, backend="numpy")
    w0 = np.ones(3, F32)
    assert exe(X3, w=w0) == ()
    assert exe(X3) == ()
    np.testing.assert_array_equal(exe.state["w"], w0 - F32(0.5) * X3 - F32(0.5) * X3)


# -- graphs broken through the low-level API ---------------------------------------------


def _reads_an_output(g: Graph, x: Node, e: Node) -> None:
    """A node taking output 'y' (no value) as its input."""
    neg = Node("neg", "op", "neg", (g.node("y"),), {}, e.type, graph=g)
    g.nodes.append(neg)
    g._by_name["neg"] = neg


def _long_cycle(g: Graph, x: Node, e: Node) -> None:
    """The first of 3000 negations reads the last: walks that recurse would overflow."""
    value = e
    for _ in range(3000):
        value = g.add_op("neg", [value], {}, e.type)
    e.inputs = (value,)


BROKEN = {name: breaker for name, (breaker, _, _) in VIOLATIONS.items()}
BROKEN["a node reads an output"] = _reads_an_output
BROKEN["a cycle through 3000 nodes"] = _long_cycle

TRANSFORMS: dict[str, Callable[[gc.Graph], Any]] = {
    "gradients": lambda g: gc.gradients(g, wrt=["x"], seeds=True),
    "split_backward": lambda g: gc.split_backward(g, wrt=["x"]),
    "optimize O1": lambda g: gc.optimize(g, level=1),
    "optimize O2": lambda g: gc.optimize(g, level=2),
    "optimize O0": lambda g: gc.optimize(g, level=0),
    "fuse": lambda g: gc.fuse(g, backend="numpy"),
    "compile": gc.compile,
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_every_transformation_refuses_a_broken_graph_with_verifys_error(broken: str) -> None:
    # gradients and the fusion step crashed with KeyError or TypeError, optimize returned
    # a graph (of a cycle, of a node reading an output) or crashed with KeyError
    g, x, e = base()
    BROKEN[broken](g, x, e)
    with pytest.raises(gc.VerifyError) as verified:
        gc.verify(g)
    for name, transform in TRANSFORMS.items():
        with pytest.raises(type(verified.value)) as caught:
            transform(g)
        assert str(caught.value) == str(verified.value), name


def test_forward_mode_on_a_broken_graph_gives_verifys_error_not_a_key_error() -> None:
    # gc.tangents differentiates through the same walk; a cycle crashed it with KeyError
    g, x, e = base()
    _long_cycle(g, x, e)
    with pytest.raises(gc.CycleError, match="has a cycle"):
        gc.tangents(g, wrt=["x"])


def test_a_wrong_declared_type_is_verifys_error_not_a_cotangent_mismatch() -> None:
    g, x, e = base()
    e.type = TensorType((3,), "float64")
    with pytest.raises(gc.VerifyError, match=r"node 'exp' \(op exp\): declared type f64\[3\]"):
        gc.gradients(g, wrt=["x"], seeds=True)
    with pytest.raises(gc.VerifyError, match=r"declared type f64\[3\]"):
        gc.tangents(g, wrt=["x"])


def test_bad_feeds_get_the_same_error_from_the_graph_and_its_executables() -> None:
    # too many positional feeds: the executable said "takes 2 data input(s)" where the
    # graph says "takes 2 input(s)" (the word is for executables holding state)
    g = _declared(_bool_and_int)
    x, n = X3, np.array([1, 2, 3])
    bad: list[tuple[tuple, dict]] = [
        ((x,), {}),
        ((x, n, n), {}),
        ((x, n), {"z": n}),
        ((x, n), {"x": x}),
        ((x.astype(np.float64), n), {}),
        ((x[:2], n), {}),
        ((x, n.astype(np.float32)), {}),
    ]
    runs = [
        gc.compile(g, backend=b, opt_level=level) for b in ("numpy", "native") for level in (0, 2)
    ]
    for args, kwargs in bad:
        with pytest.raises(gc.FeedError) as called:
            g(*args, **kwargs)
        for exe in runs:
            with pytest.raises(gc.FeedError) as caught:
                exe(*args, **kwargs)
            assert str(caught.value) == str(called.value), exe


def test_an_output_named_twice_or_none_is_refused_as_a_placeholder_named_twice() -> None:
    # outputs=["a", "a"] counted a's cotangent twice (gradient 4x for a = sum(x*x)) and
    # made two seed placeholders for it, where wrt=["x", "x"] is refused; outputs=[] said
    # the graph "has no floating point output"
    g = gc.Graph("picked")
    with g:
        x = gc.placeholder("x", shape=(3,))
        gc.output(gc.sum(x * x), name="a")
        gc.output(gc.sum(x) * 2.0, name="b")
    for transform in (gc.gradients, gc.split_backward, gc.tangents):
        with pytest.raises(
            gc.AutodiffError, match=r"outputs names an output twice: \['a', 'b', 'a'\]"
        ):
            transform(g, wrt=["x"], outputs=["a", "b", "a"])
        with pytest.raises(gc.AutodiffError, match=r"outputs=\[\] picks no output.*\['a', 'b'\]"):
            transform(g, wrt=["x"], outputs=[])
    grad_a = gc.gradients(g, wrt=["x"], outputs=["a"])(X3)[-1]
    np.testing.assert_array_equal(grad_a, 2 * X3)


def test_calling_a_broken_graph_on_graph_values_gives_verifys_error() -> None:
    """A graph called on graph values replays its ops where the caller traces (gc.trace,
    gc.jit, gc.vmap); a node reading a placeholder of no graph crashed that replay with
    a KeyError. It is verified on failure, as gc.run is."""
    g, x, e = base()
    e.inputs = (Node("ghost", "placeholder", None, (), {}, e.type),)
    with pytest.raises(gc.VerifyError) as verified:
        gc.verify(g)
    for name, transform in {
        "trace": lambda: gc.trace(lambda v: g(v), np.ones(3, np.float32)),
        "jit": lambda: gc.jit(lambda v: g(v))(np.ones(3, np.float32)),
    }.items():
        with pytest.raises(gc.VerifyError) as caught:
            transform()
        assert str(caught.value) == str(verified.value), name


def test_a_bad_feed_to_an_executable_is_not_shown_during_handling_of_another_error() -> None:
    """The entry's cache miss (a KeyError, an AttributeError on a thread's first call)
    took the slow path inside its except, so the FeedError came after 'During handling
    of the above exception, another exception occurred' (found in a notebook); and the
    entry's lines are in linecache, so a traceback shows them."""
    import linecache

    exe = gc.compile(gc.trace(lambda x: x * 2, gc.TensorSpec((3,))), backend="numpy")
    for bad in (np.ones(3), np.ones(4, np.float32)):  # wrong dtype, then wrong shape
        with pytest.raises(gc.FeedError) as caught:
            exe(bad)
        assert caught.value.__context__ is None, repr(caught.value.__context__)
    assert "def entry(" in "".join(linecache.getlines("<graphc entry lambda>"))
