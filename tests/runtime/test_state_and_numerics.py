"""Training state written back by `updates`, and `check_numerics`."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def sgd_graph(lr: float = 0.1) -> gc.Graph:
    """One SGD step of least squares: loss = mean((x @ w - y)^2), w_new = w - lr dw."""
    g = gc.Graph("regression")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        y = gc.placeholder("y", shape=("B",), dtype="float64")
        w = gc.placeholder("w", shape=(3,), dtype="float64")
        gc.output(gc.mean((x @ w - y) * (x @ w - y)), name="loss")
    gg = gc.gradients(g, wrt=["w"])
    with gg:
        w_node = gc.Symbol(gg.node("w"))
        dw = gc.Symbol(gg.outputs[-1].inputs[0])
        gc.output(w_node - lr * dw, name="w_new")
    return gg


def reference_step(x: np.ndarray, y: np.ndarray, w: np.ndarray, lr: float = 0.1) -> tuple:
    r = x @ w - y
    return np.mean(r * r), w - lr * (2.0 / len(y)) * (x.T @ r)


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 3))
    return x, x @ np.array([1.0, -2.0, 0.5]) + 0.01 * rng.standard_normal(8)


@pytest.mark.parametrize("opt_level", [0, 2])
def test_updates_write_back_into_state_and_match_reference_steps(opt_level: int) -> None:
    exe = gc.compile(sgd_graph(), opt_level=opt_level, updates={"w": "w_new"})
    x, y = data()
    w0 = np.zeros(3)
    w_ref = w0.copy()
    loss, dw = exe(x, y, w=w0)  # the first call feeds the state by name
    np.testing.assert_array_equal(w0, np.zeros(3))  # the caller's array is only read
    for step in range(20):
        if step:
            loss, dw = exe(x, y)
        want_loss, w_ref = reference_step(x, y, w_ref)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
        np.testing.assert_allclose(exe.state["w"], w_ref, rtol=1e-12)
    assert loss < 0.1


def test_state_read_back_is_a_copy_and_set_state_resets() -> None:
    exe = gc.compile(sgd_graph(), updates={"w": "w_new"})
    x, y = data()
    exe.set_state(w=np.zeros(3))
    exe(x, y)
    seen = exe.state["w"]
    seen[:] = 100.0
    assert not np.allclose(exe.state["w"], 100.0)
    exe.set_state(w=np.ones(3))
    np.testing.assert_array_equal(exe.state["w"], np.ones(3))
    _, w1 = reference_step(x, y, np.ones(3))
    exe(x, y)
    np.testing.assert_allclose(exe.state["w"], w1, rtol=1e-12)


def test_training_step_writes_state_in_place_without_copy() -> None:
    exe = gc.compile(sgd_graph(), opt_level=0, updates={"w": "w_new"})
    x, y = data()
    exe(x, y, w=np.zeros(3))
    plan = exe.plan()
    assert plan.state == ["w"]
    assert plan.late_updates == {}  # the update's last step writes into w's own buffer
    assert "w_new" not in [o for o in plan.returns]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool"])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5)])
def test_state_buffers_start_on_a_cache_line(dtype: str, shape: tuple) -> None:
    """Kernels that write a state in place store whole vectors; numpy's allocation gives
    16 bytes, the executable's own copy 64, whatever the array it was given."""
    g = gc.Graph("keep")
    with g:
        s = gc.placeholder("s", shape=shape, dtype=dtype)
        gc.output(s, name="out")
    exe = gc.compile(g, updates={"s": "out"}, backend="numpy")
    given = np.ones((2, *shape), dtype)[1]  # its second half: no alignment of its own
    feeds = [lambda v: exe.set_state(s=v), lambda v: exe(s=v)]
    for feed in feeds * 4:  # (numpy's own allocation lands on a line now and then)
        exe._state["s"] = None  # a new buffer each time
        feed(given)
        held = exe._state["s"]
        assert held.flags.c_contiguous and (held.size == 0 or held.ctypes.data % 64 == 0)
        assert held.dtype == given.dtype and held.shape == given.shape
        np.testing.assert_array_equal(held, given)
        assert not np.shares_memory(held, given)


def test_state_without_a_value_is_a_feed_error() -> None:
    exe = gc.compile(sgd_graph(), updates={"w": "w_new"})
    with pytest.raises(gc.FeedError, match="'w' is state"):
        exe(*data())


def test_bad_updates_are_rejected() -> None:
    with pytest.raises(gc.GraphcError, match="no output 'nope'"):
        gc.compile(sgd_graph(), updates={"w": "nope"})
    with pytest.raises(gc.GraphcError, match="no placeholder 'v'"):
        gc.compile(sgd_graph(), updates={"v": "w_new"})


