"""Copies of strided views on the native backend (graphc/backends/native/copies.py): a
reshape of a transposed view and a slice that is not a view are one C call, with the
source's bits for every dtype, shape and window (random ones included), from an input
or from an arena buffer, on one thread or the pool, and inside an entry in C.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends import native
from graphc.backends.native import copies, toolchain
from tests.edge_values import bits_differ
from tests.native_checks import check_native, needs_native

pytestmark = needs_native

DTYPES = [
    np.float32, np.float64, np.float16, np.bool_,
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
]  # fmt: skip


def values(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    """Random bits of `dtype` (nan, inf, -0.0 and subnormals among the floats' bits)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.random.default_rng(seed).integers(0, 2, shape).astype(np.bool_)
    raw = np.random.default_rng(seed).integers(0, 256, (*shape, dtype.itemsize), np.uint8)
    return raw.view(dtype).reshape(shape)


def tags(exe: gc.Executable, op: str, *args: np.ndarray) -> list[str]:
    """The backend tag of each `op` step of `exe`'s plan for `args` (explain's lines)."""
    return re.findall(rf"= {op}\(.*\[(native|numpy)\]", exe.explain(*args))


def merged_heads(dtype, arena: bool) -> gc.Graph:
    """(B, H, T, D) -> (B, T, H * D): attention's heads merged, a reshape of a transpose;
    of the input itself, or of an arena buffer (x + x)."""
    g = gc.Graph(f"heads_{np.dtype(dtype).name}_{arena}")
    with g:
        x = gc.placeholder("x", shape=("B", 4, 6, 8), dtype=np.dtype(dtype).name)
        source = x + x if arena else x
        t = gc.transpose(source, (0, 2, 1, 3))
        gc.output(gc.reshape(t, ("B", 6, 32)), name="y")
    return g


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_reshape_of_a_transpose_is_one_c_call_with_the_sources_bits(dtype) -> None:
    g = merged_heads(dtype, arena=False)
    x = values((3, 4, 6, 8), dtype)
    exe = gc.compile(g, backend="native")
    assert tags(exe, "reshape", x) == ["native"]
    assert "gc_strided_copy" in exe.source(x)
    want = x.transpose(0, 2, 1, 3).reshape(3, 6, 32)
    assert bits_differ(exe(x), want) is None
    check_native(g, [{"x": x}, {"x": values((1, 4, 6, 8), dtype, 1)}])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint64])
def test_from_an_arena_buffer_and_a_strided_callers_array(dtype) -> None:
    g = merged_heads(dtype, arena=True)
    x = values((2, 4, 6, 8), dtype, 2)
    with np.errstate(all="ignore"):
        want = (x + x).transpose(0, 2, 1, 3).reshape(2, 6, 32)
        exe = gc.compile(g, backend="native")
        assert tags(exe, "reshape", x) == ["native"]
        assert bits_differ(exe(x), want) is None
        fortran = np.asfortranarray(x)  # copied to C order by the call, as for any operand
        assert bits_differ(exe(fortran), want) is None
        check_native(g, [{"x": x}, {"x": fortran}])


def test_slices_that_are_not_views() -> None:
    """Steps, backwards, a column of a matrix, a window of a transposed view."""
    g = gc.Graph("windows")
    with g:
        x = gc.placeholder("x", shape=(6, 10, 5), dtype="float32")
        a = x * 2.0
        gc.output(a[:, ::3], name="every_third")
        gc.output(a[::-2, 1:9:2, ::-1], name="backwards")
        gc.output(a[:, :, 3], name="column")
        gc.output(gc.transpose(a, (2, 0, 1))[1:4, ::2], name="of_a_transpose")
    x = values((6, 10, 5), np.float32, 3)
    exe = gc.compile(g, backend="native")
    assert tags(exe, "slice", x) == ["native"] * 4
    with np.errstate(all="ignore"):
        got = exe(x)
        a = x * np.float32(2.0)
    wants = [a[:, ::3], a[::-2, 1:9:2, ::-1], a[:, :, 3], a.transpose(2, 0, 1)[1:4, ::2]]
    for out, want in zip(got, wants, strict=True):
        assert bits_differ(out, np.ascontiguousarray(want)) is None
    with np.errstate(all="ignore"):
        check_native(g, [{"x": x}])


