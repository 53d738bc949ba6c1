"""The work behind `graphc inspect`: a graph, its statistics and its optimization.

    graphc inspect GRAPH.json | MODEL.onnx [--opt-level N] [--fuse BACKEND] [--optimized]
    graphc inspect MODULE:FUNCTION --spec "B,3:float32" --spec "3,2" [--opt-level N]

A JSON file is loaded with `gc.load`, an ONNX model read with `gc.onnx.import_model`
(nothing in either is executed); a function is traced with one `--spec` per argument
(see `graphc render`). The lines are returned;
`cli.py` prints them. A constant of more than a few elements is shown by its count and
range (a model's weights were printed whole, as base64: screens of it for a small
model, megabytes for a ResNet); `graphc.save` writes the graph whole.
"""

from __future__ import annotations

import argparse

from graphc.ir.text import format_graph
from graphc.passes.stats import graph_statistics
from graphc.viz.command import check_arguments, load_target, optimized_graph

LEVEL = 2  # the optimization level reported unless --opt-level says another


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="GRAPH.json | MODEL.onnx | MODULE:FUNCTION")
    parser.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="DIMS[:DTYPE]",
        help='one per argument of FUNCTION, e.g. "B,3:float32" (names are symbolic dims)',
    )
    # no default here: "not given" is told apart from 2, so --fuse without it is refused
    parser.add_argument("--opt-level", type=int, metavar="N", help="0, 1 or 2 (default 2)")
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
    check_arguments(args)  # --fuse needs --opt-level here too, as in render and view
    level = LEVEL if args.opt_level is None else args.opt_level
    graph = load_target(args.target, args.spec)
    optimized, report = optimized_graph(graph, level, args.fuse)
    lines = ["== graph ==", format_graph(graph, brief=True)]
    lines += ["", "== statistics ==", str(graph_statistics(graph))]
    lines += ["", f"== optimization (O{level}) ==", str(report)]
    lines += ["", "== optimized statistics ==", str(graph_statistics(optimized))]
    if args.optimized:
        lines += ["", "== optimized graph ==", format_graph(optimized, brief=True)]
    return lines
