"""Shared checks for the native backend's tests (tests/backends/test_native_*.py).

`needs_native` skips a test, naming the reason, where the native backend cannot run;
the `every_size` fixture lowers small exact steps to C too (not only numpy's).
`ulp_distance` counts ulps between two float arrays by the ordered-integer mapping
(+0.0 and -0.0 are one ulp apart; the largest finite and inf are one apart too, so
infinities are held to equality separately). `bound_failures` says where a native
result of an op in `ULP_BOUND` is further from numpy's than the bound allows: nan
where numpy has nan, inf where numpy has inf, else within ULP_BOUND[op] ulp, or for
gelu within the absolute bound `gelu_allowance` (its 1 + tanh(...) cancels below
x = -4, so one ulp of tanh is a large relative error of gelu there).
`runs_native` counts the steps explain() reports as lowered to C; `random_bits`,
`sweep` and `neighbours` make inputs over the whole float range. `check_native` runs
a graph on native and numpy at each level: feeds never written, errors alike, outputs with no ULP_BOUND op
upstream (`exact_outputs`) bit for bit, the others bit for bit across native's levels
(but where constant folding computes one of their inexact ops) and `close` to numpy (say `normwise`) where asked. The `compiler` fixture swaps the C
compiler for one test (`failing_compiler` makes one that cannot build kernels).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import toolchain
from graphc.backends.native.cexpr import ulp_bounds
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.passes.simplify import simplify
from graphc.runtime import backend as backends
from graphc.runtime.backend import available_backends, get_backend
from tests.differential import describe_feeds, quiet
from tests.edge_values import bits_differ, sprinkled_feeds

HAVE_NATIVE = "native" in available_backends()

# op -> by how many ulp its native values may differ from numpy's (its native rule's bound)
ULP_BOUND = ulp_bounds()


def _why_not_native() -> str:
    from graphc.backends.native import BACKEND

    return f"the native backend cannot run here: {BACKEND.unavailable()}"


needs_native = pytest.mark.skipif(
    not HAVE_NATIVE, reason=_why_not_native() if not HAVE_NATIVE else ""
)

# gelu = (x/2) (1 + tanh(u)); where 1 + tanh(u) cancels (x below about -4) it is exact,
# so tanh's error, at most ULP_BOUND["tanh"] ulp of a value in [0.5, 1) (eps/2 each),
# reaches gelu as |x|/2 * ULP_BOUND["tanh"] * eps/2; the other roundings are a few ulp of
# the result. Measured (|native - numpy| - 4 ulp) / |x|: 1.5 eps in float32 (graphc's tanh,
# bound 8: allowance 2 eps), 0.45 eps in float64 (libmvec's, bound 4: allowance 1 eps)
GELU_ULPS = 4


def gelu_slope(dtype: np.dtype) -> float:
    """The allowance per unit of |x| for native gelu: tanh's bound carried through x/2."""
    return 0.5 * ULP_BOUND["tanh"] * float(np.finfo(dtype).eps) / 2


