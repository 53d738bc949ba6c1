"""The tutorials' RNN, h = tanh(x_t @ W_ih + h @ W_hh + b), run three ways.

The tutorials picture PyTorch building the graph of an RNN step by step (i2h, h2h,
next_h, loss) while Python runs a `for` loop over time: their argument for dynamic
graphs. Here the step is written once, as a function `step(h, x)`, and the loss (the
mean square of the last state) is computed

- eagerly: a Python `for` loop on graphc.eager tensors, then `loss.backward()`;
- statically unrolled: `gc.trace` of the same `for` loop, one copy of the step per
  time step in the graph;
- statically with `gc.scan`: the step traced once as the body of one `scan` node.

All three give the same loss and the same gradients of W_ih, W_hh and b
(backpropagation through time; checked to 1e-5 of each array's largest magnitude in
float32, see `relative_difference`). The script prints the graphs' sizes and compile
times (`gc.compile` at O2), and draws them when graphviz's `dot` is installed.

    python examples/rnn.py --steps 50             # pictures in out/rnn/
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge

WEIGHTS = ("w_ih", "w_hh", "b")
RTOL = 1e-5  # float32: the three ways sum the same terms in different orders
# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "rnn"


def cell(w_ih: Any, w_hh: Any, b: Any) -> Callable[[Any, Any], Any]:
    """The RNN step over these weights: next_h = tanh(i2h + h2h + b)."""

    def step(h: Any, x: Any) -> Any:
        i2h = x @ w_ih
        h2h = h @ w_hh
        return gc.tanh(i2h + h2h + b)

    return step


def loss_of(h: Any) -> Any:
    """The loss on the last state."""
    return gc.mean(h * h)


def rnn_loop(xs: Any, h0: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    """A Python `for` over the time steps: eager tensors run it, tracing unrolls it."""
    step = cell(w_ih, w_hh, b)
    h = h0
    for t in range(xs.shape[0]):
        h = step(h, xs[t])
    return loss_of(h)


def rnn_scan(xs: Any, h0: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    """The same loop as one `gc.scan`: the carry is h, each x is a slice xs[t]."""
    step = cell(w_ih, w_hh, b)

    def body(h: Any, x: Any) -> tuple[Any, None]:
        return step(h, x), None  # (new carry, nothing stacked per step)

    h, _ = gc.scan(body, h0, xs)
    return loss_of(h)


def make_inputs(
    steps: int, batch: int, inputs: int, hidden: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """A sequence xs (steps, batch, inputs), h0 = 0, and weights scaled to keep tanh
    out of saturation, so that the gradients of early steps do not vanish."""
    rng = np.random.default_rng(seed)
    values = {
        "xs": rng.standard_normal((steps, batch, inputs)),
        "h0": np.zeros((batch, hidden)),
        "w_ih": rng.standard_normal((inputs, hidden)) / np.sqrt(inputs),
        "w_hh": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden),
        "b": 0.1 * rng.standard_normal(hidden),
    }
    return {name: v.astype(np.float32) for name, v in values.items()}


def count_nodes(graph: gc.Graph) -> int:
    """Nodes of a graph, those of the bodies its nodes hold (a scan's) included."""
    total = 0
    for node in graph.nodes:
        total += 1
        total += sum(count_nodes(v) for v in node.attrs.values() if isinstance(v, gc.Graph))
    return total


def describe_size(graph: gc.Graph) -> str:
    """'N nodes', or 'N nodes (n at top level + m in bodies)' when there are bodies."""
    total, top = count_nodes(graph), len(graph.nodes)
    return f"{total} nodes" + (f" ({top} + {total - top} in bodies)" if total > top else "")


def tape_size(root: Any) -> int:
    """Backward functions on an eager tape (AccumulateGrad nodes of the leaves included)."""
    seen: set[int] = set()
    stack = [root.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        stack += [next_fn for next_fn, _ in fn.next_functions]
    return len(seen)


def run_eager(values: dict[str, np.ndarray]) -> dict[str, Any]:
    """Define-by-run: the tape grows by one step's ops per loop iteration."""
    weights = [ge.tensor(values[name], requires_grad=True) for name in WEIGHTS]
    loss = rnn_loop(ge.from_numpy(values["xs"]), ge.from_numpy(values["h0"]), *weights)
    nodes = tape_size(loss)
    loss.backward(retain_graph=True)  # kept: the tape may be drawn afterwards
    grads = {name: w.grad.numpy() for name, w in zip(WEIGHTS, weights)}
    return {
        "loss": loss.detach().numpy(),
        "grads": grads,
        "tape": loss,
        "leaves": dict(zip(WEIGHTS, weights)),
        "tape_nodes": nodes,
    }


def graphs(fn: Callable[..., Any], values: dict[str, np.ndarray]) -> tuple[gc.Graph, gc.Graph]:
    """`fn` traced for the shapes of `values`, and its joint forward + backward graph."""
    specs = [gc.TensorSpec(v.shape, v.dtype) for v in values.values()]
    forward = gc.trace(fn, *specs)
    return forward, gc.gradients(forward, wrt=list(WEIGHTS))  # loss, grad_w_ih, ...


def run_static(fn: Callable[..., Any], values: dict[str, np.ndarray]) -> dict[str, Any]:
    """Define-then-run: trace, differentiate (BPTT as a graph), compile at O2, call."""
    forward, joint = graphs(fn, values)
    start = time.perf_counter()
    exe = gc.compile(joint, opt_level=2)  # concrete shapes: the plan is built here too
    seconds = time.perf_counter() - start
    loss, *grads = exe(*values.values())
    return {
        "loss": loss,
        "grads": dict(zip(WEIGHTS, grads)),
        "forward": forward,
        "joint": joint,
        "compile_seconds": seconds,
    }


def relative_difference(got: Any, want: Any) -> float:
    """max |got - want| / max |want|: float32 rounding relative to the array's scale.

    Elementwise relative error is not the measure: a gradient entry near zero is a sum
    of 50 steps' contributions that nearly cancel, and summing them in another order
    (the tape's accumulation, the graph's adds) changes its low digits.
    """
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def differences(got: dict[str, Any], want: dict[str, Any]) -> dict[str, float]:
    """`relative_difference` of the loss and of each weight's gradient."""
    found = {"loss": relative_difference(got["loss"], want["loss"])}
    found.update({n: relative_difference(got["grads"][n], want["grads"][n]) for n in WEIGHTS})
    return found


def render_pictures(values: dict[str, np.ndarray], folder: Path) -> list[Path]:
    """The eager tape and the four static graphs of `values` (a short sequence), as SVG.

    Pictures are drawn for a few steps, not T: `dot`'s layout time grows steeply with
    the unrolled graphs (the tape of 20 steps takes seconds, that of 50 more than ten
    minutes), and three steps show the structure. The scan graphs are the same size
    at any T. Without `dot`, nothing is drawn.
    """
    if not gc.viz.have_dot():
        print("pictures: skipped (graphviz's `dot` is not installed: apt-get install graphviz)")
        return []
    eager = run_eager(values)
    unrolled_forward, unrolled_joint = graphs(rnn_loop, values)
    scan_forward, scan_joint = graphs(rnn_scan, values)
    pictures = {
        "rnn_eager_tape": (eager["tape"], {"names": eager["leaves"]}),
        "rnn_unrolled_forward": (unrolled_forward, {}),
        "rnn_unrolled_gradients": (unrolled_joint, {}),
        "rnn_scan_forward": (scan_forward, {}),
        "rnn_scan_gradients": (scan_joint, {}),
    }
    written = [
        gc.viz.render(obj, folder / f"{name}.svg", **kw) for name, (obj, kw) in pictures.items()
    ]
    steps = values["xs"].shape[0]
    print(f"pictures ({steps} steps):", ", ".join(str(p) for p in written))
    return written


def report(results: dict[str, Any], steps: int) -> None:
    eager, unrolled, scan = results["eager"], results["unrolled"], results["scan"]
    print(f"the graphs at T = {steps}:")
    print(f"  eager tape: {eager['tape_nodes']} backward functions, recorded anew by every run")
    for name, r in (("unrolled", unrolled), ("scan", scan)):
        print(f"  {name}: forward {describe_size(r['forward'])}")
        print(f"  {name}: forward+backward {describe_size(r['joint'])}")
        print(f"  {name}: gc.compile at O2 {r['compile_seconds'] * 1e3:.1f} ms")
    losses = ", ".join(f"{name} {float(results[name]['loss']):.7g}" for name in results)
    print(f"\nloss: {losses}")
    print("max |difference| / max |eager value|:")
    for name, r in (("unrolled", unrolled), ("scan", scan)):
        found = ", ".join(f"{k} {v:.1e}" for k, v in differences(r, eager).items())
        print(f"  {name}: {found}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=50, help="sequence length T (default: %(default)s)"
    )
    parser.add_argument(
        "--batch", type=int, default=32, help="sequences per batch (default: %(default)s)"
    )
    parser.add_argument(
        "--inputs", type=int, default=64, help="input features (default: %(default)s)"
    )
    parser.add_argument(
        "--hidden", type=int, default=128, help="hidden units (default: %(default)s)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the inputs and weights (default: %(default)s)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="for pictures (out/rnn/)")
    parser.add_argument(
        "--draw-steps", type=int, default=3, help="sequence length drawn (default: %(default)s)"
    )
    parser.add_argument("--no-render", action="store_true", help="only print")
    args = parser.parse_args(argv)

    values = make_inputs(args.steps, args.batch, args.inputs, args.hidden, args.seed)
    results = {
        "eager": run_eager(values),
        "unrolled": run_static(rnn_loop, values),
        "scan": run_static(rnn_scan, values),
    }
    report(results, args.steps)
    worst = max(
        max(differences(results[n], results["eager"]).values()) for n in ("unrolled", "scan")
    )
    if worst > RTOL:
        raise AssertionError(f"the three ways disagree: {worst:.1e} > {RTOL:g}")
    print(f"the same loss and gradients all three ways (within {RTOL:g})")
    results["files"] = []
    if not args.no_render:
        short = make_inputs(args.draw_steps, args.batch, args.inputs, args.hidden, args.seed)
        results["files"] = render_pictures(short, args.out)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
