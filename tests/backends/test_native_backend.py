"""The native backend with the numpy backend as its oracle, and the native machinery.

Values: the op case table (tests/op_cases.py) and random hostile graphs
(tests/edge_graphs.py) on native equal numpy at the same level bit for bit in every
output with no ULP_BOUND op upstream, and every output is the same bits at O0, O1 and
O2 on native (also where a pass moves a transcendental op: folding, recognized
softmax, conv epilogues); tame random graphs (tests/strategies.py) stay normwise close
to numpy. Small exact steps are lowered too (`every_size`), else the small arrays of
the table would never reach a kernel; one test keeps the default size rule. Machinery:
the loud fallback (no compiler; a failing build), explain's notes and markers,
source()'s C, the build cache, kernels reused across batch sizes, the bounded plan
cache, threads, and an unknown backend's error (control flow: test_native_control.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends import native
from graphc.ir.graph import Graph
from graphc.runtime import backend as backends
from tests.budget import draws, sample
from tests.differential import quiet
from tests.edge_graphs import edge_graphs
from tests.edge_values import bits_differ, edge_feeds
from tests.native_checks import (
    ULP_BOUND,
    Feeds,
    bound_failures,
    check_native,
    compiler_fixture,  # noqa: F401 - the `compiler` fixture
    describe_failures,
    every_size,  # noqa: F401 - a fixture
    failing_compiler,
    folded_outputs,
    graphc_warnings,
    needs_native,
    normwise,
    threaded_mismatches,
    ulp_distance,
)
from tests.op_cases import OpCase, all_cases, build_graph, case_feeds
from tests.strategies import random_feeds, random_graphs

pytestmark = [needs_native, pytest.mark.usefixtures("every_size")]
DEFAULT_SMALL = getattr(native, "SMALL", 0)  # read before every_size sets it to 0

# -- the op case table ------------------------------------------------------------

CASES = sample(all_cases(), one_in=8)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_case_on_native_matches_numpy(case: OpCase) -> None:
    """Guards every op on the native backend: native O0 and O2 give numpy's bits on the
    case's inputs and on hostile ones of the same shapes (outputs not touched by a
    ULP_BOUND op), the case's own tolerance on its inputs otherwise, and the same bits
    at both levels."""
    g = build_graph(case)
    tame, hostile = case_feeds(case)
    rtol, atol = case.tolerance

    def close(a: np.ndarray, b: np.ndarray) -> str | None:
        if (
            a.dtype != b.dtype
            or a.shape != b.shape
            or not np.allclose(a, b, rtol, atol, equal_nan=True)
        ):
            return f"not within rtol={rtol}, atol={atol}: {a!r} vs {b!r}"
        return None

    check_native(g, [tame, hostile], (0, 2), close, close_sets=(0,))


# -- random graphs ----------------------------------------------------------------

BATCHES = st.tuples(st.sampled_from([0, 1]), st.sampled_from([2, 3, 5]))


def _feed_sets(graph: Graph, seed: int, sizes: tuple[int, int]) -> list[Feeds]:
    if any(isinstance(d, str) for p in graph.inputs for d in p.type.shape):
        return [edge_feeds(graph, seed, {"B": size}) for size in sizes]
    return [edge_feeds(graph, seed), edge_feeds(graph, seed + 1)]


@pytest.mark.slow  # every draw builds its kernels; the quick run keeps the tame graphs
@settings(max_examples=draws(150), derandomize=True)
@given(edge_graphs(), st.integers(0, 2**16), BATCHES)
def test_hostile_graphs_on_native(graph: Graph, seed: int, sizes: tuple[int, int]) -> None:
    """Guards native exactness on hostile graphs and values (every dtype, 0-d, empty,
    symbolic shapes, nan/inf/-0.0/subnormals): O0 = O1 = O2 on native, and numpy's bits
    wherever no ULP_BOUND op is upstream."""
    check_native(graph, _feed_sets(graph, seed, sizes))


@pytest.mark.slow
@pytest.mark.parametrize("small", [0, DEFAULT_SMALL])
@settings(max_examples=draws(300))
@given(edge_graphs(max_ops=12), st.integers(0, 2**16), BATCHES)
def test_hostile_graphs_on_native_slow(
    small: int, graph: Graph, seed: int, sizes: tuple[int, int]
) -> None:
    """The slow job's run: bigger graphs, all steps native (small=0) and with the default
    size rule (small exact steps on numpy: plans mixing the two backends)."""
    native.SMALL = small  # every_size's monkeypatch restores it
    check_native(graph, _feed_sets(graph, seed, sizes))


@pytest.mark.parametrize(
    ("shape", "axes"), [((), ()), ((5,), (0,)), ((1, 5), (1, 0)), ((3, 1, 4), (1, 0, 2))]
)
def test_an_order_keeping_transpose_of_an_input_runs_native_at_every_level(
    shape: tuple, axes: tuple
) -> None:
    """Guards exp of a transpose that keeps the elements in order (0-d, identity, or
    moving only dims of length 1) of a caller's input: O1 removes the identity ones, so
    O0 must not leave exp to numpy's bits as it did for any transposed view (the slow
    job's hypothesis found the 0-d case)."""
    g = gc.Graph("order_keeping")
    with g:
        x = gc.placeholder("x", shape, "float32")
        gc.output(gc.exp(gc.transpose(x, axes)), name="y")
        gc.output(gc.exp(x), name="z")
    feeds = {"x": np.linspace(-3, 3, int(np.prod(shape)), dtype=np.float32).reshape(shape)}
    check_native(g, [feeds])
    exe = gc.compile(g, opt_level=0, backend="native")
    y, z = exe(**feeds)
    assert bits_differ(y, np.transpose(z, axes)) is None  # the same kernel's bits


