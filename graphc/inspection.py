"""The work behind `graphc inspect`: a graph, its statistics and its optimization.

    graphc inspect GRAPH.json | MODEL.onnx [--opt-level N] [--fuse BACKEND] [--optimized]
    graphc inspect MODULE:FUNCTION --spec "B,3:float32" --spec "3,2" [--opt-level N]

A JSON file is loaded with `gc.load`, an ONNX model read with `gc.onnx.import_model`
(nothing in either is executed); a function is traced with one `--spec` per argument
(see `graphc render`). The lines are returned;
`cli.py` prints them.
"""

from __future__ import annotations

import argparse

from graphc.passes.stats import graph_statistics
from graphc.viz.command import load_target, optimized_graph


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="GRAPH.json | MODEL.onnx | MODULE:FUNCTION")
    parser.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="DIMS[:DTYPE]",
        help='one per argument of FUNCTION, e.g. "B,3:float32" (names are symbolic dims)',
    )
    parser.add_argument("--opt-level", type=int, default=2, metavar="N", help="0, 1 or 2")
    parser.add_argument(
        "--fuse",
        metavar="BACKEND",
        help="then BACKEND's fusion step (numpy, native, auto), as gc.compile plans",
    )
    parser.add_argument(
        "--optimized", action="store_true", help="print the optimized graph's text as well"
    )


def inspect_command(args: argparse.Namespace) -> list[str]:
    """The graph's text, its statistics, and the optimization report at --opt-level."""
    graph = load_target(args.target, args.spec)
    optimized, report = optimized_graph(graph, args.opt_level, args.fuse)
    lines = ["== graph ==", str(graph), "", "== statistics ==", str(graph_statistics(graph))]
    lines += ["", f"== optimization (O{args.opt_level}) ==", str(report)]
    lines += ["", "== optimized statistics ==", str(graph_statistics(optimized))]
    if args.optimized:
        lines += ["", "== optimized graph ==", str(optimized)]
    return lines
