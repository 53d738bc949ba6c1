"""The optimization pipeline: named lists of passes per level, run in order.

    O0  nothing
    O1  cleanups: fold_constants, simplify, simplify_control_flow,
        eliminate_common_subexpressions, eliminate_dead_code; repeated (at most
        `MAX_CLEANUP_ROUNDS` times) while CSE merged an op node, since that can expose
        new algebra (x - x), or (fast_math) fold_batch_norm folded a chain, whose bias
        add of zeros where no shift was folded is algebra for simplify (x + 0).
        Folding runs first because it exposes algebra
        (x * exp(0)); simplify makes its constants itself, and each rewrite pass
        reaches its own fixed point, so other changes need no second round. Then
        optimize_bodies runs the level's pipeline in every cond, scan and while_loop
        body (and so in theirs).
    O2  the cleanups and the bodies, then recognize_softmax (spelled-out softmax as
        the op)

Every pass here is backend-free: its result is an ordinary graph of public ops, which
gradients, ONNX export, the batch split and pictures take as they take the declared
graph. Fusion is not among them. It is a backend's step (`Backend.fusion` in
runtime/backend.py), which `gc.compile` runs at O2 on this pipeline's result, just
before planning, with `run_fusion` below; its fused nodes are the backend's, and only
its plans see them (`gc.fuse` shows a backend's fused graph, `exe.plan(...).graph` the
one planned).

Every level computes what O0 computes, bit for bit, on the numpy backend: `simplify`
runs only its exact rules, and folding computes with the ops' own kernels (a backend
whose kernel for an op gives other bits, as native's exp does within its stated bound,
meets a folded constant with numpy's bits). `fast_math=True` swaps in
`simplify_fast_math`, which may also run the value-changing ones (reassociated scales,
stable log forms; see passes/simplify.py), and runs `fold_batch_norm` after it
(per-channel scales and shifts folded into a conv2d's or matmul's constant weight:
passes/batchnorm.py), then `recognize_layer_norm` (spelled-out layer norm as the op:
passes/recognize.py); the report says so in its header and tags each value-changing
rewrite that fired.

Every pass is a function `graph -> new graph` taking an optional `log`, so the
pipeline can time each one, count nodes before and after, and verify the result
(`verify=True`, or the environment variable GRAPHC_VERIFY_PASSES=1).
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Callable, Sequence

from graphc.ir.errors import GraphcError, VerifyError
from graphc.ir.graph import Graph, expect_graph
from graphc.ir.verify import verify as verify_graph
from graphc.passes import control
from graphc.passes.batchnorm import fold_batch_norm
from graphc.passes.control import simplify_control_flow
from graphc.passes.cse import MERGED_OPS, eliminate_common_subexpressions
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.fold import fold_constants
from graphc.passes.recognize import recognize_layer_norm, recognize_softmax
from graphc.passes.report import OptimizationReport, PassLog
from graphc.passes.simplify import simplify, simplify_fast_math

Pass = Callable[..., Graph]  # pass(graph, log=None) -> graph

CLEANUPS: tuple[Pass, ...] = (
    fold_constants,
    simplify,
    simplify_control_flow,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)
# (a rewrite pass drops the nodes it leaves unused itself: no DCE after it)
RECOGNITIONS: tuple[Pass, ...] = (recognize_softmax,)
# passes after simplify in a round whose every change may leave simplify work (besides
# CSE's merged ops): another round runs after one changed the graph
EXPOSES_ALGEBRA: tuple[Pass, ...] = (fold_batch_norm,)
MAX_CLEANUP_ROUNDS = 3

# level -> (passes repeated to a fixed point of the node count, passes run once after)
LEVELS: dict[int, tuple[tuple[Pass, ...], tuple[Pass, ...]]] = {
    0: ((), ()),
    1: (CLEANUPS, ()),
    2: (CLEANUPS, RECOGNITIONS),
}


def verify_passes_default() -> bool:
    return os.environ.get("GRAPHC_VERIFY_PASSES", "") not in ("", "0")


def run_pass(graph: Graph, pass_: Pass, report: OptimizationReport, verify: bool) -> Graph:
    """Run one pass, time it, record it in `report`, and verify its result if asked."""
    log = PassLog(pass_.__name__, nodes_before=len(graph.nodes))
    start = time.perf_counter()
    result = pass_(graph, log=log)
    log.seconds = time.perf_counter() - start
    log.nodes_after = len(result.nodes)
    log.before, log.after = graph, result
    report.passes.append(log)
    if verify:
        try:
            verify_graph(result)
        except GraphcError as exc:
            raise VerifyError(f"after pass {pass_.__name__}: {exc}") from exc
    return result


def with_fast_math(passes: Sequence[Pass], fast_math: bool) -> tuple[Pass, ...]:
    """`passes`, with `simplify` allowed its value-changing rules when `fast_math`, and
    `fold_batch_norm` and `recognize_layer_norm` (value-changing too) right after it."""
    if not fast_math:
        return tuple(passes)
    result: list[Pass] = []
    for p in passes:
        fast = [simplify_fast_math, fold_batch_norm, recognize_layer_norm]
        result += fast if p is simplify else [p]
    return tuple(result)


def run_passes(
    graph: Graph,
    repeated: Sequence[Pass],
    once: Sequence[Pass] = (),
    report: OptimizationReport | None = None,
    verify: bool | None = None,
) -> tuple[Graph, OptimizationReport]:
    """Run `repeated` in rounds (see the module docstring), then `once`."""
    report = report if report is not None else OptimizationReport(level=-1)
    verify = verify_passes_default() if verify is None else verify
    for _ in range(MAX_CLEANUP_ROUNDS if repeated else 0):
        first = len(report.passes)
        exposed = False
        for pass_ in repeated:
            before = graph
            graph = run_pass(graph, pass_, report, verify)
            exposed = exposed or (pass_ in EXPOSES_ALGEBRA and graph is not before)
        if not exposed and not any(log.counts.get(MERGED_OPS) for log in report.passes[first:]):
            break
    for pass_ in once:
        graph = run_pass(graph, pass_, report, verify)
    return graph, report


def with_options(pass_: Pass, **options: object) -> Pass:
    """`pass_` with keyword `options` bound, under its own name (as reports show it)."""

    def run(graph: Graph, log: PassLog | None = None) -> Graph:
        return pass_(graph, log, **options)

    run.__name__ = pass_.__name__
    return run


def _bodies_at(level: int, fast_math: bool) -> Pass:
    def optimize_bodies(graph: Graph, log: PassLog | None = None) -> Graph:
        def run(body: Graph) -> Graph:
            return optimize_verified(body, level, fast_math=fast_math)[0]

        return control.optimize_bodies(graph, run, log)

    return optimize_bodies


def optimize(
    graph: Graph,
    level: int = 2,
    explain: bool = False,
    verify: bool | None = None,
    fast_math: bool = False,
) -> Graph | tuple[Graph, OptimizationReport]:
    """The optimized copy of `graph` at `level` (0, 1 or 2); the input is not changed.
    Every level gives O0's results bit for bit; `fast_math=True` also allows rewrites
    that change values (reassociation, stable forms: see graphc/passes/simplify.py).
    The result is backend-free, made of public ops only: fusion is a backend's step
    when it plans (`gc.fuse` shows it).

    With `explain=True` returns `(graph, report)`; `print(report)` lists every pass
    run with its node counts, time and notes (rules fired, candidates left out and
    why). `graph` itself is verified first (gc.verify's error for one broken through the
    low-level API); `verify` (default: env GRAPHC_VERIFY_PASSES=1) checks the graph
    after every pass too.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[3]) {
    ...   %one: f32[] = constant(value=1.0)
    ...   %a: f32[3] = exp(%x)
    ...   %b: f32[3] = mul(%a, %one)
    ...   %c: f32[3] = exp(%x)
    ...   %d: f32[3] = add(%b, %c)
    ...   output %y = %d
    ... }''')
    >>> print(gc.optimize(g, level=2))
    graph g(%x: f32[3]) {
      %a: f32[3] = exp(%x)
      %d: f32[3] = add(%a, %a)
      output %y = %d
    }
    """
    expect_graph(graph, "optimize")
    level = _level(level)
    # a graph broken through the low-level API (a cycle, a node reading an output, a
    # wrong declared type) gets verify's named error, not a pass's KeyError or a result
    verify_graph(graph)
    result, report = optimize_verified(graph, level, verify, fast_math)
    return (result, report) if explain else result


def optimize_verified(
    graph: Graph, level: int, verify: bool | None = None, fast_math: bool = False
) -> tuple[Graph, OptimizationReport]:
    """`optimize(graph, level, explain=True)` for a graph known to verify (gc.compile
    verified it; a body was verified with its graph): the passes without a second walk."""
    repeated, once = (with_fast_math(passes, fast_math) for passes in LEVELS[level])
    if level > 0:  # the same level inside every cond, scan and while_loop body, first
        once = (_bodies_at(level, fast_math), *once)
    report = OptimizationReport(level=level, fast_math=bool(fast_math))
    return run_passes(graph, repeated, once, report, verify)


def _level(level: object) -> int:
    """`level` as an int of `LEVELS`; True and 2.0 equal levels too, but are not ones (a
    report would say "OTrue")."""
    try:
        number = None if isinstance(level, bool) else operator.index(level)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if number not in LEVELS:
        raise GraphcError(f"optimize: level must be one of {sorted(LEVELS)}, got {level!r}")
    return number  # type: ignore[return-value]


def run_fusion(
    graph: Graph,
    passes: Sequence[Pass],
    report: OptimizationReport | None = None,
    verify: bool | None = None,
) -> tuple[Graph, OptimizationReport]:
    """A backend's fusion step (`Backend.fusion`): `passes` run in every cond, scan and
    while_loop body (theirs first), then on `graph`, recorded in `report` after the
    pipeline's passes."""
    report = report if report is not None else OptimizationReport(level=2)
    verify = verify_passes_default() if verify is None else verify

    def fuse_bodies(graph: Graph, log: PassLog | None = None) -> Graph:
        return control.optimize_bodies(
            graph, lambda body: run_fusion(body, passes, None, verify)[0], log
        )

    for pass_ in (fuse_bodies, *passes) if passes else ():
        graph = run_pass(graph, pass_, report, verify)
    return graph, report