# a few ulps (ULP_BOUND: at most 8) per transcendental op, carried through up to 15 tame
# ops (tests/strategies.py keeps values within a few units; layer norms divide by a
# standard deviation). Measured largest normwise error over 200 float32 and 150 float64
# graphs: 2**-21.2 and 2**-51.1; the tolerances leave a factor 32 and 64 above that.
TAME_RTOL = {"float32": 2.0**-16, "float64": 2.0**-45}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.reads_budget
def test_tame_graphs_on_native_stay_close(dtype: str) -> None:
    """Guards the size of native's differences on realistic graphs: with ULP_BOUND ops
    on tame values the outputs stay normwise close to numpy's (and exact ones exact)."""

    @settings(max_examples=draws(40), derandomize=True)
    @given(random_graphs(min_ops=5, max_ops=15, dtype=dtype, symbolic=True), st.integers(0, 2**16))
    def check(graph: Graph, seed: int) -> None:
        feeds = [random_feeds(graph, seed=seed, dims=5), random_feeds(graph, seed=seed + 1, dims=1)]
        check_native(graph, feeds, (0, 2), normwise(TAME_RTOL[dtype]), close_sets=(0, 1))

    check()


def _differing(op: str) -> np.ndarray:
    """float32 inputs in [-6, 6] on which native `op` gives other bits than numpy's."""
    g = gc.Graph(op)
    with g:
        gc.output(getattr(gc, op)(gc.placeholder("x", shape=("B",), dtype="float32")), name="y")
    xs = np.linspace(-6, 6, 4099, dtype=np.float32)
    with quiet():
        got = gc.compile(g, backend="native")(xs)
        want = gc.compile(g, backend="numpy")(xs)
    return xs[got != want][:64]


def test_one_element_plans_run_on_numpy_scalars_only_where_native_keeps_numpys_bits() -> None:
    """The native backend's scalar plans are numpy's, for graphs of ops whose native
    bits are numpy's; a graph with an op whose native bits differ (exp) runs its native
    kernel at one element too, so a value never depends on the batch size."""
    c = _differing("exp")
    assert c.size
    for op, scalar in (("exp", False), ("negative", True)):
        g = gc.Graph(f"one_{op}")
        with g:
            x = gc.placeholder("x", shape=("B",), dtype="float32")
            gc.output(getattr(gc, op)(x) * 2.0 + 1.0, name="y")
        exe = gc.compile(g, backend="native")
        batch = exe(c)
        for k in range(min(4, c.size)):
            assert bits_differ(exe(c[k : k + 1]), batch[k : k + 1]) is None, f"{op} at {c[k]}"
            assert (exe.tier == "numpy (scalar)") == scalar, (op, exe.tier)


