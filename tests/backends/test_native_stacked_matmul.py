"""The native backend's float32 stacked product, (..., M, K) @ (..., K, N)
(graphc/backends/native/matmul.py, gc_matmul_stack_f32).

Its claim: each item's output is the very bits the rank-2 native kernel gives for that
item alone (the fused multiply-add chain over k from +0.0 that test_native_matmul.py
checks with exact rationals), whichever thread computed it, whether the team split it
or each thread took its own items, wherever its panels were packed. So every case is
checked item by item against the rank-2 kernel, in the three ways the call may run
(on one thread, the items shared out among the threads, the items left over by that
share computed by the whole team each), and against numpy within the componentwise bound of a sum of K products. The
shapes reach the edges: an empty batch, M, N and K of 0 and 1, batch dims broadcast on
either side or both, 3-d to 5-d, a matrix or a vector on the left, operands seen
through transposes and fed as strided views; a symbolic batch dim at many sizes builds
no new kernel; other dtypes and batches broadcast in too many runs stay numpy's with
the reason in explain(); gradients of a stacked product run in C too.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import matmul, toolchain
from graphc.ir.graph import Graph
from graphc.runtime import tiers
from tests.edge_values import bits_differ
from tests.native_checks import (
    assert_numpys_kernel_runs,
    assert_within_sum_bound,
    check_native,
    needs_native,
    normwise,
)

pytestmark = needs_native

F32 = np.float32
NEVER = 1 << 62

# (a's shape as fed, the transpose the graph applies to it or None; the same for b)
CASES = {
    "3d": ((3, 13, 7), None, (3, 7, 40), None),
    "one_item": ((1, 30, 7), None, (1, 7, 70), None),
    "heads": ((2, 5, 3, 8), (0, 2, 1, 3), (2, 5, 3, 8), (0, 2, 3, 1)),  # q @ k^T
    "heads_v": ((2, 3, 5, 5), None, (2, 5, 3, 8), (0, 2, 1, 3)),  # p @ v (read in place)
    "left_transposed": ((2, 3, 5, 9), (0, 1, 3, 2), (2, 3, 5, 33), None),  # p^T @ dout
    "5d": ((2, 3, 2, 6, 5), None, (2, 3, 2, 5, 9), None),
    "left_broadcast": ((1, 4, 6, 5), None, (3, 4, 5, 33), None),
    "right_broadcast": ((3, 4, 6, 5), None, (3, 1, 5, 33), None),
    "right_shared": ((4, 13, 9), None, (1, 9, 20), None),  # b packed once for all items
    "both_broadcast": ((2, 1, 7, 5), None, (1, 3, 5, 17), None),
    "missing_dims": ((3, 7, 5), None, (2, 1, 3, 5, 17), None),
    "matrix_left": ((13, 7), None, (4, 7, 40), None),
    "vector_left": ((7,), None, (4, 7, 40), None),
    "weight_transposed": ((3, 14, 11), None, (3, 37, 11), (0, 2, 1)),  # 8 x 8 blocks
    "one_row": ((5, 1, 9), None, (5, 9, 140), None),  # mm_row4, four panels at once
    "one_column": ((5, 9, 9), None, (5, 9, 1), None),
    "one_term": ((4, 6, 1), None, (1, 1, 37), None),  # K = 1 (broadcast: not outer.py's)
    "no_terms": ((3, 4, 0), None, (3, 0, 5), None),  # K = 0: +0.0
    "no_rows": ((3, 0, 4), None, (3, 4, 5), None),
    "no_columns": ((3, 4, 5), None, (3, 5, 0), None),
    "empty_batch": ((0, 4, 5), None, (0, 5, 6), None),
    "empty_broadcast": ((0, 1, 4, 5), None, (1, 3, 5, 6), None),
    "tall_items": ((2, 520, 9), None, (2, 9, 33), None),  # M > MM_IN_PLACE: b packed
    "ones": ((1, 1, 1), None, (2, 1, 1), None),  # (the same batch would be outer.py's)
}

MODES = {  # (PARALLEL_WORK, SPLIT_WORK): how gc_matmul_stack_f32 runs
    "one_thread": (NEVER, NEVER),
    "own_items": (0, NEVER),  # each thread its share of the items
    "rest_on_the_team": (0, 0),  # and the items left over by the share, each by the team
}


def values(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """float32 values of very different sizes (1e-12 .. 1e12), with zeros of both signs,
    subnormals, inf and nan sprinkled in."""
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-12, 12, shape)).astype(F32)
    specials = np.array([0.0, -0.0, 1e-45, -3e-42, np.inf, -np.inf, np.nan], F32)
    pick = rng.random(shape) < 0.03 * len(specials)
    x[pick] = rng.choice(specials, int(pick.sum()))
    return x


def stacked_graph(a_shape: tuple, a_axes: tuple | None, b_shape: tuple, b_axes: tuple | None,
                  dtype: str = "float32") -> Graph:  # fmt: skip
    """y = a' @ b', each operand a placeholder seen through its transpose (when given)."""
    g = Graph("stacked")
    with g:
        a = gc.placeholder("a", a_shape, dtype)
        b = gc.placeholder("b", b_shape, dtype)
        left = a if a_axes is None else gc.transpose(a, a_axes)
        right = b if b_axes is None else gc.transpose(b, b_axes)
        gc.output(gc.matmul(left, right), name="y")
    return g


def seen(x: np.ndarray, axes: tuple | None) -> np.ndarray:
    return x if axes is None else np.transpose(x, axes)


def per_item(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with each item computed by the rank-2 native kernel alone (a fed weight)."""
    vector = a.ndim == 1
    a2 = a[None, :] if vector else a
    batch = np.broadcast_shapes(a2.shape[:-2], b.shape[:-2])
    m, n = a2.shape[-2], b.shape[-1]
    a_items = np.broadcast_to(a2, (*batch, *a2.shape[-2:]))
    b_items = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    shapes = np.zeros(a2.shape[-2:], F32), np.zeros(b.shape[-2:], F32)
    rank2 = gc.compile(gc.trace(gc.matmul, *shapes), backend="native")
    out = np.empty((*batch, m, n), F32)
    with np.errstate(all="ignore"):
        for index in np.ndindex(*batch):
            out[index] = rank2(np.ascontiguousarray(a_items[index]), b_items[index])
    return out.reshape(*batch, n) if vector else out


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    parallel, split = MODES[request.param]
    monkeypatch.setattr(matmul, "PARALLEL_WORK", parallel)
    monkeypatch.setattr(matmul, "WARM_WORK", parallel)
    monkeypatch.setattr(matmul, "SPLIT_WORK", split)
    return request.param


