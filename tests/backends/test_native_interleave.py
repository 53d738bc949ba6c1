"""Elementwise kernels that compute eight blocks of lanes together (kernels.INTERLEAVE):
each statement of the block written for all eight before the next, so a long dependent
chain (GELU's cube, then tanh) has independent work beside it. Every element is computed
by the same operations, so the bits are those of the kernel that goes a block at a time,
for every size (whole groups of eight blocks, the blocks left over, the partial last
block, the parallel path), and exact chains keep numpy's bits. Kernels that may call a
function (libmvec, a BLOCK operand's lane-by-lane path) go a block at a time: every
vector register is the callee's, and eight blocks' values would be spilled.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
import graphc.backends.native.kernels as kernels
from tests.native_checks import bits_differ, every_size, needs_native, random_bits

pytestmark = needs_native
__all__ = ["every_size"]

EDGES = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-45, 3e38, -3e38, 8.7, -1e-4]
# sizes around a group of eight 16-lane blocks, its leftovers and tail, and the parallel path
SIZES = [1, 15, 16, 127, 128, 129, 8 * 16 * 3 + 16 * 5 + 7, 300_007]


def chain(n: int, dtype: str, exact: bool) -> gc.Graph:
    """GELU's tanh chain (inexact), or a chain of exact ops with a scalar, over (n,)."""
    g = gc.Graph("chain")
    with g:
        x = gc.placeholder("x", shape=(n,), dtype=dtype)
        y = gc.placeholder("y", shape=(n,), dtype=dtype)
        if exact:
            out = gc.maximum(x * y - 0.5 * x, gc.sqrt(gc.abs(y)) / (x + 1.0))
        else:
            out = 0.5 * x * (1.0 + gc.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
        gc.output(out, name="out")
    return g


def feeds(n: int, dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 4).astype(dtype)
    y = random_bits(dtype, n, rng)
    x[: len(EDGES)] = np.array(EDGES[:n]).astype(dtype)
    return x, y


def run(graph: gc.Graph, *args: np.ndarray, backend: str = "native") -> np.ndarray:
    with np.errstate(all="ignore"):
        return gc.compile(graph, opt_level=2, backend=backend)(*args)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.usefixtures("every_size")
def test_interleaved_kernels_give_the_bits_of_one_block_at_a_time(
    n: int, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = feeds(n, dtype, seed=n)
    for exact in (True, False):
        graph = chain(n, dtype, exact)
        together = run(graph, x, y)
        monkeypatch.setattr(kernels, "INTERLEAVE", 1)
        alone = run(graph, x, y)
        monkeypatch.undo()
        why = bits_differ(together, alone)
        assert why is None, f"exact={exact}: {why}"
        if exact:
            why = bits_differ(together, run(graph, x, y, backend="numpy"))
            assert why is None, f"vs numpy: {why}"


def kernel_source(graph: gc.Graph) -> str:
    return gc.compile(graph, opt_level=2, backend="native").source("c")


def test_which_kernels_interleave() -> None:
    n = 4096
    f32 = chain(n, "float32", exact=False)  # float32 tanh is graphc's own, inline
    assert "_blocks(" in kernel_source(f32)
    assert "_blocks(" in kernel_source(chain(n, "float32", exact=True))
    calls = gc.Graph("calls")  # exp calls libmvec
    with calls:
        x = gc.placeholder("x", shape=(n,), dtype="float32")
        gc.output(gc.exp(x) * 2.0 + x, name="out")
    assert "gk_" in kernel_source(calls) and "_blocks(" not in kernel_source(calls)
    f64 = chain(n, "float64", exact=False)  # float64 tanh calls libmvec
    assert "_blocks(" not in kernel_source(f64)
    bias = gc.Graph("bias")  # a (16,) operand over (256, 16): BLOCK
    with bias:
        x = gc.placeholder("x", shape=(256, 16), dtype="float32")
        b = gc.placeholder("b", shape=(16,), dtype="float32")
        gc.output(gc.tanh(x + b) * x, name="out")
    assert "gk_" in kernel_source(bias) and "_blocks(" not in kernel_source(bias)


def test_long_groups_are_not_copied_eight_times() -> None:
    """gcc's time grows faster than the C: a long group interleaves fewer blocks, or none."""
    n = 4096
    for ops, want in ((12, 8), (40, 4), (200, 1)):
        g = gc.Graph("long")
        with g:
            x = gc.placeholder("x", shape=(n,), dtype="float32")
            v = x
            for _ in range(ops // 2):
                v = v * 0.9 + x
            gc.output(v, name="out")
        source = kernel_source(g)
        assert "gk_" in source
        copies = len(set(re.findall(r"\bi_(\d+) = i \+", source)))
        assert copies == (want if want > 1 else 0), (ops, copies)


def test_a_long_kernel_that_calls_is_segmented(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that calls libmvec never interleaves, so from SEGMENT_OPS ops it calls
    segment functions, as a long kernel that does not interleave does: one exp and 120
    adds (whose work would have let two blocks interleave) was one long function."""
    n = 4096
    g = gc.Graph("long_call")
    with g:
        x = gc.placeholder("x", shape=(n,), dtype="float32")
        v = gc.exp(x)
        for _ in range(120):
            v = v + x
        gc.output(v, name="out")
    assert kernels.interleave(["exp"] + ["add"] * 120) > 1
    source = kernel_source(g)
    assert re.search(r"gk_\w+_s[0-9a-f]{16}\(", source), "no segment functions"
    assert "_blocks(" not in source
    x = feeds(n, "float32", seed=5)[0]
    segmented = run(g, x)
    monkeypatch.setattr(kernels, "SEGMENT_OPS", 1000)  # one function, in stages
    assert not re.search(r"gk_\w+_s[0-9a-f]{16}\(", kernel_source(g))
    why = bits_differ(segmented, run(g, x))
    assert why is None, why