def _softmax_spelled(x: gc.Symbol) -> gc.Symbol:
    e = gc.exp(x - gc.max(x, axis=-1, keepdims=True))
    return e / gc.sum(e, axis=-1, keepdims=True)


def _conv(x: gc.Symbol, fill: float) -> gc.Symbol:
    kernel = gc.constant(np.full((2, 1, 3, 3), fill, np.float32))
    return gc.conv2d(gc.reshape(x, (1, 1, 8, 8)), kernel)


# patterns a pass moves between a native kernel (O0) and a numpy kernel (O1/O2); x is
# f32[64]
MOVED: dict[str, Callable[[gc.Symbol], gc.Symbol]] = {
    "spelled_softmax": lambda x: _softmax_spelled(gc.reshape(x, (8, 8)) * 4.0),
    "conv_tanh": lambda x: gc.tanh(_conv(x, 1.0)),
    "conv_sigmoid": lambda x: gc.sigmoid(_conv(x, -0.7)),
    "conv_gelu": lambda x: gc.gelu(_conv(x, 0.3)),
}


@pytest.mark.parametrize("pattern", sorted(MOVED))
def test_passes_keep_native_bits_across_levels(pattern: str) -> None:
    """Guards "every level gives the same bits on native" where a pass could move a
    ULP_BOUND op out of a native kernel: softmax recognition, conv epilogues (native's
    fusion step keeps its inexact ops out of numpy's fused kernels)."""
    g = gc.Graph(pattern)
    with g:
        x = gc.placeholder("x", shape=(64,), dtype="float32")
        gc.output(MOVED[pattern](x) * 1.0 + gc.sum(x * 0.0), name="y")
    check_native(g, [{"x": np.linspace(-3, 3, 64, dtype=np.float32)}])


@pytest.mark.parametrize("op", ["exp", "tanh"])
def test_a_folded_constant_has_numpys_bits_at_every_backend(op: str) -> None:
    """Guards what the backend-free passes promise: constant folding computes exp(c)
    with the op's own (numpy) kernel, so at O1 and O2 native gives numpy's bits for it,
    and at O0, where native's kernel runs, values within the op's bound of them."""
    c = _differing(op)
    assert c.size, f"no float32 input in [-6, 6] where native {op} differs from numpy's"
    g = gc.Graph(f"folded_{op}")
    with g:
        x = gc.placeholder("x", shape=(c.size,), dtype="float32")
        gc.output(getattr(gc, op)(gc.constant(c)) + x, name="y")
    zeros = np.zeros(c.size, np.float32)
    with quiet():
        want = gc.compile(g, opt_level=0, backend="numpy")(zeros)
        raw = gc.compile(g, opt_level=0, backend="native")(zeros)
        levels = [gc.compile(g, opt_level=k, backend="native")(zeros) for k in (1, 2)]
    for got in levels:
        assert bits_differ(got, want) is None
    assert bits_differ(raw, want) is not None  # O0 runs native's kernel
    assert not bound_failures(op, c, raw, want).any()


@needs_native
@pytest.mark.parametrize("axis", [0, -1])
def test_a_recognized_softmax_is_within_softmaxs_bound_at_every_level(axis: int) -> None:
    """The second thing the backend-free passes do (docs/trust.md): a softmax spelled out
    in ops, which O2 recognizes as one softmax op, runs the kernel the backend lowers
    softmax to, where O0 runs native's exp step by step; both stay within softmax's
    12-ulp bound of numpy's, though not the same bits (found by the IR helper's hunt:
    3 ulp apart over axis 0)."""
    g = gc.Graph("spelled_softmax")
    with g:
        x = gc.placeholder("x", shape=(4, 37))
        e = gc.exp(x - gc.max(x, axis=axis, keepdims=True))
        gc.output(e / gc.sum(e, axis=axis, keepdims=True), name="y")
    assert [n.op for n in gc.optimize(g, level=2).op_nodes] == ["softmax"]
    xs = (np.random.default_rng(0).standard_normal((4, 37)) * 30).astype(np.float32)
    want = gc.compile(g, opt_level=0, backend="numpy")(xs)
    for level in (0, 1, 2):
        got = gc.compile(g, opt_level=level, backend="native", wait=True)(xs)
        assert ulp_distance(got, want).max() <= 12, level