@pytest.mark.parametrize("case", list(CASES))
def test_each_item_is_the_rank_2_kernels_bits(case: str, mode: str) -> None:
    a_shape, a_axes, b_shape, b_axes = CASES[case]
    rng = np.random.default_rng(len(case) * 31 + len(a_shape))
    a, b = values(rng, a_shape), values(rng, b_shape)
    kept = a.copy(), b.copy()
    exe = gc.compile(stacked_graph(a_shape, a_axes, b_shape, b_axes), backend="native")
    with np.errstate(all="ignore"):
        got = exe(a, b)
    left, right = seen(a, a_axes), seen(b, b_axes)
    want = per_item(left, right)
    assert (
        got.shape
        == np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
        + want.shape[len(want.shape) - (1 if left.ndim == 1 else 2) :]
    )
    assert bits_differ(got, want) is None, f"{case}, {mode}: {bits_differ(got, want)}"
    assert matmul.STACK.name in exe.source(a, b)
    assert bits_differ(a, kept[0]) is None and bits_differ(b, kept[1]) is None


@pytest.mark.parametrize(
    ("left", "b_shape"),
    [
        ((2, 3, 13, 7), (2, 3, 7, 40)),
        ((5, 2, 6, 11), (5, 1, 11, 17)),  # b shared along a dim
        ((13, 7), (4, 7, 40)),  # a matrix on the left
        ((2, 100, 9), (2, 9, 33)),
    ],
)
def test_rows_packed_item_by_item_give_the_same_bits(
    left: tuple, b_shape: tuple, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A left operand read across its rows (a transpose moving its last axis) packed item
    by item (mm_pack_rows into the thread's part of the rows buffer) when its items are
    large (PACK_ROWS_FROM, set to 0 here): each item still the rank-2 kernel's bits."""
    monkeypatch.setattr(matmul, "PACK_ROWS_FROM", 0)
    rank = len(left)
    axes = (*range(rank - 2), rank - 1, rank - 2)
    rng = np.random.default_rng(13)
    a = values(rng, tuple(left[i] for i in axes))  # fed (..., K, M), seen as (..., M, K)
    b = values(rng, b_shape)
    exe = gc.compile(stacked_graph(a.shape, axes, b_shape, None), backend="native")
    with np.errstate(all="ignore"):
        got = exe(a, b)
    want = per_item(seen(a, axes), b)
    assert bits_differ(got, want) is None, f"{left}, {mode}: {bits_differ(got, want)}"
    call = next(s for s in exe.source(a, b).splitlines() if matmul.STACK.name + "(" in s)
    assert call.split(",")[6].strip() not in ("null", "None"), call  # the rows buffer


def _bound(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        want = np.matmul(a, b)
        magnitude = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert_within_sum_bound(got, want, np.nan_to_num(magnitude, posinf=0.0), a.shape[-1])


@pytest.mark.parametrize("case", ["heads", "left_transposed", "5d", "both_broadcast",
                                  "vector_left", "tall_items", "no_terms"])  # fmt: skip
def test_within_the_bound_of_numpys_product(case: str, mode: str) -> None:
    """Values of very different sizes: the componentwise bound of a sum of K products,
    2 (K + 2) eps sum |a| |b|, of numpy's; nan and inf where numpy has them."""
    a_shape, a_axes, b_shape, b_axes = CASES[case]
    rng = np.random.default_rng(7)
    a, b = values(rng, a_shape), values(rng, b_shape)
    exe = gc.compile(stacked_graph(a_shape, a_axes, b_shape, b_axes), backend="native")
    with np.errstate(all="ignore"):
        got = exe(a, b)
        _bound(got, seen(a, a_axes), seen(b, b_axes))


def _strided(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """A view of `shape` two elements apart in every dim, starting one element in."""
    big = values(rng, tuple(2 * n + 1 for n in shape))
    return big[tuple(slice(1, 1 + 2 * n, 2) for n in shape)]


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((3, 5, 7), (3, 7, 33)),  # one level of items each
        ((2, 2, 2, 2, 5, 7), (2, 2, 2, 2, 7, 9)),  # four levels that do not merge: copied
        ((2, 1, 2, 5, 7), (1, 2, 2, 7, 9)),
    ],
)
def test_fed_strided_views_are_read_as_their_copies_are(
    a_shape: tuple, b_shape: tuple, mode: str
) -> None:
    """Operands that are views with strides in every dim (the caller's): the same bits as
    their C-ordered copies (read through their strides, or copied where their batch
    would need more than three levels), the caller's arrays left as they were."""
    rng = np.random.default_rng(len(a_shape))
    a, b = _strided(rng, a_shape), _strided(rng, b_shape)
    kept = a.base.copy(), b.base.copy()
    exe = gc.compile(stacked_graph(a_shape, None, b_shape, None), backend="native")
    with np.errstate(all="ignore"):
        got = exe(a, b)
        dense = exe(np.ascontiguousarray(a), np.ascontiguousarray(b))
        other = _strided(rng, a_shape)
        again = exe(other, b)  # the layout remembered (stack_layout), its copies made afresh
    assert bits_differ(got, dense) is None, bits_differ(got, dense)
    assert bits_differ(again, per_item(other, b)) is None
    assert bits_differ(got, per_item(a, b)) is None
    assert bits_differ(a.base, kept[0]) is None and bits_differ(b.base, kept[1]) is None


def test_reversed_views_are_read_through_their_negative_strides(mode: str) -> None:
    rng = np.random.default_rng(11)
    a = values(rng, (4, 6, 5))[::-1, ::-1, ::-1]
    b = values(rng, (4, 5, 37))[:, ::-1]
    exe = gc.compile(stacked_graph(a.shape, None, b.shape, None), backend="native")
    with np.errstate(all="ignore"):
        got = exe(a, b)
    assert bits_differ(got, per_item(a, b)) is None, bits_differ(got, per_item(a, b))
    assert matmul.STACK.name in exe.source(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.zeros((2, 3, 5, 7)), np.zeros((2, 3, 7, 4))),  # one level
        (np.zeros((2, 1, 5, 7)), np.zeros((1, 3, 7, 4))),  # two
        (np.zeros((6, 3, 5)).transpose(1, 0, 2), np.zeros((3, 5, 4))),  # a strided batch
        (np.zeros((2, 2, 2, 2, 5, 7))[:, :, :, :, :, ::2], np.zeros((2, 2, 2, 2, 4, 4))),
        (np.zeros((7,)), np.zeros((3, 7, 4))),  # a vector on the left
        (np.zeros((5, 7)), np.zeros((4, 1, 7, 4))[::-1]),
        # five runs (reason() keeps it numpy's): both broadcast to the whole batch
        (np.zeros((2, 1, 2, 1, 2, 3, 4)), np.zeros((2, 3, 2, 3, 2, 4, 5))),
    ],
)
def test_stack_layout_finds_every_items_matrices(a: np.ndarray, b: np.ndarray) -> None:
    """The levels, strides and arrays stack_layout gives point at each item's matrices
    (walked here as numpy views of the arrays it keeps), twice (the second answer
    remembered)."""
    rng = np.random.default_rng(12)
    a, b = a.astype(F32), b.astype(F32)
    a[...] = rng.standard_normal(a.shape)
    b[...] = rng.standard_normal(b.shape)
    for _ in range(2):
        layout = matmul.stack_layout(a, b)
        s0, sk, bk, bj, n1, n2, as0, as1, as2, bs0, bs1, bs2 = layout[2:14]
        kept_a, kept_b = layout[14]
        batch = np.broadcast_shapes(a.shape[:-2] if a.ndim > 2 else (), b.shape[:-2])
        items = int(np.prod(batch))
        m, k = (a.shape[-2] if a.ndim > 1 else 1), a.shape[-1]
        n = b.shape[-1]
        view = np.lib.stride_tricks.as_strided
        a_items = view(kept_a, (items // (n1 * n2), n1, n2, m, k),
                       [4 * x for x in (as0, as1, as2, s0, sk)], writeable=False)  # fmt: skip
        b_items = view(kept_b, (items // (n1 * n2), n1, n2, k, n),
                       [4 * x for x in (bs0, bs1, bs2, bk, bj)], writeable=False)  # fmt: skip
        want_a = np.broadcast_to(a.reshape(1, k) if a.ndim == 1 else a, (*batch, m, k))
        want_b = np.broadcast_to(b, (*batch, k, n))
        assert np.array_equal(a_items.reshape(want_a.shape), want_a)
        assert np.array_equal(b_items.reshape(want_b.shape), want_b)


def test_an_epilogue_is_applied_on_the_items_tiles() -> None:
    """A stacked product's bias (per column, then one of the output's shape) and relu,
    fused at O2 into the product's call: the bits of the product followed by the add
    and the maximum (O0), as on the rank-2 kernel."""
    rng = np.random.default_rng(3)
    a, b, b2 = values(rng, (3, 2, 9, 6)), values(rng, (3, 2, 6, 20)), values(rng, (3, 2, 6, 20))
    column = values(rng, (20,))
    whole = values(rng, (3, 2, 9, 20))
    g = Graph("epilogue")
    with g:
        x = gc.placeholder("a", a.shape, "float32")
        w = gc.placeholder("b", b.shape, "float32")
        w2 = gc.placeholder("b2", b.shape, "float32")
        gc.output(gc.relu(gc.matmul(x, w) + gc.constant(column)), name="column")
        gc.output(gc.relu(gc.matmul(x, w2) + gc.constant(whole)), name="whole")
    with np.errstate(all="ignore"):
        results = [gc.compile(g, opt_level=level, backend="native")(a, b, b2) for level in (0, 2)]
        want = [
            np.maximum(per_item(a, b) + column, F32(0)),
            np.maximum(per_item(a, b2) + whole, F32(0)),
        ]
    for level, got in zip((0, 2), results):
        for name, x, y in zip(("column", "whole"), got, want):
            assert bits_differ(x, y) is None, f"O{level} {name}: {bits_differ(x, y)}"
    exe = gc.compile(g, opt_level=2, backend="native")
    assert exe.source(a, b, b2).count(matmul.STACK.name + "(") == 2
    assert exe.explain(a, b, b2).count("= matmul_epilogue(") == 2


@pytest.mark.usefixtures("empty_cache")
def test_a_symbolic_batch_builds_no_new_kernel() -> None:
    """Attention's products with a symbolic batch: every size after the first is planned
    again but calls the kernel built at the first (sizes are arguments), each item the
    rank-2 kernel's bits."""
    g = Graph("attention_products")
    with g:
        q = gc.placeholder("q", ("B", 6, 2, 8), "float32")
        k = gc.placeholder("k", ("B", 6, 2, 8), "float32")
        scores = gc.matmul(gc.transpose(q, (0, 2, 1, 3)), gc.transpose(k, (0, 2, 3, 1)))
        gc.output(gc.matmul(scores, gc.transpose(k, (0, 2, 1, 3))), name="y")
    exe = gc.compile(g, backend="native")
    rng = np.random.default_rng(0)
    compiled = []
    for batch in (2, 3, 5, 8, 17, 64):
        q, k = (rng.standard_normal((batch, 6, 2, 8)).astype(F32) for _ in range(2))
        scores = per_item(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1))
        want = per_item(scores, k.transpose(0, 2, 1, 3))
        tiers.settle(timeout=600)  # the references' background builds (their entries in C)
        before = toolchain.compiler_runs()
        got = exe(q, k)
        tiers.settle(timeout=600)
        if batch > 2 and toolchain.compiler_runs() != before:
            compiled.append(batch)
        assert bits_differ(got, want) is None, f"batch {batch}: {bits_differ(got, want)}"
        assert exe.source(q, k).count(matmul.STACK.name + "(") == 2
    assert not compiled, f"the compiler ran for batch sizes {compiled}"


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("float64", "float32 only"),
        ("int64", "float32 only"),
        ("mixed", "float32 only"),
        ("four_runs", "batch dims that broadcast in more than 3 runs"),
    ],
)
def test_other_stacks_stay_numpys_with_the_reason(case: str, why: str) -> None:
    rng = np.random.default_rng(1)
    shapes = {"four_runs": ((2, 1, 2, 1, 3, 4), (1, 2, 1, 2, 4, 5))}.get(
        case, ((2, 3, 4), (2, 4, 5))
    )
    dtypes = {"float64": ("float64",) * 2, "int64": ("int64",) * 2, "mixed": ("float32", "float64")}
    a_dtype, b_dtype = dtypes.get(case, ("float32", "float32"))
    g = Graph(case)
    with g:
        a = gc.placeholder("a", shapes[0], a_dtype)
        b = gc.placeholder("b", shapes[1], b_dtype)
        gc.output(gc.matmul(a, b), name="y")
    feeds = [(rng.standard_normal(s) * 4).astype(d) for s, d in zip(shapes, (a_dtype, b_dtype))]
    assert_numpys_kernel_runs(g, why, *feeds)


