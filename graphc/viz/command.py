"""The work behind `graphc render` and the pictures of `graphc demo`.

These functions return what they wrote (paths and messages); `cli.py` prints them,
since nothing below the CLI prints.

    graphc render MODULE:FUNCTION --spec "B,3:float32" --spec "3,2" -o out.svg
        [--backward [--wrt NAME[,NAME]]] [--opt-level N [--fuse BACKEND]] [--passes]

MODULE is a dotted module name or a path to a ``.py`` file. A spec is a comma list
of dims (ints, or names for symbolic dims; empty for a scalar), then optionally
``:dtype``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph
from graphc.ir.types import is_float
from graphc.viz.painter import VIEW_HINT

if TYPE_CHECKING:
    from graphc.passes.report import OptimizationReport


def parse_spec(text: str) -> Any:
    """``"B,3:float32"`` -> TensorSpec(("B", 3), float32); ``":int64"`` is an int64 scalar."""
    from graphc.frontend import TensorSpec

    dims_text, _, dtype = text.partition(":")
    parts = [part.strip() for part in dims_text.split(",")] if dims_text.strip() else []
    if "" in parts:  # "3,,4" or "B,3,": a dim left out, not a shape to guess
        raise GraphcError(
            f"--spec {text!r}: an empty dim between commas; write the dims as in 'B,3' "
            "(nothing before ':' for a scalar)"
        )
    dims = [int(part) if part.lstrip("-").isdigit() else part for part in parts]
    try:
        return TensorSpec(tuple(dims), dtype.strip() or "float32")
    except GraphcError as exc:
        raise GraphcError(f"--spec {text!r}: {exc}") from None


def load_function(target: str) -> Callable[..., Any]:
    """The function named by ``module.path:function`` or ``path/to/file.py:function``."""
    module_name, sep, function_name = target.rpartition(":")
    if not sep or not module_name or not function_name:
        raise GraphcError(
            f"expected MODULE:FUNCTION, a GRAPH.json or a MODEL.onnx file, got {target!r}"
        )
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.exists():
            raise GraphcError(f"no such file: {module_name}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, module)
        spec.loader.exec_module(module)
    else:
        if "" not in sys.path:
            sys.path.insert(0, "")  # as `python -m` does: modules in the working directory
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise GraphcError(f"cannot import module '{module_name}': {exc}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise GraphcError(f"{module_name} has no function '{function_name}'")
    return function


def load_target(target: str, specs: list[str]) -> Graph:
    """The graph a command works on: a saved graph (.json, loaded by gc.load), an ONNX
    model (.onnx, read by gc.onnx.import_model), or MODULE:FUNCTION traced with
    `specs`. Loading a file never runs code from it."""
    import graphc as gc

    if specs and target.endswith((".json", ".onnx")):
        raise GraphcError(
            f"--spec is for tracing a function; {target} holds its inputs' types: drop --spec"
        )
    if target.endswith((".json", ".onnx")) and not Path(target).exists():
        raise GraphcError(f"no such file: {target}")
    if target.endswith(".json"):
        return gc.load(target)
    if target.endswith(".onnx"):
        return gc.onnx.import_model(target)
    function = load_function(target)
    try:
        return gc.trace(function, *[parse_spec(s) for s in specs])
    except GraphcError as exc:
        if specs or "cannot be called" not in str(exc):
            raise
        # no --spec at all: say how to give the types, not only that the call failed
        raise GraphcError(
            f'{exc}; give one --spec per argument of {target}, e.g. --spec "B,3:float32"'
        ) from None


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """TARGET and --spec, as `graphc render` and `graphc view` take them."""
    parser.add_argument(
        "target",
        metavar="MODULE:FUNCTION | GRAPH.json | MODEL.onnx",
        help="the function to trace, or a saved graph or ONNX model to read",
    )
    parser.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="DIMS[:DTYPE]",
        help='one per argument, e.g. "B,3:float32" (names are symbolic dims), ":int64" a scalar',
    )


def add_backward_arguments(parser: argparse.ArgumentParser) -> None:
    """--backward and --wrt, one parser for both commands (read by `gradient_inputs`)."""
    parser.add_argument(
        "--backward", action="store_true", help="the backward graph too, beside the forward one"
    )
    parser.add_argument(
        "--wrt",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="with --backward: only the gradients of these inputs (all floating ones by default); "
        "repeatable",
    )


def add_fuse_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fuse",
        metavar="BACKEND",
        help="with --opt-level: then BACKEND's fusion step (numpy, native, auto), as gc.compile plans",
    )


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    parser.add_argument(
        "-o", "--output", required=True, help="picture to write: .svg .png .pdf .dot"
    )
    add_backward_arguments(parser)
    parser.add_argument("--opt-level", type=int, default=None, metavar="N", help="optimize first")
    add_fuse_argument(parser)
    parser.add_argument(
        "--passes", action="store_true", help="with --opt-level: one picture per pass as well"
    )


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    parser.add_argument(
        "-o", "--output", help="the page to write (default: <temp>/graphc-view/NAME.html)"
    )
    add_backward_arguments(parser)
    parser.add_argument(
        "--opt-level", type=int, default=None, metavar="N", help="views pass by pass at level N"
    )
    add_fuse_argument(parser)


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse the options that need another one (render, view and inspect alike), before
    any work is done: nothing is traced or written for a command line that will fail."""
    if getattr(args, "wrt", None) and not getattr(args, "backward", False):
        raise GraphcError("--wrt says which gradients --backward draws: add --backward")
    if args.fuse and args.opt_level is None:
        raise GraphcError("--fuse needs --opt-level N")
    if getattr(args, "passes", False) and args.opt_level is None:
        raise GraphcError("--passes needs --opt-level N")


