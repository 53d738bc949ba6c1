"""Slices read in place on the native backend (graphc/backends/native/slices.py): a column
block that only native kernels read is not copied; its readers' kernels read the wide
array (a PITCHED operand). Against numpy at every level (the same bits for exact ops,
the native bits of the first level otherwise); which slices are read so, and which are
not (a width that is no multiple of 16, a reader that is no kernel here, a broadcast
reader, a buffer the planner reuses before the reader runs).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import slices
from tests.native_checks import check_native, needs_native, normwise

pytestmark = needs_native

EDGES = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40, -3e38, 0.5, -2.0], np.float32)


def feeds(
    shape: tuple[int, ...], dtype=np.float32, seed: int = 0, edges: bool = True
) -> np.ndarray:
    """Normal values, with nan, inf, -0.0, a subnormal and a huge one first (`edges`)."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    if edges:
        x.reshape(-1)[: len(EDGES)] = EDGES.astype(dtype)
    return x


def slice_tags(graph: gc.Graph, *args: np.ndarray, level: int = 2) -> list[str]:
    """How each slice step of the native plan at `level` is made, in explain's order
    (loop bodies' steps included): "in place" (no code: its readers read the wide
    array), or "copied" (copies.py's C call, or numpy's kernel)."""
    found: set[str] = set()
    lower = slices.lower_slice

    def spy(gen, step, *rest):  # type: ignore[no-untyped-def]
        lines = lower(gen, step, *rest)
        if lines is not None:
            found.add(step.output)
        return lines

    slices.lower_slice = spy
    try:
        text = gc.compile(graph, opt_level=level, backend="native").explain(*args)
    finally:
        slices.lower_slice = lower
    names = re.findall(r"^\s+\d+\s+(\S+) = slice\(", text, re.MULTILINE)
    assert names, text
    return ["in place" if name in found else "copied" for name in names]


def gates(width: int, exact: bool, dtype: str = "float32", rank: int = 2) -> gc.Graph:
    """A (B, [T,] 4 width) pre-activation cut into four gates, combined elementwise."""
    g = gc.Graph(f"gates_{width}_{exact}_{dtype}_{rank}")
    with g:
        shape = ("B", 4 * width) if rank == 2 else ("B", 3, 4 * width)
        x = gc.placeholder("x", shape=shape, dtype=dtype)
        c = gc.placeholder("c", shape=shape[:-1] + (width,), dtype=dtype)
        a = x * 2.0 + 1.0
        whole = (slice(None),) * (rank - 1)
        i, f, o, n = (a[(*whole, slice(k * width, (k + 1) * width))] for k in range(4))
        if exact:
            y = i * c + f - o * n
        else:
            y = gc.sigmoid(f) * c + gc.sigmoid(i) * gc.tanh(n) * gc.sigmoid(o)
        gc.output(y, name="y")
    return g


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rank", [2, 3])
def test_gate_slices_are_read_in_place(exact: bool, dtype: str, rank: int) -> None:
    width, batch = 32, 160  # 160 x 32 = 5120 elements: native even with exact ops only
    g = gates(width, exact, dtype, rank)
    shape = (batch, 4 * width) if rank == 2 else (batch, 3, 4 * width)
    x, c = feeds(shape, np.dtype(dtype)), feeds(shape[:-1] + (width,), np.dtype(dtype), 1)
    finite = {
        "x": feeds(shape, np.dtype(dtype), 2, edges=False),
        "c": feeds(shape[:-1] + (width,), np.dtype(dtype), 3, edges=False),
    }
    assert slice_tags(g, x, c) == ["in place"] * 4
    close = normwise(2.0**-16)
    check_native(g, [{"x": x, "c": c}, finite], close=close, close_sets=(1,))
    # a caller's x that is not C-contiguous: copied to C order by the call
    strided = {"x": np.asfortranarray(finite["x"]), "c": finite["c"]}
    check_native(g, [{"x": np.asfortranarray(x), "c": c}, strided], close=close, close_sets=(1,))


def test_explain_says_which_step_reads_a_slice_in_place() -> None:
    """A slice read in place is a step that writes nothing: explain says so and names its
    reader (the LSTM's gate slices read as four copies before); a copied one says nothing
    more than its backend."""
    for width, batch, note in ((32, 160, True), (24, 200, False)):
        g = gates(width, exact=True)
        x, c = feeds((batch, 4 * width)), feeds((batch, width), seed=1)
        text = gc.compile(g, backend="native").explain(x, c)
        steps = re.findall(r"^\s+(\d+)\s+(\S+) = (\w+)\((.*?)\).*$", text, re.MULTILINE)
        names = [name for _, name, op, _ in steps if op == "slice"]
        assert len(names) == 4, text
        for name in names:
            line = next(line for line in text.splitlines() if f" {name} = slice(" in line)
            readers = [i for i, _, _, args in steps if name in args.split(", ")]
            said = f"[native: no copy, read in place by step {', '.join(readers)}]"
            assert (said in line) == note and readers, line
            assert note or line.rstrip().endswith("[native]"), line


def test_a_width_not_a_multiple_of_16_is_copied() -> None:
    g = gates(24, exact=True)
    x, c = feeds((200, 96)), feeds((200, 24), seed=1)
    assert slice_tags(g, x, c) == ["copied"] * 4
    check_native(g, [{"x": x, "c": c}])