def test_the_declaration_of_inexact_products_follows_the_kernel() -> None:
    """Declared inexact where this kernel computes the stack; not for a stack of outer
    products (outer.py: numpy's bits), nor where numpy computes it."""

    def node(a_shape: tuple, b_shape: tuple, dtype: str = "float32") -> gc.ir.graph.Node:
        g = gc.trace(gc.matmul, np.zeros(a_shape, dtype), np.zeros(b_shape, dtype))
        (product,) = [n for n in g.op_nodes if n.op == "matmul"]
        return product

    assert matmul.inexact_product(node((4, 5, 6), (4, 6, 7)))
    assert matmul.inexact_product(node((1, 5, 1), (4, 1, 7)))  # broadcast: this kernel's
    assert not matmul.inexact_product(node((4, 5, 1), (4, 1, 7)))  # outer.py's
    assert not matmul.inexact_product(node((4, 5, 6), (4, 6, 7), "float64"))
    assert not matmul.inexact_product(node((4, 5, 6), (6,)))


def test_a_plan_of_stacked_products_is_one_c_call() -> None:
    """The entry in C records the stacked call (its layout taken from the recorded
    feeds) and gives the Python entry's bits."""
    a_shape, a_axes, b_shape, b_axes = CASES["heads"]
    rng = np.random.default_rng(2)
    a, b = values(rng, a_shape), values(rng, b_shape)
    exe = gc.compile(stacked_graph(a_shape, a_axes, b_shape, b_axes), backend="native")
    with np.errstate(all="ignore"):
        first = exe(a, b)
        exe.wait()
        again = exe(a, b)
    assert "entry: one C call" in exe.explain(a, b)
    assert bits_differ(first, again) is None


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0)])
def test_vmap_of_a_product_is_a_stack_in_c(in_axes: tuple) -> None:
    """gc.vmap of a product over both operands, or over the right one only (a matrix
    times a stack): one stacked call, each item the rank-2 kernel's bits."""
    rng = np.random.default_rng(6)
    x = values(rng, (5, 9, 7) if in_axes[0] == 0 else (9, 7))
    w = values(rng, (5, 7, 20))
    g = gc.trace(gc.vmap(gc.matmul, in_axes=in_axes), x, w)
    exe = gc.compile(g, backend="native")
    with np.errstate(all="ignore"):
        got = exe(x, w)
    assert bits_differ(got, per_item(x, w)) is None, bits_differ(got, per_item(x, w))
    assert matmul.STACK.name in exe.source(x, w)


