"""The optimization pipeline: named lists of passes per level, run in order.

    O0  nothing
    O1  cleanups: fold_constants, simplify, simplify_control_flow,
        eliminate_common_subexpressions, eliminate_dead_code; repeated (at most
        `MAX_CLEANUP_ROUNDS` times) while CSE merged an op node, since that can expose
        new algebra (x - x). Folding runs first because it exposes algebra
        (x * exp(0)); simplify makes its constants itself, and each rewrite pass
        reaches its own fixed point, so other changes need no second round. Then
        optimize_bodies runs the level's pipeline in every cond, scan and while_loop
        body (and so in theirs).
    O2  the cleanups and the bodies, then recognize_softmax (spelled-out softmax as
        the op), fuse_attention, fuse_matmul_epilogue, fuse_conv_epilogue,
        fuse_elementwise, fuse_conv_body and a last DCE

Every level computes what O0 computes, bit for bit: `simplify` runs only its exact
rules. `fast_math=True` swaps in `simplify_fast_math`, which may also run the
value-changing ones (reassociated scales, stable log forms; see passes/simplify.py),
and runs `fold_batch_norm` after it (per-channel scales and shifts folded into a
conv2d's or matmul's constant weight: passes/batchnorm.py), then
`recognize_layer_norm` (spelled-out layer norm as the op: passes/recognize.py); the
report says so in its header and tags each value-changing rewrite that fired.

Every pass is a function `graph -> new graph` taking an optional `log`, so the
pipeline can time each one, count nodes before and after, and verify the result
(`verify=True`, or the environment variable GRAPHC_VERIFY_PASSES=1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from graphc.ir.errors import GraphcError, VerifyError
from graphc.ir.graph import Graph, expect_graph
from graphc.ir.verify import verify as verify_graph
from graphc.passes import control
from graphc.passes.attention import fuse_attention
from graphc.passes.batchnorm import fold_batch_norm
from graphc.passes.control import simplify_control_flow
from graphc.passes.conv_epilogue import fuse_conv_body, fuse_conv_epilogue
from graphc.passes.cse import MERGED_OPS, eliminate_common_subexpressions
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.epilogue import fuse_matmul_epilogue
from graphc.passes.fold import fold_constants
from graphc.passes.fuse import fuse_elementwise
from graphc.passes.recognize import recognize_layer_norm, recognize_softmax
from graphc.passes.report import OptimizationReport, PassLog
from graphc.passes.simplify import simplify, simplify_fast_math, simplify_fast_math_unfolded

Pass = Callable[..., Graph]  # pass(graph, log=None) -> graph

CLEANUPS: tuple[Pass, ...] = (
    fold_constants,
    simplify,
    simplify_control_flow,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)
# constants copied into fused bodies may leave their outer copies unused: DCE last
FUSION: tuple[Pass, ...] = (
    recognize_softmax,
    fuse_attention,
    fuse_matmul_epilogue,
    fuse_conv_epilogue,
    fuse_elementwise,
    fuse_conv_body,
    eliminate_dead_code,
)
MAX_CLEANUP_ROUNDS = 3

# level -> (passes repeated to a fixed point of the node count, passes run once after)
LEVELS: dict[int, tuple[tuple[Pass, ...], tuple[Pass, ...]]] = {
    0: ((), ()),
    1: (CLEANUPS, ()),
    2: (CLEANUPS, FUSION),
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


def with_fast_math(
    passes: Sequence[Pass], fast_math: bool, fold_updates: bool = True
) -> tuple[Pass, ...]:
    """`passes`, with `simplify` allowed its value-changing rules when `fast_math` (the
    SGD fold among them unless `fold_updates` is false), and `fold_batch_norm` and
    `recognize_layer_norm` (value-changing too) right after it."""
    if not fast_math:
        return tuple(passes)
    result: list[Pass] = []
    chosen = simplify_fast_math if fold_updates else simplify_fast_math_unfolded
    for p in passes:
        fast = [chosen, fold_batch_norm, recognize_layer_norm]
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
        for pass_ in repeated:
            graph = run_pass(graph, pass_, report, verify)
        if not any(log.counts.get(MERGED_OPS) for log in report.passes[first:]):
            break
    for pass_ in once:
        graph = run_pass(graph, pass_, report, verify)
    return graph, report


# passes that may fold an op into a constant, absorb it into another op's kernel, or
# fuse it: given `keep`, they leave the ops in it alone (see `optimize`)
KEEPING: tuple[Pass, ...] = (
    fold_constants,
    fuse_attention,
    simplify,
    simplify_fast_math,
    simplify_fast_math_unfolded,
    recognize_softmax,
    fuse_conv_epilogue,
    fuse_elementwise,
    fuse_conv_body,
)


def keeping(
    passes: Sequence[Pass], keep: frozenset[str], lowered: frozenset[str]
) -> tuple[Pass, ...]:
    """`passes` with those of KEEPING told to leave the ops in `keep` alone, and fusion
    to put them only in groups of ops in `lowered` (see `optimize`)."""
    if not keep:
        return tuple(passes)

    def bound(p: Pass) -> Pass:
        told = (fuse_elementwise, simplify, simplify_fast_math, simplify_fast_math_unfolded)
        extra = {"lowered": lowered} if p in told else {}

        def run(graph: Graph, log: PassLog | None = None) -> Graph:
            return p(graph, log, keep=keep, **extra)

        run.__name__ = p.__name__
        return run

    return tuple(bound(p) if p in KEEPING else p for p in passes)


def _bodies_at(
    level: int,
    fast_math: bool,
    keep: frozenset[str],
    lowered: frozenset[str],
    fold_updates: bool,
) -> Pass:
    def optimize_bodies(graph: Graph, log: PassLog | None = None) -> Graph:
        def run(body: Graph) -> Graph:
            return optimize(  # type: ignore[return-value]
                body,
                level,
                fast_math=fast_math,
                keep=keep,
                lowered=lowered,
                fold_updates=fold_updates,
            )

        return control.optimize_bodies(graph, run, log)

    return optimize_bodies


def optimize(
    graph: Graph,
    level: int = 2,
    explain: bool = False,
    verify: bool | None = None,
    fast_math: bool = False,
    keep: frozenset[str] = frozenset(),
    lowered: frozenset[str] = frozenset(),
    fold_updates: bool = True,
) -> Graph | tuple[Graph, OptimizationReport]:
    """The optimized copy of `graph` at `level` (0, 1 or 2); the input is not changed.
    Every level gives O0's results bit for bit; `fast_math=True` also allows rewrites
    that change values (reassociation, stable forms: see graphc/passes/simplify.py).
    Ops in `keep` are never folded into constants nor absorbed into another op's kernel
    (softmax, conv epilogues): a backend whose kernels for them give other bits than
    numpy's (the native backend's exp, tanh...) passes them, so that every level still
    computes them with its kernels, as O0 does; fusion puts them only into groups of
    ops in `lowered`, which that backend's fused kernels compute too. `fold_updates=False`
    leaves the SGD fold out of fast_math (a backend without a gemm of its own gains
    nothing by it: see passes/gemm_rules.py).

    With `explain=True` returns `(graph, report)`; `print(report)` lists every pass
    run with its node counts, time and notes (rules fired, groups fused, candidates
    left out and why). `verify` (default: env GRAPHC_VERIFY_PASSES=1) checks the
    graph after every pass.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[3]) {
    ...   %a: f32[3] = exp(%x)
    ...   %b: f32[3] = mul(%a, %a)
    ...   output %y = %b
    ... }''')
    >>> [n.op for n in gc.optimize(g, level=2).op_nodes]
    ['fused']
    """
    expect_graph(graph, "optimize")
    if level not in LEVELS:
        raise GraphcError(f"optimize: level must be one of {sorted(LEVELS)}, got {level!r}")
    keep = frozenset(keep)
    lowered = frozenset(lowered)
    repeated, once = (
        keeping(with_fast_math(passes, fast_math, fold_updates), keep, lowered)
        for passes in LEVELS[level]
    )
    if level > 0:  # the same level inside every cond, scan and while_loop body, first
        once = (_bodies_at(level, fast_math, keep, lowered, fold_updates), *once)
    report = OptimizationReport(level=level, fast_math=bool(fast_math))
    result, report = run_passes(graph, repeated, once, report, verify)
    return (result, report) if explain else result
