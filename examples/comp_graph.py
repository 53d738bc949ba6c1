"""The tutorials' computational graph y = (x + w) * (w + 1) at x = 2, w = 1, both ways.

Eagerly, running the expression records a tape (AddBackward0, MulBackward0, ...) that
`backward()` walks. Statically, the expression is declared once as a graph,
`gc.gradients` derives a second graph for dy/dx and dy/dw, and `gc.split_backward`
splits it into a forward graph that saves what the backward graph needs. All of them
are rendered with `gc.viz.render`, and the gradients are printed side by side.

    python examples/comp_graph.py                # pictures in out/comp_graph/
    python examples/comp_graph.py --out DIR      # or in DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge

# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "comp_graph"


def eager(x0: float, w0: float) -> tuple[Any, dict[str, float]]:
    """Define-by-run: the tape is built while computing y."""
    x = ge.tensor(x0, requires_grad=True)
    w = ge.tensor(w0, requires_grad=True)
    a = x + w
    b = w + 1
    y = a * b
    y.backward(retain_graph=True)  # keep the tape: it is drawn afterwards
    values = {"y": y.item(), "dy/dx": x.grad.item(), "dy/dw": w.grad.item()}
    return (y, {"x": x, "w": w}), values


def declare() -> gc.Graph:
    """Define-then-run: the same expression declared once as a graph."""
    g = gc.Graph("comp_graph")
    with g:
        x = gc.placeholder("x")
        w = gc.placeholder("w")
        a = gc.add(x, w)
        b = gc.add(w, 1.0)
        gc.output(gc.mul(a, b), name="y")
    return g


def static(x0: float, w0: float) -> tuple[dict[str, Any], dict[str, float]]:
    g = declare()
    joint = gc.gradients(g, wrt=["x", "w"])  # outputs: y, grad_x, grad_w
    forward, backward = gc.split_backward(g, wrt=["x", "w"])
    y, dx, dw = gc.compile(joint)(x=np.float32(x0), w=np.float32(w0))
    graphs = {"forward": g, "gradients": joint, "forward_backward": (forward, backward)}
    return graphs, {"y": float(y), "dy/dx": float(dx), "dy/dw": float(dw)}


def render_all(pictures: dict[str, Any], folder: Path, fmt: str) -> list[Path]:
    """Render every picture; without graphviz's `dot` program, write DOT text instead."""
    if not gc.viz.have_dot():
        print("note: graphviz's `dot` program is not installed; writing .dot sources instead")
        fmt = "dot"
    written = []
    for name, (obj, options) in pictures.items():
        written.append(gc.viz.render(obj, folder / f"{name}.{fmt}", **options))
    return written


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--x", type=float, default=2.0, help="value of x (default: %(default)s)")
    parser.add_argument("--w", type=float, default=1.0, help="value of w (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=OUT, help="for pictures (out/comp_graph/)")
    parser.add_argument(
        "--format",
        choices=["svg", "png", "pdf", "dot"],
        default="svg",
        help="picture format (default: %(default)s)",
    )
    parser.add_argument("--no-render", action="store_true", help="only print the numbers")
    args = parser.parse_args(argv)

    (y, leaves), eager_values = eager(args.x, args.w)
    graphs, static_values = static(args.x, args.w)

    print(f"y = (x + w) * (w + 1) at x = {args.x:g}, w = {args.w:g}\n")
    print(f"{'':8}{'eager':>10}{'static':>10}")
    for key in eager_values:
        print(f"{key:8}{eager_values[key]:>10.4f}{static_values[key]:>10.4f}")
    print(f"\neager tape: y.grad_fn = {y.grad_fn.name()}")
    print(f"\nthe static gradient graph:\n{graphs['gradients']}")

    written: list[Path] = []
    if not args.no_render:
        pictures = {
            "eager_tape": (y, {"names": leaves}),
            "static_forward": (graphs["forward"], {}),
            "static_gradients": (graphs["gradients"], {}),
            "static_forward_backward": (graphs["forward_backward"], {}),
        }
        written = render_all(pictures, args.out, args.format)
        print("pictures:", ", ".join(str(p) for p in written))
    return {"eager": eager_values, "static": static_values, "files": written}


if __name__ == "__main__":
    main(sys.argv[1:])