def _floating_inputs(g: Graph) -> list[str]:
    return [p.name for p in g.inputs if is_float(p.type.dtype)]


def gradient_inputs(g: Graph, wrt: list[str]) -> list[str]:
    """The inputs `--wrt a,b --wrt c` names (each checked), or every floating-point input
    when none is named: the gradients a backward picture draws."""
    floating = _floating_inputs(g)
    names = [name.strip() for item in wrt for name in item.split(",") if name.strip()]
    for name in names:
        if name not in floating:
            kind = "floating-point input" if name in g else "input"
            raise GraphcError(
                f"--wrt {name}: '{g.name}' has no {kind} named '{name}'; its floating-point "
                f"inputs are {', '.join(floating) or 'none'}"
            )
    if not names and not floating:
        raise GraphcError(f"--backward: function '{g.name}' has no floating-point input")
    return list(dict.fromkeys(names)) or floating


def optimized_graph(graph: Graph, level: int, fuse: str | None) -> tuple[Graph, OptimizationReport]:
    """`graph` through the pipeline at `level` and, given a backend's name in `fuse`,
    that backend's fusion step (gc.fuse), with one report of every pass run."""
    import graphc as gc

    result, report = gc.optimize(graph, level, explain=True)
    if fuse:
        result, fusion = gc.fuse(result, backend=fuse, explain=True)
        report.passes += fusion.passes
    return result, report


def render_command(args: argparse.Namespace) -> list[str]:
    """Trace, optionally differentiate and optimize, render; returns lines to print."""
    import graphc as gc

    check_arguments(args)
    g = load_target(args.target, args.spec)
    out = Path(args.output)
    wrt = gradient_inputs(g, args.wrt) if args.backward else []
    subject: Graph = gc.gradients(g, wrt=wrt, seeds=True) if args.backward else g
    lines: list[str] = []
    written: list[Path] = []
    pictures: list[tuple[str, Any]] = []  # per pass, with --passes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", gc.viz.DotMissingWarning)
        report = None
        if args.opt_level is not None:
            subject, report = optimized_graph(subject, args.opt_level, args.fuse)
        if args.backward:
            forward, backward = gc.split_backward(g, wrt=wrt)
            if args.opt_level is not None:
                forward = optimized_graph(forward, args.opt_level, args.fuse)[0]
                backward = optimized_graph(backward, args.opt_level, args.fuse)[0]
            picture = gc.viz.to_dot((forward, backward))
        else:
            picture = gc.viz.to_dot(subject)
        written.append(gc.viz.render(picture, out))
        if VIEW_HINT in picture.source:  # the size guard collapsed it
            lines.append(view_hint(args))
        if args.passes:
            assert report is not None  # check_arguments: --passes needs --opt-level
            pictures += gc.viz.pass_pictures(report)
            for name, dot in pictures:
                written.append(
                    gc.viz.render(dot, out.with_name(f"{out.stem}-pass-{name}{out.suffix}"))
                )
    lines += [f"wrote {path}" for path in written]
    if args.passes and not pictures:
        lines.append(f"no pass changed the graph at O{args.opt_level}: no per-pass pictures")
    lines += sorted(
        {str(w.message) for w in caught if issubclass(w.category, gc.viz.DotMissingWarning)}
    )
    return lines


def view_hint(args: argparse.Namespace) -> str:
    """What to run to see every node of a graph too big for a readable picture."""
    command = ["graphc view", args.target, *(f"--spec {spec!r}" for spec in args.spec)]
    if args.backward:
        command.append("--backward")
        command += [f"--wrt {name}" for item in args.wrt for name in item.split(",") if name]
    return (
        "hint: the graph is too big for a readable picture, so it was drawn collapsed; "
        f"every node, searchable, in a page: {' '.join(command)}"
    )


def demo_pictures(graph: Graph, wrt: list[str], folder: str | Path) -> list[Path]:
    """The demo's forward graph and its (forward, backward) pair, as SVG files in `folder`."""
    import graphc as gc

    folder = Path(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gc.viz.DotMissingWarning)  # the paths say .dot
        forward_path = gc.viz.render(graph, folder / f"{graph.name}-forward.svg")
        pair = gc.split_backward(graph, wrt=wrt)
        backward_path = gc.viz.render(pair, folder / f"{graph.name}-backward.svg")
    return [forward_path, backward_path]
