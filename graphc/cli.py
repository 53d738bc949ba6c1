"""The `graphc` command: demo | render | bench | inspect."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import numpy as np

import graphc as gc


def demo(args: argparse.Namespace) -> int:
    """Declare the README's small graph, print its text IR, and run it."""
    g = gc.Graph("affine")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        w = gc.placeholder("w", shape=(3, 2))
        b = gc.constant(np.array([0.5, -0.5], np.float32), name="b")
        y = gc.relu(x @ w + b)
        gc.output(gc.mean(y * y), name="loss")
    print("The graph, declared once (B is a symbolic batch dim):\n")
    print(g)
    xv = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    wv = np.array([[1, -1], [0.5, 0.5], [-1, 1]], np.float32)
    print("\nRun on x (4x3) and w (3x2):  loss =", g(x=xv, w=wv))
    _demo_pictures(g, args)
    return 0


def _demo_pictures(g: gc.Graph, args: argparse.Namespace) -> None:
    import tempfile

    from graphc.viz.command import demo_pictures

    folder = args.out or tempfile.mkdtemp(prefix="graphc-demo-")
    paths = demo_pictures(g, ["w"], folder)
    print("\nPictures of the graph and of its backward graph (d loss / dw):")
    for path in paths:
        print(f"  {path}")
    if any(path.suffix == ".dot" for path in paths):
        print("  (graphviz's `dot` is not installed: these are DOT sources; install graphviz)")


def render(args: argparse.Namespace) -> int:
    """Trace MODULE:FUNCTION and draw it (and its backward graph, and pass by pass)."""
    from graphc.viz.command import render_command

    try:
        lines = render_command(args)
    except gc.GraphcError as exc:
        print(f"graphc render: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def bench(args: argparse.Namespace) -> int:
    """Run the benchmark workloads; print the table (and goals), write JSON and a plot."""
    import json

    from graphc import bench as benchmarks

    try:
        benchmarks.select(args.only)
    except ValueError as exc:
        print(f"graphc bench: {exc}", file=sys.stderr)
        return 2
    report = benchmarks.run(only=args.only, quick=args.quick, progress=_progress_bar())
    print(benchmarks.markdown(report))
    print("## Goals of the runtime (issue 6)\n")
    print(benchmarks.goals.markdown(benchmarks.goals.evaluate(report)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"JSON written to {args.json}")
    if args.plot:
        try:
            benchmarks.plot(report, args.plot)
            print(f"Plot written to {args.plot}")
        except benchmarks.PlotUnavailableError as exc:
            print(f"graphc bench: {exc}", file=sys.stderr)
    return 0


def _progress_bar() -> Callable[[int, int, str], None] | None:
    """A progress callback drawing a tqdm bar on stderr, or None without tqdm."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar: list = []

    def update(done: int, total: int, label: str) -> None:
        if not bar:
            bar.append(tqdm(total=total, unit="cell", file=sys.stderr, leave=False))
        bar[0].n = done
        bar[0].set_description(label, refresh=True)
        if done == total:
            bar[0].close()

    return update


def inspect(args: argparse.Namespace) -> int:
    """Print a graph (JSON file or traced function), its statistics and optimization report."""
    from graphc.inspection import inspect_command

    try:
        lines = inspect_command(args)
    except (gc.GraphcError, OSError) as exc:
        print(f"graphc inspect: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="declare, print, run and draw a small graph")
    demo_parser.add_argument("--out", metavar="DIR", help="folder for the pictures (default: temp)")
    demo_parser.set_defaults(run=demo)
    from graphc.viz.command import add_render_arguments

    render_parser = commands.add_parser("render", help="trace a function and draw its graph")
    add_render_arguments(render_parser)
    render_parser.set_defaults(run=render)
    bench_parser = commands.add_parser("bench", help="benchmark eager, static and peer modes")
    bench_parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    bench_parser.add_argument("--only", action="append", metavar="WORKLOAD", help="repeatable")
    bench_parser.add_argument("--json", metavar="PATH", help="write the report as JSON")
    bench_parser.add_argument("--plot", metavar="PATH", help="bar chart (needs matplotlib)")
    bench_parser.set_defaults(run=bench)
    from graphc.inspection import add_inspect_arguments

    inspect_parser = commands.add_parser("inspect", help="a graph's text, statistics, passes")
    add_inspect_arguments(inspect_parser)
    inspect_parser.set_defaults(run=inspect)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
