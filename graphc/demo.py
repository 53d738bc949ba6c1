"""`graphc demo`: one short tour of the whole pipeline, printed.

Declare a graph, run it, differentiate it symbolically, optimize and compile the
joint graph, compare it with the eager tape on the tutorials' y = (x + w)(w + 1),
and draw the pictures. This module sits beside cli.py and, like it, prints.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import graphc as gc
import graphc.eager as ge


def _section(title: str) -> None:
    print(f"\n== {title} ==\n")


def _affine() -> gc.Graph:
    g = gc.Graph("affine")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        w = gc.placeholder("w", shape=(3, 2))
        b = gc.constant(np.array([0.5, -0.5], np.float32), name="b")
        y = gc.relu(x @ w + b)
        gc.output(gc.mean(y * y), name="loss")
    return g


def _median_us(call: Callable[[], object], repeat: int = 7, number: int = 200) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            call()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times) * 1e6


def tutorial_comparison() -> None:
    """y = (x + w)(w + 1) at x=2, w=1: the eager tape and the static graph agree."""
    w = ge.tensor([1.0], requires_grad=True)
    x = ge.tensor([2.0], requires_grad=True)
    y = (x + w) * (w + 1)
    y.backward()
    print(f"eager : y = {y.item():g}   dy/dw = {w.grad.item():g}   dy/dx = {x.grad.item():g}")
    print(f"        y.grad_fn = {y.grad_fn}, w.is_leaf = {w.is_leaf}")

    static = gc.trace(lambda x, w: (x + w) * (w + 1), gc.TensorSpec((1,)), gc.TensorSpec((1,)))
    joint = gc.gradients(static, wrt=["w", "x"])
    exe = gc.compile(joint)
    xv, wv = np.array([2.0], np.float32), np.array([1.0], np.float32)
    yv, dw, dx = exe(xv, wv)
    print(f"static: y = {yv[0]:g}   dy/dw = {dw[0]:g}   dy/dx = {dx[0]:g}")

    def eager_step() -> None:
        w = ge.tensor([1.0], requires_grad=True)
        x = ge.tensor([2.0], requires_grad=True)
        ((x + w) * (w + 1)).backward()

    eager_us = _median_us(eager_step, number=50)
    static_us = _median_us(lambda: exe(xv, wv))
    print(
        f"\nforward + both gradients per call (median): eager {eager_us:.1f} us, "
        f"compiled {static_us:.1f} us ({eager_us / static_us:.0f}x). `graphc bench` measures more."
    )


def demo(out: str | None = None) -> int:
    g = _affine()
    _section("1. A graph, declared once (B is a symbolic batch dim)")
    print(g)
    xv = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    wv = np.array([[1, -1], [0.5, 0.5], [-1, 1]], np.float32)
    print(f"\nrun on x (4x3) and w (3x2): loss = {float(g(x=xv, w=wv)):.6g}")

    _section("2. Its gradient is another graph, built before any data is seen")
    joint = gc.gradients(g, wrt=["w"])
    optimized, report = gc.optimize(joint, level=2, explain=True)
    print(  # nodes, as the pass report below counts them: inputs and outputs too
        f"joint graph (loss, d loss/dw): {len(joint.nodes)} nodes as differentiated "
        f"({len(joint.op_nodes)} ops, {len(joint.inputs)} inputs, {len(joint.outputs)} outputs),"
    )
    print(f"{len(optimized.nodes)} nodes after the O2 passes:\n")
    print(optimized)
    print()
    print(report)
    fused = gc.fuse(optimized, backend="numpy")
    print("\nthe numpy backend's fusion step (gc.fuse; gc.compile runs it before planning):")
    steps = [n.op for n in fused.op_nodes if not n.is_constant]
    print(f"{len(steps)} steps: {', '.join(steps)} (a fused node runs as one kernel)")
    if "count" in steps:
        print(
            "the plan below is made for B = 4 and has fewer: with B known, `count` (the "
            "mean's element count) and what reads it fold into constants"
        )

    _section("3. Compiled to a plan on preallocated buffers")
    exe = gc.compile(joint, opt_level=2)
    loss, dw = exe(x=xv, w=wv)
    ref_loss, ref_dw = gc.run(joint, {"x": xv, "w": wv})
    print(f"loss = {float(loss):.6g}, dw =\n{dw}")
    # close, not equal: a native backend's matmul may sum in another order than numpy's
    agree = np.allclose(loss, ref_loss, rtol=1e-6) and np.allclose(dw, ref_dw, rtol=1e-6)
    print(f"loss and dw agree with the reference interpreter (gc.run, op by op): {agree}")
    print("\n" + exe.explain(x=xv, w=wv))

    _section("4. Eager and static on the tutorials' y = (x + w)(w + 1)")
    tutorial_comparison()

    _section("5. Pictures")
    from graphc.viz.command import demo_pictures

    folder = Path(out or tempfile.mkdtemp(prefix="graphc-demo-"))
    paths = demo_pictures(g, ["w"], folder)
    print("the graph, and its forward/backward pair (d loss / dw):")
    for path in paths:
        print(f"  {path}")
    if any(path.suffix == ".dot" for path in paths):
        print("  (graphviz's `dot` is not installed: these are DOT sources; install graphviz)")
    return 0
