"""Elementwise kernels that call libmvec compute a block of lanes in stages, each ending
with a call (kernels._stages): every other statement runs in the stage of its first
reader, each stage loads the leaves it reads, and a scalar leaf is splat where it is
read, so that no value is held in a vector register across a call the callee may
clobber. The statements are those of the block in its plain order (all loads first, then
every statement), reordered without breaking a dependence, so the bits are the same, for
every size (the partial last block, the parallel path) and every operand kind.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
import graphc.backends.native.kernels as kernels
from tests.edge_values import bits_differ
from tests.native_checks import every_size, needs_native, random_bits, runs_native

pytestmark = needs_native
__all__ = ["every_size"]

EDGES = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-45, 3e38, -3e38, 88.5, -104.0]
# rows of 37: blocks that cross rows, a partial last block; 4096 rows go to the pool
ROWS = [1, 3, 64, 4096]


def _xent(mask, y, s):  # cross-entropy's gradient: a bool, a (B, 1) and two scalars
    return gc.where(mask, np.float32(-0.25), np.float32(0.0)) - gc.exp(y) * s


def _two_calls(x, b):  # three calls, x read in four stages, a (37,) bias over the rows
    return gc.sigmoid(x + b) * x + gc.exp(x * 0.5) * gc.log(gc.abs(x * b) + 1.0)


def _chained(x):  # a call of a call's result, then arithmetic on both
    e = gc.exp(-gc.abs(x))
    return gc.log1p(e) + e * x


def _gelu(x):  # float64 tanh calls libmvec
    return 0.5 * x * (1.0 + gc.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


CASES = {
    "xent": (_xent, [("bool", 37), ("float32", 37), ("float32", 1)]),
    "two_calls": (_two_calls, [("float32", 37), ("float32", None)]),
    "chained": (_chained, [("float64", 37)]),
    "gelu64": (_gelu, [("float64", 37)]),
}


def _case(name: str, rows: int, seed: int) -> tuple[gc.Graph, list[np.ndarray]]:
    fn, specs = CASES[name]
    rng = np.random.default_rng(seed)
    feeds = []
    for dtype, cols in specs:  # cols None: a (37,) operand over the rows
        shape = (37,) if cols is None else (rows, cols)
        n = int(np.prod(shape))
        if dtype == "bool":
            feeds.append(rng.random(shape) < 0.3)
            continue
        x = np.where(rng.random(n) < 0.5, random_bits(dtype, n, rng), rng.standard_normal(n) * 8)
        x = x.astype(dtype)
        x[: len(EDGES)] = np.array(EDGES[:n]).astype(dtype)
        feeds.append(x.reshape(shape))
    graph = gc.trace(fn, *[gc.TensorSpec(f.shape, f.dtype) for f in feeds])
    return graph, feeds


def _run(graph: gc.Graph, feeds: list[np.ndarray]) -> tuple[np.ndarray, str]:
    exe = gc.compile(graph, opt_level=2, backend="native")
    with np.errstate(all="ignore"):
        result = exe(*feeds)
    assert runs_native(exe, *feeds) >= 1, exe.explain(*feeds)
    return result, exe.source("c", *feeds)


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.usefixtures("every_size")
def test_a_kernel_in_stages_gives_the_bits_of_its_plain_order(
    name: str, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, feeds = _case(name, rows, seed=rows)
    staged, source = _run(graph, feeds)
    assert re.search(r"\bx\d+_[1-9]\d* = ", source), "the kernel was not built in stages"
    monkeypatch.setattr(kernels, "_stages", lambda members, root: {})
    plain, plain_source = _run(graph, feeds)
    assert not re.search(r"\bx\d+_\d+ = ", plain_source)
    why = bits_differ(staged, plain)
    assert why is None, why


def _block(source: str) -> str:
    """The text of the first kernel's NAME_block function."""
    start = source.index("_block(int64_t i")
    return source[start : source.index("\n}\n", start)]


def test_loads_and_arithmetic_wait_for_the_calls() -> None:
    graph, feeds = _case("xent", 64, seed=0)
    block = _block(_run(graph, feeds)[1])
    call = block.index("exp_f32(")
    # the mask, the (B, 1) operand and the select are after the call, nothing is
    # computed before it but its own operand's load
    assert call < block.index("ld_b(") and call < block.index("bk_at(")
    assert call < block.index("sel_f32(")
    assert block[:call].count(";") == 1, block  # the load of y, then the call's statement
    # the scalars are splat where read, not passed in as vectors to hold across the call
    assert "vf32 s" not in block.split("{")[0]
    assert block.count("sp_f32(*(const float *)a") == 2


def test_each_stage_loads_what_it_reads() -> None:
    graph, feeds = _case("two_calls", 64, seed=0)
    block = _block(_run(graph, feeds)[1])
    # x is read by sigmoid's stage, by exp's, by log's and by the last: loaded in each
    assert len(re.findall(r"vf32 x0_\d+ = ld_f32\(a0", block)) == 4, block
    # the bias, a BLOCK operand, is read by sigmoid's stage and by log's
    assert len(re.findall(r"bk_at\(", block)) == 2, block
    calls = [block.index(f) for f in ("sigmoid_f32(", "exp_f32(t", "log_f32(")]
    assert calls == sorted(calls)


def test_a_kernel_without_calls_keeps_one_load_per_leaf() -> None:
    n = 4096
    g = gc.trace(lambda x, y: x * y + gc.tanh(x), gc.TensorSpec((n,)), gc.TensorSpec((n,)))
    block = _block(gc.compile(g, opt_level=2, backend="native").source("c"))
    assert re.findall(r"vf32 (x\d+) = ld_f32", block) == ["x0", "x1"], block  # tanh: inline