def test_a_scan_body_with_a_stacked_product_runs_in_c() -> None:
    """A loop's body in C records the stacked call (its layout helper is one the tape
    may call while recording): each step's items the rank-2 kernel's bits."""

    def step(h: gc.Tensor, xt: gc.Tensor) -> tuple[gc.Tensor, gc.Tensor]:
        h2 = gc.matmul(h, xt) * 0.5
        return h2, h2

    g = Graph("stacked_scan")
    with g:
        h0 = gc.placeholder("h", (3, 4, 6), "float32")
        xs = gc.placeholder("xs", (5, 3, 6, 6), "float32")
        gc.output(gc.scan(step, h0, xs)[1], name="y")
    rng = np.random.default_rng(9)
    h, xs_value = values(rng, (3, 4, 6)), values(rng, (5, 3, 6, 6))
    exe = gc.compile(g, backend="native")
    with np.errstate(all="ignore"):
        got = exe(h, xs_value)
        want = []
        for xt in xs_value:
            h = per_item(h, xt) * F32(0.5)
            want.append(h)
    assert bits_differ(got, np.stack(want)) is None, bits_differ(got, np.stack(want))
    assert "the scan of step 0 runs in C" in exe.explain(h, xs_value)


def test_a_float32_attention_chain_stays_unfused_so_the_levels_agree() -> None:
    """The attention node's kernel makes numpy's BLAS calls; native computes float32
    stacked products itself, so its fusion leaves such a chain as it is (fusion.py):
    every level runs the products in C, with the same bits (check_native)."""
    g = Graph("attention")
    with g:
        x = gc.placeholder("x", ("B", 16, 32), "float32")

        def heads(y: gc.Tensor) -> gc.Tensor:
            return gc.transpose(gc.reshape(y, (-1, 16, 4, 8)), (0, 2, 1, 3))

        q, k, v = heads(x * 0.5), heads(x + 1.0), heads(x - 0.5)
        gc.output(gc.softmax(gc.matmul(q, gc.transpose(k, (0, 1, 3, 2))) * 0.25) @ v, name="y")
    feeds = [{"x": np.random.default_rng(8).standard_normal((3, 16, 32)).astype(F32)}]
    check_native(g, feeds, close=normwise(1e-5), close_sets=(0,))
    exe = gc.compile(g, opt_level=2, backend="native")
    assert "attention(" not in exe.explain(**feeds[0])
    assert exe.source(**feeds[0]).count(matmul.STACK.name + "(") == 2


