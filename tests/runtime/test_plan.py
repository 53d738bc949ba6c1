"""The planner on hand-built graphs: peak bytes, reuse, in place, no overlapping live buffers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.runtime.explain import peak_bytes
from graphc.runtime.plan import Plan, Value
from tests.budget import draws
from tests.differential import check_levels
from tests.strategies import random_graphs

N = 256 * 256 * 4  # bytes of one f32[256,256]


def root(plan: Plan, v: Value) -> Value:
    while v.kind == "view":
        v = plan.values[v.base]  # type: ignore[index]
    return v


def assert_no_live_overlap(plan: Plan) -> None:
    """Values live at the same step never share arena bytes (in-place hand-over aside)."""
    arena = [
        v
        for v in plan.values.values()
        if plan.buffers[v.buffer].kind == "allocated" and v.kind != "view"
    ]
    last = {
        v.name: max(
            [v.last_use]
            + [w.last_use for w in plan.values.values() if w.kind == "view" and root(plan, w) is v]
        )
        for v in arena
    }
    for a in arena:
        for b in arena:
            if a.name >= b.name:
                continue
            ba, bb = plan.buffers[a.buffer], plan.buffers[b.buffer]
            mem = ba.offset < bb.offset + b.type.nbytes and bb.offset < ba.offset + a.type.nbytes
            first, second = (a, b) if a.defined <= b.defined else (b, a)
            live = second.defined < last[first.name] or (
                second.defined == last[first.name] and second.base != first.name
            )
            assert not (mem and live), f"{a.name} and {b.name} overlap\n{plan}"


def matmul_chain() -> gc.Graph:
    g = gc.Graph("chain")
    with g:
        x = gc.placeholder("x", shape=(256, 256))
        a = x @ x
        b = a @ a  # a dies here, but matmul may not write into its input
        c = b @ b  # reuses a's buffer
        d = c @ c  # reuses b's buffer
        gc.output(gc.sum(d), name="total")
    return g


def test_matmul_chain_reuses_two_buffers() -> None:
    exe = gc.compile(matmul_chain(), opt_level=0)
    plan = exe.plan()
    kinds = [plan.values[s.output].kind for s in plan.steps]
    assert kinds == ["allocated", "allocated", "reused", "reused", "output"]
    assert plan.arena_bytes == 2 * N
    assert peak_bytes(plan) == 2 * N
    assert plan.intermediate_bytes == 4 * N
    assert_no_live_overlap(plan)
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32) / 16
    want = gc.run(matmul_chain(), {"x": x})[0]
    np.testing.assert_allclose(exe(x), want, rtol=1e-4)


def elementwise_chain() -> gc.Graph:
    g = gc.Graph("ew")
    with g:
        x = gc.placeholder("x", shape=(1000,))
        a = gc.exp(x)  # allocated
        b = gc.tanh(a)  # in place of a
        c = b * x  # in place of b (x is the caller's: never written)
        d = gc.sin(x)  # allocated: c is still live
        e = c + d  # in place of c
        gc.output(gc.sum(e), name="total")
    return g


def test_elementwise_chain_runs_in_place() -> None:
    exe = gc.compile(elementwise_chain(), opt_level=0)
    plan = exe.plan()
    kinds = {s.output: plan.values[s.output].kind for s in plan.steps}  # by variable names
    assert kinds["a"] == "allocated" and kinds["d"] == "allocated"
    assert kinds["b"] == "inplace" and kinds["c"] == "inplace" and kinds["e"] == "inplace"
    assert peak_bytes(plan) == 2 * 4000
    assert plan.intermediate_bytes == 5 * 4000
    assert_no_live_overlap(plan)
    text = exe.explain()
    for words in ("in place of a", "frees", "peak bytes", "sum of all intermediates"):
        assert words in text


def test_an_elementwise_step_writes_over_the_dying_input_written_last() -> None:
    # a and b both die at c: c takes b's buffer, the one written last (likelier in the
    # cache of the core that wrote it), whichever operand comes first
    for first_a in (True, False):
        g = gc.Graph("donor")
        with g:
            x = gc.placeholder("x", shape=(1000,))
            a = gc.exp(x)
            b = gc.tanh(x)
            gc.output(gc.sum((a - b) if first_a else (b - a)), name="total")
        plan = gc.compile(g, opt_level=0).plan()
        c = next(s.output for s in plan.steps if s.node.op == "sub")
        assert plan.values[c].kind == "inplace" and plan.values[c].base == "b", plan


def test_a_step_frees_its_dying_inputs_in_their_order() -> None:
    # the free list's order decides later reuse: it follows the step's inputs, never a
    # set's order, so the same graph gets the same plan in every process
    for swap in (False, True):
        g = gc.Graph("frees")
        with g:
            x = gc.placeholder("x", shape=(64, 64))
            a, b = gc.exp(x), gc.tanh(x)
            gc.output(gc.sum((b @ a) if swap else (a @ b)), name="total")
        plan = gc.compile(g, opt_level=0).plan()
        step = next(s for s in plan.steps if s.node.op == "matmul")
        want = [plan.values[v].buffer for v in ("ba" if swap else "ab")]
        assert list(step.frees) == want, plan


def test_large_arena_buffers_start_on_pages() -> None:
    plan = gc.compile(matmul_chain(), opt_level=0).plan()
    offsets = [b.offset for b in plan.buffers if b.kind == "allocated"]
    assert offsets and all(o % 4096 == 0 for o in offsets)


def test_views_share_their_base_and_keep_it_alive() -> None:
    g = gc.Graph("views")
    with g:
        x = gc.placeholder("x", shape=(4, 6))
        a = gc.exp(x)
        r = gc.reshape(a, (6, 4))  # a view of a's buffer
        t = gc.transpose(r)  # a view too
        b = gc.sin(x)  # must not take a's buffer: t still reads it
        gc.output(t * b, name="y")
    exe = gc.compile(g, opt_level=0)
    plan = exe.plan()
    assert plan.values["r"].kind == "view" and plan.values["t"].kind == "view"
    assert plan.values["b"].buffer != plan.values["a"].buffer
    assert_no_live_overlap(plan)
    xv = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(exe(xv), gc.run(g, {"x": xv})[0], rtol=1e-6)


# a slice of an arena value whose window is C-contiguous is a view: (index, base shape)
CONTIGUOUS_WINDOWS = [("1:3", (4, 6)), (":, 2:5", (1, 6)), ("2", (4, 6)), ("0:1, 2:4", (3, 6))]
STRIDED_WINDOWS = [(":, 2:5", (4, 6)), ("::2", (4, 6)), ("1:3, :, 0:1", (4, 3, 2))]


@pytest.mark.parametrize(("index", "shape"), CONTIGUOUS_WINDOWS + STRIDED_WINDOWS)
def test_contiguous_slices_of_arena_values_are_views(index: str, shape: tuple) -> None:
    """The view keeps the layout a copy would have (C-contiguous) and its base alive: a
    value made after the base dies must not take the base's buffer while the view is
    read, and an op must not overwrite the base in place while the view is live."""
    g = gc.Graph("window")
    with g:
        x = gc.placeholder("x", shape=shape)
        a = gc.exp(x)
        s = gc.slice_(a, index)
        b = gc.sin(x)  # a is dead here (only s reads its memory now)
        c = gc.slice_(b, index) + 1.0  # b dies here: its buffer is free, a's is not
        gc.output(s * c, name="y")
    exe = gc.compile(g, opt_level=0)
    plan = exe.plan()
    view = (index, shape) in CONTIGUOUS_WINDOWS
    assert (plan.values["s"].kind == "view") == view, plan
    if view:
        assert plan.values["b"].buffer != plan.values["a"].buffer
    assert_no_live_overlap(plan)
    xv = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    assert exe(xv).flags.c_contiguous
    # the values: bit for bit on numpy; on native exp and sin (libmvec's) within their
    # declared bounds, the rest bit for bit (tests/differential.py)
    check_levels(g, [{"x": xv}], levels=(0,))


def test_slices_of_inputs_and_returned_slices_are_copies() -> None:
    g = gc.Graph("copies")
    with g:
        x = gc.placeholder("x", shape=(4, 6))
        a = gc.exp(x)
        gc.output(gc.slice_(x, "1:3") * 2.0, name="y")  # the caller's array: any layout
        gc.output(gc.slice_(a, "1:3"), name="z")  # returned: a fresh array
    plan = gc.compile(g, opt_level=0).plan()
    assert plan.values["slice"].kind != "view" and plan.values["slice_1"].kind == "output"
    big = np.random.default_rng(3).standard_normal((4, 12)).astype(np.float32)
    # on a strided caller's array: bit for bit on numpy; on native exp within its
    # declared bound, the rest bit for bit (tests/differential.py)
    check_levels(g, [{"x": big[:, ::2]}], levels=(0,))


def test_slices_and_reshapes_of_a_transposed_arena_value_are_computed() -> None:
    # a transpose is a view of an arena buffer; a window or a reshape of it is not a
    # C-contiguous part of that buffer, so the plan computes both (schedule.py's
    # reshape_view and plan.py's slice rule), and a reshape of the computed slice is a
    # view again
    g = gc.Graph("transposed")
    with g:
        x = gc.placeholder("x", shape=(4, 6))
        t = gc.transpose(gc.exp(x))  # (6, 4), a view of exp's arena buffer
        s = gc.slice_(t, "1:3")  # rows 1, 2 of the transpose: columns of exp(x)
        r = gc.reshape(t, (24,))
        flat = gc.reshape(s, (8,))
        gc.output(s * 2.0, name="y")
        gc.output(r + 1.0, name="z")
        gc.output(flat - 1.0, name="w")
    plan = gc.compile(g, opt_level=0).plan()
    assert plan.values[t.name].kind == "view"
    assert plan.values[s.name].kind != "view" and plan.values[r.name].kind != "view"
    assert plan.values[flat.name].kind == "view"
    xv = np.random.default_rng(4).standard_normal((4, 6)).astype(np.float32)
    check_levels(g, [{"x": xv}], levels=(0,))


@settings(max_examples=draws(80))
@given(random_graphs(min_ops=10, max_ops=30), st.sampled_from([0, 2]))
def test_random_plans_never_overlap_live_values(g: gc.Graph, opt_level: int) -> None:
    plan = gc.compile(g, opt_level=opt_level).plan()
    assert_no_live_overlap(plan)
    assert peak_bytes(plan, scratch=False) <= plan.arena_bytes  # kernels' scratch is not arena


def test_plan_is_printable_and_explain_needs_a_signature() -> None:
    g = gc.Graph("sym")
    with g:
        x = gc.placeholder("x", shape=("B",))
        gc.output(gc.exp(x) + 1.0, name="y")
    # on numpy, which marks no step (a compiling backend marks each step's backend and
    # says which tier runs while its kernels build)
    exe = gc.compile(g, backend="numpy")
    with pytest.raises(gc.GraphcError, match="symbolic dims"):
        exe.explain()
    text = exe.explain(np.zeros(5, np.float32))
    assert "B=5" in text and "f32[5]" in text
    # explain is the plan's text with the backend that lowered each step added
    backend = exe.backend.name
    assert f"backend: {backend}\n" in text and "  [" not in text
    plain = text.replace(f"backend: {backend}\n", "")
    assert plain == "compiled at O2 (exact)\n" + str(exe.plan())


def test_reshape_of_a_transposed_buffer_is_computed_not_viewed() -> None:
    g = gc.Graph("strided")
    with g:
        x = gc.placeholder("x", shape=(3, 4))
        t = gc.transpose(gc.exp(x))
        r = gc.reshape(t, (12,))  # numpy would copy here: a precomputed view would go stale
        gc.output(gc.tanh(r), name="y")
    exe = gc.compile(g, opt_level=0)
    assert exe.plan().values["r"].kind != "view"
    for seed in range(2):
        xv = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(exe(xv), gc.run(g, {"x": xv})[0], rtol=1e-6)
