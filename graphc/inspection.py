"""The work behind `graphc inspect`: a graph, its statistics and its optimization.

    graphc inspect GRAPH.json [--opt-level N] [--optimized]
    graphc inspect MODULE:FUNCTION --spec "B,3:float32" --spec "3,2" [--opt-level N]

A JSON file is loaded with `gc.load` (nothing in it is executed); a function is
traced with one `--spec` per argument (see `graphc render`). The lines are returned;
`cli.py` prints them.
"""

from __future__ import annotations

import argparse

import graphc as gc
from graphc.passes.stats import graph_statistics
from graphc.viz.command import load_function, parse_spec


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="GRAPH.json | MODULE:FUNCTION")
    parser.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="DIMS[:DTYPE]",
        help='one per argument of FUNCTION, e.g. "B,3:float32" (names are symbolic dims)',
    )
    parser.add_argument("--opt-level", type=int, default=2, metavar="N", help="0, 1 or 2")
    parser.add_argument(
        "--optimized", action="store_true", help="print the optimized graph's text as well"
    )


def load_target(target: str, specs: list[str]) -> gc.Graph:
    if target.endswith(".json"):
        return gc.load(target)
    return gc.trace(load_function(target), *[parse_spec(s) for s in specs])


def inspect_command(args: argparse.Namespace) -> list[str]:
    """The graph's text, its statistics, and the optimization report at --opt-level."""
    graph = load_target(args.target, args.spec)
    optimized, report = gc.optimize(graph, level=args.opt_level, explain=True)
    lines = ["== graph ==", str(graph), "", "== statistics ==", str(graph_statistics(graph))]
    lines += ["", f"== optimization (O{args.opt_level}) ==", str(report)]
    lines += ["", "== optimized statistics ==", str(graph_statistics(optimized))]
    if args.optimized:
        lines += ["", "== optimized graph ==", str(optimized)]
    return lines
