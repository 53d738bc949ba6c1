"""Scalar plans (backends/numpy/scalar.py): graphs whose every value is one element."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.errors import NumericsError
from graphc.ir.registry import ops_with
from tests.budget import draws
from tests.runtime.test_executable import in_threads

IDENTITY_OPS = ops_with("one_element_identity")  # the value itself on one element
SUM_OPS = ops_with("one_element_sum")  # v + 0 on one element

ONE_ELEMENT_SHAPES = ((), (1,), (1, 1))


def tiny_with_gradients(shape: tuple = (1,)) -> gc.Graph:
    g = gc.Graph("tiny")
    with g:
        x = gc.placeholder("x", shape=shape)
        w = gc.placeholder("w", shape=shape)
        gc.output(gc.sum((x + w) * (w + 1)), name="y")
    return gc.gradients(g, wrt=["x", "w"])


def feeds_for(g: gc.Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        p.name: rng.uniform(-2, 2, p.type.shape).astype(p.type.dtype)  # type: ignore[arg-type]
        for p in g.inputs
    }


def assert_bitwise_equal(got: Any, want: list[np.ndarray], msg: str) -> None:
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want), msg
    for a, b in zip(got, want):
        assert isinstance(a, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype, msg
        np.testing.assert_array_equal(a, b, err_msg=msg)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=msg)


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("shape", ONE_ELEMENT_SHAPES)
def test_tiny_graph_runs_on_scalars_and_equals_the_reference(opt_level: int, shape: tuple) -> None:
    g = tiny_with_gradients(shape)
    exe = gc.compile(g, opt_level=opt_level)
    feeds = feeds_for(g, seed=1)
    got = exe(**feeds)
    plan = exe.plan()
    assert plan.scalar and plan.arena_bytes == 0
    assert "scalar plan" in exe.explain()
    assert "arena[" not in exe.source() and "out=" not in exe.source()
    assert_bitwise_equal(got, gc.run(exe.optimized, feeds), exe.source())
    assert_bitwise_equal(got, gc.run(g, feeds), exe.source())  # rounding unchanged by O2 here


def test_results_are_fresh_arrays_and_feeds_are_untouched() -> None:
    g = tiny_with_gradients(())
    exe = gc.compile(g)
    x, w = np.array(2.0, np.float32), np.array(1.0, np.float32)
    first = exe(x, w)
    assert x == 2.0 and w == 1.0
    assert len({id(a) for a in first}) == 3 and all(a.flags.writeable for a in first)
    first[0][()] = -1
    second = exe(x, w)
    assert second[0] == 6.0 and first[0] == -1
    assert second[0] is not first[0]


def test_numpy_scalars_and_python_floats_are_accepted_as_feeds() -> None:
    g = tiny_with_gradients(())
    exe = gc.compile(g)
    want = exe(np.array(2.0, np.float32), np.array(1.0, np.float32))
    for x, w in ((np.float32(2.0), np.float32(1.0)), (2.0, 1.0)):
        assert_bitwise_equal(exe(x, w), list(want), "feeds as scalars")


def test_the_same_value_returned_twice_gives_two_arrays() -> None:
    g = gc.Graph("twice")
    with g:
        x = gc.placeholder("x", shape=(1,), dtype="float64")
        y = gc.exp(x)
        gc.output(y, name="a")
        gc.output(y, name="b")
        gc.output(x, name="x_again")
    exe = gc.compile(g, opt_level=0)
    xv = np.array([0.5])
    a, b, again = exe(xv)
    assert exe.plan().scalar
    a[0] = 0
    assert b[0] == np.exp(0.5) and again[0] == 0.5 and not np.shares_memory(again, xv)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda x: gc.relu(x), id="op without a ufunc kernel"),
        pytest.param(lambda x: gc.cast(x, "int64") + 1, id="integer value"),
        pytest.param(lambda x: gc.broadcast_to(x, (2,)) * 3.0, id="two elements"),
        pytest.param(lambda x: gc.where(x > 0.0, x, 1.0), id="boolean value"),
    ],
)
def test_graphs_outside_the_scalar_rules_use_buffers(build: Any) -> None:
    g = gc.Graph("other")
    with g:
        x = gc.placeholder("x", shape=(1,))
        gc.output(build(x), name="y")
    exe = gc.compile(g, opt_level=0)
    feeds = {"x": np.array([0.5], np.float32)}
    assert_bitwise_equal(exe(**feeds), gc.run(g, feeds), exe.source())
    assert not exe.plan().scalar


def test_training_state_uses_buffers() -> None:
    g = gc.Graph("step")
    with g:
        w = gc.placeholder("w", shape=(1,))
        gc.output(w - 0.5 * w, name="w_new")
    exe = gc.compile(g, updates={"w": "w_new"})
    exe.set_state(w=np.array([2.0], np.float32))
    exe()
    assert not exe.plan().scalar
    np.testing.assert_array_equal(exe.state["w"], [1.0])


def test_check_numerics_names_the_node_on_scalars() -> None:
    g = gc.Graph("bad")
    with g:
        x = gc.placeholder("x", shape=(1,))
        gc.output(gc.log(x) * 2.0, name="y")
    exe = gc.compile(g, opt_level=0, check_numerics=True)
    np.testing.assert_allclose(exe(np.array([1.0], np.float32)), [0.0])
    assert exe.plan().scalar
    with warnings.catch_warnings(), pytest.raises(NumericsError, match="log"):
        warnings.simplefilter("ignore", RuntimeWarning)
        exe(np.array([-1.0], np.float32))


def test_division_by_zero_gives_inf_and_numpys_warning() -> None:
    g = gc.Graph("div")
    with g:
        x = gc.placeholder("x", shape=())
        y = gc.placeholder("y", shape=())
        gc.output(x / y, name="q")
    exe = gc.compile(g)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        q = exe(np.float32(1.0), np.float32(0.0))
    assert exe.plan().scalar and q == np.inf and q.dtype == np.float32


def test_threads_share_a_scalar_plan() -> None:
    g = tiny_with_gradients()
    exe = gc.compile(g)
    errors: list[str] = []

    def work(seed: int) -> None:
        for k in range(200):
            feeds = feeds_for(g, seed * 1000 + k)
            want = gc.run(g, feeds)
            got = exe(**feeds)
            if not all(np.array_equal(a, b) for a, b in zip(got, want)):
                errors.append(f"thread {seed} call {k}")

    in_threads(work, 8)
    assert not errors and exe.plan().scalar


SPECIAL = [0.0, -0.0, 1.5, -3.25, 1e-45, 3.4e38, np.inf, -np.inf, np.nan]
ONE_ELEMENT_OPS = {
    "reshape": lambda x: gc.reshape(x, (1, 1, 1)),
    "transpose": lambda x: gc.transpose(gc.reshape(x, (1, 1)), (1, 0)),
    "broadcast_to": lambda x: gc.broadcast_to(x, (1, 1)),
    "max": lambda x: gc.max(x, axis=0, keepdims=True),
    "min": lambda x: gc.min(x),
    "sum": lambda x: gc.sum(x),
    "mean": lambda x: gc.mean(x, axis=0),
    "sum_to": lambda x: gc.sum_to(gc.reshape(x, (1, 1)), (1,)),
    "sum_to nothing": lambda x: gc.sum_to(x, (1,)),
}


def test_every_one_element_rule_has_a_case() -> None:
    assert {name.split()[0] for name in ONE_ELEMENT_OPS} == IDENTITY_OPS | SUM_OPS


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(ONE_ELEMENT_OPS))
def test_one_element_rules_agree_with_the_kernels_on_special_values(op: str, dtype: str) -> None:
    """IDENTITY_OPS give the value itself, SUM_OPS v + 0 (-0.0 becomes +0.0), as the
    op's own kernel does (the reference interpreter runs it)."""
    g = gc.Graph("one")
    with g:
        x = gc.placeholder("x", shape=(1,), dtype=dtype)
        gc.output(ONE_ELEMENT_OPS[op](x), name="y")
    assert op.split()[0] in {n.op for n in g.op_nodes}
    exe = gc.compile(g, opt_level=0)
    for value in SPECIAL:
        xv = np.array([value], dtype)
        (want,) = gc.run(g, {"x": xv})
        assert_bitwise_equal(exe(xv), [want], f"{op} on {value!r}\n{exe.source()}")
        assert exe.plan().scalar
        if op in IDENTITY_OPS or op == "sum_to nothing":
            assert np.signbit(want).all() == np.signbit(xv).all()


