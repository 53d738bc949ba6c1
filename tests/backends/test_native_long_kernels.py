"""Long elementwise kernels split into segment functions (kernels.SEGMENT_OPS): gcc's time
on one function grows faster than its length, so the block of a kernel of more ops than
that calls functions of at most that many ops, each named by the hash of its text and
emitted once. Every element is computed by the same C operations as in the unsegmented
kernel, so the bits are the same: numpy's for exact ops, the unsegmented kernel's for
tanh, exp and sigmoid, for every operand kind (full, scalar, block, strided, pitched,
transposed), every value type crossing a segment boundary, and every size (the partial
last block, the parallel path). Most tests set SEGMENT_OPS low, so that small graphs
are cut into many segments; INTERLEAVE is 1 there, since a kernel that interleaves is
short enough as it is and never segmented.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

import graphc as gc
import graphc.backends.native.kernels as kernels
from tests.edge_values import bits_differ, float_specials
from tests.native_checks import every_size, needs_native, runs_native

pytestmark = [needs_native, pytest.mark.usefixtures("every_size")]
__all__ = ["every_size"]

# around the lanes of a block (8 or 16): one lane, partial blocks, and the parallel path
SIZES = [1, 7, 21, 16 * 11 + 3, 50_003]
SEGMENT = re.compile(r"noinline\)\) void (gk_\w+_s[0-9a-f]{16})\(")
CALL = re.compile(r"^#?\s+(gk_\w+_s[0-9a-f]{16})\(", re.MULTILINE)
UNSEGMENTED = 10**9


def hostile(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Normal values times 4, the specials first: nan, inf, -0.0, subnormals, the largest."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    specials = float_specials(np.dtype(dtype))
    flat = x.reshape(-1)
    flat[: len(specials)] = specials[: flat.size]
    return x


def run(graph: gc.Graph, feeds: list[np.ndarray], segment_ops: int) -> tuple[np.ndarray, str]:
    """The native O2 result and source, kernels segmented every `segment_ops` ops."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "SEGMENT_OPS", segment_ops)
        patch.setattr(kernels, "INTERLEAVE", 1)
        exe = gc.compile(graph, opt_level=2, backend="native")
        with np.errstate(all="ignore"):
            out = exe(*feeds)
        assert runs_native(exe, *feeds) >= 1
        return out, exe.source("c", *feeds)