def test_an_op_made_known_by_the_simplifier_folds_like_a_constant() -> None:
    """Found by the hostile-graph test in CI: exp(x ** 0) is exp(full_like(x, 1)) once
    the simplifier has run, which folding computes with numpy's exp at O1 and O2, where
    native's exp runs at O0 (e, one ulp apart in float64); `folded_outputs` must say so,
    and `check_native` then holds."""
    g = gc.Graph("pow_zero_exp")
    with g:
        x = gc.placeholder("x", shape=(), dtype="int8")
        m = gc.mean(x)
        gc.output(gc.exp(gc.pow(gc.pow(m, -2.0), 0.0)), name="e")
        gc.output(gc.exp(m), name="f")
    assert folded_outputs(g) == [True, False]
    check_native(g, [{"x": np.array(-128, np.int8)}])


def test_an_op_with_no_inputs_folds_like_a_constant() -> None:
    """Found by the hostile-graph test: softmax(arange(6)) reads no placeholder, so
    folding computes it with numpy's kernel at O1 and O2 and native's levels differ
    within its bound there; `folded_outputs` must say so (a zero-input op is known
    before the graph runs), and `check_native` then holds."""
    g = gc.Graph("arange_softmax")
    with g:
        x = gc.placeholder("x", shape=(), dtype="float32")
        gc.output(gc.softmax(gc.arange(0.0, 3.0, 0.5, dtype="float32"), axis=0), name="s")
        gc.output(gc.full_like(x, 0.0), name="z")
        gc.output(gc.exp(x), name="e")
    assert folded_outputs(g) == [True, False, False]
    check_native(g, [{"x": np.array(0.5, np.float32)}])


ACTIVATIONS = {"none": lambda v: v, "relu": gc.relu, "tanh": gc.tanh, "sigmoid": gc.sigmoid}
ACTIVATIONS |= {"gelu": gc.gelu}


def _affine(activation: str) -> Graph:
    g = gc.Graph(f"affine_{activation}")
    with g:
        x = gc.placeholder("x", shape=("B", 19), dtype="float32")
        w = gc.placeholder("w", shape=(19, 11), dtype="float32")
        b = gc.constant(np.linspace(-1, 1, 11, dtype=np.float32))
        gc.output(ACTIVATIONS[activation](x @ w + b), name="y")
    return g


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_matmul_epilogue_on_native(activation: str) -> None:
    """Guards x @ w + b -> activation, an epilogue at O2: numpy's bits without a
    ULP_BOUND activation, within the activation's bound of numpy's with one. The
    product runs on native's own kernel (another summation order than numpy's BLAS), so
    the operands are quarters of small integers: every product and partial sum is exact
    in float32, the same in any order, and what differs is the epilogue's alone."""
    rng = np.random.default_rng(8)
    feeds = {"x": rng.integers(-12, 13, (37, 19)), "w": rng.integers(-12, 13, (19, 11))}
    feeds = {k: (v / 4).astype(np.float32) for k, v in feeds.items()}
    with quiet():
        before = gc.compile(_affine("none"), backend="numpy")(**feeds)  # the activation's x

    def close(a: np.ndarray, want: np.ndarray) -> str | None:
        if activation not in ULP_BOUND:  # an exact epilogue: numpy's bits
            return None if a.tobytes() == want.tobytes() else f"{a} is not {want}"
        bad = bound_failures(activation, before, a, want)
        return describe_failures(activation, before, a, want, bad) if bad.any() else None

    check_native(_affine(activation), [feeds], close=close, close_sets=(0,))


# -- fallback, explain, caches, threads, control flow ------------------------------


