"""Generated code for fused nodes (chunked, with scratch) and matmul epilogues."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends.numpy import chunked
from graphc.ops.dispatch import bind
from tests.budget import draws


def body_of(*types: tuple[tuple, str], build: object) -> gc.Graph:
    body = gc.Graph("body")
    with body:
        ps = [gc.placeholder(f"p{i}", shape=s, dtype=d) for i, (s, d) in enumerate(types)]
        gc.output(build(*ps), name="out")  # type: ignore[operator]
    return body


def fused_graph(shapes: list[tuple], build: object, dtype: str = "float32") -> gc.Graph:
    g = gc.Graph("f")
    body = body_of(*[(s, dtype) for s in shapes], build=build)
    with g:
        xs = [gc.placeholder(f"x{i}", shape=s, dtype=dtype) for i, s in enumerate(shapes)]
        y = bind("fused", *xs, body=body)
        gc.output(y, name="y")
        gc.output(bind("fused", y, *xs[1:], body=body) * 2.0, name="z")  # y read again
    return g


def gelu_like(x: object, *rest: object) -> object:
    inner = x * (1.0 + 0.044715 * x * x)
    for r in rest:
        inner = inner + r
    return 0.5 * x * (1.0 + gc.tanh(0.79788456 * inner))


CASES = [
    ([(1000,)], "flat, one operand"),
    ([(1000,), ()], "flat with a scalar"),
    ([(40, 25), (1, 1)], "flat, rank 2, size-1 operand"),
    ([(40, 25), (25,)], "rows, broadcast bias"),
    ([(7, 300), (7, 1)], "rows, column operand"),
    ([(3, 50, 7), (50, 7)], "rows, rank 3"),
]


@pytest.mark.parametrize("chunk", [16, 100, 10**6])
@pytest.mark.parametrize(("shapes", "label"), CASES, ids=[c[1] for c in CASES])
def test_fused_matches_reference(
    shapes: list[tuple], label: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunked, "CHUNK", chunk)
    g = fused_graph(shapes, gelu_like)
    rng = np.random.default_rng(0)
    feeds = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    exe = gc.compile(g, opt_level=0)
    want = gc.run(g, feeds)
    for _ in range(2):
        got = exe(**feeds)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=exe.source())
    if chunk == 16:
        assert "for lo in range" in exe.source()


def test_fused_with_constants_and_mixed_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunked, "CHUNK", 64)
    body = gc.Graph("body")
    with body:
        i = gc.placeholder("i", shape=(500,), dtype="int64")
        x = gc.placeholder("x", shape=(500,), dtype="float64")
        c = gc.constant(np.linspace(0, 1, 500), name="ramp")
        gc.output(gc.where(i > 0, gc.cast(i, "float64") * x, c), name="out")
    g = gc.Graph("mixed")
    with g:
        iv = gc.placeholder("i", shape=(500,), dtype="int64")
        xv = gc.placeholder("x", shape=(500,), dtype="float64")
        gc.output(bind("fused", iv, xv, body=body), name="y")
    rng = np.random.default_rng(3)
    feeds = {"i": rng.integers(-3, 4, 500), "x": rng.standard_normal(500)}
    np.testing.assert_array_equal(gc.compile(g, opt_level=0)(**feeds), gc.run(g, feeds)[0])


@pytest.mark.parametrize("activation", [None, "relu", "tanh", "sigmoid", "gelu"])
@pytest.mark.parametrize("bias", [False, True])
def test_matmul_epilogue_matches_reference(activation: str | None, bias: bool) -> None:
    g = gc.Graph("epi")
    with g:
        x = gc.placeholder("x", shape=("B", 6))
        w = gc.placeholder("w", shape=(6, 4))
        args = [x, w] + ([gc.placeholder("b", shape=(4,))] if bias else [])
        h = bind("matmul_epilogue", *args, bias=bias, activation=activation)
        gc.output(h, name="h")
        gc.output(
            bind("matmul_epilogue", *([h, gc.transpose(w)] + args[2:3] * 0), activation=activation),
            name="h2",
        )
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((5, 6)), "w": rng.standard_normal((6, 4))}
    if bias:
        feeds["b"] = rng.standard_normal(4)
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    exe = gc.compile(g, opt_level=0)
    for got, want in zip(exe(**feeds), gc.run(g, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert "kernel_matmul(" in exe.source() and "kernel_matmul_epilogue" not in exe.source()


def test_a_long_group_reads_in_the_source_and_calls_its_ufuncs_with_out_last() -> None:
    """The comment over a fused group names its first 12 ops and the count (a 5,000-op
    chain's comment had been one 25,000-character line); each member that is a plain
    ufunc gets its output as its last argument, which compiles faster than `out=`, and
    the group computes the chain's values."""
    g = gc.Graph("long")
    with g:
        y = gc.placeholder("x", shape=(64,), dtype="float64")
        for _ in range(20):
            y = gc.tanh(y) * 1.5
        gc.output(y, name="y")
    x = np.linspace(-2, 2, 64)
    exe = gc.compile(g, backend="numpy")
    source = exe.source(x)
    comment = next(line for line in source.splitlines() if "# fused" in line)
    assert "40 ops: tanh mul tanh mul" in comment and comment.rstrip().endswith("over 64 elements")
    assert len(comment) < 200, comment
    assert "np_tanh(x, scratch" in source and "np_tanh(scratch, scratch" in source, source
    want = x
    for _ in range(20):
        want = np.tanh(want) * 1.5
    np.testing.assert_array_equal(exe(x), want)


def test_a_repeated_block_of_members_runs_as_a_loop() -> None:
    """A traced chain repeats a few members on one scratch buffer: the block is written
    once, in a loop, so the source stays short; the values are the unrolled calls'."""
    g = gc.trace(lambda x: _chain(x, 500), gc.TensorSpec((64,), "float64"))
    x = np.linspace(-2, 2, 64)
    exe = gc.compile(g, backend="numpy")
    source = exe.source(x)
    assert len(source.splitlines()) < 30, source
    assert "in range(" in source and source.count("np_tanh(") == 2, source
    np.testing.assert_array_equal(exe(x), _chain(x, 500, np))
    short = gc.trace(lambda x: _chain(x, chunked.ROLL_FROM - 1), gc.TensorSpec((64,), "float64"))
    assert "in range(" not in gc.compile(short, backend="numpy").source(x)


def _chain(x: object, n: int, lib: object = gc) -> object:
    for _ in range(n):
        x = lib.sin(lib.tanh(x) * 1.5) + 0.25  # type: ignore[attr-defined]
    return x


@settings(max_examples=draws(200), derandomize=True)
@given(st.lists(st.sampled_from(["a()", "b()", "c()"]), max_size=120), st.integers(0, 40))
def test_rolling_keeps_every_call_in_order(lines: list[str], copies: int) -> None:
    """`_rolled` of any line sequence (a repeated block appended, to make loops likely),
    with its loops expanded, is the sequence itself."""
    lines = lines + ["a()", "b()", "b()"] * copies
    rolled = chunked._rolled(_Fresh(), lines)
    expanded: list[str] = []
    k = 0
    while k < len(rolled):
        line = rolled[k]
        if line.startswith("for "):
            repeats = int(line[line.index("range(") + 6 : -2])
            block = []
            k += 1
            while k < len(rolled) and rolled[k].startswith("    "):
                block.append(rolled[k][4:])
                k += 1
            assert repeats >= chunked.ROLL_FROM and 1 <= len(block) <= chunked.MAX_PERIOD
            expanded += block * repeats
        else:
            expanded.append(line)
            k += 1
    assert expanded == lines


class _Fresh:
    def __init__(self) -> None:
        self.count = 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"


@pytest.mark.filterwarnings("error::DeprecationWarning")
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_in_a_group_take_their_output_by_keyword(op: str) -> None:
    """numpy 2.x deprecates an output passed positionally to maximum and minimum (it is
    to become an error): their calls in a fused group name it `out=`, without a warning
    (the test fails on any DeprecationWarning)."""
    g = gc.Graph("extrema")
    with g:
        x = gc.placeholder("x", shape=(5,), dtype="float64")
        gc.output(getattr(gc, op)(x * 2.0, x) + 1.0, name="y")
    x = np.linspace(-2, 2, 5)
    exe = gc.compile(g, backend="numpy")
    np.testing.assert_array_equal(exe(x), getattr(np, op)(x * 2.0, x) + 1.0)
    assert f"np_{op}(" in exe.source(x) and ", out=" in exe.source(x)