def test_swapping_state_reads_old_values() -> None:
    g = gc.Graph("swap")
    with g:
        a = gc.placeholder("a", shape=(2,))
        b = gc.placeholder("b", shape=(2,))
        gc.output(b, name="a_new")
        gc.output(a, name="b_new")
        gc.output(a + b, name="total")
    exe = gc.compile(g, updates={"a": "a_new", "b": "b_new"})
    exe.set_state(a=[1.0, 2.0], b=[3.0, 4.0])
    total = exe()
    np.testing.assert_array_equal(total, [4.0, 6.0])
    np.testing.assert_array_equal(exe.state["a"], [3.0, 4.0])
    np.testing.assert_array_equal(exe.state["b"], [1.0, 2.0])


def numerics_graph() -> gc.Graph:
    g = gc.Graph("numerics")
    with g:
        x = gc.placeholder("x", shape=(3,))
        y = gc.log(x)
        gc.output(y * 2.0, name="y")
    return g


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # compiled code keeps numpy's warnings
def test_check_numerics_names_the_node_and_its_line() -> None:
    g = numerics_graph()
    log_node = next(n for n in g.nodes if n.op == "log")
    exe = gc.compile(g, opt_level=0, check_numerics=True)
    np.testing.assert_allclose(exe(np.ones(3, np.float32)), np.zeros(3))
    with pytest.raises(gc.NumericsError) as info:
        exe(np.array([1.0, -1.0, 2.0], np.float32))
    assert "(op log)" in str(info.value) and "NaN" in str(info.value)
    assert log_node.loc and log_node.loc in str(info.value)


def nan_constant_graphs(shape: tuple) -> dict[str, gc.Graph]:
    """A NaN from a constant: as it is, folded from log(-1), and declared after a log
    that gives NaN first (so the log is the node to name)."""
    graphs = {}
    for case in ("constant", "folded", "op first"):
        g = gc.Graph(case.replace(" ", "_"))
        with g:
            x = gc.placeholder("x", shape=shape)
            first = gc.log(x - 2.0) if case == "op first" else x
            if case == "folded":
                bad = gc.log(gc.constant(np.full(shape, -1.0, np.float32), name="minus_one"))
            else:
                bad = gc.constant(np.full(shape, np.nan, np.float32), name="bad")
            gc.output(gc.exp(first * bad), name="y")
        graphs[case] = g
    return graphs


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", ["numpy", None])
def test_check_numerics_names_the_node_gc_run_names_for_a_nan_constant(backend: str | None) -> None:
    # compiled plans named the constant's first reader ('mul'), the fused node, or (on
    # scalars) that reader: a constant was never checked
    options = {"backend": backend} if backend else {}
    for shape in ((), (3,)):
        for case, g in nan_constant_graphs(shape).items():
            feeds = {"x": np.ones(shape, np.float32)}
            with pytest.raises(gc.NumericsError) as run:
                gc.run(g, feeds, check_numerics=True)
            assert run.value.node == ("first" if case == "op first" else "bad"), str(run.value)
            for opt_level in (0, 1, 2):
                exe = gc.compile(g, opt_level=opt_level, check_numerics=True, **options)
                with pytest.raises(gc.NumericsError) as compiled:
                    exe(**feeds)
                where = f"{case}, shape {shape}, O{opt_level}: {compiled.value}"
                assert compiled.value.node == run.value.node, where
                if case != "folded" or opt_level == 0:  # folded: "node 'bad' (op constant)"
                    assert str(compiled.value) == str(run.value), where
                np.testing.assert_array_equal(feeds["x"], 1.0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_without_check_numerics_nan_flows_through() -> None:
    out = gc.compile(numerics_graph(), opt_level=0)(np.array([0.0, -1.0, 2.0], np.float32))
    assert np.isneginf(out[0]) and np.isnan(out[1])


def test_training_from_eight_threads_serializes_the_steps() -> None:
    import threading

    exe = gc.compile(sgd_graph(lr=0.01), updates={"w": "w_new"})
    x, y = data()
    exe.set_state(w=np.zeros(3))
    threads = [threading.Thread(target=lambda: [exe(x, y) for _ in range(25)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w_ref = np.zeros(3)
    for _ in range(200):  # every step sees the same batch, so the order does not matter
        _, w_ref = reference_step(x, y, w_ref, lr=0.01)
    np.testing.assert_allclose(exe.state["w"], w_ref, rtol=1e-10)