def _graph(batch: int | str = "B") -> Graph:
    """Exact elementwise work on f32[B, 4] and a max over rows (which stays on numpy)."""
    g = gc.Graph("work")
    with g:
        x = gc.placeholder("x", shape=(batch, 4), dtype="float32")
        y = gc.maximum(x * x - 1.0, x) / (gc.abs(x) + 1.0)
        gc.output(y, name="y")
        gc.output(gc.max(y, axis=1), name="s")
    return g


def _numpy_results(g: Graph, x: np.ndarray) -> tuple[np.ndarray, ...]:
    return gc.compile(g, backend="numpy")(x)


def _assert_numpy_bits(got: tuple, want: tuple) -> None:
    for a, b in zip(got, want):
        assert bits_differ(a, b) is None, bits_differ(a, b)


def test_no_compiler_falls_back_to_numpy_with_one_warning(compiler: Callable[[str], None]) -> None:
    """Guards the loud fallback: without a compiler, backend="native" warns once, naming
    the reason, and runs on numpy with numpy's results."""
    compiler("/nonexistent/graphc-test-cc")
    g, x = _graph(), np.linspace(-3, 3, 20, dtype=np.float32).reshape(5, 4)
    pattern = r"backend 'native' is not available \(no C compiler found \(.*graphc-test-cc.*\); using 'numpy'"
    with pytest.warns(RuntimeWarning, match=pattern):
        exe = gc.compile(g, backend="native")
    assert exe.backend.name == "numpy"
    assert "native" not in backends.available_backends()
    _assert_numpy_bits(exe(x), _numpy_results(g, x))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.compile(g, backend="native")(x)
    assert graphc_warnings(caught) == []


def test_failing_build_falls_back_to_numpy_with_a_warning(
    compiler: Callable[[str], None], tmp_path: Path
) -> None:
    """Guards a failed kernel build: the plan is generated on numpy, one warning quotes
    the compiler, results are numpy's."""
    compiler(failing_compiler(tmp_path, "graphc test: refusing to build kernels"))
    g, x = _graph(), np.linspace(-3, 3, 20, dtype=np.float32).reshape(5, 4)
    with pytest.warns(RuntimeWarning, match="fell back to 'numpy': .*refusing to build kernels"):
        exe = gc.compile(g, backend="native")
        got = exe(x)
    _assert_numpy_bits(got, _numpy_results(g, x))
    assert "backend: numpy" in exe.explain(x)


def test_failing_build_warns_once_when_the_compiler_names_its_file(
    compiler: Callable[[str], None], tmp_path: Path
) -> None:
    """Guards "one warning per reason" with a real compiler's message, which names the
    C file: the file lives in a fresh temporary directory per build, and each new plan
    must not warn (and try the compiler) again."""
    compiler(failing_compiler(tmp_path, "$a:1:1: error: graphc test refuses kernels"))
    g = _graph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = gc.compile(g, backend="native")
        for batch in (2, 3, 5):
            exe(np.ones((batch, 4), np.float32))
    assert len(graphc_warnings(caught)) == 1, "\n".join(graphc_warnings(caught))


NOTE = re.compile(
    r"native: \d+ C kernel\(s\) for \d+ step\(s\), \d+ librar(y|ies): "
    r"((, )?\d+ (compiled in [\d.]+ s|loaded from the disk cache in [\d.]+ ms|already loaded "
    r"in this process))+ \(called through (cffi|ctypes)\)"
)


def test_explain_and_source_show_the_native_work() -> None:
    """Guards explain's backend line, per-step markers ([native] for elementwise steps,
    [numpy] for a max, which has no kernel), the build note, a declined step's reason, and source()'s C."""
    g = _graph()
    with g:
        k = gc.placeholder("k", shape=("B", 4), dtype="int32")
        gc.output(k + 1, name="k1")
    feeds = {"x": np.ones((3, 4), np.float32), "k": np.ones((3, 4), np.int32)}
    exe = gc.compile(g, backend="native", opt_level=0)
    text = exe.explain(**feeds)
    steps = {line.split("=")[0].split()[-1]: line for line in text.splitlines() if " = " in line}
    assert "backend: native" in text
    assert steps["mul"].endswith("[native]") and steps["max"].endswith("[numpy]"), text
    assert NOTE.search(text), text
    assert re.search(r"step \d+ stays on numpy: .*int32", text), text
    source = exe.source("c", **feeds)
    assert "GC_EXPORT void gk_" in source and source.startswith("/* native kernels, compiled with")
    assert "GC_EXPORT" not in exe.source(**feeds)  # the Python alone