# -- gradients ----------------------------------------------------------------------

GRADIENT_SHAPES = [
    ((3, 5, 7), (3, 7, 4)),
    ((2, 3, 6, 5), (1, 3, 5, 9)),  # b broadcast: its gradient summed over the batch
    ((6, 5), (4, 5, 3)),  # a matrix on the left, summed over the items
]


def _summed_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    """`x` summed over the dims broadcasting added to `shape` (its leading ones, its 1s)."""
    x = x.sum(axis=tuple(range(x.ndim - len(shape))))
    return x.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)


def _loss(a: gc.Tensor, b: gc.Tensor, ct: gc.Tensor) -> gc.Tensor:
    return gc.sum(gc.matmul(a, b) * ct)


@pytest.mark.parametrize(("a_shape", "b_shape"), GRADIENT_SHAPES)
def test_gradients_run_in_c_within_the_bound(a_shape: tuple, b_shape: tuple) -> None:
    """The backward's stacked products (a cotangent times a transposed operand) run in C,
    each gradient within the bound of its sums of numpy's."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(a_shape).astype(F32), rng.standard_normal(b_shape).astype(F32)
    ct = rng.standard_normal(np.matmul(a, b).shape).astype(F32)
    g = gc.trace(gc.grad(_loss, argnums=(0, 1)), a, b, ct)
    exe = gc.compile(g, backend="native")
    da, db = exe(a, b, ct)
    want_da, want_db = gc.compile(g, backend="numpy")(a, b, ct)
    abs64 = lambda x: np.abs(x.astype(np.float64))  # noqa: E731
    # da = ct @ b^T, db = a^T @ ct, each summed over the items its operand is shared by
    sizes = {
        "da": (np.matmul(abs64(ct), np.swapaxes(abs64(b), -1, -2)), a_shape, b_shape[-1]),
        "db": (np.matmul(np.swapaxes(abs64(a), -1, -2), abs64(ct)), b_shape, a_shape[-2]),
    }
    for (size, shape, inner), got, want in zip(sizes.values(), (da, db), (want_da, want_db)):
        summed = _summed_to(size, shape)
        terms = inner * (size.size // max(summed.size, 1))
        assert_within_sum_bound(got, want, summed, terms)
    explained = exe.explain(a, b, ct)
    assert "matmul in C" not in explained, explained
    assert matmul.STACK.name in exe.source(a, b, ct)


@pytest.mark.parametrize(("a_shape", "b_shape"), GRADIENT_SHAPES[:2])
def test_float64_gradients_stay_numpys_and_match_finite_differences(
    a_shape: tuple, b_shape: tuple
) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    ct = rng.standard_normal(np.matmul(a, b).shape)
    g = gc.trace(gc.grad(_loss, argnums=(0, 1)), a, b, ct)
    exe = gc.compile(g, backend="native")
    grads = exe(a, b, ct)
    assert "matmul in C: float32 only" in exe.explain(a, b, ct)
    step = 1e-6
    for which, (x, got) in enumerate(zip((a, b), grads)):
        for index in itertools.islice(np.ndindex(*x.shape), 0, None, 7):
            up, down = x.copy(), x.copy()
            up[index] += step
            down[index] -= step
            pair = [(up, b) if which == 0 else (a, up), (down, b) if which == 0 else (a, down)]
            f_up, f_down = (float(np.sum(np.matmul(p, q) * ct)) for p, q in pair)
            assert got[index] == pytest.approx((f_up - f_down) / (2 * step), rel=1e-6, abs=1e-8)
