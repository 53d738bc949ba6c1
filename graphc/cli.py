"""The `graphc` command: demo | render | view | bench | inspect."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

import graphc as gc

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool killed by SIGPIPE


def demo(args: argparse.Namespace) -> int:
    """A tour: declare, run, differentiate, optimize, compile, compare with eager, draw."""
    from graphc.demo import demo as run_demo

    return run_demo(args.out)


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


def view(args: argparse.Namespace) -> int:
    """Trace MODULE:FUNCTION (or read a graph or ONNX model) and write its viewer page:
    the forward graph, with --backward the joint one, with --opt-level N pass by pass."""
    from graphc.viz.command import check_arguments, gradient_inputs, load_target, optimized_graph

    try:
        check_arguments(args)
        g = load_target(args.target, args.spec)
        views: dict[str, object] = {"forward": g}
        if args.backward:
            wrt = gradient_inputs(g, args.wrt)
            views["forward + backward"] = gc.gradients(g, wrt=wrt, seeds=True)
        if args.opt_level is not None:
            last = list(views.values())[-1]
            views[f"O{args.opt_level}"] = optimized_graph(last, args.opt_level, args.fuse)[1]  # type: ignore[arg-type]
        path = gc.viz.view(views, args.output, title=g.name)
    except gc.GraphcError as exc:
        print(f"graphc view: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} (open it in a browser: it fetches nothing)")
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
    goals = benchmarks.goals.evaluate(report)
    report["goals"] = [vars(goal) for goal in goals]
    print("## Goals (issues 6, 14 to 18, 30, 31 and 35)\n")
    shown = goals
    if args.only:  # the workloads left out measure none of their goals: no row for each
        shown = [goal for goal in goals if goal.met is not None]
        print(
            f"--only {', '.join(args.only)}: the {len(shown)} goal(s) this run measured; "
            f"{len(goals) - len(shown)} not measured are left out (a full run lists every goal)\n"
        )
    print(benchmarks.goals.markdown(shown, quick=args.quick))
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
    """A progress callback drawing a tqdm bar on stderr, or None without tqdm or when
    stderr is no terminal (in a log, a bar redrawn in place is one long line)."""
    if not sys.stderr.isatty():
        return None
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


FIRST_STEPS = """\
first steps:
  graphc demo                        declare, differentiate, compile and draw a small graph
  graphc inspect model.onnx          an ONNX model's graph, statistics and passes
  graphc render FILE.py:FUNCTION --spec B,3:float32 -o f.svg
                                     trace a function and draw its graph
  graphc view FILE.py:FUNCTION --spec B,3:float32 --backward
                                     a page to explore a graph too big to draw
  graphc bench --quick               the benchmark, in about a minute
each command's --help says more; README.md and docs/guide.md are the documentation"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="graphc",
        description=__doc__,
        epilog=FIRST_STEPS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {gc.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="declare, print, run and draw a small graph")
    demo_parser.add_argument(
        "-o", "--out", metavar="DIR", help="folder for the pictures (default: temp)"
    )
    demo_parser.set_defaults(run=demo)
    from graphc.viz.command import add_render_arguments, add_view_arguments

    render_parser = commands.add_parser("render", help="trace a function and draw its graph")
    add_render_arguments(render_parser)
    render_parser.set_defaults(run=render)
    view_parser = commands.add_parser("view", help="write a page to explore a graph of any size")
    add_view_arguments(view_parser)
    view_parser.set_defaults(run=view)
    bench_parser = commands.add_parser("bench", help="benchmark eager, static and peer modes")
    bench_parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    from graphc.bench.runner import ON_REQUEST, WORKLOADS

    names = ", ".join(w.name for w in WORKLOADS)
    bench_parser.add_argument(
        "--only",
        action="append",
        metavar="WORKLOAD",
        help=f"one of {names} (all of them by default), or "
        f"{', '.join(w.name for w in ON_REQUEST)} (run only when named); repeatable",
    )
    bench_parser.add_argument("--json", metavar="PATH", help="write the report as JSON")
    bench_parser.add_argument("--plot", metavar="PATH", help="bar chart (needs matplotlib)")
    bench_parser.set_defaults(run=bench)
    from graphc.inspection import add_inspect_arguments

    inspect_parser = commands.add_parser("inspect", help="a graph's text, statistics, passes")
    add_inspect_arguments(inspect_parser)
    inspect_parser.set_defaults(run=inspect)
    args = parser.parse_args(argv)
    try:
        code = int(args.run(args))
        sys.stdout.flush()  # a reader gone shows here for output still buffered
    except BrokenPipeError:
        # the reader (`| head`) stopped reading: stop quietly, as a Unix tool does on
        # SIGPIPE. Python's docs (signal, "Note on SIGPIPE"): point stdout at devnull so
        # that the flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