def test_kernels_compiled_then_reused_from_memory_and_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Guards the build cache: a new kernel is compiled, a second executable finds it
    loaded in this process, another process loads it from GRAPHC_CACHE_DIR."""
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(tmp_path))
    value = 1.0 + (uuid.uuid4().int % 2**20) / 2**21  # a C literal no build has seen
    g = gc.Graph("fresh")
    with g:
        x = gc.placeholder("x", shape=("B",), dtype="float32")
        gc.output(gc.full_like(x, value) * x, name="y")
    x = np.arange(8192, dtype=np.float32)
    assert "compiled in" in gc.compile(g, backend="native", opt_level=0).explain(x)
    assert "already loaded in this process" in gc.compile(g, backend="native", opt_level=0).explain(
        x
    )
    gc.save(g, tmp_path / "g.json")
    code = (
        "import numpy as np, graphc as gc; g = gc.load(__import__('sys').argv[1]); "
        "print(gc.compile(g, backend='native', opt_level=0).explain(np.arange(8192, dtype=np.float32)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "g.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "loaded from the disk cache" in done.stdout, done.stdout + done.stderr


def test_a_new_batch_size_reuses_the_loaded_kernels() -> None:
    """Guards sizes as arguments: a second signature builds a plan but no new C."""
    g = _graph()
    exe = gc.compile(g, backend="native")
    for batch in (4, 9):
        x = np.linspace(-2, 2, 4 * batch, dtype=np.float32).reshape(batch, 4)
        _assert_numpy_bits(exe(x), _numpy_results(g, x))
    assert "already loaded in this process" in exe.explain(x)
    assert exe.plans_built == 2


def test_bounded_plan_cache_on_native() -> None:
    """Guards plan_cache_size on native: at most 2 plans kept, an evicted signature is
    planned again, and results stay right throughout."""
    g = _graph()
    exe = gc.compile(g, backend="native", plan_cache_size=2)
    xs = {b: np.linspace(-2, 2, 4 * b, dtype=np.float32).reshape(b, 4) for b in (2, 3, 4)}
    for b in (2, 3, 4, 2):
        _assert_numpy_bits(exe(xs[b]), _numpy_results(g, xs[b]))
        assert len(exe._compiled) <= 2
    assert exe.plans_built == 4


def test_threads_share_one_native_executable() -> None:
    """Guards per-thread plan state: 4 threads x 50 calls (one batch large enough for
    OpenMP inside) give numpy's bits and never write the caller's arrays."""
    g = _graph()
    exe = gc.compile(g, backend="native")
    rng = np.random.default_rng(9)
    inputs = [rng.standard_normal((b, 4)).astype(np.float32) for b in (1, 7, 40_000, 300)]
    wants = [_numpy_results(g, x) for x in inputs]
    copies = [x.copy() for x in inputs]
    feed_sets = [(x,) for x in inputs]
    assert threaded_mismatches(exe, feed_sets, wants, threads=4, calls=50) == []
    assert all(bits_differ(x, c) is None for x, c in zip(inputs, copies))


def test_values_never_depend_on_the_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the default size rule (small exact steps on numpy, steps with a ULP_BOUND op
    always native) and the zero-padded tail: each row's bits are the same whatever the
    batch, from 1 row to past OpenMP's threshold, and exact outputs are numpy's."""
    monkeypatch.setattr(native, "SMALL", DEFAULT_SMALL)  # undo every_size
    g = gc.Graph("rows")
    with g:
        x = gc.placeholder("x", shape=("B", 4), dtype="float32")
        gc.output(gc.tanh(x) * 2.0 + x, name="inexact")
        gc.output(x * 3.0 - 1.0, name="exact")
    big = np.random.default_rng(11).standard_normal((40_000, 4)).astype(np.float32) * 4
    exe = gc.compile(g, backend="native")
    whole = exe(big)
    for batch in (1, 3, 1023, 1024, 1025, 40_000):
        rows = exe(big[:batch])
        for a, b in zip(rows, whole):
            assert bits_differ(a, b[:batch]) is None, f"batch {batch}: {bits_differ(a, b[:batch])}"
        _assert_numpy_bits(rows[1:], _numpy_results(g, big[:batch])[1:])