def numpy_result(graph: gc.Graph, feeds: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return gc.compile(graph, opt_level=2, backend="numpy")(*feeds)


def segments(source: str) -> tuple[list[str], list[str]]:
    """The segment functions defined in `source`, and the calls to them in order."""
    return SEGMENT.findall(source), CALL.findall(source)


def two_inputs(n: int, dtype: str, body: Callable[[gc.Symbol, gc.Symbol], gc.Symbol]) -> gc.Graph:
    g = gc.Graph(f"long_{dtype}")
    with g:
        x = gc.placeholder("x", shape=(n,), dtype=dtype)
        y = gc.placeholder("y", shape=(n,), dtype=dtype)
        gc.output(body(x, y), name="out")
    return g


def exact_chain(x: gc.Symbol, y: gc.Symbol) -> gc.Symbol:
    v = x
    for k in range(8):
        v = gc.maximum(v * y - 0.5, x) if k % 2 else gc.sqrt(gc.abs(v)) / (y + 1.0)
        v = gc.minimum(v, y * float(k)) + gc.where(x > v, -0.0, v)
    return v


def inexact_chain(x: gc.Symbol, y: gc.Symbol) -> gc.Symbol:
    v = x
    for k in range(4):
        v = gc.tanh(v * 1.5 + x) - gc.exp(v * 0.25) * y
        v = gc.sigmoid(v - y) + v if k % 2 else gc.tanh(v)
    return v


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", SIZES)
def test_segmented_exact_ops_give_numpy_bits(n: int, dtype: str) -> None:
    g = two_inputs(n, dtype, exact_chain)
    feeds = [hostile((n,), dtype, 1), hostile((n,), dtype, 2)[::-1].copy()]
    got, source = run(g, feeds, segment_ops=1)  # every op a function of its own
    defined, called = segments(source)
    assert len(called) >= 40 and set(called) == set(defined)
    why = bits_differ(got, numpy_result(g, feeds))
    assert why is None, why


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", SIZES)
def test_segmented_inexact_ops_give_the_unsegmented_bits(n: int, dtype: str) -> None:
    g = two_inputs(n, dtype, inexact_chain)
    feeds = [hostile((n,), dtype, 3), hostile((n,), dtype, 4)[::-1].copy()]
    whole, whole_source = run(g, feeds, segment_ops=UNSEGMENTED)
    assert segments(whole_source) == ([], [])
    got, source = run(g, feeds, segment_ops=4)
    assert len(segments(source)[1]) >= 8
    why = bits_differ(got, whole)
    assert why is None, why


def test_identical_segments_are_emitted_once() -> None:
    """A repeated chain, cut at its period: one function called for every segment; its
    constants are arguments, so segments with other constants are the same function."""

    def chain(x: gc.Symbol, y: gc.Symbol) -> gc.Symbol:
        for k in range(40):
            x = gc.maximum(x, y) * (0.75 if k < 20 else 0.5) + 0.25
        return x

    g = two_inputs(100, "float32", chain)
    feeds = [hostile((100,), "float32", 5), hostile((100,), "float32", 6)]
    got, source = run(g, feeds, segment_ops=6)
    defined, called = segments(source)
    assert len(called) == 20 and defined == called[:1], (defined, len(called))
    assert bits_differ(got, numpy_result(g, feeds)) is None


def test_a_long_chain_at_the_default_threshold_is_a_handful_of_functions() -> None:
    """The issue's chain (three ops, repeated) at the real SEGMENT_OPS: segments start at
    each of the three phases of the chain, plus a shorter last one; no interleaving."""
    ops = 10 * kernels.SEGMENT_OPS + 2

    def chain(x: gc.Symbol, y: gc.Symbol) -> gc.Symbol:
        for _ in range(ops // 3):
            x = gc.minimum(x, y)
            x = x + 0.5
            x = x * 0.9
        return x

    n = 1000
    g = two_inputs(n, "float32", chain)
    feeds = [hostile((n,), "float32", 7), hostile((n,), "float32", 8)]
    exe = gc.compile(g, opt_level=2, backend="native")
    got = exe(*feeds)
    defined, called = segments(exe.source("c", *feeds))
    assert len(called) == 11 and len(defined) <= 4, (len(called), len(defined))
    assert "_blocks(" not in exe.source("c", *feeds)
    assert bits_differ(got, numpy_result(g, feeds)) is None


def test_a_kernel_that_interleaves_is_not_segmented(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short kernels keep their C: one that interleaves blocks is short by INTERLEAVE_WORK."""
    monkeypatch.setattr(kernels, "SEGMENT_OPS", 2)
    g = two_inputs(4096, "float32", lambda x, y: (x * y + 1.0) * x - y * 0.5)
    source = gc.compile(g, opt_level=2, backend="native").source("c")
    assert "_blocks(" in source and segments(source) == ([], [])


def test_values_of_every_type_cross_segment_boundaries() -> None:
    """float32, float64 and bool values made early, a bool leaf and a float64 scalar,
    all read segments later: in as vectors (or the scalar's address), out by pointers."""
    n = 16 * 5 + 9
    g = gc.Graph("types")
    with g:
        x = gc.placeholder("x", shape=(n,), dtype="float32")
        y = gc.placeholder("y", shape=(n,), dtype="float32")
        mask = gc.placeholder("mask", shape=(n,), dtype="bool")
        scale = gc.placeholder("scale", shape=(1,), dtype="float64")
        above = x > y  # bool
        wide = gc.cast(x, "float64") * scale  # float64
        small = y * 3.0  # float32
        v = x
        for _ in range(6):  # segments in between
            v = gc.abs(v - 0.5) * 0.5
        late = gc.where(gc.logical_xor(above, mask), wide, gc.cast(small + v, "float64"))
        gc.output(late - gc.cast(gc.logical_and(above, mask), "float64"), name="out")
    feeds = [
        hostile((n,), "float32", 9),
        hostile((n,), "float32", 10),
        np.random.default_rng(11).random(n) < 0.5,
        np.array([-1.5]),
    ]
    got, source = run(g, feeds, segment_ops=3)
    signatures = re.findall(r"noinline\)\) void gk_\w+_s[0-9a-f]{16}\((.*)\) \{", source)
    params = " ".join(signatures)
    for kind in ("vf32 p", "vf64 p", "vb p", "vf32 *q", "vf64 *q", "vb *q", "const char *p"):
        assert kind in params, (kind, signatures)
    assert bits_differ(got, numpy_result(g, feeds)) is None


def test_an_early_value_read_by_a_late_segment() -> None:
    """The first op's value is read again by the last: the first segment hands out two
    values, and every segment in between passes nothing but the chain's."""

    def body(x: gc.Symbol, y: gc.Symbol) -> gc.Symbol:
        early = x * y
        v = early + 1.0
        for _ in range(12):
            v = gc.abs(v) * 0.5 - 0.25
        return v + early

    n = 16 * 3 + 1
    g = two_inputs(n, "float64", body)
    feeds = [hostile((n,), "float64", 12), hostile((n,), "float64", 13)]
    got, source = run(g, feeds, segment_ops=4)
    calls = re.findall(r"^#?\s+gk_\w+_s[0-9a-f]{16}\((.*)\);", source, re.MULTILINE)
    early = re.compile(r"\bt0\b")  # the block's name of the kernel's first value
    assert "&t0" in calls[0] and calls[0].count("&") == 2, calls[0]
    assert [bool(early.search(call)) for call in calls[1:]] == [False] * (len(calls) - 2) + [True]
    assert bits_differ(got, numpy_result(g, feeds)) is None


def random_dag(n: int, ops: int, seed: int, exact: bool) -> gc.Graph:
    """`ops` random elementwise ops over float32 and float64 inputs: arithmetic, casts,
    comparisons, where and logical ops, operands mostly recent values and sometimes any
    earlier one (long edges across segments); every value reaches the output."""
    rng = np.random.default_rng(seed)
    g = gc.Graph(f"dag_{seed}_{exact}")
    with g:
        values = [
            gc.placeholder("x", shape=(n,), dtype="float32"),
            gc.placeholder("y", shape=(n,), dtype="float32"),
            gc.placeholder("z", shape=(n,), dtype="float64"),
        ]
        read: set[int] = set()

        def pick(boolean: bool) -> gc.Symbol | None:
            pool = [k for k, v in enumerate(values) if (v.type.dtype == np.bool_) == boolean]
            if not pool:
                return None
            recent = pool[-1 - min(int(rng.exponential(3)), len(pool) - 1)]
            k = recent if rng.random() < 0.8 else pool[rng.integers(len(pool))]
            read.add(k)
            return values[k]

        unary = [gc.abs, gc.neg, lambda t: t * 0.5 + 0.25]
        if not exact:
            unary += [gc.tanh, lambda t: gc.exp(t * 0.125)]
        binary = [gc.add, gc.sub, gc.mul, gc.maximum, gc.minimum]
        while len(values) < ops + 3:
            a, r = pick(False), rng.random()
            if r < 0.35:
                v = binary[rng.integers(len(binary))](a, pick(False))
            elif r < 0.55:
                v = unary[rng.integers(len(unary))](a)
            elif r < 0.65:
                v = gc.cast(a, "float64" if a.type.dtype == np.float32 else "float32")
            elif r < 0.8:
                v = [gc.lt, gc.ge, gc.eq][rng.integers(3)](a, pick(False))
            elif (c := pick(True)) is None:
                continue
            elif r < 0.92:
                v = gc.where(c, a, pick(False))
            else:
                v = gc.logical_xor(c, pick(True))
            values.append(v)
        total = None
        for k, v in enumerate(values[3:], start=3):
            if k not in read:
                total = gc.cast(v, "float64") if total is None else total + gc.cast(v, "float64")
        gc.output(total, name="out")
    return g


def test_random_dags() -> None:
    n = 16 * 7 + 5
    feeds = [hostile((n,), "float32", 14), hostile((n,), "float32", 15)]
    feeds.append(hostile((n,), "float64", 16))
    exact = random_dag(n, 48, seed=0, exact=True)
    got, source = run(exact, feeds, segment_ops=6)
    assert len(segments(source)[1]) >= 8
    assert bits_differ(got, numpy_result(exact, feeds)) is None
    inexact = random_dag(n, 48, seed=1, exact=False)
    whole, _ = run(inexact, feeds, segment_ops=UNSEGMENTED)
    got, source = run(inexact, feeds, segment_ops=6)
    assert len(segments(source)[1]) >= 8
    assert bits_differ(got, whole) is None


# -- operand kinds: the block loads them and passes the vectors --------------------------


def chain_after(v: gc.Symbol, w: gc.Symbol) -> gc.Symbol:
    for _ in range(4):
        v = gc.maximum(v * 0.5 - w, w * -0.25) + 1.0
    return v


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_block_strided_and_scalar_operands(dtype: str) -> None:
    shape = (5, 7, 19)  # 665 elements: a partial last block
    g = gc.Graph("broadcasts")
    with g:
        x = gc.placeholder("x", shape=shape, dtype=dtype)
        bias = gc.placeholder("bias", shape=(19,), dtype=dtype)  # BLOCK
        rows = gc.placeholder("rows", shape=(5, 7, 1), dtype=dtype)  # BLOCK, wrapping
        strided = gc.placeholder("strided", shape=(5, 1, 19), dtype=dtype)  # STRIDED
        scalar = gc.placeholder("scalar", shape=(1,), dtype=dtype)  # SCALAR
        v = chain_after(x + bias, rows) * strided
        gc.output(chain_after(v, scalar) - bias, name="out")
    feeds = [
        hostile(shape, dtype, 17),
        hostile((19,), dtype, 18),
        hostile((5, 7, 1), dtype, 19),
        hostile((5, 1, 19), dtype, 20),
        np.array([0.75], dtype),
    ]
    got, source = run(g, feeds, segment_ops=3)
    assert len(segments(source)[1]) >= 8
    # the block's loads of each kind (source() also shows the prelude, which defines them)
    assert re.search(r"= bk_f\d\d\(a\d", source) and re.search(r"= gd_f\d\d\(a\d", source)
    assert bits_differ(got, numpy_result(g, feeds)) is None


def test_pitched_operands() -> None:
    """Gates of a (B, 4 x 32) pre-activation read in place by a long kernel."""
    width, batch = 32, 21
    g = gc.Graph("gates")
    with g:
        x = gc.placeholder("x", shape=(batch, 4 * width))
        c = gc.placeholder("c", shape=(batch, width))
        a = x * 2.0 + 1.0
        i, f, o, n = (a[:, k * width : (k + 1) * width] for k in range(4))
        gc.output(chain_after(i * c + f, o) - chain_after(n, c), name="y")
    feeds = [hostile((batch, 4 * width), "float32", 21), hostile((batch, width), "float32", 22)]
    got, source = run(g, feeds, segment_ops=4)
    assert len(segments(source)[1]) >= 6 and re.search(r"i % w\d", source)  # a PITCHED load
    assert bits_differ(got, numpy_result(g, feeds)) is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(37, 53), (16, 16), (3, 5)], ids=str)
def test_transposed_operands(shape: tuple[int, int], dtype: str) -> None:
    """w - transpose(g * c) and a chain after it: the tiled kernel calls the segments."""
    rows, cols = shape
    g = gc.Graph("update")
    with g:
        w = gc.placeholder("w", shape=(rows, cols), dtype=dtype)
        grad = gc.placeholder("g", shape=(cols, rows), dtype=dtype)
        scaled = grad * gc.constant(np.asarray(0.5, dtype))
        gc.output(chain_after(w - gc.transpose(scaled, (1, 0)), w), name="y")
    feeds = [hostile((rows, cols), dtype, 23), hostile((cols, rows), dtype, 24)]
    got, source = run(g, feeds, segment_ops=3)
    assert len(segments(source)[1]) >= 6 and re.search(r"tile\d\[", source)
    assert bits_differ(got, numpy_result(g, feeds)) is None