def test_a_slice_read_by_another_op_is_copied() -> None:
    g = gc.Graph("also_matmul")
    with g:
        x = gc.placeholder("x", shape=("B", 64), dtype="float32")
        w = gc.placeholder("w", shape=(32, 8), dtype="float32")
        a = x * 2.0
        s = a[:, 0:32]
        gc.output(gc.tanh(s) + 1.0, name="y")
        gc.output(s @ w, name="z")
    x, w = feeds((160, 64)), feeds((32, 8), seed=2)
    assert slice_tags(g, x, w) == ["copied"]
    check_native(g, [{"x": x, "w": w}], close=normwise(2.0**-16), close_sets=(0,))


def test_a_broadcast_reader_copies() -> None:
    g = gc.Graph("broadcast")
    with g:
        x = gc.placeholder("x", shape=(4, 1, 64), dtype="float32")
        y = gc.placeholder("y", shape=(4, "B", 32), dtype="float32")
        s = (x * 2.0)[:, :, 32:64]  # (4, 1, 32), read broadcast over (4, B, 32)
        gc.output(gc.tanh(s + y), name="out")
    x, y = feeds((4, 1, 64)), feeds((4, 40, 32), seed=3)
    assert slice_tags(g, x, y) == ["copied"]
    check_native(g, [{"x": x, "y": y}], close=normwise(2.0**-16), close_sets=(0,))


def test_a_buffer_reused_before_the_reader_runs_keeps_the_copy() -> None:
    """a dies at its slice, so the planner hands its buffer to u, made before the reader:
    reading a in place there would read u."""
    g = gc.Graph("reused")
    with g:
        x = gc.placeholder("x", shape=("B", 64), dtype="float32")
        v = gc.placeholder("v", shape=("B", 32), dtype="float32")
        a = x * 2.0
        s = a[:, 0:32]
        u = v * 3.0
        gc.output(gc.tanh(s) + u, name="y")
    x, v = feeds((160, 64)), feeds((160, 32), seed=4)
    exe = gc.compile(g, opt_level=0, backend="native")
    text = exe.explain(x, v)
    a_buffer = re.search(r"= mul\(x, .*-> allocated (b\d+)", text).group(1)
    assert re.search(rf"= mul\(v, .*-> reused {a_buffer}\b", text), text  # the hazard is real
    assert slice_tags(g, x, v, level=0) == ["copied"]
    check_native(g, [{"x": x, "v": v}], levels=(0,), close=normwise(2.0**-16), close_sets=(0,))


def test_gate_slices_of_a_scan_row_are_read_in_place() -> None:
    """A GRU-like step: the row of xs (the body's input, given by the loop) and the
    recurrent product, each cut into three gates."""
    h_size = 16
    g = gc.Graph("gru_like")
    with g:
        h0 = gc.placeholder("h0", shape=("B", h_size), dtype="float32")
        xs = gc.placeholder("xs", shape=("T", "B", 3 * h_size), dtype="float32")
        r = gc.placeholder("r", shape=(h_size, 3 * h_size), dtype="float32")

        def body(h: gc.Symbol, x: gc.Symbol) -> tuple[gc.Symbol, gc.Symbol]:
            p = h @ r
            xz, xr, xn = (x[:, k * h_size : (k + 1) * h_size] for k in range(3))
            pz, pr, pn = (p[:, k * h_size : (k + 1) * h_size] for k in range(3))
            z, rr = gc.sigmoid(xz + pz), gc.sigmoid(xr + pr)
            n = gc.tanh(xn + rr * pn)
            h2 = (1.0 - z) * n + z * h
            return h2, h2

        h, ys = gc.scan(body, h0, xs)
        gc.output(h, name="h")
        gc.output(ys, name="ys")
    feed = {
        "h0": feeds((300, h_size)),
        "xs": feeds((5, 300, 3 * h_size), seed=5),
        "r": feeds((h_size, 3 * h_size), seed=6) * np.float32(0.1),
    }
    finite = {k: feeds(v.shape, seed=7, edges=False) for k, v in feed.items()}
    finite["r"] *= np.float32(0.1)
    assert slice_tags(g, *feed.values()) == ["in place"] * 6
    check_native(g, [feed, finite], close=normwise(2.0**-12), close_sets=(1,))


def test_a_reader_of_a_value_made_after_the_slice_compiles() -> None:
    """The reader's other operand u, an output, is made by a step between the slice and
    the reader: deciding at the slice whether the reader reads it in place looked up
    u's array before u's step had bound it (a KeyError from gc.compile at every level)."""
    g = gc.Graph("made_between")
    with g:
        x = gc.placeholder("x", shape=("B", 32), dtype="float32")
        h = gc.placeholder("h", shape=("B", 16), dtype="float32")
        s = (x * 2.0)[:, 0:16]
        u = h + 1.0
        gc.output(u, name="u")
        gc.output(s * u, name="y")
    x, h = feeds((3, 32)), feeds((3, 16), seed=1)
    assert slice_tags(g, x, h, level=0) == ["in place"]
    check_native(g, [{"x": x, "h": h}])