def test_unknown_backend_is_an_error_naming_the_backends() -> None:
    """Guards the seam's error: a misspelled backend names the registered ones."""
    with pytest.raises(gc.GraphcError, match=r"unknown backend 'nope'.*'native'.*'numpy'"):
        gc.compile(_graph(), backend="nope")


@pytest.mark.parametrize(
    ("x_shape", "b_shape"),
    [
        ((37, 19), (37, 1)),  # a (B, 1) operand: its run index never wraps
        ((3, 5, 4, 7), (5, 1, 1)),  # per channel over a batch: the run index wraps
        ((6, 13), (13,)),  # a bias: runs of one element, wrapping every row
        ((2, 9, 16), (9, 1)),  # runs of 16 that wrap after 9
    ],
)
def test_block_operands_give_numpys_bits(x_shape: tuple, b_shape: tuple) -> None:
    """A broadcast operand read as BLOCK (kernels.py; prelude's bk_at finds a block's
    place in the runs, with a second division only where the runs wrap): the kernel's
    add and multiply against numpy's, bit for bit, edge values included."""
    g = gc.Graph("block")
    with g:
        x = gc.placeholder("x", shape=x_shape, dtype="float32")
        b = gc.placeholder("b", shape=b_shape, dtype="float32")
        gc.output(x * b + b, name="out")
    exe = gc.compile(g, backend="native")
    assert "gk_" in exe.source(), exe.source()
    for seed in range(3):
        feeds = edge_feeds(g, seed)
        got, want = exe(**feeds), gc.compile(g, backend="numpy")(**feeds)
        assert bits_differ(got, want) is None, bits_differ(got, want)


@pytest.mark.parametrize(
    "x_shape,b_shape,dtype",
    [
        ((2, 3, 64, 64), (2, 1, 64, 64), "float32"),  # an attention mask over the heads
        ((5, 7, 40), (5, 1, 40), "float32"),  # an outer product's (N, 1, K): rows of 40
        ((4, 6, 13), (4, 1, 13), "float64"),  # rows shorter than a block: lane by lane
        ((3, 4, 5, 17), (3, 1, 5, 1), "float32"),  # constant along the rows: a splat a block
        ((2, 3, 4, 5, 6), (2, 1, 4, 1, 6), "float64"),  # five dims, two broadcast
        ((9, 1, 33), (1, 7, 1), "float32"),  # both broadcast: the output is wider than each
    ],
)
def test_strided_operands_give_numpys_bits(x_shape: tuple, b_shape: tuple, dtype: str) -> None:
    """A broadcast operand read as STRIDED (neither full, nor a run of the output's dims):
    a block of lanes in one output row is one load or one splat, others step through the
    index lane by lane (prelude's gd_). Against numpy, bit for bit, edge values included,
    at sizes whose rows end inside a block of lanes."""
    g = gc.Graph("strided")
    with g:
        x = gc.placeholder("x", shape=x_shape, dtype=dtype)
        b = gc.placeholder("b", shape=b_shape, dtype=dtype)
        gc.output(x * b - b, name="out")
        gc.output(gc.where(b > x, b, x), name="pick")
    exe = gc.compile(g, backend="native")
    assert re.search(r"gd_f(32|64)\(a\d", exe.source("c")), "no STRIDED operand: a void case"
    for seed in range(3):
        feeds = edge_feeds(g, seed)
        got, want = exe(**feeds), gc.compile(g, backend="numpy")(**feeds)
        for a, b in zip(got, want, strict=True):
            assert bits_differ(a, b) is None, bits_differ(a, b)