def test_empty_and_one_element_results() -> None:
    g = gc.Graph("small")
    with g:
        x = gc.placeholder("x", shape=(3, 4), dtype="float64")
        a = x + 1.0
        gc.output(a[1:1, ::2], name="empty")
        gc.output(a[::-1, ::-1][:1, :1], name="one")
        gc.output(gc.reshape(gc.transpose(a, (1, 0)), (12,)), name="flat")
    x = values((3, 4), np.float64, 4)
    with np.errstate(all="ignore"):
        a = x + 1.0
        empty, one, flat = gc.compile(g, backend="native")(x)
    assert empty.shape == (0, 2)
    assert bits_differ(one, np.ascontiguousarray(a[::-1, ::-1][:1, :1])) is None
    assert bits_differ(flat, a.T.reshape(12)) is None


# 7.5 and 8 MiB of float32, past PARALLEL_BYTES; the first's odd count of rows (runs of
# 33) puts the threads' boundary inside a row, where a walk starts mid-run
@pytest.mark.parametrize("shape", [(63, 7, 129, 33), (64, 8, 128, 32)])
def test_a_large_copy_runs_on_the_pool_with_the_same_bits(shape: tuple) -> None:
    assert np.prod(shape) * 4 >= copies.PARALLEL_BYTES
    a, b, c, d = shape
    g = gc.Graph("large")
    with g:
        x = gc.placeholder("x", shape=shape, dtype="float32")
        gc.output(gc.reshape(gc.transpose(x, (0, 2, 1, 3)), (a, c, b * d)), name="y")
    x = values(shape, np.float32, 5)
    exe = gc.compile(g, backend="native")
    assert "gc_strided_copy" in exe.source(x) and re.search(
        r"gc_strided_copy\(.*, 1\)", exe.source(x)
    )
    assert bits_differ(exe(x), x.transpose(0, 2, 1, 3).reshape(a, c, b * d)) is None


def test_the_plan_runs_as_one_c_call() -> None:
    """A reshape of a transpose no longer keeps a plan's entry in Python (entry.py)."""
    g = merged_heads(np.float32, arena=True)
    x = values((2, 4, 6, 8), np.float32, 6)
    exe = gc.compile(g, backend="native", wait=True)
    with np.errstate(all="ignore"):
        for _ in range(20):
            exe(x)
        exe.wait()
        assert "entry: one C call" in exe.explain(x), exe.explain(x).splitlines()[1]
        want = (x + x).transpose(0, 2, 1, 3).reshape(2, 6, 32)
        for _ in range(3):
            assert bits_differ(exe(x), want) is None


def test_a_new_batch_size_builds_nothing() -> None:
    g = merged_heads(np.float32, arena=True)
    exe = gc.compile(g, backend="native", wait=True)
    with np.errstate(all="ignore"):
        exe(values((2, 4, 6, 8), np.float32))
        exe.wait()
        runs = toolchain.compiler_runs()
        for batch in (3, 5, 17):
            x = values((batch, 4, 6, 8), np.float32, batch)
            want = (x + x).transpose(0, 2, 1, 3).reshape(batch, 6, 32)
            assert bits_differ(exe(x), want) is None
            exe.wait()
            assert tags(exe, "reshape", x) == ["native"]
    assert toolchain.compiler_runs() == runs


def test_descriptor_merges_dims_adjacent_in_memory() -> None:
    a = np.zeros((2, 3, 4, 5), np.uint8)  # strides in elements: one byte each
    assert copies.descriptor(a).tolist() == [1, 120, 1]
    assert copies.descriptor(a.transpose(0, 2, 1, 3)).tolist() == [4, 2, 4, 3, 5, 60, 5, 20, 1]
    assert copies.descriptor(a[:, :, :, ::2]).tolist() == [2, 24, 3, 5, 2]
    assert copies.descriptor(a[::-1, :1]).tolist() == [2, 2, 20, -60, 1]
    assert copies.descriptor(a[0, 0, 0, 0:1]).tolist() == [1, 1, 1]
    # two views walked together (unslice's source and window): a dim merges only where
    # both have it adjacent to the next
    b = np.zeros((2, 3, 8, 5), np.uint8)[:, :, ::2]  # strides 120, 40, 10, 1: the last dim stays
    assert copies.descriptor(a, b).tolist() == [2, 24, 5, 5, 1, 10, 1]
    assert copies.descriptor(a, a, a[:, :, :, :]).tolist() == [1, 120, 1, 1, 1]
    assert copies.descriptor(a[:1, :1, :1, :1], b[:1, :1, :1, :1]).tolist() == [1, 1, 1, 1]


@st.composite
def windows(draw) -> tuple:
    """A shape, a permutation of its dims and a window of the permuted array."""
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    perm = tuple(draw(st.permutations(range(rank))))
    index = []
    for d in (shape[p] for p in perm):
        start = draw(st.integers(-d - 1, d + 1))
        stop = draw(st.integers(-d - 1, d + 1))
        step = draw(st.sampled_from([1, 2, 3, -1, -2]))
        index.append(slice(start, stop, step))
    dtype = draw(st.sampled_from(DTYPES))
    return shape, perm, tuple(index), dtype


