"""Every exact rule, bit for bit on edge inputs, over dtypes and shapes (0-d and empty too).

Each case builds a graph that one exact rule rewrites; for every dtype and shape where
the graph can be built, the simplified graph (the default, exact rule set) and the
O1/O2 executables must give O0's results bit for bit on feeds drawn from the edge
values (nan, inf, -0.0, subnormals, the largest finite values, integer limits, bools).
Together the cases must fire every exact rule of the table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import graphc as gc
from graphc.passes.report import PassLog
from graphc.passes.simplify import REWRITES
from tests.differential import check_levels
from tests.passes.passcheck import assert_bits_equal, edge_values
from tests.passes.test_rules import every_rule

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
SHAPES = [(), (0,), (5,), (0, 3), (2, 3)]

Build = Callable[..., gc.Symbol]


def k(value: float, dtype: str) -> gc.Symbol:
    """A 0-d constant of `dtype`."""
    return gc.constant(np.array(value).astype(dtype))


def _nan_checked_max(z: gc.Symbol) -> gc.Symbol:
    """max of z over axis 0, nan where a nan is reduced: the form graphc's ONNX export
    writes for onnxruntime, which skips nans (a float z: the rule fires; else declines)."""
    flags = gc.max(gc.cast(gc.ne(z, z), "int32"), axis=0)
    nan = np.asarray(np.nan if np.issubdtype(z.dtype, np.floating) else 0, z.dtype)
    return gc.where(gc.gt(flags, 0), gc.constant(nan), gc.max(z, axis=0))


def _transpose_twice(x: gc.Symbol, y: gc.Symbol, z: gc.Symbol, dtype: str) -> gc.Symbol:
    rotate = (*range(1, z.type.rank), 0)  # twice: a permutation, not the identity (rank 3)
    return gc.transpose(gc.transpose(z, rotate), rotate)


# rule (as the report names it; "declines: rule" where it must not fire) -> graph builder
# on x, y (shape S) and z (shape (2, *S)), and the dtype
CASES: list[tuple[str, Build]] = [
    ("add(x, 0)", lambda x, y, z, t: x + k(-0.0, t)),
    ("sub(x, 0)", lambda x, y, z, t: x - k(0.0, t)),
    ("sub(0, x)", lambda x, y, z, t: k(-0.0, t) - x),
    ("mul(x, 1)", lambda x, y, z, t: x * k(1, t)),
    ("mul(x, 1)", lambda x, y, z, t: gc.full_like(y, 1) * x),
    ("mul(x, -1)", lambda x, y, z, t: x * k(-1, t)),
    ("mul(x, -1)", lambda x, y, z, t: x * gc.full_like(y, -1)),  # bool: True, not -1
    ("mul(x, 0)", lambda x, y, z, t: x * k(0, t)),
    ("declines: mul(x, 0)", lambda x, y, z, t: x * gc.constant(np.float64(0.0))),  # -3*0.0 = -0.0
    ("div(x, 1)", lambda x, y, z, t: x / k(1, t)),
    ("neg(neg(x))", lambda x, y, z, t: gc.neg(gc.neg(x))),
    ("sub(x, x)", lambda x, y, z, t: x - x),
    ("add(x, neg(y))", lambda x, y, z, t: x + gc.neg(y)),
    ("sub(x, neg(y))", lambda x, y, z, t: x - gc.neg(y)),
    ("add(x, neg(y))", lambda x, y, z, t: x + gc.neg(gc.cast(y, "int32"))),  # wider x: declines
    ("sub(x, neg(y))", lambda x, y, z, t: x - gc.neg(gc.cast(y, "int32"))),
    ("transpose(x, axes=a)", lambda x, y, z, t: gc.transpose(x, tuple(range(x.type.rank)))),
    ("transpose(transpose(x, axes=a), axes=b)", _transpose_twice),
    ("reshape(x)", lambda x, y, z, t: gc.reshape(x, x.type.shape)),
    ("reshape(reshape(x), shape=s)",
     lambda x, y, z, t: gc.reshape(gc.reshape(z, (-1,)), (*x.type.shape, 2))),
    ("reshape(broadcast_to(x), shape=s)",
     lambda x, y, z, t: gc.reshape(gc.broadcast_to(x, z.type.shape), (*z.type.shape, 1))),
    ("broadcast_to(x)", lambda x, y, z, t: gc.broadcast_to(x, x.type.shape)),
    ("broadcast_to(broadcast_to(x), shape=s)",
     lambda x, y, z, t: gc.broadcast_to(gc.broadcast_to(x, z.type.shape), (3, *z.type.shape))),
    ("sum_to(x)", lambda x, y, z, t: gc.sum_to(x, x.type.shape)),
    ("cast(x)", lambda x, y, z, t: gc.cast(x, t)),
    ("mul(broadcast_to(x, shape=s), c)",
     lambda x, y, z, t: gc.broadcast_to(x, z.type.shape) * k(-3, t)),
    ("add(broadcast_to(x), y)", lambda x, y, z, t: gc.broadcast_to(x, z.type.shape) + z),
    ("mul(broadcast_to(x), y)", lambda x, y, z, t: z * gc.broadcast_to(x, z.type.shape)),
    ("sub(broadcast_to(x), y)", lambda x, y, z, t: gc.broadcast_to(x, z.type.shape) - z),
    ("sub(y, broadcast_to(x))", lambda x, y, z, t: z - gc.broadcast_to(x, z.type.shape)),
    ("div(broadcast_to(x), y)", lambda x, y, z, t: gc.broadcast_to(x, z.type.shape) / z),
    ("div(y, broadcast_to(x))", lambda x, y, z, t: z / gc.broadcast_to(x, z.type.shape)),
    ("where(z, broadcast_to(x), y)",
     lambda x, y, z, t: gc.where(gc.cast(z, "bool"), gc.broadcast_to(x, z.type.shape), z)),
    ("where(z, y, broadcast_to(x))",
     lambda x, y, z, t: gc.where(gc.cast(z, "bool"), z, gc.broadcast_to(x, z.type.shape))),
    ("where(1, x, y)", lambda x, y, z, t: gc.where(gc.constant(np.True_), x, y)),
    ("where(0, x, y)", lambda x, y, z, t: gc.where(gc.constant(np.zeros(x.type.shape, bool)), x, y)),
    ("where(0, x, y)", lambda x, y, z, t: gc.where(gc.constant(np.False_), x, gc.cast(y, "float64"))),  # y wider than x: fires
    ("where(gt(z, 0), c, y)", lambda x, y, z, t: _nan_checked_max(z)),  # ONNX's NaN check of a max, read back
    ("declines: where(1, x, y)", lambda x, y, z, t: gc.where(gc.constant(np.True_), gc.cast(x, "int32"), gc.cast(y, "float64"))),  # x narrower than the result
    ("declines: where(1, x, y)", lambda x, y, z, t: gc.where(gc.constant(np.True_), k(1, t), z)),  # x broadcast to the result's shape
    ("mul(neg(x), c)", lambda x, y, z, t: gc.neg(x) * k(-3, t)),
    ("mul(neg(x), c)", lambda x, y, z, t: gc.neg(x) * gc.constant(np.int32(-(2**31)))),
    ("mul(transpose(x, axes=a), c)",  # an elementwise user: an output's layout is the caller's
     lambda x, y, z, t: gc.exp(gc.transpose(z, tuple(reversed(range(z.type.rank)))) * k(0.1, t))),
    ("div(x, c)", lambda x, y, z, t: x / k(0.25, t)),
    ("div(x, c)", lambda x, y, z, t: x / k(-(2.0**60), t)),
    ("div(x, c)", lambda x, y, z, t: x / k(2.0**-130, t)),  # declines where 1/c is inf
    ("pow(x, 0)", lambda x, y, z, t: gc.pow(x, k(0, t))),
    ("pow(x, 1)", lambda x, y, z, t: gc.pow(x, k(1, t))),
    ("pow(x, 2)", lambda x, y, z, t: gc.pow(x, k(2, t))),
    ("pow(x, 3)", lambda x, y, z, t: gc.pow(x, k(3, t))),
    ("constant inputs -> constant", lambda x, y, z, t: x * (k(3, t) * k(5, t))),
]  # fmt: skip


def _build(build: Build, dtype: str, shape: tuple[int, ...]) -> gc.Graph | None:
    g = gc.Graph("g")
    try:
        with g:
            x = gc.placeholder("x", shape=shape, dtype=dtype)
            y = gc.placeholder("y", shape=shape, dtype=dtype)
            z = gc.placeholder("z", shape=(2, *shape), dtype=dtype)
            gc.output(build(x, y, z, dtype), name="out")
    except gc.GraphcError:  # the op refuses this dtype or shape (neg of bool, ...)
        return None
    return g


def _feeds(graph: gc.Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {p.name: rng.choice(edge_values(p.type.dtype), size=p.type.shape) for p in graph.inputs}


def _check(rule: str, build: Build) -> set[str]:
    """Bit-equality for every dtype and shape; returns the exact rules that fired."""
    fired: set[str] = set()
    built = 0
    for dtype in DTYPES:
        for shape in SHAPES:
            before = _build(build, dtype, shape)
            if before is None:
                continue
            built += 1
            log = PassLog("simplify")
            after = every_rule(before, log=log, fast_math=False)
            assert not any("[fast_math]" in what for what in log.counts), log.counts
            fired |= set(log.counts)
            with np.errstate(all="ignore"):
                for seed in range(6):
                    feeds = _feeds(before, seed)
                    (want,) = gc.run(before, feeds)
                    (got,) = gc.run(after, feeds)
                    msg = f"{rule} {dtype}{shape}\n{before}\n->\n{after}\n{feeds}"
                    assert_bits_equal(got, want, msg)
            # and compiled at each level: bit for bit on numpy; on native each inexact op
            # within its declared bound (tests/differential.py)
            check_levels(before, [_feeds(before, seed) for seed in range(2)])
    assert built, f"no dtype and shape builds the case for {rule}"
    return fired


@pytest.mark.parametrize(
    "rule, build", CASES, ids=[f"{i}:{name}" for i, (name, _) in enumerate(CASES)]
)
def test_exact_rule_is_bit_identical_on_edge_inputs(rule: str, build: Build) -> None:
    fired = _check(rule, build)
    if rule.startswith("declines: "):  # a graph the rule must leave alone
        assert rule.removeprefix("declines: ") not in fired, sorted(fired)
    else:
        assert rule in fired, f"{rule} never fired; fired: {sorted(fired)}"


def test_the_cases_cover_every_exact_rule() -> None:
    exact = {str(r) for r in REWRITES if r.exact}
    assert exact - {name for name, _ in CASES} == set()
