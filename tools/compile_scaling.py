"""Compile time of the gradient ladder (graphc/bench/compile_chain.py) per graph size.

For each size: seconds of `gc.gradients`, of every pass of the O2 pipeline (summed by
name over the cleanup rounds), of verify, specialization, planning and code generation,
and the end-to-end `gc.compile(g, opt_level=2)` (which plans the one concrete signature)
plus the first call. A linear compiler shows about twice the seconds per doubled size.
Seconds are this process's CPU time (machines here are shared: wall time swings with
the load); the last row is the end-to-end wall time.

    python tools/compile_scaling.py                    # 10k 20k 40k 80k 150k, O2
    python tools/compile_scaling.py 10000 20000 --level 0
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import graphc as gc
from graphc.bench.compile_chain import gradient_ladder, ladder_feeds
from graphc.ir.verify import verify
from graphc.passes.pipeline import optimize
from graphc.runtime.codegen import generate
from graphc.runtime.executable import collector_paused
from graphc.runtime.plan import build_plan
from graphc.runtime.specialize import specialize


def phases(nodes: int, level: int) -> tuple[int, dict[str, float]]:
    """The gradient graph's node count and the seconds of each phase."""
    seconds: dict[str, float] = defaultdict(float)
    start = time.process_time()
    graph = gradient_ladder(nodes)
    seconds["gradients"] = time.process_time() - start
    with collector_paused():
        start = time.process_time()
        verify(graph)
        seconds["verify"] = time.process_time() - start
        optimized = graph
        if level > 0:
            optimized, report = optimize(graph, level, explain=True)
            for log in report.passes:
                seconds[log.name] += log.seconds
        start = time.process_time()
        spec = specialize(optimized, {})
        seconds["specialize"] = time.process_time() - start
        start = time.process_time()
        plan = build_plan(optimized, spec)
        seconds["plan"] = time.process_time() - start
        start = time.process_time()
        generate(plan)
        seconds["codegen"] = time.process_time() - start
    start, wall = time.process_time(), time.perf_counter()
    exe = gc.compile(graph, opt_level=level)
    exe(**ladder_feeds())
    seconds["compile + first call"] = time.process_time() - start
    seconds["(wall) compile + first call"] = time.perf_counter() - wall
    return len(graph.nodes), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "sizes", nargs="*", type=int, default=[10_000, 20_000, 40_000, 80_000, 150_000]
    )
    parser.add_argument("--level", type=int, default=2)
    args = parser.parse_args()
    rows = [phases(n, args.level) for n in args.sizes]
    names = list(dict.fromkeys(name for _, s in rows for name in s))
    print(f"O{args.level}, seconds".ljust(32) + "".join(f"{n:>10}" for n, _ in rows))
    for name in names:
        print(name.ljust(32) + "".join(f"{s.get(name, 0.0):10.2f}" for _, s in rows))


if __name__ == "__main__":
    main()