@settings(max_examples=60, deadline=None)
@given(windows())
def test_random_windows_of_transposes_have_numpys_bits(case: tuple) -> None:
    shape, perm, index, dtype = case
    g = gc.Graph("window")
    with g:
        x = gc.placeholder("x", shape=shape, dtype=np.dtype(dtype).name)
        w = gc.transpose(x, perm)[index]
        gc.output(gc.reshape(w, (-1,)), name="flat")
        gc.output(w, name="window")
    x = values(shape, dtype, sum(shape))
    flat, window = gc.compile(g, backend="native")(x)
    want = x.transpose(perm)[index]
    assert bits_differ(window, np.ascontiguousarray(want)) is None
    assert bits_differ(flat, want.reshape(-1)) is None


def test_a_loop_body_runs_its_copies_in_c() -> None:
    """A slice that is not a view inside a scan body: the body still runs as one C call
    (its tape records the copy), with numpy's bits."""
    g = gc.Graph("scan_copy")
    with g:
        h0 = gc.placeholder("h0", (4, 6), "float32")
        xs = gc.placeholder("xs", (3, 4, 6), "float32")

        def body(h: gc.Symbol, x: gc.Symbol) -> tuple[gc.Symbol, gc.Symbol]:
            a = h * 0.5 + x
            return a, a[::-1, ::2]

        h, ys = gc.scan(body, h0, xs)
        gc.output(h, name="h")
        gc.output(ys, name="ys")
    h0, xs = values((4, 6), np.float32, 7), values((3, 4, 6), np.float32, 8)
    exe = gc.compile(g, backend="native", wait=True)
    text = exe.explain(h0, xs)
    assert re.search(r"= scan\(.*\n.*\n.*\[native\]", text), text
    assert re.findall(r"= slice\(.*\[(native|numpy)\]", text) == ["native"]
    with np.errstate(all="ignore"):
        check_native(g, [{"h0": h0, "xs": xs}])


@pytest.mark.parametrize("arena", [True, False])
@pytest.mark.parametrize("shape", [(16, 6, 5, 5), (32, 16, 3, 3)])
def test_an_elementwise_operand_transposed_past_a_matrix_is_copied_first(
    shape: tuple, arena: bool
) -> None:
    """A conv weight's SGD update reads its gradient through a 4-d transpose: the
    elementwise kernel cannot read that view, so the step copies it into a buffer of
    its thread's first (two C calls) rather than leaving the step (and the plan's entry
    in C) to numpy; numpy's bits. The gradient an arena buffer or the caller's array."""
    g = gc.Graph("sgd_update")
    with g:
        w = gc.placeholder("w", shape, "float32")
        grad = gc.placeholder("g", (shape[1], shape[0], *shape[2:]), "float32")
        source = grad * 0.5 if arena else grad
        gc.output(w - 0.125 * gc.transpose(source, (1, 0, 2, 3)), name="w2")
    w, grad = values(shape, np.float32, 9), values((shape[1], shape[0], *shape[2:]), np.float32, 10)
    exe = gc.compile(g, backend="native", wait=True)
    if np.prod(shape) >= native.SMALL:  # below, numpy's ufuncs are the cheaper call from Python
        assert exe.source(w, grad).count("gc_strided_copy(") == 1, exe.source(w, grad)
    with np.errstate(all="ignore"):
        check_native(g, [{"w": w, "g": grad}])
        want = gc.compile(g, backend="numpy")(w, grad)
        for _ in range(20):
            exe(w, grad)
        exe.wait()
        assert "entry: one C call" in exe.explain(w, grad), exe.explain(w, grad)
        assert bits_differ(exe(w, grad), want) is None


def test_an_element_taken_by_integers_alone() -> None:
    """x[1, 2] of an arena value is a 0-d result: numpy's kernel copies it."""
    g = gc.Graph("element")
    with g:
        x = gc.placeholder("x", shape=(3, 4), dtype="float32")
        gc.output((x * 2.0)[1, 2], name="e")
        gc.output(gc.transpose(x * 3.0, (1, 0))[2, 1], name="t")
    x = values((3, 4), np.float32, 11)
    with np.errstate(all="ignore"):
        e, t = gc.compile(g, backend="native")(x)
        assert bits_differ(e, np.asarray((x * np.float32(2.0))[1, 2])) is None
        assert bits_differ(t, np.asarray((x * np.float32(3.0)).T[2, 1])) is None
        check_native(g, [{"x": x}])