# -- random one-element graphs ------------------------------------------------------

UNARY = ["neg", "tanh", "exp", "sin", "abs", "sqrt_abs", "reshape", "sum", "mean", "max"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "const"]


@st.composite
def one_element_graphs(draw: Any) -> gc.Graph:
    """Graphs of 3-15 ops on one-element float values of mixed ranks and dtypes."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    g = gc.Graph("one_element")
    with g:
        pool = [
            gc.placeholder(f"x{i}", shape=draw(st.sampled_from(ONE_ELEMENT_SHAPES)), dtype=dtype)
            for i in range(draw(st.integers(1, 3)))
        ]
        for _ in range(draw(st.integers(3, 15))):
            x = draw(st.sampled_from(pool))
            if draw(st.booleans()):
                name = draw(st.sampled_from(UNARY))
                if name == "sqrt_abs":
                    y = gc.sqrt(gc.abs(x))
                elif name == "reshape":
                    y = gc.reshape(x, draw(st.sampled_from(ONE_ELEMENT_SHAPES)))
                elif name in ("sum", "mean", "max"):
                    y = getattr(gc, name)(x)
                else:
                    y = getattr(gc, name)(x)
            else:
                name = draw(st.sampled_from(BINARY))
                other = draw(st.sampled_from(pool))
                if name == "const":
                    y = x * draw(st.sampled_from([0.5, -3.0, 1e-3])) + 1.0
                elif name == "div":
                    y = x / (gc.abs(other) + 0.5)
                else:
                    y = getattr(gc, name)(x, other)
            pool.append(y)
        for i, y in enumerate(draw(st.lists(st.sampled_from(pool[-4:]), min_size=1, max_size=3))):
            gc.output(y, name=f"out{i}")
    return g


@settings(max_examples=draws(200), deadline=None)
@given(one_element_graphs(), st.integers(0, 2**16))
def test_random_one_element_graphs_match_the_reference_bit_for_bit(g: gc.Graph, seed: int) -> None:
    feeds = feeds_for(g, seed)
    for level in (0, 2):
        exe = gc.compile(g, opt_level=level)
        got = exe(**feeds)
        msg = f"O{level}\n{g}\n{exe.source()}"
        assert exe.plan().scalar, msg
        # the reference on the graph the plan was made from: the same ops, on arrays
        with np.errstate(all="ignore"):
            assert_bitwise_equal(got, gc.run(exe.optimized, feeds), msg)
