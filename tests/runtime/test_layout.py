"""Memory layout is the same at every level and in the reference (plan.py, LAYOUT).

matmul and reductions round by their operands' memory order, so a value laid out one
way at O0 and another at O2 (or in the plan and in the reference) gives other last
bits. Each graph here once did: a transpose copied C-contiguous where the reference
kept a view, a folded transpose, a transposed state update, an F-ordered constant.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from tests.differential import check_levels
from tests.edge_values import bits_differ

SEEDS = range(8)


def feeds_for(g: gc.Graph, seeds=SEEDS) -> list[dict[str, np.ndarray]]:
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        out.append({p.name: rng.standard_normal(p.type.shape) for p in g.inputs})
    return out


def parsed(text: str) -> gc.Graph:
    return gc.parse(text)


def test_an_elementwise_result_of_a_transpose_is_c_contiguous_as_in_the_plan() -> None:
    # numpy's ufunc keeps a transposed input's order; the plan's out= buffer is C
    g = parsed("""
    graph g(%x: f64[2,3,16]) {
      %s: f64[3,16] = sum(%x, axis=(0,), keepdims=False)
      %t: f64[16,3] = transpose(%s, axes=(1, 0))
      %a: f64[16,3] = abs(%t)
      %one: f64[] = constant(value=1.0)
      %b: f64[16,3] = add(%one, %a)
      %d: f64[16,3] = div(%t, %b)
      %w: f64[3,1] = constant(value=[[0.25], [-0.5], [0.75]])
      %m: f64[16,1] = matmul(%d, %w)
      %r: f64[3] = sum(%d, axis=(0,), keepdims=False)
      output %y = %m
      output %z = %r
    }""")
    check_levels(g, feeds_for(g))


def test_a_reshaped_transpose_of_an_input_is_c_contiguous_as_in_the_reference() -> None:
    # numpy reshapes x.transpose(1, 2, 0) to (12, 2) as a view with strides (8, 96):
    # BLAS then read the matrix transposed and rounded differently from the reference's
    # C-contiguous copy (found by the tame random graphs, tests/strategies.py)
    g = parsed("""
    graph g(%x: f64[2,3,4]) {
      %s: f64[3,4] = sum(%x, axis=(0,), keepdims=False)
      %r: f64[1,12] = reshape(%s, shape=(1, 12))
      %t: f64[3,4,2] = transpose(%x, axes=(1, 2, 0))
      %q: f64[12,2] = reshape(%t, shape=(12, 2))
      %m: f64[1,2] = matmul(%r, %q)
      %c: f64[2] = sum(%q, axis=(0,), keepdims=False)
      output %y = %m
      output %z = %c
    }""")
    check_levels(g, feeds_for(g, range(40)))


def test_a_returned_transpose_read_by_matmul_keeps_its_order() -> None:
    g = parsed("""
    graph g(%x: f64[5,64], %w: f64[5,3]) {
      %h: f64[5,64] = tanh(%x)
      %t: f64[64,5] = transpose(%h, axes=(1, 0))
      %m: f64[64,3] = matmul(%t, %w)
      output %t_out = %t
      output %m_out = %m
    }""")
    check_levels(g, feeds_for(g))
    t, _ = gc.compile(g)(**feeds_for(g)[0])
    assert t.flags.f_contiguous and not t.flags.c_contiguous  # copied out in its order


def test_a_transpose_of_a_transposed_arena_view_is_a_view_too() -> None:
    g = parsed("""
    graph g(%x: f64[4,8,32]) {
      %h: f64[4,8,32] = tanh(%x)
      %a: f64[32,8,4] = transpose(%h, axes=(2, 1, 0))
      %b: f64[8,32,4] = transpose(%a, axes=(1, 0, 2))
      %s: f64[8,4] = sum(%b, axis=(1,), keepdims=False)
      %r: f64[8,128] = reshape(%b, shape=(8, 128))
      %q: f64[8] = sum(%r, axis=(1,), keepdims=False)
      output %y = %s
      output %z = %q
    }""")
    check_levels(g, feeds_for(g), levels=(0,))


def test_a_transposed_state_update_read_by_matmul() -> None:
    g = parsed("""
    graph g(%w: f64[16,16], %v: f64[16,3]) {
      %h: f64[16,16] = tanh(%w)
      %t: f64[16,16] = transpose(%h, axes=(1, 0))
      %m: f64[16,3] = matmul(%t, %v)
      output %w_new = %t
      output %y = %m
    }""")
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        w, v = rng.standard_normal((16, 16)), rng.standard_normal((16, 3))
        want = gc.run(g, {"w": w, "v": v})
        for level in (0, 1, 2):
            exe = gc.compile(g, opt_level=level, updates={"w": "w_new"})
            got = exe(v, w=w)
            assert bits_differ(got, want[1]) is None, (level, seed)
            assert bits_differ(exe.state["w"], want[0]) is None, (level, seed)


def test_a_transposed_constant_is_not_folded_into_another_layout() -> None:
    rng = np.random.default_rng(3)
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(64, 4), dtype="float64")
        c = gc.constant(rng.standard_normal((64, 7)))
        gc.output(gc.matmul(gc.transpose(c), x), name="y")
    assert "transpose" in str(gc.optimize(g, level=2))  # a constant would be C-contiguous
    check_levels(g, feeds_for(g))


def test_an_f_ordered_constant_runs_as_its_text_round_trip() -> None:
    rng = np.random.default_rng(4)
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(64, 4), dtype="float64")
        c = gc.constant(np.asfortranarray(rng.standard_normal((7, 64))))
        gc.output(gc.matmul(c, x), name="y")
    again = gc.parse(str(g))
    for feeds in feeds_for(g):
        want = gc.run(again, feeds)[0]
        assert bits_differ(gc.run(g, feeds)[0], want) is None
        for level in (0, 1, 2):
            assert bits_differ(gc.compile(g, opt_level=level)(**feeds), want) is None


SCALED = """
graph g(%x: f64[5,64], %y: f64[5,3]) {{
  %c: f64[] = constant(value=0.3)
  %t: f64[64,5] = transpose(%x, axes=(1, 0))
  %s: f64[64,5] = mul(%t, %c)
  {user}
}}"""


@pytest.mark.parametrize(
    "user",
    [
        "%m: f64[64,3] = matmul(%s, %y)\n  output %o = %m",
        "%m: f64[5] = sum(%s, axis=(0,), keepdims=False)\n  output %o = %m",
    ],
    ids=["matmul", "sum"],
)
def test_a_scale_does_not_move_past_a_transpose_before_a_layout_reader(user: str) -> None:
    g = parsed(SCALED.format(user=user))
    assert "mul(%t, %c)" in str(gc.optimize(g, level=2))
    check_levels(g, feeds_for(g))


def test_a_scale_moves_past_a_transpose_before_elementwise_users() -> None:
    g = parsed(SCALED.format(user="%e: f64[64,5] = exp(%s)\n  output %o = %e"))
    fused = str(gc.fuse(gc.optimize(g, level=2), backend="numpy"))  # numpy's choice
    assert "mul(%x, %c)" in fused, fused
    check_levels(g, feeds_for(g))
    # returned too, the scaled value is a layout reader's (the caller gets O0's
    # C-contiguous array: ac6723f), so the scale stays where it is
    g = parsed(SCALED.format(user="%e: f64[64,5] = exp(%s)\n  output %o = %e\n  output %p = %s"))
    assert "mul(%t, %c)" in str(gc.fuse(gc.optimize(g, level=2), backend="numpy"))
    check_levels(g, feeds_for(g))


def test_a_returned_elementwise_result_of_a_transpose_is_c_contiguous_as_in_the_reference() -> None:
    # a returned tanh of a transposed view was allocated by numpy in its K order (the
    # view's), and the sum reading it rounded otherwise than the reference's C-ordered
    # array (found by the random float32 graphs)
    g = parsed("""
    graph g(%x: f32[3,4]) {
      %t: f32[4,3] = transpose(%x, axes=(1, 0))
      %h: f32[4,3] = tanh(%t)
      %s: f32[] = sum(%h, axis=None, keepdims=False)
      output %y = %s
      output %z = %h
    }""")
    x = np.array(
        [[-0.0, -3.1588201e-10, -1.8361059, 88.0],
         [-6.8706277e13, 5.4210115e-20, 8.6389132e13, -3.0],
         [5.4210115e-20, 9.3049041e16, 1.0, 1.3314361e-15]], np.float32,
    )  # fmt: skip
    check_levels(g, [{"x": x}])


def test_a_reduction_over_a_transposed_view_is_laid_out_as_in_the_plan() -> None:
    # numpy allocates a reduction's result in the order of the input's kept axes (here
    # transposed) and sums over several axes in an order that follows it; the plan passes
    # a C-contiguous out=. The reference's kernel, given no out, gave other last bits
    # (found by the random symbolic graphs of tests/runtime/test_shape_passes.py)
    g = parsed("""
    graph g(%x: f64[3,4]) {
      %a: f64[3,4,1,1] = reshape(%x, shape=(3, 4, 1, 1))
      %b: f64[1,1,3,4] = reshape(%x, shape=(1, 1, 3, 4))
      %m: f64[3,4,3,4] = mul(%a, %b)
      %t: f64[4,3,3,4] = transpose(%m, axes=(3, 2, 0, 1))
      %s: f64[3,3] = sum(%t, axis=(0, 3), keepdims=False)
      output %y = %s
    }""")
    feeds = feeds_for(g, range(32))
    check_levels(g, feeds)
    for f in feeds:
        x = f["x"]
        t = (x.reshape(3, 4, 1, 1) * x.reshape(1, 1, 3, 4)).transpose(3, 2, 0, 1)
        into = np.empty((3, 3))
        np.add.reduce(t, axis=(0, 3), out=into)
        assert bits_differ(gc.run(g, f)[0], into) is None


@pytest.mark.parametrize("layout", ["F", "reversed", "strided"])
def test_a_feed_in_another_layout_gives_its_c_copys_bits_at_every_level(layout: str) -> None:
    # x * 1 -> x (exact) handed the caller's Fortran-ordered x itself to the sum at O1 and
    # O2, which numpy sums in another order than O0's C-contiguous product: the levels
    # gave other bits; and a plan's reshape of a reversed input was a strided view where
    # the reference's is C-contiguous. Feeds are read as their C-contiguous copies now
    g = gc.trace(
        lambda x: (gc.sum(x * 1, axis=0), gc.sum(gc.reshape(x, (6, 40, 5)), axis=2)),
        np.zeros((40, 30), np.float32),
    )
    x = np.random.default_rng(0).standard_normal((40, 30)).astype(np.float32)
    fed = {
        "F": np.asfortranarray(x),
        "reversed": np.flip(np.flip(x).copy()),
        "strided": np.repeat(x, 2, axis=1)[:, ::2],
    }[layout]
    fed.flags.writeable = False
    want = gc.run(g, {g.inputs[0].name: x})
    assert all(bits_differ(a, b) is None for a, b in zip(gc.run(g, {g.inputs[0].name: fed}), want))
    for level in (0, 1, 2):
        exe = gc.compile(g, opt_level=level, backend="numpy")
        for _ in range(2):  # the checked first call, then the signature's cached run
            for k, (got, w) in enumerate(zip(exe(fed), want)):
                assert bits_differ(got, w) is None, (level, k, bits_differ(got, w))


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_example_feeds_for_a_plan_are_not_copied_into_c_order(backend: str) -> None:
    """plan(), explain() and source() read an example's shape and dtype alone: a
    broadcast view stands for a chunk of any size without memory (graphc.distributed's
    memory model probes 10**7 rows so: each probe copied the view, 3.8 s and the chunk's
    memory, before). A call still copies a feed in another layout (the test above)."""
    g = gc.trace(lambda x: gc.tanh(x) + 1.0, gc.TensorSpec(("B", 1024)))
    exe = gc.compile(g, backend=backend)
    huge = np.broadcast_to(np.float32(0), (2**40, 1024))  # 4 PiB if it were copied
    assert exe.plan(huge).arena_bytes >= 0
    assert "with B=1099511627776" in exe.explain(huge)
    assert exe.source(huge)