def random_bits(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` floats from uniform bit patterns: every exponent (and nan, inf) equally often."""
    if dtype == "float32":
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True).view(np.float64)


def neighbours(values: list[float], dtype: str, k: int = 3) -> np.ndarray:
    """Each value in `dtype` and its k nearest floats on either side."""
    out = []
    for v in np.array(values, dtype=np.float64).astype(dtype):
        up = down = v
        out.append(v)
        for _ in range(k):
            up, down = np.nextafter(up, up.dtype.type(np.inf)), np.nextafter(down, -np.inf)
            out += [up, down]
    return np.array(out, dtype=dtype)


def sweep(dtype: str, rng: np.random.Generator, low: int = -12, high: int = 10) -> np.ndarray:
    """About 2**21 floats of both signs with magnitudes in [2**low, 2**high): for float32
    every 97th one (so a narrow bad region, say tanh above 1 on [8.04, 8.70], is hit),
    for float64 log-uniform ones."""
    if dtype == "float32":
        start, stop = (np.float32(2.0**e).view(np.uint32) for e in (low, high))
        bits = np.arange(start + rng.integers(97), stop, 97, dtype=np.uint32)
        return np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    n = 2**21
    return rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(low, high, n)


@pytest.fixture
def direct_kernel_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct convolution wherever it applies, whatever this processor's vectors
    (conv.py runs Winograd's F(2x2, 3x3) first for the 3x3 layers that
    `winograd.preferred` gives it): the tests of the kernel itself run it on every
    machine and geometry."""
    from graphc.backends.native import winograd

    monkeypatch.setattr(winograd, "preferred", lambda w, out: False)


@pytest.fixture
def every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lower steps of every size to C: by default a step of exact ops smaller than
    `graphc.backends.native.SMALL` elements stays on numpy (cheaper there), which would
    leave the kernels untested on the small arrays of the op table and random graphs."""
    import graphc.backends.native as native

    monkeypatch.setattr(native, "SMALL", 0)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|ordered(a) - ordered(b)| per element, as float64 (exact below 2**53)."""
    int_type = np.int32 if a.dtype == np.float32 else np.int64
    ia = a.view(int_type).astype(np.int64)
    ib = b.view(int_type).astype(np.int64)
    sign = np.int64(np.iinfo(int_type).min)  # the sign bit, as a negative number
    mag_a, mag_b = ia & ~sign, ib & ~sign
    same_sign = (ia < 0) == (ib < 0)
    apart = mag_a.astype(np.float64) + mag_b.astype(np.float64) + 1.0  # via the zeros
    return np.where(same_sign, np.abs(mag_a - mag_b).astype(np.float64), apart)


def gelu_allowance(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How far native gelu may be from numpy's, absolutely, per element."""
    dtype = want.dtype
    with np.errstate(all="ignore"):
        ulp = np.spacing(np.abs(want)).astype(np.float64)
        return gelu_slope(dtype) * np.abs(x.astype(np.float64)) + GELU_ULPS * ulp


def bound_failures(op: str, x: np.ndarray, got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """A mask of the elements where `got` (native) is not within the bound of `want`."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    got_nan, want_nan = np.isnan(got), np.isnan(want)
    bad = got_nan != want_nan
    infinite = ~want_nan & ~got_nan & (np.isinf(got) | np.isinf(want))
    bad |= infinite & (got != want)
    finite = ~want_nan & ~got_nan & ~infinite
    if op == "gelu":
        with np.errstate(all="ignore"):
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        far = diff > gelu_allowance(np.broadcast_to(x, want.shape), want)
    else:
        far = ulp_distance(got, want) > ULP_BOUND[op]
    return bad | (finite & far)


def describe_failures(
    op: str, x: np.ndarray, got: np.ndarray, want: np.ndarray, bad: np.ndarray, limit: int = 8
) -> str:
    """The worst failing elements: input, native, numpy and their ulp distance; for float32
    also the float64 result of the same numpy kernel, to show which side is off."""
    where = np.flatnonzero(bad.ravel())
    xs, gs, ws = (np.broadcast_to(a, want.shape).ravel() for a in (x, got, want))
    dist = ulp_distance(gs[where], ws[where])
    order = where[np.argsort(-dist, kind="stable")][:limit]
    lines = [f"{op} {want.dtype}: {where.size} of {want.size} elements beyond the bound"]
    finer = None
    if want.dtype == np.float32 and op in ULP_BOUND:
        with np.errstate(all="ignore"):
            finer = np.asarray(getattr(gc, op)(xs[order].astype(np.float64)))
    for j, k in enumerate(order):
        line = f"  x={xs[k]!r}: native {gs[k]!r}, numpy {ws[k]!r}, {ulp_distance(gs[k : k + 1], ws[k : k + 1])[0]:.0f} ulp"
        if finer is not None:
            ulp = float(np.spacing(np.abs(np.float32(finer[j]))))
            line += (
                f" (float64 {finer[j]!r}: native off by {abs(float(gs[k]) - finer[j]) / ulp:.2f} "
                f"ulp, numpy by {abs(float(ws[k]) - finer[j]) / ulp:.2f})"
            )
        lines.append(line)
    return "\n".join(lines)


def threaded_mismatches(
    exe: gc.Executable, feed_sets: Sequence[tuple], wants: Sequence[Any], threads: int, calls: int
) -> list[str]:
    """`threads` threads each call `exe` `calls` times, going round `feed_sets` (thread t
    starts at set t); what differs from `wants` (per set, its results), said per call."""
    errors: list[str] = []

    def work(t: int) -> None:
        for call in range(calls):
            k = (t + call) % len(feed_sets)
            for a, b in zip(exe(*feed_sets[k]), wants[k]):
                if (why := bits_differ(a, b)) is not None:
                    errors.append(f"thread {t}, call {call}: {why}")

    started = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return errors


def runs_native(exe: gc.Executable, *feeds: np.ndarray, **named: np.ndarray) -> int:
    """How many of the plan's steps are lowered to native kernels (from explain)."""
    return exe.explain(*feeds, **named).count("[native]")


# -- native against numpy on whole graphs ----------------------------------------

Feeds = dict[str, np.ndarray]
Outcome = list[np.ndarray] | gc.GraphcError
Close = Callable[[np.ndarray, np.ndarray], str | None]


def _inexact(node: Node) -> bool:
    """Whether native may compute `node` with other bits than numpy: a node its lowering
    declares inexact (`register_lowering(..., inexact=...)`: libmvec's functions, the row
    kernels' softmax and log_softmax, gemm's BLAS call, the products matmul.py computes,
    ...), an epilogue activation of one, or a body holding one."""
    if node.kind != OP:
        return False
    declared = get_backend("native").inexact_lowerings.get(node.op)
    if (declared is not None and declared.covers(node)) or node.attrs.get(
        "activation"
    ) in ULP_BOUND:
        return True
    bodies = (v for v in node.attrs.values() if isinstance(v, Graph))
    return any(_inexact(n) for body in bodies for n in body.nodes)


def exact_outputs(graph: Graph) -> list[bool]:
    """Per output: True when no inexact node (`_inexact`) is among its ancestors."""
    memo: dict[Node, bool] = {}
    for node in graph.nodes:  # topological order
        memo[node] = _inexact(node) or any(memo.get(x, False) for x in node.inputs)
    return [not memo[o.inputs[0]] for o in graph.outputs]


def folded_outputs(graph: Graph) -> list[bool]:
    """Per output: True when an inexact node among its ancestors is known before the
    graph runs (it reads constants only, or nothing: `arange`; or only its inputs' types:
    `full_like`, whatever its shape), in the graph or once the simplifier's exact rules
    have run (x**0 -> full_like(x, 1) makes exp(x**0) known, and the simplifier folds
    it: fewer inexact ancestors are left). Constant folding (a
    backend-free pass) computes that node with numpy's kernel at O1 and O2, and so does
    a fused kernel's build when the node is in its body and reads a fill
    (`exp(full_like(x, -1.0))` with x of a symbolic shape: numpy's exp of -1.0 in every
    lane), where native's runs it at O0: there native's levels differ within the op's
    bound, not bit for bit."""
    before, after = _inexact_ancestors(graph), _inexact_ancestors(simplify(graph))
    fewer = [b < a for a, b in zip(before, after, strict=True)]  # outputs in one order
    return [a or b for a, b in zip(_known_inexact(graph), fewer, strict=True)]


def _inexact_ancestors(graph: Graph) -> list[int]:
    """Per output: how many inexact nodes (`_inexact`) it depends on."""
    below: dict[Node, set[Node]] = {}
    for node in graph.nodes:  # topological order
        below[node] = set().union(*(below[x] for x in node.inputs))
        if _inexact(node):
            below[node].add(node)
    return [len(below[o.inputs[0]]) for o in graph.outputs]


def _known_inexact(graph: Graph) -> list[bool]:
    """Per output: whether an inexact ancestor of it is known before the graph runs."""
    memo: dict[Node, tuple[bool, bool]] = {}  # node -> (known before running, folded below)
    for node in graph.nodes:
        constant = node.is_constant
        if node.kind == OP and not constant:
            opdef = get_op(node.op)
            constant = opdef.pure and (
                all(memo[x][0] for x in node.inputs) or opdef.has("reads_only_type")
            )
        folded = (constant and _inexact(node)) or any(memo[x][1] for x in node.inputs)
        memo[node] = (constant, folded)
    return [memo[o.inputs[0]][1] for o in graph.outputs]


def _outcomes(graph: Graph, backend: str, level: int, feed_sets: Sequence[Feeds]) -> list[Outcome]:
    try:
        exe = gc.compile(graph, opt_level=level, backend=backend)
    except gc.GraphcError as exc:
        return [exc] * len(feed_sets)
    outcomes: list[Outcome] = []
    for feeds in feed_sets:
        before = {name: np.array(a, copy=True) for name, a in feeds.items()}
        try:
            result = exe(**feeds)
        except gc.GraphcError as exc:
            result = exc
        for name, a in feeds.items():  # in-place plans never write a caller's array
            assert bits_differ(a, before[name]) is None, f"{backend} O{level} wrote {name!r}"
        if isinstance(result, gc.GraphcError):
            outcomes.append(result)
            continue
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        outcomes.append([np.array(r, copy=True) for r in result])
    return outcomes


def check_native(
    graph: Graph,
    feed_sets: Sequence[Feeds],
    levels: Sequence[int] = (0, 1, 2),
    close: Close | None = None,
    close_sets: Sequence[int] = (),
) -> None:
    """Native at each level vs numpy at that level: the same errors; exact outputs the
    same bits; others the same bits as native at the first level (unless folding computes
    an inexact op of theirs: `folded_outputs`), and `close` to numpy on the feed sets
    numbered in `close_sets`."""
    exact, folded = exact_outputs(graph), folded_outputs(graph)
    first: list[Outcome] | None = None
    with quiet():
        for level in levels:
            wants = _outcomes(graph, "numpy", level, feed_sets)
            gots = _outcomes(graph, "native", level, feed_sets)
            first = first or gots
            for k, (got, want, base) in enumerate(zip(gots, wants, first)):
                where = f"native O{level}, feed set {k}\n{graph}\nfeeds = {describe_feeds(feed_sets[k])}"
                if isinstance(want, gc.GraphcError) or isinstance(got, gc.GraphcError):
                    assert type(got) is type(want), f"{got!r} vs numpy's {want!r}\n{where}"
                    continue
                for j, (a, b) in enumerate(zip(got, want)):
                    name = graph.outputs[j].name
                    why = bits_differ(a, b) if exact[j] else None
                    if why is None and not exact[j] and k in close_sets and close is not None:
                        why = close(a, b)
                    assert why is None, f"output {name!r} vs numpy: {why}\n{where}"
                    if not isinstance(base, gc.GraphcError) and not folded[j]:
                        why = bits_differ(a, base[j])
                        assert why is None, (
                            f"output {name!r} vs native O{levels[0]}: {why}\n{where}"
                        )


def normwise(rtol: float) -> Close:
    """Same dtype, shape and nan/inf pattern, and max |a - b| <= rtol * max(|b|, 1) over
    the finite elements: a few ulps of error, carried by tame ops, measured against the
    output's scale (elementwise relative error is meaningless after a cancellation)."""

    def close(a: np.ndarray, b: np.ndarray) -> str | None:
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"type {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
        if a.dtype.kind != "f":
            return None if np.array_equal(a, b) else f"{int(np.sum(a != b))} elements differ"
        finite = np.isfinite(b)
        if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(
            a[~finite], b[~finite], equal_nan=True
        ):
            return "nan or inf in other places"
        if not finite.any():
            return None
        err = float(np.max(np.abs(a[finite].astype(np.float64) - b[finite])))
        scale = max(float(np.max(np.abs(b[finite]))), 1.0)
        return None if err <= rtol * scale else f"normwise error {err / scale:.3g} > {rtol:.3g}"

    return close


# -- another C compiler for a test ------------------------------------------------


@pytest.fixture(name="compiler")
def compiler_fixture(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Callable[[str], None]]:
    """Use another C compiler in one test: the probe is forgotten before and after, the
    warnings given so far are forgotten (and restored after), libraries go to tmp_path."""
    saved = set(backends._WARNED)
    backends._WARNED.clear()
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(tmp_path / "cache"))

    def use(cc: str) -> None:
        monkeypatch.setenv("GRAPHC_CC", cc)
        toolchain.reset()

    yield use
    monkeypatch.undo()
    toolchain.reset()
    backends._WARNED.clear()
    backends._WARNED.update(saved)


def graphc_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("graphc:")]


def failing_compiler(tmp_path: Path, message: str) -> str:
    """A compiler that builds the probe but fails on graphc's kernels (sources with gk_)."""
    real = toolchain.toolchain()
    assert not isinstance(real, str)
    script = tmp_path / "failing-cc"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in *.c) if grep -q gk_ "$a"; then\n'
        f'  echo "{message}" >&2; exit 1; fi;; esac; done\n'
        f'exec "{real.compiler}" "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def assert_within_sum_bound(
    got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, terms: int
) -> None:
    """`got` within the componentwise bound of a sum of `terms` float32 products of
    `want` (numpy's): 2 (terms + 2) eps `magnitude` (the sums of |products|, float64)
    plus the underflow of the products; nan and inf where numpy has them."""
    eps, tiny = float(np.finfo(np.float32).eps), float(np.finfo(np.float32).smallest_subnormal)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), "nan in other places"
    assert np.array_equal(np.isinf(got), np.isinf(want)), "inf in other places"
    assert np.array_equal(got[np.isinf(got)], want[np.isinf(want)])
    bound = 2 * (terms + 2) * eps * magnitude + 2 * terms * tiny
    err = np.abs(got.astype(np.float64) - want)
    bad = np.isfinite(want) & (err > bound)
    assert not bad.any(), f"{int(bad.sum())} outputs beyond the bound, e.g. {err[bad][:3]}"


def scaled_values(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """float32 normal values scaled by 10**k, k uniform in [-12, 12]: sums over terms of
    very different sizes, products far from overflow."""
    scale = 10.0 ** rng.uniform(-12, 12, shape)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def two_input_graph(
    op: Callable[..., Any], x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str = "float32"
) -> Graph:
    """A graph of y = op(x, w, **attrs), x and w placeholders (a convolution's input and
    weight)."""
    g = gc.Graph(op.__name__)
    with g:
        x = gc.placeholder("x", x_shape, dtype)
        w = gc.placeholder("w", w_shape, dtype)
        gc.output(op(x, w, **attrs), name="y")
    return g


def sum_feeds(graph: Graph, seed: int, share: float) -> tuple[np.ndarray, np.ndarray]:
    """x and w of a two-input graph from `sprinkled_feeds` (nan, inf, -0.0, subnormals),
    their largest finite values replaced by +-1: they would overflow the sums."""
    feeds = sprinkled_feeds(graph, seed, share=share)
    x, w = feeds["x"], feeds["w"]
    x[np.abs(x) > 1e30] = 1.0
    w[np.abs(w) > 1e30] = -1.0
    return x, w


def assert_numpys_kernel_runs(graph: Graph, why: str, *feeds: np.ndarray) -> None:
    """The native plan leaves the graph's step to numpy for the reason `why` (explain
    says so), and gives numpy's bits on `feeds`."""
    exe = gc.compile(graph, backend="native")
    text = exe.explain(*feeds)
    assert "[numpy]" in text and why in text, text
    with np.errstate(all="ignore"):
        want = gc.compile(graph, backend="numpy")(*feeds)
        assert bits_differ(exe(*feeds), want) is None


def assert_kernel_within_bound(
    kernel: Callable[..., np.ndarray],
    got: np.ndarray,
    want: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    attrs: dict,
    terms: int,
) -> None:
    """`assert_within_sum_bound` for a sum of `terms` products computed by numpy's
    `kernel(x, w, **attrs)` (`want`), its magnitude `kernel` of |x| and |w| in float64
    (inf and nan as 0)."""
    magnitude = kernel(
        np.nan_to_num(np.abs(x.astype(np.float64)), posinf=0.0),
        np.nan_to_num(np.abs(w.astype(np.float64)), posinf=0.0),
        **attrs,
    )
    assert_within_sum_bound(got, want, magnitude, terms)
